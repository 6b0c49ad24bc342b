"""Prepare for class (``app_pages/prepare.py``): the Lesson page's button and ``python -m app_pages.prepare``.

On bilm-tf's fixture model with the data root: a cold server's pages train nothing before they are
asked to; the button computes each page's first figure through the pages' own functions and keys, so
that afterwards every page draws its first figure with the backends made to fail; the command keeps
what it computed on disk, prints each page with the time left and the times in all; an interruption
keeps the pages finished before it.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from app_pages.model_choice import MODEL_ENV_VAR

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "app.py"
PAGES = {"Playground": "app_pages/playground.py", "Lesson": "app_pages/lesson.py", "Probes": "app_pages/probes.py",
         "Beyond accuracy": "app_pages/information.py", "Scalar mix": "app_pages/scalar_mix.py",
         "Sense retrieval": "app_pages/sense_retrieval.py", "Layer projections": "app_pages/layer_projections.py",
         "Syntax": "app_pages/syntax.py"}
# what trains a probe (or reads every layer of a task's split to train one), by module
TRAINING = [("probing.tagging.suite", "run_suite"), ("probing.tagging.scalar_mix", "explore_mix"),
            ("probing.tagging.scalar_mix", "load_mix_task"), ("probing.syntax.structural", "tree_probe"),
            ("probing.information.run", "run_information"), ("probing.report.lesson", "pos_probe_run"),
            ("probing.senses.wsd", "lexical_sample_probe")]
# every backend a page's first figure computes
COMPUTING = TRAINING + [("probing.context.playground", "explore_word"),
                        ("probing.context.contextuality", "anisotropy_baseline"),
                        ("probing.senses.semcor_index", "build_lemma_index"),
                        ("probing.senses.projections", "project_lemma"), ("probing.context.static", "static_baselines"),
                        ("probing.report.lesson", "static_vs_contextual"), ("probing.report.lesson", "senses_by_layer"),
                        ("probing.report.lesson", "confound_found_and_fixed")]


@pytest.fixture
def server(data_root, tmp_path, monkeypatch):
    """A fresh server (empty Streamlit caches, an empty activation cache) on the fixture model."""
    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(data_root))
    monkeypatch.setenv("ELMO_WORKBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(MODEL_ENV_VAR, str(data_root / "fixtures" / "bilm_tf"))
    st.cache_data.clear()
    st.cache_resource.clear()
    yield
    st.cache_data.clear()
    st.cache_resource.clear()


def record_calls(monkeypatch, functions) -> list[str]:
    """Make each backend fail, recording its name when it is called."""
    import importlib

    calls = []
    for module, name in functions:
        def fail(*args, _name=f"{module}.{name}", **kwargs):
            calls.append(_name)
            raise AssertionError(f"{_name} computed")
        monkeypatch.setattr(importlib.import_module(module), name, fail)
    return calls


def open_page(title: str) -> AppTest:
    at = AppTest.from_file(str(APP), default_timeout=300)
    at.switch_page(PAGES[title])
    return at.run()


def click(at: AppTest, label: str) -> AppTest:
    (button,) = [b for b in at.button if b.label == label]
    return button.click().run()


def figures(at: AppTest) -> list[dict]:
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def test_a_cold_server_trains_nothing_before_it_is_asked(server, monkeypatch):
    calls = record_calls(monkeypatch, TRAINING)
    for title in PAGES:
        at = open_page(title)
        assert not at.exception, (title, [e.value for e in at.exception])
        assert calls == [], title
    # the two pages that trained on opening now wait for their button
    assert "Train the structural probe" in [b.label for b in open_page("Syntax").button]
    assert "Train the probe on this mix" in [b.label for b in open_page("Scalar mix").button]


def test_after_prepare_every_pages_first_figure_comes_from_the_caches(server, monkeypatch):
    at = open_page("Lesson")
    click(at, "Prepare every page for class")
    assert not at.exception and not at.error, [e.value for e in [*at.exception, *at.error]]
    done = at.dataframe[0].value
    assert list(done["page"]) == list(PAGES) and (done["note"] == "").all() and (done["seconds"] >= 0).all()
    assert any(m.value.replace("\\", "").startswith("Prepared 8 page(s) in ") for m in at.success)

    calls = record_calls(monkeypatch, COMPUTING)
    buttons = {"Probes": ["Run the probes"], "Beyond accuracy": ["Measure"]}
    for title in PAGES:
        at = open_page(title)
        for label in buttons.get(title, []):
            at = click(at, label)
        if title == "Lesson":
            for key in ("contextual", "senses", "pos", "control", "confound"):
                at = at.button(key=f"lesson_run_{key}").click().run()
            assert len(at.dataframe) == 5, "each step's numbers"
        else:
            assert figures(at), title
        assert not at.exception and not at.error, (title, [e.value for e in [*at.exception, *at.error]])
    assert calls == []


def test_the_command_keeps_its_work_on_disk_and_says_how_long_it_took(data_root, tmp_path):
    env = {**os.environ, "ELMO_WORKBENCH_DATA": str(data_root), "ELMO_WORKBENCH_CACHE": str(tmp_path),
           "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "app_pages.prepare", "--model", str(data_root / "fixtures" / "bilm_tf"),
               "--pages", "Playground", "Syntax"]
    first = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert first.returncode == 0, first.stderr
    lines = first.stdout.splitlines()
    assert lines[1] == "[1/2] Playground: preparing; no estimate yet (a page not prepared before with this " \
                       "model and data)"
    assert lines[-1].startswith("Prepared 2 page(s) in ") and "Playground " in lines[-1] and "Syntax " in lines[-1]
    assert "Warning" not in first.stderr  # no bare-mode noise from Streamlit
    # the structural probe is on disk, where a server started later reads it
    from elmo_model import load_bilm
    from probing.syntax.structural import stored_tree_probe

    from app_pages.first_figures import SYNTAX_LAYER, SYNTAX_RANK, SYNTAX_TRAIN, syntax_config

    model = load_bilm(data_root / "fixtures" / "bilm_tf", "auto")
    assert stored_tree_probe(model, SYNTAX_LAYER, data_root, tmp_path, config=syntax_config(SYNTAX_TRAIN,
                                                                                            SYNTAX_RANK)) is not None
    # the second run estimates from the first's times
    second = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert second.returncode == 0, second.stderr
    assert "left, by the last preparation's times" in second.stdout.splitlines()[1]


def test_an_interruption_keeps_the_pages_finished_before_it(server, monkeypatch, data_root):
    from app_pages import first_figures, prepare
    from app_pages.running import load_model

    def interrupted(model):
        raise KeyboardInterrupt

    monkeypatch.setattr(first_figures, "interrupted_first", interrupted, raising=False)
    monkeypatch.setattr(prepare, "PAGES", [("Playground", "playground_first"), ("Probes", "interrupted_first")])
    model, _ = load_model(str(data_root / "fixtures" / "bilm_tf"), "auto", "cpu")
    started, done = [], []
    with pytest.raises(KeyboardInterrupt):
        prepare.prepare(model, data_root, True, lambda i, n, title, eta: started.append((title, eta)),
                        lambda i, page: done.append(page))
    assert started == [("Playground", None), ("Probes", None)]
    assert [p.page for p in done] == ["Playground"]
    assert set(prepare.last_times(model, data_root)) == {"Playground"}
    # what the finished page computed is kept: the Playground's figure needs no embedding now
    calls = record_calls(monkeypatch, [("probing.context.playground", "explore_word")])
    demo = first_figures.load_demo_set("bank")
    contexts, labels = first_figures.parse_labelled(demo.text)
    result, _test = first_figures.playground_view(model, tuple(contexts), demo.word, None, tuple(labels))
    assert result.word == "bank" and calls == []
