"""Bad input to the model-card and Kneser-Ney command lines: one line naming the file, exit 2, never a
traceback or a result computed from nothing."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from elmo_model import kneser_ney, model_card
from probing.report import main as report_main

VOCAB = Path(__file__).resolve().parents[1] / "data" / "models" / "elmo-mini" / "vocab.txt"


def one_error_line(capsys) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert len(err) == 1, err
    return err[0]


def test_model_card_refuses_a_directory_without_a_card(tmp_path, capsys):
    assert model_card.main([str(tmp_path)]) == 2
    assert str(tmp_path) in one_error_line(capsys)
    (tmp_path / "model_card.json").write_text("{damaged", encoding="utf-8")
    assert model_card.main([str(tmp_path)]) == 2
    line = one_error_line(capsys)
    assert "model_card.json" in line and "JSON" in line


@pytest.mark.parametrize("case", ["missing", "empty", "not gzip", "cut gzip"])
def test_kneser_ney_names_the_bad_training_file(tmp_path, capsys, case):
    text = tmp_path / "eval.txt"
    text.write_text("The bank was closed .\n", encoding="utf-8")
    train = tmp_path / ("train.txt.gz" if "gzip" in case else "train.txt")
    if case == "empty":
        train.write_text("\n\n", encoding="utf-8")
    elif case == "not gzip":
        train.write_bytes(b"plain text, not gzip\n")
    elif case == "cut gzip":
        whole = gzip.compress("".join(f"sentence number {i} by the river bank .\n" for i in range(3000)).encode())
        train.write_bytes(whole[: len(whole) // 2])
    rc = kneser_ney.main(["--train", str(train), "--vocab", str(VOCAB), "--eval", str(text),
                          "--tokenizer", "whitespace"])
    assert rc == 2
    assert str(train) in one_error_line(capsys)


def test_kneser_ney_refuses_empty_evaluation_text(tmp_path, capsys):
    train = tmp_path / "train.txt"
    train.write_text("the bank was closed .\nthe river bank .\n", encoding="utf-8")
    empty = tmp_path / "eval.txt"
    empty.write_text("", encoding="utf-8")
    assert kneser_ney.main(["--train", str(train), "--vocab", str(VOCAB), "--eval", str(empty),
                            "--tokenizer", "whitespace"]) == 2
    assert "--eval" in one_error_line(capsys)  # not a perplexity of nan with exit 0


@pytest.mark.parametrize("content, says", [
    ('{"x": 1}', "not a probe-suite result"),
    ("not json at all", "not valid JSON"),
    ("[1, 2]", "not a JSON object"),
    ('{"format": "elmo-workbench/probe-suite", "version": 1}', "no 'model_name' field"),
])
def test_report_compare_names_the_file_it_cannot_read(tmp_path, capsys, content, says):
    bad = tmp_path / "results.json"
    bad.write_text(content, encoding="utf-8")
    other = tmp_path / "other.json"
    other.write_text("{}", encoding="utf-8")
    assert report_main(["--compare", str(bad), str(other), "--out", str(tmp_path / "cmp")]) == 2
    line = one_error_line(capsys)
    assert str(bad) in line and says in line
