"""Bad input to the model-card and Kneser-Ney command lines: one line naming the file, exit 2, never a
traceback or a result computed from nothing."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from elmo_model.bilm import precision as precision_module
from elmo_model.corpus.embedder import ElmoEmbedder, escape_key
from elmo_model.corpus.embedder import main as embedder_main
from elmo_model.training import model_card
from elmo_model.text.tokenizer import tokenize_words
from elmo_model.training import kneser_ney
from probing.report import main as report_main
from probing.tagging.suite import main as suite_main

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


# --------------------------------------------------------------------------------------------
# Ctrl-C: one line saying what is kept and how to go on, then the rerun goes on from it
# --------------------------------------------------------------------------------------------

PROJECT = Path(__file__).resolve().parents[1]


def _ud_lines(data_root: Path, n: int) -> str:
    """``n`` sentences of UD English-EWT train, one a line (at most 30 tokens each)."""
    lines, tokens = [], []
    with open(data_root / "ud_english_ewt" / "en_ewt-ud-train.conllu", encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                if tokens:
                    lines.append(" ".join(tokens[:30]))
                    tokens = []
                    if len(lines) >= n:
                        break
            elif not line.startswith("#") and line.split("\t")[0].isdigit():
                tokens.append(line.split("\t")[1])
    return "\n".join(lines) + "\n"


def _interrupt_when(command: list[str], ready, cwd: Path, timeout: float = 120.0) -> subprocess.CompletedProcess:
    """Start ``python -m command...``, send SIGINT once ``ready()`` holds, return the finished process."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(PROJECT))
    process = subprocess.Popen([sys.executable, "-m", *command], cwd=cwd, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout
    while not ready() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process.poll() is None, f"finished before the interrupt: {process.communicate()}"
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=timeout)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def test_ctrl_c_on_an_embed_is_one_line_and_the_rerun_resumes(tmp_path, data_root):
    """Ctrl-C on ``python -m elmo_model.corpus.embedder``: no traceback, one line naming how many sentences
    are kept in which file and that the same command resumes; the rerun finishes with every
    sentence. Run against the old ``main`` (no ``run_interruptible``): a KeyboardInterrupt
    traceback, so the ``interrupted;`` line and the no-traceback check both failed."""
    text = tmp_path / "in.txt"
    text.write_text(_ud_lines(data_root, 4000), encoding="utf-8")
    out = tmp_path / "out.hdf5"
    command = ["elmo_model.corpus.embedder", str(text), str(out), "--model", str(data_root / "fixtures" / "bilm_tf"),
               "--batch-size", "4", "--precision", "fp32"]
    partial = tmp_path / "out.hdf5.partial"
    # 2 MB: past the first marks (at 200 kB the interrupt could come before any, and then the rerun
    # rightly starts over instead of resuming)
    done = _interrupt_when(command, lambda: partial.exists() and partial.stat().st_size > 2_000_000, tmp_path)
    assert done.returncode == 130, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    line = [x for x in done.stderr.splitlines() if x.startswith("interrupted;")]
    assert len(line) == 1, done.stderr[-2000:]
    assert "of 4000 sentences kept in" in line[0] and str(partial) in line[0]
    assert "rerun the same command to resume" in line[0]
    assert partial.exists() and not out.exists()
    rerun = subprocess.run([sys.executable, "-m", *command], cwd=tmp_path, capture_output=True, text=True,
                           env=dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(PROJECT)), timeout=300)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "resuming" in rerun.stderr
    with h5py.File(out, "r") as handle:
        assert len(json.loads(handle["sentence_to_index"][()])) > 0
        assert sum(1 for key in handle if key != "sentence_to_index") == 4000


