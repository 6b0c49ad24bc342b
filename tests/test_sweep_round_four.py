"""A sweep of three classes of bad input, case by case, none of them swept before:

- **roots a setting names**: ``ELMO_WORKBENCH_DATA``, ``_MODELS`` and ``_CACHE`` set to a file, a
  symlink loop, or a path under a file, given to each command that reads that root: exit 2 and one
  ``error:`` line naming the variable, never a traceback (``elmo_model.plumbing.settings.folder_setting``
  is the one reader; the commands ask it before any work);
- **the public API's inputs**: ``batch_to_char_ids``, ``ElmoEmbedder``, ``Elmo``, the ``BiLM`` itself,
  ``hub.Module`` and ``load_bilm`` given the wrong types, shapes and ranges: a ``TypeError`` or
  ``ValueError`` of one line, raised by the project's own checks (the last frame is ours, not torch's);
- **any kind of file** where a command reads one (a folder, a symlink loop, an empty file, binary
  bytes, /dev/null, a FIFO where a folder is expected): exit 2 and one line.

Every case runs in-process on the fixture model, in seconds.
"""

from __future__ import annotations

import os
import traceback
from pathlib import Path

import pytest
import torch

from elmo_model import hub
from elmo_model.bilm.char_ids import batch_to_char_ids
from elmo_model.corpus.embedder import main as embedder_main
from elmo_model.elmo import Elmo
from elmo_model.embedding import ElmoEmbedder
from elmo_model.models import tfhub
from elmo_model.models.registry import load_bilm
from probing.data.cli import main as data_main
from probing.information.cli import main as information_main
from probing.report import main as report_main
from probing.senses.wsd import main as wsd_main
from probing.tagging.suite import main as suite_main

pytestmark = pytest.mark.usefixtures("one_torch_thread")

PROJECT = str(Path(__file__).resolve().parents[1] / "elmo_model")


@pytest.fixture(scope="module")
def odd(tmp_path_factory) -> Path:
    """A folder of odd things: a file, a symlink loop, a folder, an empty file, binary bytes, a FIFO."""
    root = tmp_path_factory.mktemp("odd")
    (root / "a_file").write_text("not a folder\n")
    (root / "loop").symlink_to(root / "loop")
    (root / "a_folder").mkdir()
    (root / "empty.txt").write_bytes(b"")
    (root / "binary.txt").write_bytes(bytes(range(256)) * 8)
    os.mkfifo(root / "fifo")
    return root


def _one_error_line(capsys, code: int, words: str) -> None:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, (code, err[-2000:])
    assert "Traceback" not in err, err[-2000:]
    assert len(lines) == 1 and lines[0].startswith("error:") and words in lines[0], err[-2000:]


# --------------------------------------------------------------------------------------------
# Roots a setting names
# --------------------------------------------------------------------------------------------

ROOT_VALUES = {"a file": "a_file", "a symlink loop": "loop", "a path under a file": "a_file/sub"}


def _root_commands(fixture: str, out: Path) -> dict[str, dict[str, list]]:
    """variable -> {command: (main, argv)}: the commands that read the root the variable names."""
    return {
        "ELMO_WORKBENCH_DATA": {
            "data status": (data_main, ["status"]),
            "probing suite": (suite_main, ["--model", fixture, "--tasks", "pos", "--limit", "5", "--no-random-bilm"]),
        },
        "ELMO_WORKBENCH_MODELS": {
            "data status": (data_main, ["status"]),
            "data download --from": (data_main, ["download", "elmo-small", "--from", str(out)]),
            "embedder, a published name": (embedder_main, ["--model", "elmo-small", fixture + "/vocab_test.txt",
                                                           str(out / "out.hdf5")]),
        },
        "ELMO_WORKBENCH_CACHE": {
            "probing suite": (suite_main, ["--model", fixture, "--tasks", "pos", "--limit", "5", "--no-random-bilm"]),
            "wsd": (wsd_main, ["--model", fixture]),
            "report": (report_main, ["--model", fixture, "--out", str(out / "report")]),
            "information": (information_main, ["--model", fixture, "--tasks", "pos"]),
        },
    }


