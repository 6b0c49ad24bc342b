"""Nothing lost, nothing silently wrong: every writer, reader and resume of the workbench.

Each test reproduces one way a run used to lose data or write wrong output without a word, or
to fail with a traceback, on bilm-tf's fixture model and real sentences (UD English-EWT dev);
docs/reliability.md lists them beside the behaviour they guard."""

from __future__ import annotations

import json
import shutil
import threading
from pathlib import Path
from urllib.parse import unquote

import h5py
import numpy as np
import pytest

from elmo_model import ElmoEmbedder, load_bilm
from elmo_model import embedder as embedder_cli

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def fixture_dir(data_root):
    return data_root / "fixtures" / "bilm_tf"


@pytest.fixture(scope="module")
def model(fixture_dir):
    return load_bilm(fixture_dir)


def ud_sentences(data_root: Path, n: int, skip: int = 0) -> list[list[str]]:
    """The first ``n`` sentences (after ``skip``) of UD English-EWT dev, as token lists."""
    sentences, tokens = [], []
    with open(data_root / "ud_english_ewt" / "en_ewt-ud-dev.conllu", encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                if tokens:
                    sentences.append(tokens[:30])
                    tokens = []
                    if len(sentences) >= n + skip:
                        break
            elif not line.startswith("#"):
                cols = line.split("\t")
                if cols[0].isdigit():
                    tokens.append(cols[1])
    return sentences[skip:]


def write_lines(path: Path, sentences) -> Path:
    path.write_text("".join(" ".join(s) + "\n" for s in sentences), encoding="utf-8")
    return path


def read_all(path: Path) -> dict[str, np.ndarray]:
    with h5py.File(path, "r") as f:
        return {k: f[k][()] for k in f}


def assert_same_file(a: Path, b: Path) -> None:
    left, right = read_all(a), read_all(b)
    assert sorted(left) == sorted(right)
    for key in left:
        if key == "sentence_to_index":
            assert json.loads(left[key]) == json.loads(right[key])
        else:
            np.testing.assert_array_equal(left[key], right[key], err_msg=f"dataset {key!r}")


class Stop(Exception):
    pass


def stop_after(calls: int):
    """A progress callback that interrupts the run at its ``calls``-th report."""
    seen = []

    def progress(done, total):
        seen.append(done)
        if len(seen) >= calls:
            raise Stop

    return progress


# --------------------------------------------------------------------------------------------
# The embedding CLI / ElmoEmbedder.embed_file
# --------------------------------------------------------------------------------------------


def test_stateful_embedding_resumes_with_the_carried_state(tmp_path, model, data_root):
    text = write_lines(tmp_path / "in.txt", ud_sentences(data_root, 24))
    ElmoEmbedder(model, batch_size=4, stateful=True).embed_file(text, tmp_path / "whole.hdf5")
    with pytest.raises(Stop):
        ElmoEmbedder(model, batch_size=4, stateful=True).embed_file(text, tmp_path / "out.hdf5",
                                                                     progress=stop_after(3))
    assert (tmp_path / "out.hdf5.partial").exists()
    ElmoEmbedder(model, batch_size=4, stateful=True).embed_file(text, tmp_path / "out.hdf5")
    assert_same_file(tmp_path / "whole.hdf5", tmp_path / "out.hdf5")


def test_partial_of_an_edited_input_is_discarded(tmp_path, model, data_root, caplog):
    embedder = ElmoEmbedder(model, batch_size=2)
    sentences = ud_sentences(data_root, 200)
    text = write_lines(tmp_path / "in.txt", sentences)
    with pytest.raises(Stop):
        embedder.embed_file(text, tmp_path / "out.hdf5", progress=stop_after(3))  # 2 windows of 64 done
    edited = ud_sentences(data_root, 200, skip=300)  # other sentences, other lengths
    write_lines(text, edited)
    embedder.embed_file(text, tmp_path / "out.hdf5")
    assert "another job" in caplog.text and "input_digest" in caplog.text
    embedder.embed_file(text, tmp_path / "fresh.hdf5")
    assert_same_file(tmp_path / "fresh.hdf5", tmp_path / "out.hdf5")


def test_a_partial_from_another_output_format_is_discarded(tmp_path, model, data_root):
    embedder = ElmoEmbedder(model, batch_size=2)
    text = write_lines(tmp_path / "in.txt", ud_sentences(data_root, 200))
    with pytest.raises(Stop):
        embedder.embed_file(text, tmp_path / "out.hdf5", "top", progress=stop_after(3))
    embedder.embed_file(text, tmp_path / "out.hdf5", "all")
    embedder.embed_file(text, tmp_path / "fresh.hdf5", "all")
    assert_same_file(tmp_path / "fresh.hdf5", tmp_path / "out.hdf5")


def test_a_second_run_on_the_same_output_stops_and_leaves_the_first_alone(tmp_path, model, data_root):
    embedder = ElmoEmbedder(model, batch_size=2)
    text = write_lines(tmp_path / "in.txt", ud_sentences(data_root, 140))
    errors = []

    def second_run_meanwhile(done, total):
        if done and not errors:
            try:
                ElmoEmbedder(model, batch_size=2).embed_file(text, tmp_path / "out.hdf5")
            except ValueError as err:
                errors.append(str(err))
            else:
                errors.append("no error")

    embedder.embed_file(text, tmp_path / "out.hdf5", progress=second_run_meanwhile)
    assert errors and "another run" in errors[0] and "out.hdf5" in errors[0]
    embedder.embed_file(text, tmp_path / "alone.hdf5")
    assert_same_file(tmp_path / "alone.hdf5", tmp_path / "out.hdf5")
    assert not (tmp_path / "out.hdf5.partial").exists() and not (tmp_path / "out.hdf5.lock").exists()


def test_a_second_process_on_the_same_output_is_refused(tmp_path, fixture_dir, data_root):
    """Between threads (separate open files, as between processes): the lock is flock-based."""
    from elmo_model.io_safety import output_lock

    text = write_lines(tmp_path / "in.txt", ud_sentences(data_root, 5))
    held, release = threading.Event(), threading.Event()

    def holder():
        with output_lock(tmp_path / "out.hdf5"):
            held.set()
            release.wait(30)

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait(30)
    try:
        code = embedder_cli.main([str(text), str(tmp_path / "out.hdf5"), "--model", str(fixture_dir)])
    finally:
        release.set()
        thread.join()
    assert code == 2 and not (tmp_path / "out.hdf5").exists()


def test_sentence_keys_are_escaped_one_dataset_per_line(tmp_path, model):
    lines = [".", "and/or x", "and", "100% sure", "..", "sentence_to_index", "a . b", "and"]
    text = tmp_path / "in.txt"
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = ElmoEmbedder(model, batch_size=3).embed_file(text, tmp_path / "out.hdf5", use_sentence_keys=True)
    by_line = ElmoEmbedder(model, batch_size=3).embed_file(text, tmp_path / "lines.hdf5")
    with h5py.File(out, "r") as f, h5py.File(by_line, "r") as g:
        index = json.loads(f["sentence_to_index"][()])
        assert sorted(index) == sorted(set(lines))
        for i, sentence in enumerate(lines):
            key = index[sentence]
            assert unquote(key) == sentence
            assert isinstance(f[key], h5py.Dataset) and "/" not in key
            np.testing.assert_array_equal(f[key][...], g[str(i)][...])
        assert len(f.keys()) == len(set(lines)) + 1  # every distinct sentence at the root, plus the index


def run_cli(argv, capsys):
    code = embedder_cli.main([str(a) for a in argv])
    err = capsys.readouterr().err
    return code, [line for line in err.splitlines() if line.startswith("error")]


def test_paths_are_checked_before_any_work(tmp_path, fixture_dir, capsys, caplog):
    text = write_lines(tmp_path / "in.txt", [["a", "b"]])
    (tmp_path / "somedir").mkdir()
    code, errors = run_cli([tmp_path / "somedir", tmp_path / "o.hdf5", "--model", fixture_dir], capsys)
    assert code == 2 and len(errors) == 1 and "somedir" in errors[0] and "directory" in errors[0]
    code, errors = run_cli([text, tmp_path / "somedir", "--model", fixture_dir], capsys)
    assert code == 2 and "is a directory" in errors[0]
    assert not list((tmp_path).glob("*.partial"))
    code, errors = run_cli([text, tmp_path / "missing" / "o.hdf5", "--model", fixture_dir], capsys)
    assert code == 2 and "missing does not exist" in errors[0] and "damaged" not in caplog.text
    code, errors = run_cli([text, text, "--model", fixture_dir], capsys)
    assert code == 2 and "input" in errors[0]
    assert text.read_text() == "a b\n"
    (tmp_path / "empty.txt").write_text("")
    code, errors = run_cli([tmp_path / "empty.txt", tmp_path / "e.hdf5", "--model", fixture_dir], capsys)
    assert code == 2 and "no sentences" in errors[0] and not (tmp_path / "e.hdf5").exists()


@pytest.mark.parametrize("value", ["0", "-1", "x"])
def test_batch_size_must_be_positive(tmp_path, fixture_dir, capsys, value):
    text = write_lines(tmp_path / "in.txt", [["a", "b"]])
    with pytest.raises(SystemExit) as exit_info:
        embedder_cli.main([str(text), str(tmp_path / "o.hdf5"), "--model", str(fixture_dir), "--batch-size", value])
    assert exit_info.value.code == 2 and "--batch-size" in capsys.readouterr().err


def test_embedder_refuses_a_batch_size_below_one(model):
    with pytest.raises(ValueError, match="batch_size"):
        ElmoEmbedder(model, batch_size=0)