def test_ctrl_c_on_training_names_the_checkpoint_and_the_step(tmp_path, data_root):
    """Ctrl-C on ``python -m elmo_model.training.train`` during training: the trainer's handler finishes the
    step and checkpoints; the command says ``interrupted; step N is kept in OUT/checkpoint.pt;
    rerun the same command to resume`` on one line, exit 130, and the rerun continues from step N.
    Run against the old ``main`` (it printed ``stopped: interrupted`` on stdout and nothing on
    stderr): the ``interrupted;`` line was missing."""
    corpus = tmp_path / "text.txt"
    corpus.write_text(_ud_lines(data_root, 3000), encoding="utf-8")
    run = tmp_path / "run"
    command = ["elmo_model.training.train", "--train", str(corpus), "--out", str(run), "--vocab-size", "500",
               "--vocab-min-count", "1", "--char-embedding-dim", "4", "--filters", "[[1, 8], [2, 8]]",
               "--n-highway", "1", "--lstm-dim", "16", "--projection-dim", "8", "--softmax-cutoffs", "100",
               "--batch-tokens", "200", "--max-sentence-tokens", "20", "--threads", "1", "--precision", "fp32",
               "--checkpoint-every-minutes", "0", "--no-export"]
    checkpoint = run / "checkpoint.pt"
    done = _interrupt_when(command, checkpoint.exists, tmp_path)
    assert done.returncode == 130, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    line = [x for x in done.stderr.splitlines() if x.startswith("interrupted;")]
    assert len(line) == 1, done.stderr[-2000:]
    assert str(checkpoint) in line[0] and "rerun the same command to resume" in line[0]
    step = int(line[0].split("step ")[1].split(" ")[0])
    assert step >= 1
    state = torch.load(checkpoint, weights_only=False, map_location="cpu")
    assert state["progress"]["step"] == step


# --------------------------------------------------------------------------------------------
# Command-line options no other test takes
# --------------------------------------------------------------------------------------------


def _embed_cli(tmp_path: Path, data_root: Path, lines: str, *flags: str) -> dict:
    text = tmp_path / "in.txt"
    text.write_text(lines, encoding="utf-8")
    out = tmp_path / f"out{len(list(tmp_path.glob('out*.hdf5')))}.hdf5"
    code = embedder_main([str(text), str(out), "--model", str(data_root / "fixtures" / "bilm_tf"), *flags])
    assert code == 0
    with h5py.File(out, "r") as handle:
        return {key: (handle[key][()] if key != "sentence_to_index" else json.loads(handle[key][()]))
                for key in handle}


def test_embedder_average_tokenize_and_sentence_keys_on_the_command_line(tmp_path, data_root):
    """``--average`` stores the mean of the layers, ``--tokenize`` splits each line with the
    project's tokenizer, ``--use-sentence-keys`` names each dataset by its (escaped) sentence;
    each checked against ``ElmoEmbedder`` on the same tokens. Run against an embedder whose CLI
    dropped ``--tokenize`` (whitespace tokens: "closed." stayed one token) and one whose
    ``--average`` stored the top layer: both failed here."""
    reference = ElmoEmbedder(str(data_root / "fixtures" / "bilm_tf"), precision="fp32")
    lines = "The bank's door was closed.\nRivers flow 50/50 .\n"
    tokens = [tokenize_words(line) for line in lines.splitlines()]
    assert tokens[0][-2:] == ["closed", "."]
    got = _embed_cli(tmp_path, data_root, lines, "--average", "--tokenize", "--precision", "fp32")
    assert got["sentence_to_index"] == {" ".join(t): str(i) for i, t in enumerate(tokens)}
    for i, sentence in enumerate(tokens):
        expected = reference.embed_sentence(sentence).mean(axis=0)  # (T, 2P)
        np.testing.assert_allclose(got[str(i)], expected, rtol=0, atol=1e-6)
    keyed = _embed_cli(tmp_path, data_root, lines, "--use-sentence-keys", "--top", "--tokenize", "--precision", "fp32")
    for sentence in tokens:
        key = escape_key(" ".join(sentence))
        assert keyed["sentence_to_index"][" ".join(sentence)] == key
        np.testing.assert_allclose(keyed[key], reference.embed_sentence(sentence)[-1], rtol=0, atol=1e-6)
    assert "Rivers flow 50%2F50 ." in keyed  # '/' escaped, not an hdf5 group