ROOT_CASES = [(variable, command, kind) for variable, commands in _root_commands("", Path()).items()
              for command in commands for kind in ROOT_VALUES]


@pytest.mark.parametrize("variable, command, kind", ROOT_CASES, ids=[" / ".join(c) for c in ROOT_CASES])
def test_a_root_setting_that_cannot_be_a_folder_is_one_line(variable, command, kind, odd, data_root, tmp_path,
                                                             monkeypatch, capsys):
    fixture = str(data_root / "fixtures" / "bilm_tf")
    main, argv = _root_commands(fixture, tmp_path)[variable][command]
    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(data_root))
    monkeypatch.setenv(variable, str(odd / ROOT_VALUES[kind]))
    _one_error_line(capsys, main(argv), variable)
    assert not (tmp_path / "report").exists() and not (tmp_path / "out.hdf5").exists()


# --------------------------------------------------------------------------------------------
# The public API's inputs
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def api(data_root):
    fixture = data_root / "fixtures" / "bilm_tf"
    model = load_bilm(fixture)
    return {"fixture": fixture, "model": model, "embedder": ElmoEmbedder(model), "hub": hub.Module(model),
            "elmo": Elmo(str(fixture / "options.json"), str(fixture / "lm_weights.hdf5"), 1, dropout=0.0),
            "ids": batch_to_char_ids([["a", "b"]])}


def _elmo(api, **kwargs):
    f = api["fixture"]
    return Elmo(str(f / "options.json"), str(f / "lm_weights.hdf5"), **kwargs)


API_CASES = {
    "char ids of None": (lambda a: batch_to_char_ids(None), TypeError, "lists of tokens"),
    "char ids of a string": (lambda a: batch_to_char_ids("the bank"), TypeError, "not strings"),
    "char ids, a sentence None": (lambda a: batch_to_char_ids([["a"], None]), TypeError, "sentence 1"),
    "char ids, a token a list": (lambda a: batch_to_char_ids([[["a"]]]), TypeError, "not a str"),
    "char ids, a token bytes": (lambda a: batch_to_char_ids([[b"ab"]]), TypeError, "not a str"),
    "char ids, a token a float": (lambda a: batch_to_char_ids([[1.5]]), TypeError, "not a str"),
    "embed_sentence of a string": (lambda a: a["embedder"].embed_sentence("the bank"), TypeError, "not a string"),
    "embed_sentence of None": (lambda a: a["embedder"].embed_sentence(None), TypeError, "got None"),
    "embed_sentence of ints": (lambda a: a["embedder"].embed_sentence([1, 2]), TypeError, "not a str"),
    "embed_sentence of lists": (lambda a: a["embedder"].embed_sentence([["a"]]), TypeError, "not a str"),
    "embed_batch of None": (lambda a: a["embedder"].embed_batch(None), TypeError, "got None"),
    "embed_batch of strings": (lambda a: a["embedder"].embed_batch(["the cat", "a dog"]), TypeError, "split"),
    "embedder, stateful 'yes'": (lambda a: ElmoEmbedder(a["model"], stateful="yes"), TypeError, "True or False"),
    "embedder, batch size 0": (lambda a: ElmoEmbedder(a["model"], batch_size=0), ValueError, "positive integer"),
    "Elmo, a list of tokens": (lambda a: a["elmo"]([["a"]]), TypeError, "batch_to_ids"),
    "Elmo, a numpy array": (lambda a: a["elmo"](a["ids"].numpy()), TypeError, "tensor"),
    "Elmo, float ids": (lambda a: a["elmo"](a["ids"].float()), ValueError, "integer ids"),
    "Elmo, 2-d ids": (lambda a: a["elmo"](a["ids"][0]), ValueError, "(batch, tokens, 50)"),
    "Elmo, 49 characters a token": (lambda a: a["elmo"](a["ids"][:, :, :49]), ValueError, "50"),
    "Elmo, ids past 261": (lambda a: a["elmo"](a["ids"] + 300), ValueError, "0..261"),
    "Elmo, negative ids": (lambda a: a["elmo"](a["ids"] * 0 - 5), ValueError, "0..261"),
    "Elmo, dropout 2": (lambda a: _elmo(a, num_output_representations=1, dropout=2.0), ValueError, "dropout"),
    "Elmo, dropout nan": (lambda a: _elmo(a, num_output_representations=1, dropout=float("nan")), ValueError,
                          "dropout"),
    "Elmo, 0 representations": (lambda a: _elmo(a, num_output_representations=0), ValueError, "at least 1"),
    "Elmo, 1.5 representations": (lambda a: _elmo(a, num_output_representations=1.5), ValueError, "at least 1"),
    "BiLM, float ids": (lambda a: a["model"](a["ids"].float()), ValueError, "integer ids"),
    "BiLM, 4-d ids": (lambda a: a["model"](a["ids"][None]), ValueError, "(batch, tokens, 50)"),
    "BiLM, ids past 261": (lambda a: a["model"](a["ids"] + 300), ValueError, "0..261"),
    "hub, None": (lambda a: a["hub"](None), ValueError, "1-D sequence of sentences"),
    "hub, a number": (lambda a: a["hub"](5), ValueError, "1-D sequence of sentences"),
    "hub, token lists to 'default'": (lambda a: a["hub"]([["a", "b"]]), ValueError, "signature 'tokens'"),
    "hub, 'tokens' without lengths": (lambda a: a["hub"]({"tokens": [["a"]]}, signature="tokens"), ValueError,
                                      "sequence_len"),
    "hub, an unknown signature": (lambda a: a["hub"](["a"], signature=3), ValueError, "'default' and 'tokens'"),
    "load_bilm, a number": (lambda a: load_bilm(5), ValueError, "no such"),
    "load_bilm, precision fp8": (lambda a: load_bilm(a["fixture"], precision="fp8"), ValueError, "precision"),
    "load_bilm, device tpu": (lambda a: load_bilm(a["fixture"], device="tpu"), ValueError, "device"),
}


