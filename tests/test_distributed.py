"""The trainer on torchrun: 2 gloo ranks on this CPU train the model one process trains.

Each torchrun job here starts 2 Python processes (about 10 s of imports on 2 busy cores), so the
test runs few, short jobs on the tiny config of tests/test_train.py with dropout 0 (dropout masks
are drawn per rank, so only a dropout-free run can be compared number for number).
"""

import os
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
import torch
from test_train import corpus, tiny  # noqa: F401 (the module-scoped corpus fixture)

from elmo_model.corpus.embedder import ElmoEmbedder
from elmo_model.models.registry import load_bilm
from elmo_model.training.distributed import share_of
from elmo_model.training.trainer import TrainConfig, Trainer

PROJECT = Path(__file__).resolve().parents[1]

# Measured on a 2-core CPU machine: 20 steps of the tiny config, the largest difference of a per-step
# training loss (nats, losses ~6) between 1 process and 2 gloo ranks is 6.65e-7. The same gap,
# 6.648e-7, appears without any communication when one process computes each global batch as the
# two rank shares with summed gradients: it is float32 rounding of the reordered sums, nothing
# else. A real mistake is far larger: normalising each share by its own prediction count instead
# of the global one moves the loss by 1.7e-2 within 20 steps. 1e-5 sits 15x above the noise and
# 1,600x below that mistake.
LOSS_TOLERANCE = 1e-5


def cli_args(config: TrainConfig) -> list[str]:
    """The command-line flags that give ``config`` back (``python -m elmo_model.training.train``)."""
    args = []
    for f in fields(TrainConfig):
        value = getattr(config, f.name)
        flag = "--" + f.name.replace("_", "-")
        if value is None:
            continue
        if f.name in ("train", "valid", "test", "softmax_cutoffs"):
            if value:
                args += [flag, *map(str, value)]
        elif f.name == "filters":
            args += [flag, str(value)]
        elif isinstance(value, bool):
            args.append(flag if value else "--no-" + f.name.replace("_", "-"))
        else:
            args += [flag, str(value)]
    return args