def test_precision_on_the_command_line_is_the_one_that_runs_and_is_recorded(tmp_path, data_root, monkeypatch):
    """``--precision fp32|bf16|auto`` on ``probing.tagging.suite``: the result records the precision that
    ran, and bf16 keeps its activations apart from fp32's. The machine's bf16 check is fixed to
    "usable" here (a CPU without bf16 instructions would make every choice fp32), so fp32 -> fp32,
    bf16 -> bf16, auto -> bf16. Run against a suite CLI that did not pass
    --precision on: the fp32 run recorded bf16."""
    monkeypatch.setattr(precision_module, "bf16_support",
                        lambda device="cpu": precision_module.Bf16Support(True, ("amx_bf16",), "fixed by the test"))
    recorded = {}
    for choice in ("fp32", "bf16", "auto"):
        out = tmp_path / f"{choice}.json"
        code = suite_main(["--model", str(data_root / "fixtures" / "bilm_tf"), "--tasks", "pos", "--limit", "12",
                           "--layers", "1", "--no-random-bilm", "--mix-seeds", "0", "--quiet", "--data-root",
                           str(data_root), "--cache-dir", str(tmp_path / "cache"), "--precision", choice, "--out",
                           str(out)])
        assert code == 0
        recorded[choice] = json.loads(out.read_text(encoding="utf-8"))["config"]["precision"]
    assert recorded == {"fp32": "fp32", "bf16": "bf16", "auto": "bf16"}
    names = [p.name for p in (tmp_path / "cache").rglob("*.h5")]
    assert any("bf16" in n for n in names) and any("bf16" not in n for n in names), names


@pytest.mark.parametrize("command", ["suite", "report", "wsd", "kneser_ney", "model_card"])
def test_ctrl_c_in_the_other_commands_is_one_line(command, tmp_path, data_root, monkeypatch, capsys):
    """Ctrl-C in the middle of each other long command (its work function interrupted): one
    ``interrupted; ...`` line saying what is kept and that the same command goes on, exit 130, no
    traceback. Run against the old ``main`` functions: the KeyboardInterrupt escaped."""
    import elmo_model.training.model_card as card_module
    import probing.report.cli as report_cli
    import probing.senses.wsd as wsd_module
    import probing.tagging.suite as suite_module

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    model = str(data_root / "fixtures" / "bilm_tf")
    cache = str(tmp_path / "cache")
    text = tmp_path / "t.txt"
    text.write_text("the bank was closed .\n", encoding="utf-8")
    if command == "suite":
        monkeypatch.setattr(suite_module, "run_suite", interrupt)
        run = lambda: suite_main(["--model", model, "--cache-dir", cache, "--quiet"])  # noqa: E731
        kept = f"kept in the cache {cache}"
    elif command == "report":
        monkeypatch.setattr(report_cli, "build_report", interrupt)
        run = lambda: report_cli.main(  # noqa: E731
            ["--model", model, "--cache-dir", cache, "--out", str(tmp_path / "r")])
        kept = f"{tmp_path / 'r'} is as it was"
    elif command == "wsd":
        monkeypatch.setattr(wsd_module, "evaluate_wsd", interrupt)
        run = lambda: wsd_module.main(["--model", model, "--cache-dir", cache])  # noqa: E731
        kept = f"kept in the cache {cache}"
    elif command == "kneser_ney":
        monkeypatch.setattr(kneser_ney, "fit_bidirectional", interrupt)
        run = lambda: kneser_ney.main(["--train", str(text), "--vocab", str(VOCAB), "--eval", str(text)])  # noqa: E731
        kept = "nothing is written"
    else:
        card_dir = tmp_path / "card_model"  # a model folder of its own: the command writes its card
        card_dir.mkdir()
        for name in ("options.json", "lm_weights.hdf5"):
            (card_dir / name).write_bytes((data_root / "fixtures" / "bilm_tf" / name).read_bytes())
        (card_dir / "model_card.json").write_text('{"train_config": {"train": ["corpus.txt"]}}', encoding="utf-8")
        monkeypatch.setattr(card_module, "contextualisation_table", interrupt)
        run = lambda: model_card.main([str(card_dir), "--skip-perplexity"])  # noqa: E731
        kept = "model_card.json keeps the tables finished"
    capsys.readouterr()
    try:
        code = run()
    except KeyboardInterrupt:  # caught here, or it would stop the whole test session
        pytest.fail("the KeyboardInterrupt escaped main()")
    assert code == 130
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("interrupted;")]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert kept in lines[0] and "rerun" in lines[0]