@pytest.mark.parametrize("case", list(API_CASES))
def test_the_api_checks_its_inputs_in_one_line_of_its_own(case, api):
    call, kind, words = API_CASES[case]
    with pytest.raises(kind) as raised:
        with torch.no_grad():
            call(api)
    message = str(raised.value)
    assert words in message and "\n" not in message, message
    last = traceback.extract_tb(raised.value.__traceback__)[-1].filename
    assert last.startswith(PROJECT), f"raised inside {last}, not by the project's own check: {message}"


# --------------------------------------------------------------------------------------------
# Any kind of file where a command reads one
# --------------------------------------------------------------------------------------------

FILE_CASES = {
    "embedder input, a folder": (embedder_main, "a_folder", "is a directory"),
    "embedder input, a symlink loop": (embedder_main, "loop", "input file"),
    "embedder input, an empty file": (embedder_main, "empty.txt", "holds no sentences"),
    "embedder input, binary bytes": (embedder_main, "binary.txt", "UTF-8"),
    "embedder input, /dev/null": (embedder_main, "/dev/null", "holds no sentences"),
    "TF Hub module, a FIFO": (tfhub.main, "fifo", "not a TF Hub module"),
    "TF Hub module, a symlink loop": (tfhub.main, "loop", "not a TF Hub module"),
    "TF Hub module, binary bytes": (tfhub.main, "binary.txt", "not a TF Hub module"),
    "TF Hub module, an empty folder": (tfhub.main, "a_folder", "not a TF Hub module"),
}


@pytest.mark.parametrize("case", list(FILE_CASES))
def test_any_kind_of_file_where_one_is_read_is_one_line(case, odd, data_root, tmp_path, capsys):
    main, name, words = FILE_CASES[case]
    given = name if name.startswith("/") else str(odd / name)
    if main is embedder_main:
        argv = ["--model", str(data_root / "fixtures" / "bilm_tf"), given, str(tmp_path / "out.hdf5")]
    else:
        argv = [given, str(tmp_path / "converted")]
    _one_error_line(capsys, main(argv), words)
    assert list(tmp_path.iterdir()) == []
