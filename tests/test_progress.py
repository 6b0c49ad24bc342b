"""The one terminal progress adapter every CLI draws with (elmo_model/plumbing/progress.py)."""

from __future__ import annotations

import pytest

from elmo_model.plumbing.progress import TerminalProgress


def test_one_bar_per_label_closed_at_its_total(capsys):
    progress = TerminalProgress()
    progress("download a", 512, 1024, "B")
    progress("index", 3, 10, "sentences")
    assert sorted(progress._bars) == ["download a", "index"]
    progress("download a", 1024, 1024, "B")  # done: its bar closes, the other stays
    assert list(progress._bars) == ["index"]
    progress.close()
    assert not progress._bars
    err = capsys.readouterr().err
    assert "download a" in err and "index" in err and "/1.00k" in err  # bytes scaled by 1024


def test_single_bar_follows_the_label_and_never_passes_its_total(capsys):
    with TerminalProgress("probe report", single=True, unit="%") as progress:
        progress("probing suite: pos L1", 10.0, 100.0, "%")
        bar = progress._bars["probe report"]
        assert bar.n == 10.0 and bar.desc.startswith("probing suite: pos L1")
        progress("all-words WSD", 140.0, 100.0, "%")
        assert bar.n == 100.0 and bar.desc.startswith("all-words WSD")
        assert list(progress._bars) == ["probe report"]  # still one bar
    assert not progress._bars
    assert "all-words WSD" in capsys.readouterr().err


def test_count_and_step_shapes_and_quiet(capsys):
    counted = TerminalProgress("embedding", single=True, unit="sentence")
    counted.counts(3, 40)
    assert counted._bars["embedding"].total == 40 and counted._bars["embedding"].n == 3
    counted.steps("fit layer 2", 4, 9)
    assert counted._bars["embedding"].total == 9 and counted._bars["embedding"].desc.startswith("fit layer 2")
    counted.close()
    capsys.readouterr()
    quiet = TerminalProgress("embedding", single=True, quiet=True)
    quiet.counts(1, 2)
    quiet("x", 1, 2, "")
    quiet.close()
    assert not quiet._bars and capsys.readouterr().err == ""


def test_throughput_estimates_from_measured_work_only():
    from elmo_model.plumbing.progress import Throughput

    t = Throughput()
    assert t.update("embedding", 40, 100, now=0.0) is None  # found done (resumed, copied): not a rate
    assert t.update("embedding", 45, 100, now=0.5) is None  # under a second measured: no estimate
    rate, left = t.update("embedding", 60, 100, now=2.0)
    assert rate == pytest.approx(10.0) and left == pytest.approx(4.0)
    assert t.describe("embedding", 80, 100, "sentences", now=4.0) == " · 10.0 sentences/s, about 2 s left"
    assert t.update("indexing", 1, 3, now=5.0) is None  # a new stage measures again
    assert t.update("indexing", 0, 3, now=9.0) is None  # a count that goes back: again
    assert t.update("indexing", 3, None, now=12.0) is None  # no total, no time left
