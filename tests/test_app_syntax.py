"""The Syntax page, and the attribution panel in the Playground, through streamlit.testing's AppTest,
on the fixture biLM and small EWT slices."""

import json
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app_pages.model_choice import MODEL_ENV_VAR

pytestmark = pytest.mark.usefixtures("one_torch_thread")

APP = Path(__file__).resolve().parents[1] / "app.py"
SYNTAX = "app_pages/syntax.py"


@pytest.fixture
def open_app(data_root, tmp_path, monkeypatch):
    """``open_app(page, **state)``: a fresh session on ``page`` (None: the Playground) with the
    fixture biLM and widget values preset, run once."""
    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(data_root))
    monkeypatch.setenv("ELMO_WORKBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(MODEL_ENV_VAR, str(data_root / "fixtures" / "bilm_tf"))

    def opener(page: str | None, **state) -> AppTest:
        at = AppTest.from_file(str(APP), default_timeout=300)
        for key, value in state.items():
            at.session_state[key] = value
        if page is not None:
            at.switch_page(page)
        return at.run()

    return opener


@pytest.fixture
def open_syntax(open_app):
    # the visitor has asked for a probe once (a cold server trains none before the button: tests/test_prepare.py)
    return lambda **state: open_app(SYNTAX, **{"sy_train": 200, "sy_rank": 16, "syntax_train_asked": True, **state})


def _figures(at):
    return [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]


def test_syntax_page_draws_gold_and_predicted_trees_and_the_attribution(open_syntax):
    at = open_syntax(sy_index=0)
    assert not at.exception and not at.error, [e.value for e in at.exception] + [e.value for e in at.error]
    assert 'st.Page("app_pages/syntax.py"' in APP.read_text()
    tree, attribution = _figures(at)
    names = {t.get("name") for t in tree["data"]}
    assert "gold (above)" in names and names & {"predicted, in the gold tree", "predicted, not in the gold tree"}
    words = [t for t in tree["data"] if t.get("mode") == "text"][0]["text"]
    assert words[:3] == ["What", "if", "Google"]
    assert any("gold arcs" in m.value for m in at.markdown)
    assert "bank" in attribution["layout"]["title"]["text"]
    assert {t["name"] for t in attribution["data"]} == {"layer 0", "layer 1", "layer 2"}


def test_syntax_page_draws_the_jabberwocky_twin_of_a_test_sentence(open_syntax):
    at = open_syntax(sy_index=0, sy_source="nonsense")
    assert not at.exception and not at.error, [e.value for e in at.exception] + [e.value for e in at.error]
    tree = _figures(at)[0]
    assert "gold (above)" in {t.get("name") for t in tree["data"]}
    words = [t for t in tree["data"] if t.get("mode") == "text"][0]["text"]
    assert words[:3] == ["What", "if", "Google"] and words[3] != "Morphed" and words[4] == "Into"
    assert any("gold arcs" in m.value and "The real sentence:" in m.value for m in at.markdown)
    assert any("Syntax on nonsense" in c.value for c in at.caption)


def test_syntax_page_with_a_typed_sentence_and_a_missing_word(open_syntax):
    at = open_syntax(sy_source="typed", sy_text="The dog chased the cat", sy_attr_word="canoe",
                     sy_attr_text="the bank of the river")
    assert not at.exception and not at.error
    tree = _figures(at)[0]
    assert "gold (above)" not in {t.get("name") for t in tree["data"]}
    assert sum(1 for t in tree["data"] if t.get("name") == "predicted" or t.get("legendgroup") == "predicted") == 4
    assert any("'canoe' is not among" in w.value for w in at.warning)


SENTENCE = "We pulled the canoe onto the muddy bank of the river"
REFERENCE = "They fished from the grassy bank of the stream"


@pytest.fixture
def playground(open_app):
    return lambda **state: open_app(None, **{"pg_demo": "my own sentences", "pg_text": f"{SENTENCE}\n{REFERENCE}",
                                             "pg_word": "bank", **state})


def _attribution(at):
    figures = [json.loads(chart.proto.spec) for chart in at.get("plotly_chart")]
    return [f for f in figures if "move" in f["layout"].get("title", {}).get("text", "")]


def test_panel_is_off_until_asked_for(playground):
    at = playground()
    assert not at.exception and not at.error
    assert at.toggle(key="pg_attr_on").value is False and not _attribution(at)


def test_panel_draws_a_bar_per_context_word_and_layer_for_bank(playground):
    at = playground(pg_attr_on=True)
    assert not at.exception and not at.error, [e.value for e in at.exception] + [e.value for e in at.error]
    (fig,) = _attribution(at)
    assert "bank" in fig["layout"]["title"]["text"] and "grassy" in fig["layout"]["title"]["text"]
    words = SENTENCE.split()
    bars = [t for t in fig["data"] if t["type"] == "bar"]
    assert {t["name"] for t in bars} == {"layer 0", "layer 1", "layer 2"}
    assert len(bars) == 6  # leave one out and gradient x input, each layer
    assert all(len(t["x"]) == len(words) for t in bars)
    assert at.selectbox(key="pg_attr_ref").value == 1  # the other sentence with "bank"
    top = at.dataframe[-1].value
    assert list(top["layer"]) == [0, 1, 2]
    assert all(w.split(" (")[0] in words for cell in top["moved most by (leave one out)"][1:] for w in cell.split(", "))

    at.selectbox(key="pg_attr_ref").set_value("no reference (leave one out only)").run()
    assert not at.exception and not at.error
    (fig,) = _attribution(at)
    assert len([t for t in fig["data"] if t["type"] == "bar"]) == 3  # leave one out only


def test_a_first_tree_comes_from_100_sentences_whose_vectors_the_chosen_probe_reuses(open_syntax, caplog):
    """A fresh server: the tree is first drawn by a probe on 100 training sentences, then by the one
    on the 200 chosen, whose first 100 (and dev's) are copied from the first look's caches."""
    import logging

    import streamlit as st

    st.cache_resource.clear()
    with caplog.at_level(logging.INFO, logger="probing.engine"):
        at = open_syntax(sy_index=0, sy_rank=32)
    assert not at.exception and not at.error
    assert len(_figures(at)) == 2  # the first look's tree is replaced: the chosen probe's tree, the attribution
    assert not any("A first look" in c.value for c in at.caption)
    copied = [r.getMessage() for r in caplog.records if "the first 100 sentences copied" in r.getMessage()]
    assert len(copied) == 2, copied  # train and dev
