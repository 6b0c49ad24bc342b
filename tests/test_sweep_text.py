"""The sweep's text classes: text read wrongly with exit 0, found by a careful but unlucky user.

A UTF-8 byte-order mark, a pipe given as a file (``--train <(cat corpus)``), plain strings given
where token lists belong, an edited progress mark in an unfinished file, bars switched off. Each
test names what the earlier code did. docs/reliability.md gives the counts.
"""

from __future__ import annotations

import gzip
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import h5py
import numpy as np
import pytest

from elmo_model.corpus.embedder import main as embedder_main
from elmo_model.embedding import ElmoEmbedder, read_sentence_file
from elmo_model.text.reader import check_text_file, read_text_lines
from elmo_model.training import kneser_ney

pytestmark = pytest.mark.usefixtures("one_torch_thread")

BOM = "\ufeff".encode("utf-8")
LINES = "The bank was closed .\nWe sat on the river bank .\nRivers flow .\n"


class Stop(Exception):
    """Raised by a progress callback to interrupt a run."""


@pytest.fixture(scope="module")
def model(data_root) -> Path:
    return data_root / "fixtures" / "bilm_tf"


@pytest.fixture(scope="module")
def corpus(data_root, tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("text") / "corpus.txt"
    with gzip.open(data_root / "lm_corpus" / "wiki-valid.txt.gz", "rt", encoding="utf-8") as handle:
        path.write_text("".join(next(handle) for _ in range(120)), encoding="utf-8")
    return path


def test_a_byte_order_mark_is_dropped_and_said_once(tmp_path, caplog):
    """A file saved with a BOM: the first token was ``\\ufeffThe`` (its sentence key changed)."""
    path = tmp_path / "in.txt"
    path.write_bytes(BOM + LINES.encode("utf-8"))
    with caplog.at_level(logging.INFO, logger="elmo_model.text.reader"):
        check_text_file(path)
        lines = list(read_text_lines(path))
        sentences = read_sentence_file(path)
    assert lines[0] == "The bank was closed .\n" and sentences[0][0] == "The"
    assert [r.getMessage() for r in caplog.records].count(
        f"{path}: starts with a UTF-8 byte-order mark; it is not part of the text (dropped)") == 1
    gz = tmp_path / "in.txt.gz"
    gz.write_bytes(gzip.compress(BOM + LINES.encode("utf-8")))
    assert next(read_text_lines(gz)) == "The bank was closed .\n"
    plain = tmp_path / "plain.txt"
    plain.write_text("x \ufeff y\n", encoding="utf-8")  # a BOM inside the text is text
    assert next(read_text_lines(plain)) == "x \ufeff y\n"


def test_a_byte_order_mark_never_reaches_a_sentence_key(tmp_path, model, capsys):
    """``elmo-embed --use-sentence-keys`` on a BOM file: the key of the first sentence is the sentence."""
    (tmp_path / "in.txt").write_bytes(BOM + LINES.encode("utf-8"))
    assert embedder_main([str(tmp_path / "in.txt"), str(tmp_path / "o.hdf5"), "--model", str(model),
                          "--use-sentence-keys", "--precision", "fp32"]) == 0
    with h5py.File(tmp_path / "o.hdf5", "r") as handle:
        assert "The bank was closed ." in handle


def _pipe(data: bytes) -> str:
    """A path that reads ``data`` once, as ``<(cat file)`` gives (``/dev/fd/N`` of a pipe)."""
    read_end, write_end = os.pipe()

    def feed() -> None:
        with os.fdopen(write_end, "wb") as handle:
            handle.write(data)

    threading.Thread(target=feed, daemon=True).start()
    return f"/dev/fd/{read_end}"


def test_kneser_ney_reads_a_pipe_once(corpus, tmp_path, capsys):
    """``kneser_ney --train <(cat corpus)``: the check before the fit read the pipe's first MiB,
    and the fit saw only the rest (here, nothing: "no sentences"). The same perplexities as the file."""
    vocab = Path(__file__).resolve().parents[1] / "data" / "models" / "elmo-mini" / "vocab.txt"
    argv = ["--vocab", str(vocab), "--eval", str(corpus), "--tokenizer", "whitespace", "--json"]
    assert kneser_ney.main(["--train", str(corpus), *argv]) == 0
    from_file = capsys.readouterr().out
    pipe = _pipe(corpus.read_bytes())
    try:
        assert kneser_ney.main(["--train", pipe, *argv]) == 0, capsys.readouterr().err
        assert capsys.readouterr().out == from_file
    finally:
        os.close(int(pipe.rsplit("/", 1)[1]))


def test_kneser_ney_counts_sentences_with_bars_off(corpus):
    """``TQDM_DISABLE=1``: every run failed with "no sentences" (the bar's own count stays 0).
    A fresh process: tqdm reads its environment when it is imported."""
    checkout = Path(__file__).resolve().parents[1]
    vocab = checkout / "data" / "models" / "elmo-mini" / "vocab.txt"
    done = subprocess.run([sys.executable, "-m", "elmo_model.training.kneser_ney", "--train", str(corpus), "--vocab",
                           str(vocab), "--eval", str(corpus), "--tokenizer", "whitespace"], cwd=checkout,
                          env={**os.environ, "TQDM_DISABLE": "1"}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "perplexity" in done.stdout


@pytest.mark.parametrize("call", ["embed_sentences", "embed_batch", "embed_sentences_one_string"])
def test_strings_are_refused_where_token_lists_belong(model, call):
    """``embed_sentences(["The bank .", ...])`` embedded each character as a token, exit 0;
    ``embed_sentence`` already refused a string."""
    embedder = ElmoEmbedder(model, precision="fp32")
    with pytest.raises(TypeError, match="lists of tokens, not strings"):
        if call == "embed_batch":
            embedder.embed_batch(["The bank .", "Rivers flow ."])
        elif call == "embed_sentences":
            list(embedder.embed_sentences(["The bank .", "Rivers flow ."]))
        else:
            list(embedder.embed_sentences("The bank ."))
    assert embedder.embed_batch([["The", "bank", "."]])[0].shape[1] == 3


def _stop_after(calls: int):
    seen = []

    def progress(done, total):
        seen.append(done)
        if len(seen) >= calls:
            raise Stop

    return progress


@pytest.fixture(scope="module")
def straight(model, tmp_path_factory) -> tuple[Path, Path]:
    """100 sentences and their embedding by one uninterrupted run: (text, output)."""
    folder = tmp_path_factory.mktemp("straight")
    text = folder / "in.txt"
    text.write_text("".join(f"sentence number {i} of the bank .\n" for i in range(100)), encoding="utf-8")
    ElmoEmbedder(model, batch_size=1, precision="fp32").embed_file(text, folder / "straight.hdf5")
    return text, folder / "straight.hdf5"


@pytest.mark.parametrize("mark", [68, 100, 1000, -5])
def test_an_edited_progress_mark_never_skips_a_sentence(model, straight, tmp_path, mark, caplog):
    """The unfinished file's ``lines_done`` set past its data: the resume skipped the sentences it
    vouched for (an output of 32 of 100 sentences, exit 0). Now the mark is checked against the
    datasets and the resume goes back to the last whole window; the result equals a straight run."""
    text, straight_output = straight
    embedder = ElmoEmbedder(model, batch_size=1, precision="fp32")
    with pytest.raises(Stop):
        embedder.embed_file(text, tmp_path / "o.hdf5", progress=_stop_after(2))  # mark 32 on disk
    with h5py.File(tmp_path / "o.hdf5.partial", "r+") as handle:
        assert int(handle.attrs["lines_done"]) == 32
        handle.attrs["lines_done"] = mark
    with caplog.at_level(logging.WARNING, logger="elmo_model.embedding"):
        embedder.embed_file(text, tmp_path / "o.hdf5")
    assert "does not match the data in it" in caplog.text
    with h5py.File(tmp_path / "o.hdf5", "r") as got, h5py.File(straight_output, "r") as want:
        assert set(got) == set(want) and len(got) == 101
        for key in want:
            if key != "sentence_to_index":
                np.testing.assert_array_equal(got[key][()], want[key][()])


def test_kneser_ney_refuses_sentences_given_as_the_vocabulary(corpus, capsys):
    """``--vocab`` a file of sentences: a warning, then a perplexity of 1.55 (almost every word
    ``<UNK>``), exit 0. Now one line naming the file and line."""
    assert kneser_ney.main(["--train", str(corpus), "--vocab", str(corpus), "--eval", str(corpus),
                            "--tokenizer", "whitespace"]) == 2
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and f"--vocab {corpus}:1: holds several words" in errors[0], errors
