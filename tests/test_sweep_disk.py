"""The sweep's full-disk class: a write that does not fit, made to happen in CI.

A subprocess runs under a file-size limit (RLIMIT_FSIZE, with SIGXFSZ ignored, so a write past
it fails with EFBIG as a full disk fails with ENOSPC). HDF5 does not recover from a failed write:
the embedder printed a traceback and then segfaulted (exit 139), and the activation cache lost
its unfinished file. Now each hdf5 writer asks for room before each block
(``io_safety.ensure_room``): one line, the marks kept, and the same command resumes once there is
room. docs/reliability.md gives the counts.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import re
import resource
import signal
import subprocess
import sys
from pathlib import Path

import h5py
import pytest

CHECKOUT = Path(__file__).resolve().parents[1]


def _limited(limit: int):
    def start() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return start


#: Both writers under one file-size limit, in one subprocess (the earlier code segfaulted there):
#: the embedder's command line (``main(argv)``) and an activation cache. Each result is a line of JSON.
LIMITED = """
import json, sys, io, contextlib, traceback
from elmo_model.corpus.embedder import main
from elmo_model import load_bilm
from probing.engine.activations import extract_activations

model, text, out, cache = sys.argv[1:5]
err = io.StringIO()
try:
    with contextlib.redirect_stderr(err):
        code = main([text, out, "--model", model, "--batch-size", "1", "--precision", "fp32"])
except BaseException:
    code = None
    err.write(traceback.format_exc())
print(json.dumps({"embedder": [code, err.getvalue()]}), flush=True)
sentences = [f"sentence number {i} of the river bank is here .".split() for i in range(100)]
try:
    extract_activations(load_bilm(model, precision="fp32"), sentences, "demo", "test", cache_dir=cache, batch_size=1)
    result = [0, ""]
except ValueError as error:
    result = [2, f"error: {error}"]
except BaseException:
    result = [None, traceback.format_exc()]
