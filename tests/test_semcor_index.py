"""Reliability of the SemCor index (probing.senses.semcor_index) on the bilm-tf fixture model and a SemCor
slice: an index is reused only for the job it was built for, a build killed at any instant leaves
no index or a whole one and the next build equals an uninterrupted one, two builders never spoil
each other's file, and a view never mixes two builds."""

import dataclasses
import logging
import multiprocessing
import os
import random
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from elmo_model import load_bilm
from probing.senses.corpora import read_wsd_corpus
from probing.senses.semcor_index import SemcorIndex, build_semcor_index, index_manifest
from probing.senses.wsd import main as wsd_main

SLICE = 60  # SemCor sentences: enough for several activation windows at batch size 2


@pytest.fixture(scope="module")
def model(data_root):
    torch.set_num_threads(1)
    return load_bilm(data_root / "fixtures/bilm_tf")


@pytest.fixture(scope="module")
def semcor(data_root):
    return read_wsd_corpus("semcor", data_root, limit_sentences=SLICE)


@pytest.fixture(scope="module")
def reference(model, semcor, tmp_path_factory):
    """An uninterrupted build."""
    return build_semcor_index(model, sentences=semcor, cache_dir=tmp_path_factory.mktemp("reference"),
                              batch_size=2)


def contents(path: Path) -> dict:
    """Every dataset and attribute of an index file except its build id."""
    out = {}
    with h5py.File(path, "r") as f:
        for name, ds in f.items():
            out[name] = ds[...]
        out.update({f"attr:{k}": v for k, v in f.attrs.items() if k != "build_id"})
    return out


def assert_same_index(a: Path, b: Path) -> None:
    first, second = contents(a), contents(b)
    assert sorted(first) == sorted(second)
    for name in first:
        np.testing.assert_array_equal(first[name], second[name], err_msg=name)


def with_other_keys(sentences, old_key: str, new_key: str):
    """The same sentences (same tokens) with one gold key replaced by another everywhere."""
    out = []
    for s in sentences:
        instances = tuple(dataclasses.replace(i, sense_keys=frozenset(new_key if k == old_key else k
                                                                      for k in i.sense_keys))
                          for i in s.instances)
        out.append(dataclasses.replace(s, instances=instances))
    return out


def test_an_index_built_from_other_annotations_is_rebuilt_not_reused(model, semcor, reference, tmp_path, caplog):
    index = build_semcor_index(model, sentences=semcor, cache_dir=tmp_path, batch_size=2)
    assert index.manifest == index_manifest(model, semcor, "float16")
    key = max(index.sense_keys, key=lambda k: index.sense_counts[index.sense_row[k]])
    edited = with_other_keys(semcor, key, "edited%1:00:00::")
    with caplog.at_level(logging.WARNING, logger="probing.senses.semcor_index"):
        again = build_semcor_index(model, sentences=edited, cache_dir=tmp_path, batch_size=2)
    # the tokens are the same, so the file is the same; what it holds now follows the new keys
    assert again.path == index.path
    assert "edited%1:00:00::" in again.sense_keys and key not in again.sense_keys
    assert "semcor_digest differ" in caplog.text and "rebuilding it" in caplog.text


def test_an_index_with_another_dtype_or_no_manifest_is_rebuilt(model, semcor, reference, tmp_path, caplog):
    wide = build_semcor_index(model, sentences=semcor, cache_dir=tmp_path, dtype="float32", batch_size=2)
    target = tmp_path / reference.path.parent.name / reference.path.name  # where float16 lives here
    target.parent.mkdir(parents=True, exist_ok=True)
    # a float32 index at the place of the float16 one: its name says float16, its content does not
    os.replace(wide.path, target)
    with caplog.at_level(logging.WARNING, logger="probing.senses.semcor_index"):
        rebuilt = build_semcor_index(model, sentences=semcor, cache_dir=tmp_path, batch_size=2)
    assert rebuilt.path == target and rebuilt.dtype == "float16"
    assert "dtype differ" in caplog.text
    assert_same_index(rebuilt.path, reference.path)
    # a file that records no manifest (as written before indexes did) is rebuilt too
    with h5py.File(target, "a") as f:
        del f.attrs["manifest"]
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="probing.senses.semcor_index"):
        build_semcor_index(model, sentences=semcor, cache_dir=tmp_path, batch_size=2)
    assert "job manifest (missing) differ" in caplog.text
    assert_same_index(target, reference.path)


