"""The report's writers on the bilm-tf fixture model: every file a report writes (results.json,
report.md, report.html, PNG figures, comparison.json, the per-lemma cache) goes through
``elmo_model.plumbing.io_safety``'s atomic writer; a second run into a folder another run is writing stops
at once with one line; the before/after comparison script; the package has no import cycle with
the syntax sections."""

import ast
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from elmo_model.plumbing import io_safety
from probing.report import VOLATILE_KEYS, ReportConfig, build_report, compare_reports, load_results, main, write_report
from probing.tagging.suite_config import SuiteConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PROJECT = Path(__file__).resolve().parents[1]
# the quickest report that still has a figure of each kind of writer: a suite task, a word fitted
# on the demo sentences (its per-lemma cache entry), PNGs
CONFIG = ReportConfig(suite=SuiteConfig(mix_seeds=1, n_bootstrap=50, max_iter=10, warm_max_iter=5, random_bilm=False,
                                        control=False, halves=False),
                      semcor_limit=20, word_seeds=1, word_folds=2, word_steps=20, contextuality=False, information=None)


def _same_report_script():
    spec = importlib.util.spec_from_file_location("same_report", PROJECT / "scripts" / "same_report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def fixture_model(data_root):
    return data_root / "fixtures/bilm_tf"


def test_every_file_goes_through_the_atomic_writer(fixture_model, data_root, tmp_path, monkeypatch):
    written = []
    real = io_safety.atomic_write_bytes
    monkeypatch.setattr(io_safety, "atomic_write_bytes",
                        lambda path, data: written.append(Path(path).resolve()) or real(path, data))
    out, cache = tmp_path / "report", tmp_path / "cache"
    result = build_report(fixture_model, ["upos"], out, words=["bank"], data_root=data_root, limit=20,
                          cache_dir=cache, config=CONFIG)
    files = sorted(p.resolve() for p in out.rglob("*") if p.is_file())
    assert {p.name for p in files} >= {"results.json", "report.md", "report.html", "upos-layers.png",
                                        "word-senses.png"}
    assert set(files) <= set(written), "written without io_safety: " + str(sorted(set(files) - set(written)))
    lemma_cache = list((cache / "word_senses").glob("*.json"))
    assert len(lemma_cache) == 1 and lemma_cache[0].resolve() in written
    assert not list(tmp_path.rglob("*.tmp*")) and not list(out.glob("**/.png-*"))
    assert not (tmp_path / "report.lock").exists()  # the folder's lock is gone with its run

    written.clear()
    compared = compare_reports(out, out, tmp_path / "cmp", labels=["A", "B"])
    files = sorted(p.resolve() for p in (tmp_path / "cmp").rglob("*") if p.is_file())
    assert Path(compared.json).name == "comparison.json" and compared.figures
    assert files and set(files) <= set(written)
    assert load_results(out) == result


def test_a_second_run_into_a_busy_folder_stops_at_once(fixture_model, data_root, tmp_path, capsys):
    """Another run holds the folder: the second stops before any work, with one line naming the
    folder and the holder, and writes nothing (neither the folder nor a cache)."""
    out, cache = tmp_path / "busy", tmp_path / "cache"
    argv = ["--model", str(fixture_model), "--tasks", "upos", "--limit", "5", "--data-root", str(data_root),
            "--cache-dir", str(cache), "--out", str(out), "--no-png", "--no-contextuality", "--no-random-bilm",
            "--quiet"]
    with io_safety.output_lock(out.resolve(), what="report folder"):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        with pytest.raises(io_safety.OutputBusy, match="another run"):
            build_report(fixture_model, ["upos"], out, data_root=data_root, limit=5, cache_dir=cache, png=False)
    assert len(err.splitlines()) == 1 and str(out.resolve()) in err and "another run (pid" in err, err
    assert "report folder" in err
    assert not out.exists() and not cache.exists()


def test_writing_or_comparing_into_a_busy_folder_stops(fixture_model, data_root, tmp_path):
    result = build_report(fixture_model, ["upos"], tmp_path / "done", data_root=data_root, limit=5,
                          cache_dir=tmp_path / "cache", config=CONFIG, png=False)
    busy = tmp_path / "busy"
    with io_safety.output_lock(busy.resolve(), what="report folder"):
        with pytest.raises(io_safety.OutputBusy):
            write_report(result, busy, png=False)
        with pytest.raises(io_safety.OutputBusy):
            compare_reports(result, result, busy, png=False)
    assert not busy.exists()
    write_report(result, busy, png=False)  # free again
    assert load_results(busy) == result


def test_same_report_script_ignores_only_dates_and_timings(fixture_model, data_root, tmp_path, capsys):
    script = _same_report_script()
    assert script.IGNORED_KEYS == VOLATILE_KEYS
    runs = [build_report(fixture_model, ["upos"], tmp_path / name, data_root=data_root, limit=5,
                         cache_dir=tmp_path / f"cache-{name}", config=CONFIG, png=False) for name in ("a", "b")]
    a, b = (Path(r.files.json) for r in runs)
    assert json.loads(a.read_text())["timings"] != json.loads(b.read_text())["timings"]
    text, counts = script.comparable_text(a)
    assert counts["created"] >= 1 and counts["timings"] >= 1 and "timings" not in text and "created" not in text
    assert script.main([str(a), str(b)]) == 0
    assert capsys.readouterr().out.startswith("same: ")
    changed = json.loads(b.read_text())
    changed["suite"]["tasks"][0]["layers"][1]["probe"]["test"]["estimate"] += 1e-12
    b.write_text(json.dumps(changed, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    assert script.main([str(a), str(b.parent)]) == 1
    printed = capsys.readouterr().out
    assert printed.startswith("different: 1 place(s)") and "$.suite.tasks[0].layers[1].probe.test.estimate" in printed


def test_the_syntax_sections_do_not_import_the_report():
    """probing.syntax.sections is imported by the report, never the other way round (no import of
    probing.report anywhere in it, not even inside a function), and a fresh interpreter importing
    it loads no module of the report package."""
    tree = ast.parse((PROJECT / "probing" / "syntax" / "sections.py").read_text(encoding="utf-8"))
    imported = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    imported += [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module]
    assert not [name for name in imported if name == "probing.report" or name.startswith("probing.report.")]
    code = ("import sys, probing.syntax.sections; "
            "print(sorted(m for m in sys.modules if m == 'probing.report' or m.startswith('probing.report.')))")
    done = subprocess.run([sys.executable, "-c", code], cwd=PROJECT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_summary_says_when_layer_0_separates_senses_by_spelling_alone():
    """Layer 0 (the char CNN) sees no context: where it separates a lemma's senses best (e.g.
    "banks" vs "bank" going with different senses), the summary says it is spelling, and names
    the best contextual layer beside it."""
    from types import SimpleNamespace

    from probing.report.blocks import summary_lines
    from probing.senses.projections import LayerProjection, ProjectionResult

    def layer(j, acc, distinct):
        return LayerProjection(layer=j, pca=[], umap=None, pca_explained=[], n_distinct=distinct, collapsed=False,
                               loo_1nn_accuracy=acc, majority_baseline=0.5, silhouette=None)

    def summary(accuracies):
        projection = ProjectionResult(lemma="bank", pos="NOUN", model_name="m", seed=0, points=[None] * 40,
                                      layers=[layer(j, a, 3 if j == 0 else 40) for j, a in enumerate(accuracies)],
                                      senses={})
        result = SimpleNamespace(suite=None, wsd=None, projections=[projection], word_senses=None, contextuality=None)
        (line,) = summary_lines(result)
        return line

    by_spelling = summary([0.75, 0.625, 0.55])
    assert "layer 0" in by_spelling and "by spelling alone" in by_spelling and "its 3 points" in by_spelling
    assert "the best contextual layer is 1, 62.5%, above the majority" in by_spelling
    contextual = summary([0.5, 0.625, 0.70])
    assert "layer 2, leave-one-out 1-NN 70.0%" in contextual and "spelling" not in contextual