print(json.dumps({"activations": result}), flush=True)
"""

SENTENCES = "".join(f"sentence number {i} of the river bank is here .\n" for i in range(100))


@pytest.fixture(scope="module")
def limited(data_root, tmp_path_factory) -> dict:
    """What each writer did under a 400,000-byte file-size limit (a whole embedding is about 470 kB,
    a whole activation cache about 450 kB), and the paths, for the in-process reruns."""
    folder = tmp_path_factory.mktemp("limited")
    (folder / "in.txt").write_text(SENTENCES, encoding="utf-8")
    paths = {"model": data_root / "fixtures" / "bilm_tf", "text": folder / "in.txt", "out": folder / "o.hdf5",
             "cache": folder / "cache"}
    done = subprocess.run([sys.executable, "-c", LIMITED, *map(str, paths.values())], cwd=CHECKOUT,
                          capture_output=True, text=True, timeout=600, preexec_fn=_limited(400_000),
                          env={**os.environ, "TQDM_DISABLE": "1"}, check=False)
    results = {}
    for line in done.stdout.splitlines():
        if line.startswith("{"):
            results.update(json.loads(line))
    return {"results": results, "returncode": done.returncode, "stderr": done.stderr[-3000:], **paths}


def test_the_embedder_stops_in_one_line_when_the_file_would_not_fit(limited, capsys, caplog):
    """``elmo-embed`` under ``ulimit -f``: was a traceback then a segfault (exit 139)."""
    assert "embedder" in limited["results"], (limited["returncode"], limited["stderr"])
    code, err = limited["results"]["embedder"]
    assert code == 2 and "Traceback" not in err, (code, err[-3000:])
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "file-size limit" in errors[0], errors
    kept = re.search(r"(\d+) of 100 sentences kept", errors[0])
    assert kept and int(kept[1]) in (32, 64, 96), errors  # whole windows of 32
    with h5py.File(f"{limited['out']}.partial", "r") as handle:  # a healthy file, its mark on disk
        assert int(handle.attrs["lines_done"]) == int(kept[1])
    from elmo_model.corpus.embedder import main
    with caplog.at_level(logging.INFO, logger="elmo_model.embedding"):  # the same command, room now
        assert main([str(limited["text"]), str(limited["out"]), "--model", str(limited["model"]), "--batch-size",
                     "1", "--precision", "fp32"]) == 0, capsys.readouterr().err[-3000:]
    assert f"{kept[1]} of 100 sentences already embedded" in caplog.text
    with h5py.File(limited["out"], "r") as handle:
        assert len(handle) == 101


def test_the_activation_cache_stops_in_one_line_when_the_file_would_not_fit(limited):
    """An activation cache under ``ulimit -f``: was a traceback, a segfault, and the unfinished
    file lost. Now: one line, exit as the caller decides, and the next run completes it."""
    from elmo_model import load_bilm
    from probing.engine.activations import extract_activations

    assert "activations" in limited["results"], (limited["returncode"], limited["stderr"])
    code, err = limited["results"]["activations"]
    assert code == 2 and "Traceback" not in err, (code, err[-3000:])
    assert "file-size limit" in err and "of 100 sentences kept" in err
    sentences = [line.split() for line in SENTENCES.splitlines()]
    cache = extract_activations(load_bilm(limited["model"], precision="fp32"), sentences, "demo", "test",
                                cache_dir=limited["cache"], batch_size=1)
    assert int(cache.lengths.sum()) == sum(map(len, sentences))


def test_a_full_disk_is_named_with_what_is_kept(tmp_path, monkeypatch):
    """ENOSPC, as the writers see it before they write: the free space of the output's file
    system (``statvfs``), one line with what is kept and how to go on."""
    from elmo_model.plumbing import io_safety

    class Full:
        f_bavail, f_frsize = 10, 4096

    monkeypatch.setattr(io_safety.os, "statvfs", lambda path: Full())
    with pytest.raises(io_safety.DiskFull, match=r"the disk is full \(40,960 bytes free.*; 3 of 9 kept; free some"):
        io_safety.ensure_room(tmp_path / "o.hdf5.partial", 1000, "3 of 9 kept")
    monkeypatch.setattr(io_safety.os, "statvfs", lambda path: type("Roomy", (), {"f_bavail": 1 << 30,
                                                                                  "f_frsize": 4096})())
    io_safety.ensure_room(tmp_path / "o.hdf5.partial", 1000, "3 of 9 kept")  # room: no error


def test_an_export_that_would_not_fit_keeps_the_checkpoint_and_writes_nothing(data_root, tmp_path, monkeypatch,
                                                                               capsys):
    """A full disk at the trainer's export: the weights were written until the disk ran out (an
    hdf5 traceback). Now one line before any file of the export, the checkpoint kept; the same
    command exports once there is room."""
    from elmo_model.plumbing import io_safety
    from elmo_model.training import train as train_cli

    corpus = tmp_path / "c.txt"
    with gzip.open(data_root / "lm_corpus" / "wiki-valid.txt.gz", "rt", encoding="utf-8") as handle:
        corpus.write_text("".join(next(handle) for _ in range(40)), encoding="utf-8")
    argv = ["--train", str(corpus), "--out", str(tmp_path / "run"), "--max-steps", "1", "--vocab-size", "200",
            "--vocab-min-count", "1", "--char-embedding-dim", "4", "--filters", "[[1, 8], [2, 8]]", "--n-highway",
            "1", "--lstm-dim", "16", "--projection-dim", "8", "--softmax-cutoffs", "100", "--batch-tokens", "200",
            "--max-sentence-tokens", "20", "--threads", "1", "--precision", "fp32"]
    real = io_safety.os.statvfs
    monkeypatch.setattr(io_safety.os, "statvfs", lambda path: type("Full", (), {"f_bavail": 1, "f_frsize": 4096})())
    assert train_cli.main(argv) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "the disk is full" in errors[0] and "checkpoint.pt (step 1) is kept" in errors[0]
    assert not (tmp_path / "run" / "model" / "weights.hdf5").exists()
    assert (tmp_path / "run" / "checkpoint.pt").is_file()
    monkeypatch.setattr(io_safety.os, "statvfs", real)
    assert train_cli.main(argv) == 0
    assert (tmp_path / "run" / "model" / "weights.hdf5").is_file()


def _no_room(monkeypatch) -> None:
    """The output's file system with 40,960 bytes free (``statvfs``), as a nearly full disk."""
    from elmo_model.plumbing import io_safety

    monkeypatch.setattr(io_safety.os, "statvfs", lambda path: type("Full", (), {"f_bavail": 10, "f_frsize": 4096})())