def test_a_view_refuses_to_read_after_a_rebuild_replaced_its_file(model, semcor, reference, tmp_path):
    view = build_semcor_index(model, sentences=semcor, cache_dir=tmp_path, batch_size=2)
    key = view.sense_keys[0]
    build_semcor_index(model, sentences=with_other_keys(semcor, key, "edited%1:00:00::"), cache_dir=tmp_path,
                       batch_size=2)
    with pytest.raises(ValueError, match="rebuilt after this view"):
        view.vectors(1)
    with pytest.raises(ValueError, match="rebuilt after this view"):
        view.instance(0)
    assert SemcorIndex(view.path).vectors(1).shape == (view.n_instances, view.dim)  # a new view reads


def test_a_flipped_byte_in_the_vectors_is_named_not_read(model, semcor, reference, tmp_path):
    index = build_semcor_index(model, sentences=semcor, cache_dir=tmp_path, batch_size=2)
    with h5py.File(index.path, "r") as f:
        offset = f["vectors"].id.get_offset()  # None for a chunked dataset: find its first chunk
        info = f["vectors"].id.get_chunk_info(0)
    assert offset is None
    data = bytearray(index.path.read_bytes())
    data[info.byte_offset + 10] ^= 0xFF
    index.path.write_bytes(bytes(data))
    view = SemcorIndex(index.path)
    with pytest.raises(ValueError, match="damaged SemCor index .*delete the file"):
        view.vectors(0)


# -- kill -9 at random instants ----------------------------------------------------------------


def _build_in_child(data_root: str, cache_dir: str, ready) -> None:
    """A whole build in a process of its own (forked from a fork server that has imported the
    modules but run nothing: quick to start, and no torch or hdf5 state shared with the test)."""
    torch.set_num_threads(1)
    model = load_bilm(Path(data_root) / "fixtures/bilm_tf")
    sentences = read_wsd_corpus("semcor", data_root, limit_sentences=SLICE)
    ready.set()
    build_semcor_index(model, sentences=sentences, cache_dir=cache_dir, batch_size=2)


@pytest.fixture(scope="module")
def context():
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["torch", "h5py", "elmo_model.models.registry", "probing.senses.semcor_index"])
    return context


def _start(context, data_root: Path, cache_dir: Path):
    ready = context.Event()
    process = context.Process(target=_build_in_child, args=(str(data_root), str(cache_dir), ready))
    process.start()
    assert ready.wait(300), "the build process did not start"
    return process


def test_a_build_killed_at_random_instants_then_rebuilt_equals_an_uninterrupted_one(
        model, semcor, reference, data_root, tmp_path, context):
    timed = _start(context, data_root, tmp_path / "timed")
    started = time.perf_counter()
    timed.join(300)
    assert timed.exitcode == 0
    duration = time.perf_counter() - started  # the build's own time (and the process's exit)
    assert_same_index(next((tmp_path / "timed").rglob("semcor-index-*.h5")), reference.path)
    rng = random.Random(0)
    hit_unfinished = 0
    for k in range(4):
        cache_dir = tmp_path / f"killed{k}"
        process = _start(context, data_root, cache_dir)
        time.sleep(rng.uniform(0.0, 0.7 * duration))
        process.kill()  # SIGKILL
        process.join(60)
        leftovers = list(cache_dir.rglob("*.partial"))
        hit_unfinished += bool(leftovers) or not list(cache_dir.rglob("semcor-index-*.h5"))
        for index_file in cache_dir.rglob("semcor-index-*.h5"):  # an index on disk is a whole one
            assert_same_index(index_file, reference.path)
        rebuilt = build_semcor_index(model, sentences=semcor, cache_dir=cache_dir, batch_size=2)
        assert_same_index(rebuilt.path, reference.path)
        assert not list(cache_dir.rglob("*.partial"))
    assert hit_unfinished >= 1  # at least one kill came before the build had finished


def test_two_builders_of_one_index_leave_one_whole_index(model, semcor, reference, data_root, tmp_path, context):
    first = _start(context, data_root, tmp_path)
    second = _start(context, data_root, tmp_path)
    first.join(300)
    second.join(300)
    assert (first.exitcode, second.exitcode) == (0, 0)
    (index_file,) = tmp_path.rglob("semcor-index-*.h5")
    assert_same_index(index_file, reference.path)
    assert not list(tmp_path.rglob("*.partial")) and not list(tmp_path.rglob("*.lock"))


def test_a_non_positive_semcor_limit_is_refused_before_any_work(model, data_root, tmp_path, capsys):
    with pytest.raises(ValueError, match="semcor_limit 0: expected a positive number"):
        build_semcor_index(model, data_root, semcor_limit=0, cache_dir=tmp_path)
    for flag in ("--limit-semcor", "--batch-size", "--max-instances"):
        with pytest.raises(SystemExit) as exit_:
            wsd_main([flag, "0"])
        assert exit_.value.code == 2 and f"{flag}: expected a positive integer" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
