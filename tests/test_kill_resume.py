"""kill -9 at a random instant of an embedding, an activation extraction and a training run,
then the same command again: the result equals an uninterrupted run bit for bit. The figure
with 20 instants per job is ``bench/kill_resume.py`` (docs/reliability.md)."""

import importlib.util
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "kill_resume.py"


@pytest.fixture(scope="module")
def bench(data_root, tmp_path_factory):
    spec = importlib.util.spec_from_file_location("kill_resume", BENCH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("job,variant", [("embed", 1), ("activations", 1), ("train", 0)])
def test_a_killed_run_resumes_to_the_uninterrupted_result(bench, tmp_path, monkeypatch, data_root, job, variant):
    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(data_root))
    monkeypatch.setattr(bench, "N_SENTENCES", 120)
    monkeypatch.setattr(bench, "TRAIN_STEPS", 20)
    hit = False
    for seed in range(1, 4):  # a run faster than the reference may finish before its kill: try again
        summary = bench.kill_and_resume(job, 1, seed=seed, work=tmp_path / str(seed), log=lambda line: None,
                                        variants=(variant,), latest=0.5)
        assert summary["equal"] == 1
        if summary["mid_work"] == 1:  # the kill hit unfinished work
            hit = True
            break
    assert hit
