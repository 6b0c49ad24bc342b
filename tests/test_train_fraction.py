"""Tests for the probes' sampled training split (``SuiteConfig.train_fraction``): what the suite
trains on, what it leaves whole, how a report says what it sampled and how its flags behave."""

import math

import pytest

from elmo_model import load_bilm
from probing.report import load_results
from probing.report.provenance import reproduce_command, settings_table
from probing.report.cli import main as report_main
from probing.report.config import REPORT_TRAIN_FRACTION, ReportConfig
from probing.tagging.runner import evenly_spaced
from probing.tagging.suite import main as suite_main
from probing.tagging.suite import run_suite
from probing.tagging.suite_config import SuiteConfig
from probing.tagging.tasks import load_task

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LIMIT = 80


def test_evenly_spaced_takes_the_ends_and_never_more_than_there_are():
    assert list(evenly_spaced(10, 5)) == [0, 2, 4, 7, 9]
    assert list(evenly_spaced(4, 9)) == [0, 1, 2, 3]
    assert list(evenly_spaced(7, 1)) == [0]
    assert list(evenly_spaced(7, 0)) == [0]


@pytest.mark.parametrize("bad", [0, 0.0, -0.5, 1.5, "half", True, None])
def test_a_share_outside_zero_to_one_is_refused(bad):
    with pytest.raises(ValueError, match="train_fraction"):
        SuiteConfig(train_fraction=bad)
    with pytest.raises(ValueError, match="random_bilm_train_fraction"):
        SuiteConfig(random_bilm_train_fraction=bad)


def test_the_suite_trains_on_the_evenly_spaced_share_and_scores_on_whole_dev_and_test(data_root, tmp_path):
    model = load_bilm(data_root / "fixtures/bilm_tf")
    share = 0.6
    config = SuiteConfig(train_fraction=share, control=False, halves=False, mix=False)
    result = run_suite(model, ["pos"], layers=[1], data_root=data_root, cache_dir=tmp_path, limit=LIMIT,
                       config=config)
    task = result.task("pos")
    train = load_task("pos", "train", data_root=data_root, limit=LIMIT)
    kept = [train[i] for i in evenly_spaced(LIMIT, math.ceil(share * LIMIT))]
    assert 0 < len(kept) < LIMIT
    assert task.n_sentences == {"train": len(kept), "dev": LIMIT, "test": LIMIT}
    assert task.n_tokens["train"] == sum(len(s) for s in kept)
    assert task.layers[0].probe.n_train_tokens == task.n_tokens["train"]
    # the random biLM's share is counted on the whole split (a quarter of 80 sentences), taken from those kept
    random_subset = evenly_spaced(len(kept), math.ceil(0.25 * LIMIT))
    assert task.baselines.random_bilm_train_tokens == sum(len(kept[i]) for i in random_subset)
    assert result.config["train_fraction"] == share

    whole = run_suite(model, ["pos"], layers=[1], data_root=data_root, cache_dir=tmp_path, limit=LIMIT,
                      config=SuiteConfig(control=False, halves=False, mix=False))
    assert whole.task("pos").n_sentences["train"] == LIMIT
    # a different training set, so a different probe: the cache never hands one for the other
    assert whole.task("pos").layers[0].probe.n_train_tokens > task.layers[0].probe.n_train_tokens

    out = tmp_path / "suite.json"
    result.to_json(out)
    report = load_results(out)
    meta = dict((row[0], row[1]) for row in settings_table(report).rows)
    assert meta["probes' training sentences"].startswith(f"{share:.0%} of each training split, evenly spaced")
    assert f"pos {len(kept):,}" in meta["probes' training sentences"]
    assert reproduce_command(report).endswith("--train-fraction 0.6 --out DIR")


def test_the_suite_command_takes_the_share(data_root, tmp_path, capsys):
    out = tmp_path / "r.json"
    code = suite_main(["--model", str(data_root / "fixtures/bilm_tf"), "--tasks", "pos", "--layers", "1",
                       "--limit", "30", "--data-root", str(data_root), "--cache-dir", str(tmp_path / "c"),
                       "--no-random-bilm", "--mix-seeds", "0", "--train-fraction", "0.4", "--out", str(out),
                       "--quiet"])
    assert code == 0
    assert load_results(out).suite.task("pos").n_sentences["train"] == 12
    with pytest.raises(SystemExit) as stop:
        suite_main(["--train-fraction", "0", "--quiet"])
    assert stop.value.code == 2 and "--train-fraction" in capsys.readouterr().err


def test_a_reports_default_trains_on_everything_and_its_reproduce_line_says_nothing_of_it(data_root, tmp_path):
    assert ReportConfig().suite.train_fraction == REPORT_TRAIN_FRACTION == SuiteConfig().train_fraction == 1.0
    model = load_bilm(data_root / "fixtures/bilm_tf")
    result = run_suite(model, ["pos"], layers=[1], data_root=data_root, cache_dir=tmp_path, limit=20,
                       config=SuiteConfig(control=False, halves=False, mix=False, random_bilm=False))
    out = tmp_path / "whole.json"
    result.to_json(out)
    report = load_results(out)
    assert "--train-fraction" not in reproduce_command(report)
    assert dict((r[0], r[1]) for r in settings_table(report).rows)["probes' training sentences"].startswith(
        "all of each training split")


@pytest.mark.parametrize("flags", [["--paper-grade", "--precision", "bf16"],
                                   ["--paper-grade", "--train-fraction", "0.5"],
                                   ["--train-fraction", "2"], ["--train-fraction", "x"]])
def test_the_report_refuses_a_share_it_cannot_honour_in_one_line(flags, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        report_main(["--out", str(tmp_path / "r"), *flags])
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert stop.value.code == 2 and "error:" in last and ("--train-fraction" in last or "--paper-grade" in last)
    assert not (tmp_path / "r").exists()
