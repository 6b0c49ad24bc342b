"""One set of flags and messages across the commands that run a biLM: --device and --precision,
the exit codes in every --help, hints that name the command as the user runs it, input read before
the model loads."""

import sys

import pytest

from elmo_model.bilm.precision import resolve_precision

from elmo_model.plumbing.flags import EXIT_CODES
from elmo_model.corpus.embedder import main as embed_main
from elmo_model.models import published
from elmo_model.training.model_card import main as card_main
from elmo_model.text.build_punkt import main as punkt_main
from elmo_model.training.kneser_ney import main as kneser_ney_main
from elmo_model.training.train import main as train_main
from probing.context.static import main as static_main
from probing.data.cli import main as data_main
from probing.information.cli import main as information_main
from probing.senses.wsd import main as wsd_main
from probing.tagging.suite import main as suite_main


def _help(main, capsys, *before: str) -> str:
    with pytest.raises(SystemExit) as info:
        main([*before, "--help"])
    assert info.value.code == 0
    return " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("main", [embed_main, suite_main, wsd_main, information_main],
                         ids=["embed", "suite", "wsd", "information"])
def test_every_command_that_runs_a_bilm_takes_device_and_precision_and_says_its_exit_codes(main, capsys):
    text = _help(main, capsys)
    for flag in ("--device", "--precision", "--models-dir"):
        assert flag in text, flag
    assert " ".join(EXIT_CODES.split()) in text


def test_the_data_and_train_commands_say_their_exit_codes(capsys):
    assert " ".join(EXIT_CODES.split()) in _help(data_main, capsys)
    assert " ".join(EXIT_CODES.split()) in _help(train_main, capsys)
    assert " ".join(EXIT_CODES.split()) in _help(static_main, capsys)
    assert " ".join(EXIT_CODES.split()) in _help(card_main, capsys)
    assert " ".join(EXIT_CODES.split()) in _help(kneser_ney_main, capsys)
    assert " ".join(EXIT_CODES.split()) in _help(punkt_main, capsys)


def test_the_embedder_takes_device_and_keeps_cuda_device_as_allennlps_alias(data_root, tmp_path, capsys):
    text = tmp_path / "in.txt"
    text.write_text("The bank .\n")
    model = str(data_root / "fixtures" / "bilm_tf")
    assert embed_main([str(text), str(tmp_path / "a.hdf5"), "--model", model, "--device", "cpu"]) == 0
    assert embed_main([str(text), str(tmp_path / "b.hdf5"), "--model", model, "--cuda-device", "-1"]) == 0
    with pytest.raises(SystemExit) as info:
        embed_main([str(text), str(tmp_path / "c.hdf5"), "--model", model, "--device", "cuda", "--cuda-device", "0"])
    assert info.value.code == 2 and "give one of them" in capsys.readouterr().err
    import torch

    if not torch.cuda.is_available():
        assert embed_main([str(text), str(tmp_path / "d.hdf5"), "--model", model, "--device", "cuda:3"]) == 2
        [line] = [x for x in capsys.readouterr().err.splitlines() if x.startswith("error:")]
        assert "--device cuda:3" in line


def test_the_embedder_reads_its_input_before_the_model(tmp_path, capsys):
    """A bad line is reported before the model is looked for: a name not downloaded does not hide it."""
    text = tmp_path / "in.txt"
    text.write_text("fine\n\nafter an empty line\n")
    assert embed_main([str(text), str(tmp_path / "out.hdf5"), "--model", "elmo-original"]) == 2
    err = capsys.readouterr().err
    assert f"{text}:2: empty line" in err and "not downloaded" not in err


def test_hints_name_the_console_script_when_that_is_what_runs(monkeypatch, tmp_path):
    from probing import data

    assert published.download_command("elmo-small").startswith("python -m probing.data download")  # a checkout
    assert data.download_command("conll2000", tmp_path).startswith("python -m probing.data download conll2000")
    monkeypatch.setattr(sys, "argv", ["/opt/venv/bin/elmo-data", "status"])
    assert published.download_command("elmo-small") == "elmo-data download elmo-small"
    assert data.download_command("conll2000", tmp_path) == f"elmo-data download conll2000 --data-root {tmp_path}"


