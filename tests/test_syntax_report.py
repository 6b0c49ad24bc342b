"""The syntax sections of a report on the fixture biLM and a 20-sentence slice of EWT, and the tree figure."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from elmo_model import load_bilm
from probing.report import ReportConfig, ReportResult, build_report, report_figures
from probing.tagging.suite_config import SuiteConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def report(data_root, tmp_path_factory):
    out = tmp_path_factory.mktemp("syntax-report")
    config = ReportConfig(suite=SuiteConfig(n_bootstrap=100), contextuality=False)
    return build_report(data_root / "fixtures/bilm_tf", ["structural", "arcs"], out, data_root=data_root,
                        limit=20, cache_dir=out / "cache", config=config, png=False)


def test_report_holds_the_syntax_sections(report):
    syntax = report.syntax
    s = syntax.structural
    assert [x.layer for x in s.model] == [0, 1, 2] and [x.layer for x in s.random_bilm] == [0, 1, 2]
    assert s.n_sentences == {"train": 20, "dev": 20, "test": 20}
    assert all(0.0 <= x.uuas <= 1.0 and -1.0 <= x.dspr <= 1.0 for x in s.model + s.random_bilm)
    assert 0.2 < s.linear_chain_uuas < 0.7
    assert [x.layer for x in s.nonsense] == [x.layer for x in s.random_bilm_nonsense] == [0, 1, 2]  # Jabberwocky
    assert 0.2 < s.nonsense_replaced < 0.5
    arc, label = syntax.edges.task("arc"), syntax.edges.task("label")
    assert arc.majority.estimate == pytest.approx(0.5, abs=0.02)  # one positive, one negative per token
    assert label.n_classes > 10
    a = syntax.attribution
    assert a.tokens[a.target] == "bank" and np.allclose(a.leave_one_out[0][~np.isnan(a.leave_one_out[0])], 0, atol=1e-6)
    assert "syntax" in report.timings


def test_report_round_trips_and_renders(report):
    again = ReportResult.from_json(report.files.json)
    assert again.numbers() == report.numbers()
    html = open(report.files.html, encoding="utf-8").read()
    assert "Structural probe (Hewitt &amp; Manning 2019)" in html and "Edge probes on gold arcs" in html
    assert "Syntax on nonsense" in html and "arcs of 3-4 (real / nonsense)" in html and "on nonsense (%)" in html
    names = [f.name for f in report_figures(report)]
    assert {"structural-layers", "edge-layers", "attribution-bank"} <= set(names)
    json.dumps(report.to_dict())


def test_tree_probe_parses_a_sentence_and_draws_it(report, data_root):
    from probing.syntax.sections import tree_figure
    from probing.syntax.structural import SyntaxConfig, parse_with_probe, tree_probe
    from probing.syntax.trees import read_ewt_trees

    model = load_bilm(data_root / "fixtures/bilm_tf")
    config = SyntaxConfig(train_sentences=20, dev_sentences=20, ranks=(8,), max_epochs=3, random_bilm=False)
    cache = report.files.out_dir + "/cache"
    probe = tree_probe(model, 1, data_root, cache, config=config)
    again = tree_probe(model, 1, data_root, cache, config=config)  # from the cache file
    assert np.array_equal(probe.B_, again.B_)
    tree = read_ewt_trees("test", data_root, limit=1)[0]
    dist, edges = parse_with_probe(model, probe, tree.tokens, 1, tree.upos)
    assert dist.shape == (len(tree), len(tree)) and len(edges) == int((~tree.punct).sum()) - 1
    fig = tree_figure(tree, edges)
    assert len(fig.data) >= len(tree) - 1


def test_cli_report_shows_the_syntax_sections(report, data_root, tmp_path):
    """Under ``python -m probing.report`` the report module is ``__main__``: the syntax blocks
    must still be the renderer's own classes, or they vanish from the documents."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "ELMO_WORKBENCH_DATA": str(data_root), "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-m", "probing.report", "--model", str(data_root / "fixtures/bilm_tf"),
                    "--tasks", "structural", "arcs", "--limit", "10", "--no-contextuality", "--no-png", "--quiet",
                    "--no-jabberwocky", "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out")],
                   check=True, env=env, cwd=Path(__file__).resolve().parents[1], capture_output=True)
    markdown = (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
    assert "### Structural probe (Hewitt & Manning 2019)" in markdown and "### Edge probes on gold arcs" in markdown
    assert "Syntax on nonsense" not in markdown  # --no-jabberwocky (the module's report has it: above)
