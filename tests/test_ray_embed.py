"""Corpus embedding on Ray (2 local workers, the bilm-tf fixture model): the same file as the
single-process embedder, through a crashed worker, and bad input named by its line number."""

import gzip
import json
import os
from pathlib import Path

import h5py
import numpy as np
import pytest
import ray
import torch

from elmo_model.corpus.embedder import ElmoEmbedder, main
from elmo_model.corpus.ray_embed import ShardWorker, embed_file_with_ray, runtime_env
from elmo_model.models.registry import load_bilm

BATCH_SIZE = 16  # window 32 x 16 = 512 sentences: 3,000 sentences make 6 shards


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray for the module: ray.init(num_cpus=2), torn down at the end."""
    ray.init(num_cpus=2, runtime_env=runtime_env(), include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def sentences_file(tmp_path_factory, data_root) -> Path:
    """3,000 sentences (pieces of 3-25 tokens of the LM corpus's wiki validation text), one a line."""
    lines = []
    with gzip.open(data_root / "lm_corpus" / "wiki-valid.txt.gz", "rt", encoding="utf-8") as f:
        for paragraph in f:
            words = paragraph.split()
            for start in range(0, len(words), 25):
                piece = words[start : start + 3 + (start * 7 + len(lines)) % 23]
                if piece:
                    lines.append(" ".join(piece))
            if len(lines) >= 3000:
                break
    path = tmp_path_factory.mktemp("corpus") / "sentences.txt"
    path.write_text("\n".join(lines[:3000]) + "\n", encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def reference(sentences_file, data_root, tmp_path_factory) -> Path:
    """The single-process embedder's file (1 thread, as each Ray worker uses)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        embedder = ElmoEmbedder(load_bilm(data_root / "fixtures" / "bilm_tf"), batch_size=BATCH_SIZE)
        return embedder.embed_file(sentences_file, tmp_path_factory.mktemp("single") / "out.hdf5", "all")
    finally:
        torch.set_num_threads(threads)


def assert_same_file(a: Path, b: Path, n: int) -> None:
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        assert sorted(fa.keys()) == sorted(fb.keys())
        assert len(fa.keys()) == n + 1  # every line once, plus sentence_to_index
        assert json.loads(fa["sentence_to_index"][()]) == json.loads(fb["sentence_to_index"][()])
        for i in range(n):
            assert fa[str(i)].dtype == fb[str(i)].dtype == np.float32
            np.testing.assert_array_equal(fa[str(i)][()], fb[str(i)][()], err_msg=f"line {i}")


def test_two_ray_workers_give_the_single_process_file(local_ray, sentences_file, reference, data_root, tmp_path):
    seen = []
    out = embed_file_with_ray(sentences_file, tmp_path / "ray.hdf5", data_root / "fixtures" / "bilm_tf",
                              batch_size=BATCH_SIZE, workers=2, shard_size=512, keep_shards=True,
                              progress=lambda done, total: seen.append(done))
    assert_same_file(reference, out, 3000)
    shards = sorted((tmp_path / "ray.hdf5.shards").glob("shard-*.hdf5"))
    index = json.loads((tmp_path / "ray.hdf5.shards" / "index.json").read_text())
    assert len(shards) == len(index["shards"]) == 6 and index["shards"][-1]["stop"] == 3000
    assert seen[0] == 0 and seen[-1] == 3000
    # a rerun finds every shard finished and embeds nothing; this time OUTPUT links to the shards
    stamps = [p.stat().st_mtime_ns for p in shards]
    seen.clear()
    out = embed_file_with_ray(sentences_file, tmp_path / "ray.hdf5", data_root / "fixtures" / "bilm_tf",
                              batch_size=BATCH_SIZE, workers=2, shard_size=512, link_shards=True,
                              progress=lambda done, total: seen.append(done))
    assert seen == [3000] and [p.stat().st_mtime_ns for p in shards] == stamps
    with h5py.File(out, "r") as f:
        assert isinstance(f.get("0", getlink=True), h5py.ExternalLink)
    assert_same_file(reference, out, 3000)


def test_a_worker_killed_mid_shard_is_restarted_and_every_sentence_lands_once(local_ray, sentences_file, reference,
                                                                             data_root, tmp_path):
    marker = tmp_path / "crashed"

    class CrashOnce(ShardWorker):
        """Dies (the whole actor process) half-way through shard 1, the first time only."""

        def embed_shard(self, task, keys, sentences):
            if task.index == 1 and not marker.exists():
                marker.touch()
                original = self.embedder.embed_sentences

                def dying(batch):
                    for k, array in enumerate(original(batch)):
                        if k == 200:
                            os._exit(1)
                        yield array

                self.embedder.embed_sentences = dying
            return super().embed_shard(task, keys, sentences)

    out = embed_file_with_ray(sentences_file, tmp_path / "ray.hdf5", data_root / "fixtures" / "bilm_tf",
                              batch_size=BATCH_SIZE, workers=2, shard_size=512, worker_class=CrashOnce)
    assert marker.exists()  # the worker did die
    assert_same_file(reference, out, 3000)
    assert not (tmp_path / "ray.hdf5.shards").exists()  # copied into the output, then removed


def test_bad_lines_are_named_by_line_number(tmp_path, data_root, capsys):
    model = str(data_root / "fixtures" / "bilm_tf")
    empty = tmp_path / "empty.txt"
    empty.write_text("one sentence\nanother one\n\nlast\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"empty.txt:3: empty line"):
        embed_file_with_ray(empty, tmp_path / "out.hdf5", model)
    undecodable = tmp_path / "latin1.txt"
    undecodable.write_bytes(b"fine\nstill fine\n" * 3000 + b"caf\xe9 au lait\n")
    assert main([str(undecodable), str(tmp_path / "out.hdf5"), "--model", model, "--ray"]) == 2
    assert "latin1.txt:6001: not valid UTF-8" in capsys.readouterr().err
    assert not (tmp_path / "out.hdf5").exists()


# ---- the probing activation cache on Ray ---------------------------------------------------

class Stop(Exception):
    pass


def test_activation_cache_on_ray_equals_the_local_cache_and_resumes_by_window(local_ray, sentences_file, data_root,
                                                                             tmp_path):
    from probing.engine.activations import extract_activations

    model = load_bilm(data_root / "fixtures" / "bilm_tf")
    sentences = [line.split() for line in sentences_file.read_text(encoding="utf-8").splitlines()[:700]]
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as each Ray worker
    try:
        local = extract_activations(model, sentences, "corpus", "test", cache_dir=tmp_path / "local", batch_size=8)
    finally:
        torch.set_num_threads(threads)

    def stop_after_first_window(done, total):
        if done >= 256:  # windows of 32 x 8 sentences
            raise Stop

    with pytest.raises(Stop):
        extract_activations(model, sentences, "corpus", "test", cache_dir=tmp_path / "ray", batch_size=8,
                            ray="local", ray_workers=2, progress=stop_after_first_window)
    seen = []
    cache = extract_activations(model, sentences, "corpus", "test", cache_dir=tmp_path / "ray", batch_size=8,
                                ray="local", ray_workers=2, progress=lambda done, total: seen.append(done))
    assert seen[0] == 256 and seen[-1] == 700  # the finished window was skipped
    assert cache.path.name == local.path.name  # the same key: the same cache, wherever it was computed
    np.testing.assert_array_equal(cache.lengths, local.lengths)
    for j in range(3):
        np.testing.assert_array_equal(cache.layer(j), local.layer(j))
    with pytest.raises(ValueError, match="stateful"):
        extract_activations(model, sentences, "corpus", "test", cache_dir=tmp_path / "x", stateful=True, ray="local")


# ---- one writer per output, a resume only of the same job, data before the mark -----------------

def _first_lines(sentences_file: Path, path: Path, n: int) -> Path:
    path.write_text("".join(sentences_file.read_text(encoding="utf-8").splitlines(keepends=True)[:n]), encoding="utf-8")
    return path


def test_a_second_run_on_the_same_output_stops_and_touches_nothing(sentences_file, data_root, tmp_path):
    from elmo_model.plumbing.io_safety import OutputBusy, output_lock

    text = _first_lines(sentences_file, tmp_path / "in.txt", 40)
    out = tmp_path / "out.hdf5"
    with output_lock(out, what="output file"):  # the first run, still writing
        with pytest.raises(OutputBusy, match=r"out.hdf5: another run \(pid \d+\) is writing this output file"):
            embed_file_with_ray(text, out, data_root / "fixtures" / "bilm_tf", batch_size=4, workers=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]  # no shards, no .partial, no output


def test_output_paths_are_checked_before_any_work(sentences_file, data_root, tmp_path):
    text = _first_lines(sentences_file, tmp_path / "in.txt", 40)
    model = data_root / "fixtures" / "bilm_tf"
    with pytest.raises(ValueError, match="is a directory; give the path of a file to write"):
        embed_file_with_ray(text, tmp_path, model)
    with pytest.raises(ValueError, match=r"the directory .*missing does not exist"):
        embed_file_with_ray(text, tmp_path / "missing" / "out.hdf5", model)
    with pytest.raises(ValueError, match="is also an input"):
        embed_file_with_ray(text, text, model)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_shards_of_another_job_are_discarded_saying_why(local_ray, sentences_file, data_root, tmp_path, caplog):
    """A shard directory kept from a run on other input lines is not resumed: the rerun says what
    differs, embeds everything again and gives the single-process file."""
    model = load_bilm(data_root / "fixtures" / "bilm_tf")
    old = _first_lines(sentences_file, tmp_path / "old.txt", 300)
    text = tmp_path / "in.txt"
    lines = old.read_text(encoding="utf-8").splitlines(keepends=True)
    text.write_text("".join(lines[:150] + ["A line that was edited .\n"] + lines[151:]), encoding="utf-8")
    out = tmp_path / "out.hdf5"
    options = dict(batch_size=4, workers=2, shard_size=128, keep_shards=True)
    embed_file_with_ray(old, out, model, **options)
    shards = tmp_path / "out.hdf5.shards"
    stamps = {p.name: p.stat().st_mtime_ns for p in shards.glob("shard-*.hdf5")}
    assert len(stamps) == 3
    with caplog.at_level("WARNING", logger="elmo_model.corpus.ray_embed"):
        embed_file_with_ray(text, out, model, **options)
    assert "was written for another job (input_digest differ); starting over" in caplog.text
    assert all(p.stat().st_mtime_ns != stamps[p.name] for p in shards.glob("shard-*.hdf5"))  # every shard redone
    assert json.loads((shards / "job.json").read_text())["n_sentences"] == 300
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        single = ElmoEmbedder(model, batch_size=4).embed_file(text, tmp_path / "single.hdf5", "all")
    finally:
        torch.set_num_threads(threads)
    assert_same_file(single, out, 300)


def test_a_shard_is_on_disk_before_its_mark_and_its_name(data_root, tmp_path, monkeypatch):
    """The shard's datasets are fsynced before the ``digest`` attribute that marks it complete, which
    is fsynced before the file is renamed into place (and its folder synced after)."""
    from elmo_model.corpus.ray_embed import ShardTask

    events: list[tuple] = []
    real_fsync, real_replace, real_setattr = os.fsync, os.replace, h5py.AttributeManager.__setitem__

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        return real_fsync(fd)

    def replace(src, dst):
        events.append(("replace", str(dst)))
        return real_replace(src, dst)

    def setattr_(self, name, value):
        events.append(("attr", name))
        return real_setattr(self, name, value)

    worker = ShardWorker(load_bilm(data_root / "fixtures" / "bilm_tf"), batch_size=4)
    path = tmp_path / "shard-00000.hdf5"
    task = ShardTask(0, 0, 3, str(path), "d" * 64, "top")
    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(h5py.AttributeManager, "__setitem__", setattr_)
    worker.embed_shard(task, ["0", "1", "2"], [["The", "bank", "."], ["A", "river", "bank", "."], ["Yes"]])
    monkeypatch.undo()
    partial = str(path.with_name(path.name + ".partial").resolve())
    mark, rename = events.index(("attr", "digest")), events.index(("replace", str(path)))
    assert ("fsync", partial) in events[:mark], "the digest was set before the data was synced"
    assert ("fsync", partial) in events[mark:rename], "the shard was renamed before its mark was synced"
    assert ("fsync", str(tmp_path.resolve())) in events[rename:]
    with h5py.File(path, "r") as f:
        assert f.attrs["digest"] == task.digest and sorted(f) == ["0", "1", "2"]