def test_a_ctrl_c_python_dropped_stops_the_work_at_its_next_safe_point(capsys):
    """SIGINT raises KeyboardInterrupt in whatever code runs at that instant; raised inside a
    weakref callback, Python prints "Exception ignored" and goes on (seen: an embed interrupted so
    ran to its end, exit 0, about one time in twelve). ``run_interruptible`` remembers the Ctrl-C,
    and the work's next ``raise_if_interrupted`` (the embedder calls it at every mark) stops it.
    Here the work drops the KeyboardInterrupt itself. Run against a ``raise_if_interrupted`` that
    did nothing: the work returned 0."""
    from elmo_model.plumbing.io_safety import raise_if_interrupted, run_interruptible

    def work() -> int:
        try:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1.0)  # the handler runs here
        except KeyboardInterrupt:
            pass  # dropped, as inside a weakref callback
        raise_if_interrupted()
        return 0

    assert run_interruptible(work, lambda: "nothing to keep") == 130
    assert capsys.readouterr().err.strip() == "interrupted; nothing to keep"
    assert run_interruptible(lambda: (raise_if_interrupted(), 0)[1], lambda: "") == 0  # forgotten afterwards


def test_a_models_files_are_inputs_whether_given_by_folder_or_by_name(tmp_path, data_root):
    """No output may replace a model's files, also when the model is given by name: the shipped
    elmo-mini's folder, and a published model's folder in the data root. Run against the
    ``model_files`` that returned nothing for a name: both lists were empty."""
    from elmo_model.models.names import model_files
    from elmo_model.plumbing.io_safety import check_output_dir
    from elmo_model.plumbing.resources import shipped_data

    shipped = model_files("elmo-mini")
    assert shipped_data("models", "elmo-mini", "weights.hdf5") in shipped
    published = tmp_path / "root" / "models" / "elmo-small"
    published.mkdir(parents=True)
    for name in ("options.json", "weights.hdf5"):
        (published / name).write_bytes(b"{}")
    assert sorted(p.name for p in model_files("elmo-small", tmp_path / "root")) == ["elmo-small", "options.json",
                                                                                   "weights.hdf5"]
    with pytest.raises(ValueError, match="input"):
        check_output_dir(published, model_files("elmo-small", tmp_path / "root"), flag="--out")


def test_a_ctrl_c_python_drops_in_a_callback_prints_no_traceback(capsys):
    """SIGINT that lands in a ``__del__`` or weakref callback cannot propagate: Python hands it to
    ``sys.unraisablehook``, which printed "Exception ignored ... Traceback" before the one line (seen
    now and then on a loaded machine in the embed's Ctrl-C test). Under ``run_interruptible`` it is
    remembered, raised at the next safe point, and not printed; the hook is restored afterwards."""
    from elmo_model.plumbing.io_safety import raise_if_interrupted, run_interruptible

    class DroppedInterrupt:
        def __del__(self):
            raise KeyboardInterrupt

    def work() -> int:
        DroppedInterrupt()  # collected at once: its KeyboardInterrupt goes to the unraisable hook
        for _ in range(3):
            raise_if_interrupted()  # the loop's safe point
        return 0

    hook = sys.unraisablehook
    assert run_interruptible(work, lambda: "nothing to keep") == 130
    err = capsys.readouterr().err
    assert err == "interrupted; nothing to keep\n"
    assert sys.unraisablehook is hook
