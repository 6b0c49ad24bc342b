"""The remote-GPU recipe end to end on the CPU with a tiny model and budget: pack -> run (in a
copy of the job folder, as on the other machine) -> the export in pieces -> unpack -> the model
loads and equals the exported one; the size caps and the checksums refuse in one line."""

import gzip
import hashlib
import importlib.util
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from elmo_model.models.registry import load_bilm
from elmo_model.training.trainer import TrainConfig, Trainer

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_job.py"


def load_script():
    spec = importlib.util.spec_from_file_location("gpu_job", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Result:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


@pytest.fixture
def gpu_job(capsys):
    """``gpu_job(script, *args)``: ``run`` in a process of its own (as on the GPU machine, where it
    starts the trainer twice), the rest in this one (they only pack and check files)."""
    module = load_script()

    def call(script, *args, cwd=None):
        args = [str(a) for a in args]
        if args[0] == "run":
            done = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, cwd=cwd,
                                  timeout=600)
            return Result(done.returncode, done.stdout, done.stderr)
        capsys.readouterr()
        code = module.main(args)
        out = capsys.readouterr()
        return Result(code, out.out, out.err)

    return call


@pytest.fixture(scope="module")
def tiny_export(tmp_path_factory, data_root):
    """A 5-step model of the trainer's tiny test shape, exported."""
    folder = tmp_path_factory.mktemp("tiny")
    with gzip.open(data_root / "lm_corpus" / "wiki-valid.txt.gz", "rt", encoding="utf-8") as f:
        (folder / "text.txt").write_text("".join(next(f) for _ in range(150)), encoding="utf-8")
    config = TrainConfig(train=[str(folder / "text.txt")], out=str(folder / "run"), vocab_size=800,
                         vocab_max_tokens=100_000, vocab_min_count=1, char_embedding_dim=4,
                         filters=[[1, 8], [2, 8], [3, 16]], n_highway=1, lstm_dim=32, projection_dim=16,
                         softmax_cutoffs=[200], batch_tokens=300, max_sentence_tokens=30, max_steps=5, threads=1,
                         precision="fp32")
    trainer = Trainer(config, progress=False)
    trainer.train()
    return trainer.export(folder / "model", evaluate_test=False)


def test_pack_run_unpack_gives_back_the_exported_model(tiny_export, data_root, tmp_path, gpu_job):
    job = tmp_path / "job"
    packed = gpu_job(SCRIPT, "pack", job, "--model", tiny_export, "--data-root", data_root, "--device", "cpu",
                     "--hours", 0.0005, "--corpus-mb", 0.05, "--valid-mb", 0.01, "--batch-tokens", 300,
                     "--init-warmup-steps", 2, "--piece-mb", 0.02)
    assert packed.returncode == 0, packed.stderr
    assert sum(p.stat().st_size for p in job.rglob("*") if p.is_file()) <= 60_000_000
    spec = json.loads((job / "job.json").read_text())
    assert spec["corpus"]["skipped_words"] > 0  # the corpus slice starts after what the model has seen

    remote = tmp_path / "remote"  # the other machine: only the job folder travels
    shutil.copytree(job, remote)
    ran = gpu_job(remote / "gpu_job.py", "run", cwd=remote)
    assert ran.returncode == 0, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert "cool-down over the next" in ran.stdout
    export = remote / "work" / "export"
    card = json.loads((export / "model_card.json").read_text())
    steps = card["train_config"]["max_steps"]
    assert card["steps"] == steps and card["train_config"]["cooldown_steps"] >= 1  # ended with its cool-down

    # the start travelled in fp16: the rebuilt start is the original rounded, nothing else
    original, rebuilt = load_bilm(tiny_export).state_dict(), load_bilm(remote / "work" / "start").state_dict()
    for name, value in original.items():
        assert torch.equal(rebuilt[name], value.half().float()), name

    again = gpu_job(remote / "gpu_job.py", "run", cwd=remote)  # a second run trains nothing more
    assert again.returncode == 0 and "already made" in again.stdout

    outbox = remote / "outbox"
    pieces = sorted(outbox.glob("export.tar.xz.*"))
    assert len(pieces) > 1 and all(p.stat().st_size <= 20_000 for p in pieces)
    back = tmp_path / "back"
    unpacked = gpu_job(SCRIPT, "unpack", outbox, "--to", back)
    assert unpacked.returncode == 0, unpacked.stderr
    for path in export.iterdir():
        assert hashlib.sha256((back / path.name).read_bytes()).digest() == hashlib.sha256(path.read_bytes()).digest()
    a, b = load_bilm(back).state_dict(), load_bilm(export).state_dict()
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)

    # a damaged or missing piece is refused in one line, and nothing is put in place
    damaged = tmp_path / "damaged"
    shutil.copytree(outbox, damaged)
    raw = bytearray(pieces[1].read_bytes())
    raw[100] ^= 0xFF
    (damaged / pieces[1].name).write_bytes(bytes(raw))
    refused = gpu_job(SCRIPT, "unpack", damaged, "--to", tmp_path / "never")
    assert refused.returncode == 2 and "sha256 differs" in refused.stderr and len(refused.stderr.splitlines()) == 1
    (damaged / pieces[1].name).unlink()
    refused = gpu_job(SCRIPT, "unpack", damaged, "--to", tmp_path / "never")
    assert refused.returncode == 2 and "missing" in refused.stderr and not (tmp_path / "never").exists()


def test_pack_refuses_a_job_over_the_cap_in_one_line(tiny_export, data_root, tmp_path, gpu_job):
    over = gpu_job(SCRIPT, "pack", tmp_path / "job", "--model", tiny_export, "--data-root", data_root,
                   "--max-mb", 0.4, "--corpus-mb", 1.0)
    assert over.returncode == 2 and len(over.stderr.splitlines()) == 1
    assert "over the 0.4 MB cap" in over.stderr
    assert not (tmp_path / "job").exists() and not (tmp_path / "job.partial").exists()
    full = gpu_job(SCRIPT, "pack", tmp_path / "job", "--model", tiny_export, "--data-root", data_root, "--max-mb", 0.1)
    assert full.returncode == 2 and "no room left for a corpus" in full.stderr and len(full.stderr.splitlines()) == 1
    # the corpus takes what the cap leaves (the code and the start model take about 0.4 MB)
    fits = gpu_job(SCRIPT, "pack", tmp_path / "job", "--model", tiny_export, "--data-root", data_root,
                   "--max-mb", 0.6, "--valid-mb", 0.01)
    assert fits.returncode == 0, fits.stderr
    size = sum(p.stat().st_size for p in (tmp_path / "job").rglob("*") if p.is_file())
    assert 0.5e6 < size <= 0.6e6