RAY_SENTENCES = [["The", "bank", "."], ["A", "river", "bank", "."], ["Yes"]]


def test_a_ray_shard_asks_for_room_before_each_dataset(data_root, tmp_path, monkeypatch):
    """A Ray worker wrote its shard until HDF5 failed (a traceback from the actor, a damaged
    ``.partial``). Now it stops before the first dataset that would not fit: one line, naming the
    shard and what is kept, and no shard file left half-written."""
    from elmo_model import load_bilm
    from elmo_model.corpus.ray_embed import ShardTask, ShardWorker

    worker = ShardWorker(load_bilm(data_root / "fixtures" / "bilm_tf"), batch_size=4)
    path = tmp_path / "o.hdf5.shards" / "shard-00000.hdf5"
    path.parent.mkdir()
    _no_room(monkeypatch)
    with pytest.raises(ValueError, match=r"shard-00000\.hdf5\.partial: the disk is full .*finished shards are kept"):
        worker.embed_shard(ShardTask(0, 0, 3, str(path), "d" * 64, "all"), ["0", "1", "2"], RAY_SENTENCES)
    assert list(path.parent.iterdir()) == []


def test_the_ray_assembly_asks_for_room_for_every_shard_first(data_root, tmp_path, monkeypatch):
    """Assembling ``OUTPUT`` from the shards copies every dataset: it ran out half-way. Now the
    room for all of them is asked for first; the shards stay for the rerun."""
    from elmo_model import load_bilm
    from elmo_model.corpus.ray_embed import ShardTask, ShardWorker, _assemble

    worker = ShardWorker(load_bilm(data_root / "fixtures" / "bilm_tf"), batch_size=4)
    task = ShardTask(0, 0, 3, str(tmp_path / "o.hdf5.shards" / "shard-00000.hdf5"), "d" * 64, "all")
    Path(task.path).parent.mkdir()
    worker.embed_shard(task, ["0", "1", "2"], RAY_SENTENCES)
    _no_room(monkeypatch)
    with pytest.raises(ValueError, match=r"o\.hdf5\.partial: the disk is full .*finished shards are kept"):
        _assemble(tmp_path / "o.hdf5", [task], ["0", "1", "2"], RAY_SENTENCES, link_shards=False)
    assert not (tmp_path / "o.hdf5").exists() and not (tmp_path / "o.hdf5.partial").exists()
    assert Path(task.path).is_file()


def test_a_ray_workers_full_disk_reaches_the_driver_as_one_line():
    """Ray wraps a worker's exception with the actor's traceback; the driver printed all of it. A
    ``DiskFull`` among the results is raised again as its own one line."""
    from elmo_model.corpus.ray_embed import _disk_full_said_once
    from elmo_model.plumbing.io_safety import DiskFull

    class RayTaskError(Exception):  # what ray.exceptions.RayTaskError carries: the cause
        def __init__(self, cause):
            super().__init__(f"ray::ShardWorker.embed_shard()\nTraceback (most recent call last):\n...{cause}")
            self.cause = cause

    def results():
        yield {"index": 0}
        raise RayTaskError(DiskFull("o.hdf5.shards/shard-00001.hdf5.partial: the disk is full (…)"))

    seen = []
    with pytest.raises(DiskFull) as caught:
        seen.extend(_disk_full_said_once(results()))
    assert seen == [{"index": 0}] and "\n" not in str(caught.value) and "Traceback" not in str(caught.value)