def torchrun(config: TrainConfig, *extra: str, nproc: int = 2) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(PROJECT))
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
               "-m", "elmo_model.training.train", *cli_args(config), *extra]
    done = subprocess.run(command, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def saved_run(out: Path) -> dict:
    return torch.load(Path(out) / "checkpoint.pt", map_location="cpu", weights_only=True)


def test_shares_cover_the_global_batch_once():
    group = [["a"] * n for n in range(1, 8)]
    shares = [share_of(group, rank, 3) for rank in range(3)]
    assert sorted(len(s) for share in shares for s in share.sentences) == list(range(1, 8))
    assert all(share.weight == 1.0 and share.n_predictions == sum(range(2, 9)) for share in shares)
    short = [share_of(group[:1], rank, 2) for rank in range(2)]
    assert [s.weight for s in short] == [1.0, 0.0]  # rank 1 joins the all-reduce with a zero-weight sentence


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message for a machine without a GPU")
def test_device_cuda_without_a_gpu_is_a_clear_error(tmp_path, capsys):
    from elmo_model.training.train import main

    (tmp_path / "text.txt").write_text("A sentence .\n", encoding="utf-8")
    assert main(["--train", str(tmp_path / "text.txt"), "--out", str(tmp_path / "run"), "--device", "cuda"]) == 2
    assert "torch sees no GPU" in capsys.readouterr().err


def test_bf16_autocast_keeps_the_softmax_in_fp32():
    """The GPU path's bf16 autocast, exercised with CPU autocast (no GPU here): the loss comes
    out in fp32, close to the fp32 loss, and backward runs."""
    from collections import Counter

    from elmo_model.training.lm_data import make_batch
    from elmo_model.training.train import LanguageModel
    from elmo_model.training.vocab import Vocabulary

    config = TrainConfig(train=[], char_embedding_dim=4, filters=[[1, 8], [2, 8]], n_highway=1, lstm_dim=32,
                         projection_dim=16, softmax_cutoffs=[20])
    words = "the bank was closed and the river ran past it quickly today".split()
    vocab = Vocabulary.build(Counter(words * 3), 50, 1)
    torch.manual_seed(0)
    lm = LanguageModel(config.elmo_config(), len(vocab), config.softmax_cutoffs, 4.0)
    batch = make_batch([words[:5], words[2:9], words[:3]], vocab)
    fw, bw, n = lm(batch)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fw16, bw16, _ = lm(batch)
        loss = (fw16 + bw16) / (2 * n)
    assert fw16.dtype == bw16.dtype == torch.float32
    assert float(loss.detach()) == pytest.approx(float((fw + bw).detach()) / (2 * n), rel=2e-2)  # bf16 encoder: ~3 digits
    loss.backward()
    assert all(p.grad is None or torch.isfinite(p.grad).all() for p in lm.parameters())


def test_two_ranks_give_the_single_process_loss_curve(corpus, tmp_path):  # noqa: F811
    """Same global batches and seed: the per-step losses of 1 process and 2 gloo ranks agree to
    float noise (measured max 6.65e-7 over 20 steps; ``LOSS_TOLERANCE``), and so do the weights."""
    config = tiny(corpus, tmp_path / "single", max_steps=20, log_every=1, dropout=0.0)
    single = Trainer(config, progress=False)
    single.train()
    torchrun(tiny(corpus, tmp_path / "ranks", max_steps=20, log_every=1, dropout=0.0), "--no-export")
    run = saved_run(tmp_path / "ranks")
    assert run["world_size"] == 2 and len(run["torch_rng_per_rank"]) == 2
    a = single.state["loss_curve"]
    b = run["progress"]["loss_curve"]
    assert [(p["step"], p["tokens_seen"]) for p in a] == [(p["step"], p["tokens_seen"]) for p in b]
    gaps = np.abs(np.array([p["loss"] for p in a]) - np.array([p["loss"] for p in b]))
    print(f"max |loss(1 process) - loss(2 ranks)| over {len(gaps)} steps: {gaps.max():.3g}")
    assert gaps.max() < LOSS_TOLERANCE
    # the loss moved far more than the tolerance, so the comparison can fail
    assert abs(a[0]["loss"] - a[-1]["loss"]) > 1000 * LOSS_TOLERANCE
    weight_gap = max(float((x - y).abs().max()) for x, y in zip(single.lm.state_dict().values(), run["model"].values()))
    print(f"max weight difference after 20 steps: {weight_gap:.3g}")
    assert weight_gap < 1e-4


def test_two_rank_run_resumes_the_same_curve_and_exports_a_loadable_model(corpus, tmp_path):  # noqa: F811
    """Stopped at step 10 and restarted with the same N, the run continues the loss curve of an
    uninterrupted 2-rank run exactly; rank 0's export loads through ``elmo_model``."""
    straight = tmp_path / "straight"
    torchrun(tiny(corpus, straight, max_steps=20, log_every=2, dropout=0.1), "--no-export")
    resumed = tmp_path / "resumed"
    torchrun(tiny(corpus, resumed, max_steps=10, log_every=2, dropout=0.1), "--no-export")
    assert saved_run(resumed)["progress"]["step"] == 10
    torchrun(tiny(corpus, resumed, max_steps=20, log_every=2, dropout=0.1))
    a, b = saved_run(straight), saved_run(resumed)
    curve = lambda run: [(p["step"], p["tokens_seen"], p["loss"]) for p in run["progress"]["loss_curve"]]  # noqa: E731
    assert curve(a) == curve(b) and len(curve(a)) == 10
    for x, y in zip(a["model"].values(), b["model"].values()):
        assert torch.equal(x, y)
    exported = load_bilm(resumed / "model")
    assert exported.checksum and (resumed / "model" / "model_card.json").is_file()
    sentences = [["The", "bank", "was", "closed", "."]]
    reference = Trainer(tiny(corpus, resumed, max_steps=20, log_every=2, dropout=0.1), progress=False)
    reference._setup()  # the checkpoint's weights, in this process
    np.testing.assert_array_equal(ElmoEmbedder(exported).embed_batch(sentences)[0],
                                  ElmoEmbedder(reference.lm.bilm.eval()).embed_batch(sentences)[0])


def _children_with_rank(parent: int) -> dict[int, int]:
    """torchrun's worker processes -> {rank: pid}, from /proc (Linux)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid != parent:
                continue
            env = dict(item.split("=", 1) for item in (entry / "environ").read_text().split("\0") if "=" in item)
        except (OSError, ValueError, IndexError):
            continue
        if "RANK" in env:
            found[int(env["RANK"])] = int(entry.name)
    return found


@pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="finds torchrun's workers through /proc")
def test_sigterm_on_one_rank_stops_every_rank_at_the_same_step_with_a_checkpoint(corpus, tmp_path):  # noqa: F811
    """SIGTERM to rank 1 alone: both ranks agree to stop after the same step, rank 0 writes the
    checkpoint, and rerunning the command continues from there to the budget."""
    import signal
    import time

    # epochs: the step budget, not the end of the tiny corpus's first epoch (~120 steps, which a fast
    # machine reaches in the 3 s before the signal), is what ends the resumed run
    config = tiny(corpus, tmp_path / "run", max_steps=2000, log_every=5, dropout=0.1, epochs=50)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(PROJECT))
    log_path = tmp_path / "stderr.txt"
    with open(log_path, "w") as log:
        job = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                                "-m", "elmo_model.training.train", *cli_args(config), "--no-export"],
                               cwd=PROJECT, env=env, stdout=subprocess.DEVNULL, stderr=log)
        try:
            deadline = time.monotonic() + 240
            while "training:" not in log_path.read_text() and time.monotonic() < deadline and job.poll() is None:
                time.sleep(0.5)
            time.sleep(3)  # some steps into the run
            ranks = _children_with_rank(job.pid)
            assert set(ranks) == {0, 1}, ranks
            os.kill(ranks[1], signal.SIGTERM)
            job.wait(timeout=120)
        finally:
            if job.poll() is None:
                job.kill()
    text = log_path.read_text()
    assert "signal 15" in text or "stopping after this step" in text
    run = saved_run(tmp_path / "run")
    stopped_at = run["progress"]["step"]
    assert 0 < stopped_at < 2000, stopped_at
    assert len(run["torch_rng_per_rank"]) == 2
    resumed = tiny(corpus, tmp_path / "run", max_steps=stopped_at + 10, log_every=5, dropout=0.1, epochs=50)
    torchrun(resumed, "--no-export")
    after = saved_run(tmp_path / "run")
    assert after["progress"]["step"] == stopped_at + 10
    assert after["progress"]["loss_curve"][: len(run["progress"]["loss_curve"])] == run["progress"]["loss_curve"]


# ---- one job per run directory, checkpoints on disk before they are named ------------------------

def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _two_ranks(args: list[str]) -> tuple[list[int], list[str]]:
    """``python -m elmo_model.training.train ARGS`` as the two ranks of one job, started as torchrun starts
    them (RANK, WORLD_SIZE, MASTER_ADDR/PORT), so each one's exit code and stderr can be read."""
    port = _free_port()
    ranks = []
    for rank in range(2):
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(PROJECT), RANK=str(rank), LOCAL_RANK=str(rank),
                   WORLD_SIZE="2", LOCAL_WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
        ranks.append(subprocess.Popen([sys.executable, "-m", "elmo_model.training.train", *args], cwd=PROJECT, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    try:
        results = [job.communicate(timeout=180) for job in ranks]
    finally:
        for job in ranks:
            if job.poll() is None:
                job.kill()
    return [job.returncode for job in ranks], [stderr for _, stderr in results]


def test_every_rank_of_a_second_job_stops_before_touching_the_run_directory(corpus, tmp_path):  # noqa: F811
    """A run holds OUT's lock; a 2-rank job on the same OUT: both ranks exit 2, rank 0 says why in one
    line, rank 1 says nothing and prints no traceback, and nothing is written into OUT. The ranks are
    started as torchrun starts them (RANK, WORLD_SIZE, MASTER_ADDR/PORT), so each one's exit code and
    output can be read."""
    from elmo_model.plumbing.io_safety import output_lock

    out = tmp_path / "run"
    out.mkdir()
    config = tiny(corpus, out, max_steps=2)
    with output_lock(out / "train", what="run directory"):
        before = sorted(p.name for p in out.iterdir())
        codes, errors = _two_ranks(cli_args(config))
        after = sorted(p.name for p in out.iterdir())
    assert codes == [2, 2], (codes, [e[-2000:] for e in errors])
    assert errors[0].count("another run") == 1 and "error: " in errors[0] and "run directory" in errors[0]
    assert "error" not in errors[1] and "Traceback" not in errors[1], errors[1][-2000:]
    assert "Traceback" not in errors[0]
    assert after == before == ["train.lock"]  # no train_config.json, vocab.txt or checkpoint from the second job


def test_every_rank_of_a_job_exporting_into_a_claimed_folder_stops_before_training(corpus, tmp_path):  # noqa: F811
    """A run holds ``--export-to``'s claim (EXPORT.lock); a 2-rank job exporting into the same
    folder: both ranks exit 2 before a step is trained, rank 0 says why in one line, rank 1 says
    nothing. Before rank 0 took the claim for the job, torchrun runs took none: the job trained
    and exported over the first run's model."""
    from elmo_model.plumbing.io_safety import output_lock

    out, export = tmp_path / "run", tmp_path / "model"
    config = tiny(corpus, out, max_steps=2)
    with output_lock(export, what="export folder"):
        codes, errors = _two_ranks([*cli_args(config), "--export-to", str(export)])
    assert codes == [2, 2], (codes, [e[-2000:] for e in errors])
    assert errors[0].count("another run") == 1 and "export folder" in errors[0], errors[0][-2000:]
    assert "error" not in errors[1] and "Traceback" not in errors[1], errors[1][-2000:]
    assert not (out / "checkpoint.pt").exists() and not export.exists()


def _record_durability(monkeypatch) -> list[tuple]:
    """Every os.fsync (with the path it synced) and os.replace, in order."""
    events: list[tuple] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", str(src), str(dst)))
        return real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return events


def _assert_synced_then_renamed(events: list[tuple], target: Path) -> None:
    renames = [e for e in events if e[0] == "replace" and e[2] == str(target)]
    assert len(renames) == 1, events
    tmp, at = renames[0][1], events.index(renames[0])
    assert ("fsync", str(Path(tmp).resolve())) in events[:at], f"{tmp} renamed to {target.name} before an fsync"
    assert ("fsync", str(target.parent.resolve())) in events[at:], "the folder was not synced after the rename"


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="names fsynced files through /proc")
def test_checkpoints_reach_the_disk_before_they_replace_the_last_one(corpus, tmp_path, monkeypatch):  # noqa: F811
    """Single process and a (1-rank, gloo) distributed trainer: checkpoint.pt is written under another
    name, fsynced, renamed, and its folder fsynced: a power cut never leaves a named, empty checkpoint."""
    import torch.distributed as dist

    from elmo_model.training.distributed import DistributedContext, DistributedTrainer

    single = Trainer(tiny(corpus, tmp_path / "single", max_steps=1), progress=False)
    single._setup()
    events = _record_durability(monkeypatch)
    single.save_checkpoint()
    _assert_synced_then_renamed(events, tmp_path / "single" / "checkpoint.pt")
    monkeypatch.undo()

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{_free_port()}", rank=0, world_size=1)
    try:
        ranked = DistributedTrainer(tiny(corpus, tmp_path / "ranked", max_steps=1), DistributedContext(0, 1, 0),
                                    progress=False)
        ranked._setup()
        events = _record_durability(monkeypatch)
        ranked.save_checkpoint()
        _assert_synced_then_renamed(events, tmp_path / "ranked" / "checkpoint.pt")
        monkeypatch.undo()
        assert saved_run(tmp_path / "ranked")["world_size"] == 1
    finally:
        dist.destroy_process_group()
    assert sorted(p.name for p in (tmp_path / "ranked").iterdir()) == ["checkpoint.pt", "train_config.json",
                                                                       "vocab.txt"]