def test_log_lines_go_through_the_bars_and_quiet_keeps_warnings_only(monkeypatch):
    """Every command logs through tqdm.write (which clears the bars, prints the line, redraws
    them), so an INFO line never tears a progress bar; --quiet leaves warnings only."""
    import logging

    from tqdm import tqdm

    from elmo_model.plumbing.progress import log_through_bars

    written = []
    monkeypatch.setattr(tqdm, "write", classmethod(lambda cls, text, file=None, **kw: written.append(text)))
    root = logging.getLogger()
    saved_handlers, saved_level = root.handlers[:], root.level
    try:
        for quiet in (False, True):
            root.handlers = []
            log_through_bars(quiet)
            logging.getLogger("elmo_model.test").info("an info line")
            logging.getLogger("elmo_model.test").warning("a warning")
        assert written == ["INFO elmo_model.test: an info line", "WARNING elmo_model.test: a warning",
                           "WARNING elmo_model.test: a warning"]
    finally:
        root.handlers, root.level = saved_handlers, saved_level


@pytest.mark.parametrize("main, before", [(embed_main, ()), (wsd_main, ()), (suite_main, ()), (information_main, ()),
                                          (train_main, ()), (data_main, ("download",)), (data_main, ("status",)),
                                          (static_main, ("nearest",)), (static_main, ("train-word2vec",)),
                                          (card_main, ()), (kneser_ney_main, ()), (punkt_main, ())],
                         ids=["embed", "wsd", "suite", "information", "train", "download", "status", "nearest",
                              "train-word2vec", "model-card", "kneser-ney", "build-punkt"])
def test_quiet_everywhere(main, before, capsys):
    assert "--quiet" in _help(main, capsys, *before)


def test_a_missing_extra_names_the_packages_and_leaves_torch_alone(monkeypatch):
    """The hint installs the missing packages by name: no `-r requirements.txt` (it pins torch and
    would replace the user's own)."""
    import importlib.util

    from elmo_model.plumbing import extras

    real = importlib.util.find_spec
    hidden = ("plotly", "umap")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in hidden else real(name, *a))
    message = extras.missing_message("report", "elmo-probe-report")
    assert "pip install plotly umap-learn" in message and "requirements" not in message and "[report]" in message


def test_the_report_command_says_its_exit_codes_and_takes_the_shared_flags(capsys):
    from probing.report.cli import main as report_main

    text = _help(report_main, capsys)
    for flag in ("--device", "--precision", "--models-dir", "--quiet"):
        assert flag in text, flag
    assert " ".join(EXIT_CODES.split()) in text


@pytest.mark.parametrize("random", [False, True], ids=["model", "random-bilm"])
def test_the_information_command_runs_the_biLM_in_the_precision_asked(random, monkeypatch, data_root, tmp_path,
                                                                      capsys):
    from probing.information import cli

    seen = {}

    class Result:
        def table(self) -> str:
            return "the table"

    def run_information(model, tasks, **kwargs):
        seen["precision"] = model.precision
        return Result()

    monkeypatch.setattr(cli, "run_information", run_information)
    argv = ["--precision", "bf16", "--cache-dir", str(tmp_path), "--data-root", str(data_root), "--quiet"]
    assert cli.main(argv + (["--random-bilm"] if random else [])) == 0
    expected = resolve_precision("bf16")  # fp32 on a CPU without bf16 units, said in the line
    assert seen["precision"] == expected and f"precision {expected}" in capsys.readouterr().out


def test_the_trainer_takes_quiet_no_bars(monkeypatch, tmp_path):
    from elmo_model.training import train

    seen = {}

    class Trainer:
        def __init__(self, config, tokenize, progress=True, **init):
            seen["progress"] = progress
            raise ValueError("stopped before training")

    monkeypatch.setattr(train, "Trainer", Trainer)
    text = tmp_path / "train.txt"
    text.write_text("a sentence .\n", encoding="utf-8")
    for flags, progress in (([], True), (["--quiet"], False)):
        assert train.main(["--train", str(text), "--out", str(tmp_path / "run"), *flags]) == 2
        assert seen.pop("progress") is progress


def test_the_static_command_runs_layer_0_on_the_device_and_precision_asked(capsys):
    assert static_main(["nearest", "bank", "--model", "elmo-mini", "-k", "2", "--precision", "bf16",
                        "--device", "cpu", "--quiet"]) == 0
    out = capsys.readouterr().out
    expected = resolve_precision("bf16")  # fp32 on a CPU without bf16 units, said in the line
    assert "biLM elmo-mini" in out and f"on cpu, precision {expected}" in out and "nearest to 'bank'" in out