def test_a_static_embedding_that_would_not_fit_leaves_the_old_file(tmp_path, monkeypatch):
    """``StaticEmbedding.save`` (``train-word2vec``'s output) on a full disk: an OSError traceback
    after the training. Now one line, and the file it would have replaced is as it was."""
    import numpy as np

    from probing.context.static_embedding import StaticEmbedding

    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(3000)]
    old = tmp_path / "w.npz"
    StaticEmbedding(words[:10], rng.standard_normal((10, 50)).astype(np.float32), name="old").save(old)
    before = old.read_bytes()
    _no_room(monkeypatch)
    with pytest.raises(ValueError, match=r"w\.npz\.tmp\d+: the disk is full .*w\.npz is as it was"):
        StaticEmbedding(words, rng.standard_normal((3000, 50)).astype(np.float32), name="new").save(old)
    assert old.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["w.npz"]


def test_an_atomic_write_cut_by_the_file_size_limit_is_one_line(tmp_path):
    """Every atomic writer (reports, figures, manifests, word2vec files) under ``ulimit -f``: an
    ``OSError: File too large`` traceback. Now ``DiskFull`` naming the limit; no temporary file."""
    from elmo_model.plumbing.io_safety import atomic_write_bytes

    target = tmp_path / "report.html"
    target.write_text("the old report\n", encoding="utf-8")
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    handler = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (200_000, hard))
    try:
        with pytest.raises(ValueError, match="file-size limit"):
            atomic_write_bytes(target, b"x" * 500_000)
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, handler)
    assert target.read_text(encoding="utf-8") == "the old report\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.html"]


def test_a_cache_folder_removed_mid_suite_is_one_line(data_root, tmp_path, monkeypatch, capsys):
    """``rm -r`` of the cache folder while ``probing.tagging.suite`` extracts: a FileNotFoundError
    traceback at the rename. Now one line saying what happened and that a rerun computes it again."""
    import shutil

    from probing.engine import activations
    from probing.tagging.suite import main as suite_main

    cache = tmp_path / "cache"
    real_fill = activations._fill

    def fill_then_lose_the_folder(*args, **kwargs):
        real_fill(*args, **kwargs)
        shutil.rmtree(cache)

    monkeypatch.setattr(activations, "_fill", fill_then_lose_the_folder)
    code = suite_main(["--model", str(data_root / "fixtures" / "bilm_tf"), "--tasks", "pos", "--limit", "8",
                       "--layers", "1", "--mix-seeds", "0", "--no-random-bilm", "--quiet", "--cache-dir", str(cache),
                       "--out", str(tmp_path / "s.json")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err, err[-3000:]
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert "was removed while this run wrote into it" in line and "rerun the same command" in line, line
    assert not (tmp_path / "s.json").exists()


def test_a_semcor_index_that_would_not_fit_is_one_line_and_keeps_its_activations(data_root, tmp_path, monkeypatch):
    """The SemCor index (WSD, retrieval, projections) asked for no room: on a full disk HDF5 fails
    part-way through the vectors and does not recover. Now the room for the whole index is asked
    for before a byte of it is written; the activations it is built from stay in their cache, and
    the next build reads them instead of computing them again."""
    from elmo_model import load_bilm
    from elmo_model.plumbing import io_safety
    from probing.senses import semcor_index
    from probing.senses.corpora import read_wsd_corpus

    model = load_bilm(data_root / "fixtures" / "bilm_tf", precision="fp32")
    semcor = read_wsd_corpus("semcor", data_root, limit_sentences=20)
    real_statvfs, real_extract, full = io_safety.os.statvfs, semcor_index.extract_activations, []

    def extract_then_fill_the_disk(*args, **kwargs):  # the disk fills once the activations are cached
        cache = real_extract(*args, **kwargs)
        full.append(True)
        return cache

    monkeypatch.setattr(semcor_index, "extract_activations", extract_then_fill_the_disk)
    monkeypatch.setattr(io_safety.os, "statvfs", lambda path: type("Full", (), {"f_bavail": 10, "f_frsize": 4096})()
                        if full else real_statvfs(path))
    with pytest.raises(ValueError, match="the disk is full .*the activations it is built from stay in their cache"):
        semcor_index.build_semcor_index(model, sentences=semcor, cache_dir=tmp_path, batch_size=2)
    assert not list(tmp_path.rglob("semcor-index*"))
    cached = {path: path.stat().st_mtime_ns for path in tmp_path.rglob("semcor-*.h5")}
    assert cached
    monkeypatch.undo()  # room again
    index = semcor_index.build_semcor_index(model, sentences=semcor, cache_dir=tmp_path, batch_size=2)
    assert index.path.is_file()
    assert {path: path.stat().st_mtime_ns for path in cached} == cached


def _writes_then_fails(how: str):
    """A ``torch.save`` that writes a little, then fails as it does on a full disk: ``OSError``
    (ENOSPC) from the file it was given, the ``RuntimeError`` of torch's zip writer over that
    ``OSError`` ("unexpected pos", when it writes through a Python file), or that ``RuntimeError``
    alone (when it opens the path itself)."""
    import errno

    torch_says = "[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598"

    def save(obj, f, *args, **kwargs):
        handle = f if hasattr(f, "write") else open(f, "wb")  # noqa: SIM115 -- closed below when ours
        try:
            handle.write(b"PK\x03\x04 a third of a checkpoint")
            if how == "RuntimeError alone":
                raise RuntimeError(torch_says)
            try:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            except OSError:
                if how == "OSError":
                    raise
                raise RuntimeError(torch_says)  # noqa: B904 -- torch's, with the OSError as its context
        finally:
            if handle is not f:
                handle.close()
    return save


@pytest.mark.parametrize("how", ["OSError", "RuntimeError over OSError", "RuntimeError alone"])
def test_a_full_disk_at_a_checkpoint_is_one_line_and_keeps_the_previous_one(data_root, tmp_path, monkeypatch, capsys,
                                                                             how):
    """A full disk while the trainer writes checkpoint.pt: a RuntimeError traceback from torch's zip
    writer. Now one line naming the run folder and the checkpoint that is kept (exit 2), the
    previous checkpoint byte for byte as it was and no temporary file left beside it."""
    import torch

    from elmo_model.training import train as train_cli

    corpus = tmp_path / "c.txt"
    with gzip.open(data_root / "lm_corpus" / "wiki-valid.txt.gz", "rt", encoding="utf-8") as handle:
        corpus.write_text("".join(next(handle) for _ in range(40)), encoding="utf-8")
    run = tmp_path / "run"
    argv = ["--train", str(corpus), "--out", str(run), "--no-export", "--vocab-size", "200", "--vocab-min-count", "1",
            "--char-embedding-dim", "4", "--filters", "[[1, 8], [2, 8]]", "--n-highway", "1", "--lstm-dim", "16",
            "--projection-dim", "8", "--softmax-cutoffs", "100", "--batch-tokens", "200", "--max-sentence-tokens",
            "20", "--threads", "1", "--precision", "fp32"]
    assert train_cli.main([*argv, "--max-steps", "1"]) == 0
    before = (run / "checkpoint.pt").read_bytes()
    capsys.readouterr()
    monkeypatch.setattr(torch, "save", _writes_then_fails(how))
    assert train_cli.main([*argv, "--max-steps", "2"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err, err[-3000:]
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert f"error: {run}: " in line and f"the previous checkpoint {run / 'checkpoint.pt'} (step 1) is kept" in line
    assert ("the disk is full" if how != "RuntimeError alone" else "unexpected pos 704 vs 598") in line, line
    assert "rerun the same command" in line, line
    assert (run / "checkpoint.pt").read_bytes() == before
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint.pt", "train_config.json", "vocab.txt"]
