"""A sweep of bad and unusual input over every command line: what a careful but unlucky user types.

Each case is a row of ``CASES``: the command, its arguments, the files it makes first, the exit
code expected, a piece of the one message expected (``error: ...`` on stderr for a refusal, the
output for a success) and the files the command may write. Every case is run in-process
(``main(argv)``) and checked for: the exit code; exactly one error line, holding the expected
words, and no traceback (an exception escaping ``main`` fails the case); every other file it was
given, the model's and the case's own, byte for byte as before (sha256 before and after); and,
where a row says so, the output's content.

Among the rows are the classes whose fixes live outside the command lines: a model's identity,
number validation, strict text reading in the trainer, truncated datasets, the printed ``auto``
precision.

docs/reliability.md gives the counts. The whole file runs in well under 3 minutes on the fixture
model (a few cases train, embed or probe something tiny).
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import h5py
import numpy as np
import pytest

from elmo_model.corpus.embedder import main as embedder_main
from elmo_model.training import model_card
from elmo_model.training import kneser_ney
from elmo_model.training import train as train_cli
from probing.data import cli as data_cli
from probing.report import main as report_main
from probing.senses import wsd
from probing.tagging.suite import main as suite_main

pytestmark = pytest.mark.usefixtures("one_torch_thread")

MAINS: dict[str, Callable] = {
    "embedder": embedder_main, "train": train_cli.main, "model_card": model_card.main,
    "kneser_ney": kneser_ney.main, "data": data_cli.main, "suite": suite_main, "report": report_main,
    "wsd": wsd.main,
}

LATIN1 = "Caf\xe9 au lait , na\xefve r\xe9sum\xe9 .\n".encode("latin-1") * 20
BINARY = bytes(range(256)) * 40
TEXT_LINES = "The bank was closed .\nWe sat on the river bank .\nRivers flow .\n"
DIR = object()  # a ``files`` value: make a directory

TINY_TRAIN = ["--vocab-size", "300", "--vocab-min-count", "1", "--char-embedding-dim", "4", "--filters",
              "[[1, 8], [2, 8]]", "--n-highway", "1", "--lstm-dim", "16", "--projection-dim", "8",
              "--softmax-cutoffs", "100", "--batch-tokens", "200", "--max-sentence-tokens", "20", "--threads", "1",
              "--precision", "fp32", "--log-every", "2"]


@dataclass
class Case:
    """One row: ``argv`` may name ``{d}`` (the case's folder), ``{model}``, ``{model_b}``,
    ``{nan_model}``, ``{exported}``, ``{data}`` (the data root), ``{cache}`` (a cache shared by the
    sweep), ``{suite_a}``, ``{corpus}``, ``{vocab}``, ``{short_data}``. ``files``: relative path ->
    text, bytes, ``DIR``, or a function of the world returning bytes. ``outputs``: relative
    paths (globs) the command may write or change; everything else it is given must stay as it was."""

    name: str
    command: str
    argv: list[str]
    code: int
    says: str
    files: dict = field(default_factory=dict)
    outputs: tuple[str, ...] = ()
    check: Callable | None = None


# --------------------------------------------------------------------------------------------
# The world the cases share: model folders, a corpus, a suite result, a cache
# --------------------------------------------------------------------------------------------


@dataclass
class World:
    root: Path
    data: Path
    model: Path
    model_b: Path
    nan_model: Path
    exported: Path
    cache: Path
    suite_a: Path
    corpus: Path
    vocab: Path
    short_data: Path


def _copy_model(source: Path, target: Path, options: dict | None = None) -> Path:
    target.mkdir(parents=True)
    shutil.copy(source / "lm_weights.hdf5", target / "lm_weights.hdf5")
    settings = json.loads((source / "options.json").read_text(encoding="utf-8"))
    if options:
        settings["lstm"].update(options)
    (target / "options.json").write_text(json.dumps(settings), encoding="utf-8")
    return target


def _short_data_root(data: Path, target: Path) -> Path:
    """A data root whose EWT train file is cut mid-line at 3,000 bytes; everything else linked."""
    target.mkdir()
    for entry in data.iterdir():
        if entry.name != "ud_english_ewt":
            (target / entry.name).symlink_to(entry)
    ewt = target / "ud_english_ewt"
    ewt.mkdir()
    for entry in (data / "ud_english_ewt").iterdir():
        if entry.name == "en_ewt-ud-train.conllu":
            (ewt / entry.name).write_bytes(entry.read_bytes()[:3000])
        else:
            (ewt / entry.name).symlink_to(entry)
    return target


@pytest.fixture(scope="module")
def world(tmp_path_factory, data_root) -> World:
    root = tmp_path_factory.mktemp("world")
    fixture = data_root / "fixtures" / "bilm_tf"
    model = _copy_model(fixture, root / "model")
    model_b = _copy_model(fixture, root / "model_b", {"cell_clip": 1.0})
    nan_model = _copy_model(fixture, root / "nan_model")
    with h5py.File(nan_model / "lm_weights.hdf5", "r+") as handle:
        names = []
        handle.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
        target = next(n for n in names if "LSTMCell/W_0" in n)
        values = handle[target][()]
        values.flat[0] = np.nan
        handle[target][...] = values
    corpus = root / "corpus.txt"
    with gzip.open(data_root / "lm_corpus" / "wiki-valid.txt.gz", "rt", encoding="utf-8") as handle:
        corpus.write_text("".join(next(handle) for _ in range(80)), encoding="utf-8")
    vocab = Path(__file__).resolve().parents[1] / "data" / "models" / "elmo-mini" / "vocab.txt"
    cache = root / "cache"
    # an exported model (for model_card) and a suite result (for report --compare)
    assert train_cli.main(["--train", str(corpus), "--out", str(root / "run"), "--max-steps", "2",
                           *TINY_TRAIN]) == 0
    suite_a = root / "suite_a" / "results.json"
    suite_a.parent.mkdir()
    assert suite_main(["--model", str(model), "--tasks", "pos", "--limit", "8", "--layers", "1", "--mix-seeds", "0",
                       "--no-random-bilm", "--quiet", "--data-root", str(data_root), "--cache-dir", str(cache),
                       "--precision", "fp32", "--out", str(suite_a)]) == 0
    for name, folder in {"model": model, "model_b": model_b, "exported": root / "run" / "model",
                         "suite": suite_a.parent}.items():
        shutil.copytree(folder, root / "pristine" / name, symlinks=True)
    return World(root, data_root, model, model_b, nan_model, root / "run" / "model", cache, suite_a, corpus, vocab,
                 _short_data_root(data_root, root / "short_data"))


# --------------------------------------------------------------------------------------------
# The cases
# --------------------------------------------------------------------------------------------


def _hdf5_keys(path: Path) -> set[str]:
    with h5py.File(path, "r") as handle:
        return set(handle)


def _embedder_cases() -> list[Case]:
    m = ["--model", "{model}"]
    text = {"in.txt": TEXT_LINES}
    e = "embedder"
    return [
        Case("missing input", e, ["{d}/nope.txt", "{d}/o.hdf5", *m], 2, "nope.txt: no such input file"),
        Case("input is a directory", e, ["{d}/sub", "{d}/o.hdf5", *m], 2, "is a directory", {"sub": DIR}),
        Case("output is a directory", e, ["{d}/in.txt", "{d}/sub", *m], 2, "sub: is a directory",
             {**text, "sub": DIR}),
        Case("output in a missing directory", e, ["{d}/in.txt", "{d}/no/o.hdf5", *m], 2, "does not exist", text),
        Case("output under a file", e, ["{d}/in.txt", "{d}/in.txt/o.hdf5", *m], 2, "does not exist", text),
        Case("output is the input", e, ["{d}/in.txt", "{d}/in.txt", *m], 2, "is also an input", text),
        Case("output is the model's options", e, ["{d}/in.txt", "{model}/options.json", *m], 2, "is also an input",
             text),
        Case("output is the weight file", e, ["{d}/in.txt", "{model}/lm_weights.hdf5", "--options-file",
                                              "{model}/options.json", "--weight-file", "{model}/lm_weights.hdf5"],
             2, "is also an input", text),
        Case("output is a link to the input", e, ["{d}/in.txt", "{d}/link.txt", *m], 2, "is also an input",
             {**text, "link.txt": lambda w, d: os.symlink(d / "in.txt", d / "link.txt")}),
        Case("empty input", e, ["{d}/in.txt", "{d}/o.hdf5", *m], 2, "holds no sentences", {"in.txt": ""}),
        Case("blank lines only", e, ["{d}/in.txt", "{d}/o.hdf5", *m], 2, "in.txt:1: empty line",
             {"in.txt": "\n  \n\t\n"}),
        Case("binary input", e, ["{d}/in.txt", "{d}/o.hdf5", *m], 2, "in.txt", {"in.txt": BINARY}),
        Case("Latin-1 input", e, ["{d}/in.txt", "{d}/o.hdf5", *m], 2, "in.txt", {"in.txt": LATIN1}),
        Case("batch size 0", e, ["{d}/in.txt", "{d}/o.hdf5", *m, "--batch-size", "0"], 2, "positive integer", text),
        Case("batch size -3", e, ["{d}/in.txt", "{d}/o.hdf5", *m, "--batch-size", "-3"], 2, "positive integer", text),
        Case("batch size not a number", e, ["{d}/in.txt", "{d}/o.hdf5", *m, "--batch-size", "ten"], 2,
             "positive integer", text),
        Case("a GPU that is not there", e, ["{d}/in.txt", "{d}/o.hdf5", *m, "--cuda-device", "99"], 2,
             "--cuda-device 99", text),
        Case("a GPU number below -1", e, ["{d}/in.txt", "{d}/o.hdf5", *m, "--cuda-device", "-4"], 2,
             "--cuda-device -4", text),
        Case("options file without weights", e, ["{d}/in.txt", "{d}/o.hdf5", "--options-file",
                                                 "{model}/options.json"], 2, "go together", text),
        Case("--workers without --ray", e, ["{d}/in.txt", "{d}/o.hdf5", *m, "--workers", "2"], 2, "need --ray", text),
        Case("--stateful with --ray", e, ["{d}/in.txt", "{d}/o.hdf5", *m, "--ray", "--stateful"], 2,
             "cannot be split", text),
        Case("--shard-size 0", e, ["{d}/in.txt", "{d}/o.hdf5", *m, "--ray", "--shard-size", "0"], 2,
             "positive integer", text),
        Case("unknown precision", e, ["{d}/in.txt", "{d}/o.hdf5", *m, "--precision", "fp16"], 2, "invalid choice",
             text),
        Case("two output formats", e, ["{d}/in.txt", "{d}/o.hdf5", *m, "--all", "--top"], 2, "not allowed with",
             text),
        Case("unknown option", e, ["{d}/in.txt", "{d}/o.hdf5", *m, "--fast"], 2, "unrecognized arguments", text),
        Case("missing model directory", e, ["{d}/in.txt", "{d}/o.hdf5", "--model", "{d}/nomodel"], 2, "nomodel",
             text),
        Case("model directory without weights", e, ["{d}/in.txt", "{d}/o.hdf5", "--model", "{d}/m"], 2, "m",
             {**text, "m/options.json": lambda w, d: (w.model / "options.json").read_bytes()}),
        Case("damaged options.json", e, ["{d}/in.txt", "{d}/o.hdf5", "--model", "{d}/m"], 2, "options.json",
             {**text, "m/options.json": "{\"lstm\": ", "m/lm_weights.hdf5": lambda w, d: (
                 w.model / "lm_weights.hdf5").read_bytes()}),
        Case("options.json not UTF-8", e, ["{d}/in.txt", "{d}/o.hdf5", "--model", "{d}/m"], 2, "options.json",
             {**text, "m/options.json": b"\xff\xfe{}", "m/lm_weights.hdf5": lambda w, d: (
                 w.model / "lm_weights.hdf5").read_bytes()}),
        Case("weights not hdf5", e, ["{d}/in.txt", "{d}/o.hdf5", "--model", "{d}/m"], 2, "lm_weights.hdf5",
             {**text, "m/options.json": lambda w, d: (w.model / "options.json").read_bytes(),
              "m/lm_weights.hdf5": b"not hdf5 at all"}),
        Case("a plain embed", e, ["{d}/in.txt", "{d}/o.hdf5", *m], 0, "wrote", text, ("o.hdf5", "o.hdf5.*"),
             lambda d: _hdf5_keys(d / "o.hdf5") == {"0", "1", "2", "sentence_to_index"}),
        Case("--top", e, ["{d}/in.txt", "{d}/o.hdf5", *m, "--top"], 0, "wrote", text, ("o.hdf5", "o.hdf5.*")),
        Case("--average with --tokenize", e, ["{d}/in.txt", "{d}/o.hdf5", *m, "--average", "--tokenize"], 0, "wrote",
             {"in.txt": "The bank's door was closed.\n"}, ("o.hdf5", "o.hdf5.*")),
        Case("sentence keys with '/' and '.'", e, ["{d}/in.txt", "{d}/o.hdf5", *m, "--use-sentence-keys"], 0,
             "wrote", {"in.txt": "and/or x\n.\n..\n100 %\n"}, ("o.hdf5", "o.hdf5.*"),
             lambda d: _hdf5_keys(d / "o.hdf5") == {"and%2For x", "%2E", "%2E%2E", "100 %25", "sentence_to_index"}),
        Case("an existing output is replaced", e, ["{d}/in.txt", "{d}/o.hdf5", *m], 0, "wrote",
             {**text, "o.hdf5": b"an older result"}, ("o.hdf5", "o.hdf5.*")),
        Case("a leftover unfinished file of another job", e, ["{d}/in.txt", "{d}/o.hdf5", *m], 0, "wrote",
             {**text, "o.hdf5.partial": b"garbage"}, ("o.hdf5", "o.hdf5.*")),
        Case("a 300-token line", e, ["{d}/in.txt", "{d}/o.hdf5", *m, "--top"], 0, "wrote",
             {"in.txt": " ".join(["word"] * 300) + "\n"}, ("o.hdf5", "o.hdf5.*")),
        Case("--stateful", e, ["{d}/in.txt", "{d}/o.hdf5", *m, "--stateful", "--precision", "fp32"], 0, "wrote", text,
             ("o.hdf5", "o.hdf5.*")),
    ]


def _train_cases() -> list[Case]:
    t = "train"
    base = ["--train", "{corpus}", "--out", "{d}/run", *TINY_TRAIN]
    return [
        Case("missing training file", t, ["--train", "{d}/nope.txt", "--out", "{d}/run", *TINY_TRAIN], 2, "nope.txt"),
        Case("empty training file", t, ["--train", "{d}/e.txt", "--out", "{d}/run", *TINY_TRAIN], 2, "no text",
             {"e.txt": ""}, ("run", "run/*")),
        Case("--batch-tokens 0", t, [*base, "--batch-tokens", "0"], 2, "--batch-tokens 0"),
        Case("--max-hours 0", t, [*base, "--max-hours", "0"], 2, "--max-hours 0.0"),
        Case("--max-hours -1", t, [*base, "--max-hours", "-1"], 2, "--max-hours -1.0"),
        Case("--max-hours inf", t, [*base, "--max-hours", "inf"], 2, "--max-hours inf"),
        Case("--max-steps 0", t, [*base, "--max-steps", "0"], 2, "--max-steps 0"),
        Case("--max-tokens -5", t, [*base, "--max-tokens", "-5"], 2, "--max-tokens -5"),
        Case("--learning-rate 0", t, [*base, "--learning-rate", "0"], 2, "--learning-rate 0.0"),
        Case("--learning-rate nan", t, [*base, "--learning-rate", "nan"], 2, "--learning-rate nan"),
        Case("--dropout 1", t, [*base, "--dropout", "1"], 2, "--dropout 1.0"),
        Case("--grad-clip -1", t, [*base, "--grad-clip", "-1"], 2, "--grad-clip -1.0"),
        Case("--epochs 0", t, [*base, "--epochs", "0"], 2, "--epochs 0"),
        Case("--threads 0", t, [*base, "--threads", "0"], 2, "--threads 0"),
        Case("--vocab-size 0", t, [*base, "--vocab-size", "0"], 2, "--vocab-size 0"),
        Case("--cooldown-steps without --max-steps", t, [*base, "--cooldown-steps", "5"], 2, "--cooldown-steps",
             outputs=("run", "run/*")),
        Case("--filters not JSON", t, [*base, "--filters", "[[1, 8"], 2, "--filters"),
        Case("--softmax-cutoffs not numbers", t, [*base, "--softmax-cutoffs", "many"], 2, "--softmax-cutoffs"),
        Case("unknown precision", t, [*base, "--precision", "fp16"], 2, "invalid choice"),
        Case("--out is a file", t, ["--train", "{corpus}", "--out", "{d}/f", *TINY_TRAIN], 2, "--out", {"f": "x"}),
        Case("--out under a file", t, ["--train", "{corpus}", "--out", "{d}/f/run", *TINY_TRAIN], 2,
             "is a file, not a directory", {"f": "x"}),
        Case("--export-to an existing file", t, [*base, "--max-steps", "1", "--export-to", "{d}/f"], 2,
             "--export-to", {"f": "x"}),
        Case("--export-to the training text's folder", t, ["--train", "{d}/text/c.txt", "--out", "{d}/run",
                                                            *TINY_TRAIN, "--max-steps", "1", "--export-to",
                                                            "{d}/text"], 2, "holds an input",
             {"text/c.txt": lambda w, d: w.corpus.read_bytes()}),
        Case("--init-from a file", t, [*base, "--init-from", "{d}/f"], 2, "--init-from", {"f": "x"}),
        Case("--init-from a folder without vocab.txt", t, [*base, "--init-from", "{model}", "--max-steps", "1"], 2,
             "--init-from", outputs=("run", "run/*")),
        Case("--device that is no device", t, [*base, "--device", "abacus"], 2, "--device abacus"),
        Case("--device cuda:x", t, [*base, "--device", "cuda:x"], 2, "--device cuda:x"),
        Case("binary training file", t, ["--train", "{d}/b.bin", "--out", "{d}/run", *TINY_TRAIN, "--max-steps", "1"],
             2, "b.bin", {"b.bin": BINARY}, ("run", "run/*")),
        Case("Latin-1 training file", t, ["--train", "{d}/l.txt", "--out", "{d}/run", *TINY_TRAIN, "--max-steps", "1"],
             2, "l.txt", {"l.txt": LATIN1}, ("run", "run/*")),
        Case("--cell-clip nan", t, [*base, "--max-steps", "1", "--cell-clip", "nan"], 2, "--cell-clip",
             outputs=("run", "run/*")),
        Case("--cell-clip -3", t, [*base, "--max-steps", "1", "--cell-clip", "-3"], 2, "--cell-clip",
             outputs=("run", "run/*")),
        Case("--proj-clip inf", t, [*base, "--max-steps", "1", "--proj-clip", "inf"], 2, "--proj-clip",
             outputs=("run", "run/*")),
        Case("--filters []", t, [*base, "--max-steps", "1", "--filters", "[]"], 2, "--filters",
             outputs=("run", "run/*")),
        Case("a few steps and an export", t, [*base, "--max-steps", "2"], 0, "stopped: max_steps",
             outputs=("run", "run/*", "run/model/*"),
             check=lambda d: json.loads((d / "run" / "model" / "model_card.json").read_text())["steps"] == 2),
        Case("a resume with another architecture", t, [*base, "--max-steps", "2", "--lstm-dim", "24"], 2,
             "lstm_dim: 16 -> 24", {"run/train_config.json": lambda w, d: _train_config(w, d, lstm_dim=16)},
             ("run", "run/*")),
        Case("a run directory copied elsewhere", t, [*base, "--max-steps", "2"], 2, "out: '/elsewhere/run' ->",
             {"run/train_config.json": lambda w, d: _train_config(w, d, out="/elsewhere/run")}, ("run", "run/*")),
        Case("a damaged train_config.json", t, [*base, "--max-steps", "2"], 2, "train_config.json",
             {"run/train_config.json": "{not json"}, ("run", "run/*")),
    ]


def _train_config(world: World, d: Path, **changes) -> bytes:
    """The train_config.json the base training arguments would write, with ``changes``."""
    config, _ = train_cli._parse_args(["--train", str(world.corpus), "--out", str(d / "run"), *TINY_TRAIN])
    data = {**config.__dict__, **changes}
    return json.dumps(data).encode()


def _model_card_cases() -> list[Case]:
    c = "model_card"
    exported = {name: (lambda w, d, name=name: (w.exported / name).read_bytes())
                for name in ("options.json", "weights.hdf5", "vocab.txt", "softmax.npz", "model_card.json")}
    return [
        Case("a folder without a card", c, ["{d}"], 2, "not an exported model directory"),
        Case("a missing folder", c, ["{d}/nope"], 2, "nope"),
        Case("a file", c, ["{d}/f"], 2, "not an exported model directory", {"f": "x"}),
        Case("a damaged card", c, ["{d}"], 2, "not readable JSON", {"model_card.json": "{"}),
        Case("a card that is not UTF-8", c, ["{d}"], 2, "model_card.json", {"model_card.json": b"\xff\xfe\x00{"}),
        Case("unknown option", c, ["{d}", "--fast"], 2, "unrecognized arguments"),
        Case("a card without its weights", c, ["{d}/m", "--skip-perplexity"], 2, "m",
             {"m/model_card.json": lambda w, d: (w.exported / "model_card.json").read_bytes(),
              "m/options.json": lambda w, d: (w.exported / "options.json").read_bytes()}, ("m/model_card.json",)),
        Case("the contextualisation table of an export", c, ["{d}/m", "--skip-perplexity"], 0, "same sense",
             {f"m/{k}": v for k, v in exported.items()}, ("m/model_card.json", "m/model_card.json.*"),
             lambda d: "contextualisation" in json.loads((d / "m" / "model_card.json").read_text())),
        Case("a model holding NaN", c, ["{d}/m", "--skip-perplexity"], 2, "contains NaN or infinite values",
             {**{f"m/{k}": v for k, v in exported.items()}, "m/weights.hdf5": lambda w, d: _nan_weights(w),
              "m/model_card.json": lambda w, d: _card_for(w, _nan_weights(w))},
             ("m/model_card.json",)),
    ]


def _nan_weights(world: World) -> bytes:
    path = world.root / "nan_export.hdf5"
    if not path.exists():
        shutil.copy(world.exported / "weights.hdf5", path)
        with h5py.File(path, "r+") as handle:
            names = []
            handle.visititems(lambda name, obj: names.append(name) if isinstance(obj, h5py.Dataset) else None)
            values = handle[names[-1]][()]
            values.flat[0] = np.nan
            handle[names[-1]][...] = values
    return path.read_bytes()


def _card_for(world: World, weights: bytes) -> bytes:
    """The export's card, recording the sha256 of ``weights`` (as an export of those weights would)."""
    card = json.loads((world.exported / "model_card.json").read_text(encoding="utf-8"))
    card["weights_sha256"] = hashlib.sha256(weights).hexdigest()
    return json.dumps(card).encode()


def _kneser_ney_cases() -> list[Case]:
    k = "kneser_ney"
    good = {"t.txt": TEXT_LINES * 5, "e.txt": TEXT_LINES}
    args = lambda train="{d}/t.txt", vocab="{vocab}", evaluation="{d}/e.txt": [  # noqa: E731
        "--train", train, "--vocab", vocab, "--eval", evaluation, "--tokenizer", "whitespace"]
    return [
        Case("missing training file", k, args(train="{d}/nope.txt"), 2, "--train {d}/nope.txt: no such file", good),
        Case("training file is a directory", k, args(train="{d}/sub"), 2, "is a directory", {**good, "sub": DIR}),
        Case("vocabulary is a binary file", k, args(vocab="{d}/v.bin"), 2, "--vocab {d}/v.bin",
             {**good, "v.bin": BINARY}),
        Case("vocabulary is Latin-1", k, args(vocab="{d}/v.txt"), 2, "--vocab {d}/v.txt:1: not valid UTF-8",
             {**good, "v.txt": LATIN1}),
        Case("vocabulary is empty", k, args(vocab="{d}/v.txt"), 2, "v.txt", {**good, "v.txt": ""}),
        Case("vocabulary is a directory", k, args(vocab="{d}/sub"), 2, "is a directory", {**good, "sub": DIR}),
        Case("missing evaluation file", k, args(evaluation="{d}/nope.txt"), 2, "--eval {d}/nope.txt", good),
        Case("empty evaluation file", k, args(evaluation="{d}/empty.txt"), 2, "--eval", {**good, "empty.txt": ""}),
        Case("empty training file", k, args(train="{d}/empty.txt"), 2, "--train", {**good, "empty.txt": "\n"}),
        Case("training file not gzip", k, args(train="{d}/t.txt.gz"), 2, "t.txt.gz", {**good, "t.txt.gz": "plain"}),
        Case("training file is Latin-1", k, args(train="{d}/l.txt"), 2, "l.txt", {**good, "l.txt": LATIN1}),
        Case("training file is binary", k, args(train="{d}/b.bin"), 2, "b.bin", {**good, "b.bin": BINARY}),
        Case("evaluation file is binary", k, args(evaluation="{d}/b.bin"), 2, "b.bin", {**good, "b.bin": BINARY}),
        Case("--discount 0", k, [*args(), "--discount", "0"], 2, "--discount", good),
        Case("--discount 1.5", k, [*args(), "--discount", "1.5"], 2, "--discount", good),
        Case("--discount nan", k, [*args(), "--discount", "nan"], 2, "--discount", good),
        Case("--max-train-tokens 0", k, [*args(), "--max-train-tokens", "0"], 2, "--max-train-tokens", good),
        Case("unknown tokenizer", k, [*args()[:-1], "bpe"], 2, "invalid choice", good),
        Case("a fit and its perplexity", k, args(), 0, "perplexity", good),
        Case("gzip text", k, args(train="{d}/t.txt.gz"), 0, "perplexity",
             {**good, "t.txt.gz": gzip.compress((TEXT_LINES * 5).encode())}),
        Case("--modified --json", k, [*args(), "--modified", "--json"], 0, '"direction"', good),
    ]


def _data_cases() -> list[Case]:
    a = "data"
    return [
        Case("status of the data root", a, ["status", "--data-root", "{data}"], 0, "ud_english_ewt"),
        Case("status of an empty folder", a, ["status", "--data-root", "{d}"], 0, "fetch the missing ones"),
        Case("status of a missing folder", a, ["status", "--data-root", "{d}/nope"], 0, "missing"),
        Case("no command", a, [], 2, "required"),
        Case("unknown command", a, ["fetch"], 2, "invalid choice"),
        Case("download an unknown dataset", a, ["download", "imagenet", "--data-root", "{d}"], 2, "unknown dataset"),
        Case("status with an unknown option", a, ["status", "--fast"], 2, "unrecognized arguments"),
        Case("status of a truncated archive", a, ["status", "--data-root", "{d}"], 0, "DAMAGED",
             {"nltk_data/corpora/conll2000.zip": lambda w, d: (
                 w.data / "nltk_data" / "corpora" / "conll2000.zip").read_bytes()[:5000]}),
    ]


SUITE = ["--tasks", "pos", "--limit", "8", "--layers", "1", "--mix-seeds", "0", "--no-random-bilm", "--quiet",
         "--data-root", "{data}", "--cache-dir", "{cache}", "--precision", "fp32"]


def _another_identity(d: Path, world: World) -> bool:
    """B (A's weights, another cell_clip) is recorded as another model than A, so nothing of A's
    cache can be reused for it."""
    a = json.loads(world.suite_a.read_text())
    b = json.loads((d / "b.json").read_text())
    return a["model_identity"] != b["model_identity"]


def _precision_first(d: Path) -> bool:  # noqa: ARG001
    """The run's first line (stdout or stderr) says which precision runs."""
    firsts = [next((line for line in text.splitlines() if line.strip()), "") for text in _LAST_OUTPUT]
    return any("fp32" in line or "bf16" in line for line in firsts)


def _suite_cases() -> list[Case]:
    s = "suite"
    m = ["--model", "{model}"]
    return [
        Case("--out is a directory", s, [*m, *SUITE, "--out", "{d}"], 2, "--out {d}: is a directory"),
        Case("--out under a file", s, [*m, *SUITE, "--out", "{d}/f/r.json"], 2, "is a file, not a directory",
             {"f": "x"}),
        Case("--out is the model's options", s, [*m, *SUITE, "--out", "{model}/options.json"], 2, "is also an input"),
        Case("--cache-dir is a file", s, [*m, *SUITE[:-4], "--cache-dir", "{d}/f"], 2, "--cache-dir {d}/f: is a file",
             {"f": "x"}),
        Case("--cache-dir under a file", s, [*m, *SUITE[:-4], "--cache-dir", "{d}/f/c"], 2, "is a file, not a",
             {"f": "x"}),
        Case("--cache-dir is the model's folder", s, [*m, *SUITE[:-4], "--cache-dir", "{model}"], 2, "holds an input"),
        Case("unknown task", s, [*m, "--tasks", "ner"], 2, "invalid choice"),
        Case("--limit 0", s, [*m, *SUITE, "--limit", "0"], 2, "--limit 0"),
        Case("--limit -5", s, [*m, *SUITE, "--limit", "-5"], 2, "--limit -5"),
        Case("--limit not a number", s, [*m, *SUITE, "--limit", "some"], 2, "invalid int"),
        Case("--mix-seeds -1", s, [*m, *SUITE, "--mix-seeds", "-1"], 2, "--mix-seeds -1"),
        Case("a layer the model lacks", s, [*m, *SUITE, "--layers", "7"], 2, "7"),
        Case("unknown precision", s, [*m, *SUITE, "--precision", "fp16"], 2, "invalid choice"),
        Case("missing model", s, ["--model", "{d}/nomodel", *SUITE], 2, "nomodel"),
        Case("model is a file", s, ["--model", "{d}/f", *SUITE], 2, "f", {"f": "x"}),
        Case("damaged options.json", s, ["--model", "{d}/m", *SUITE], 2, "options.json",
             {"m/options.json": "{", "m/lm_weights.hdf5": lambda w, d: (w.model / "lm_weights.hdf5").read_bytes()}),
        Case("an empty data root", s, [*m, *SUITE, "--data-root", "{d}"], 2, "is missing from the data root"),
        Case("a missing data root", s, [*m, *SUITE, "--data-root", "{d}/nope"], 2, "nope"),
        Case("a probe run", s, [*m, *SUITE, "--out", "{d}/r.json"], 0, "wrote", outputs=("r.json", "r.json.*"),
             check=lambda d: json.loads((d / "r.json").read_text())["config"]["precision"] == "fp32"),
        Case("--out in a folder not yet made", s, [*m, *SUITE, "--out", "{d}/new/r.json"], 0, "wrote",
             outputs=("new", "new/*")),
        Case("a model with another cell clip, same weights, same cache", s,
             ["--model", "{model_b}", *SUITE, "--out", "{d}/b.json"], 0, "wrote", outputs=("b.json", "b.json.*"),
             check=lambda d: _another_identity(d, _WORLD[0])),
        Case("a negative cell clip in options.json", s, ["--model", "{d}/m", *SUITE], 2, "cell_clip",
             {"m/options.json": lambda w, d: _options(w, cell_clip=-3),
              "m/lm_weights.hdf5": lambda w, d: (w.model / "lm_weights.hdf5").read_bytes()}),
        Case("a NaN in the weights", s, ["--model", "{nan_model}", *SUITE], 2, "contains NaN or infinite values"),
        Case("a truncated EWT train file", s, [*m, *SUITE, "--data-root", "{short_data}"], 2, "en_ewt-ud-train"),
        Case("auto precision is printed", s, [*m, *SUITE[:-2], "--precision", "auto"], 0, "pos",
             check=_precision_first),
    ]


def _options(world: World, **lstm) -> bytes:
    settings = json.loads((world.model / "options.json").read_text(encoding="utf-8"))
    settings["lstm"].update(lstm)
    return json.dumps(settings).encode()


def _report_cases() -> list[Case]:
    r = "report"
    results = {"a/results.json": lambda w, d: w.suite_a.read_bytes(),
               "b/results.json": lambda w, d: w.suite_a.read_bytes(),
               "a/report.md": "# A's own report\n", "b/report.md": "# B's own report\n",
               "b/report.html": "<html>B's own report</html>\n"}
    cmp = lambda a="{d}/a/results.json", b="{d}/b", out="{d}/c": [  # noqa: E731
        "--compare", a, b, "--out", out, "--no-png"]
    uncached = ["--model", "{model}", "--tasks", "pos", "--limit", "4", "--no-png", "--data-root", "{data}",
                "--no-random-bilm", "--no-contextuality"]
    quick = [*uncached, "--cache-dir", "{cache}"]
    return [
        Case("--compare writing over B's folder", r, cmp(out="{d}/b"), 2, "holds an input", results),
        Case("--compare writing over A's folder", r, cmp(out="{d}/a"), 2, "holds an input", results),
        Case("--compare into an existing file", r, cmp(out="{d}/f"), 2, "--out {d}/f: is a file",
             {**results, "f": "x"}),
        Case("--compare into a folder under a file", r, cmp(out="{d}/f/c"), 2, "is a file, not a directory",
             {**results, "f": "x"}),
        Case("--compare a missing file", r, cmp(a="{d}/nope.json"), 2, "nope.json", results),
        Case("--compare a file that is not JSON", r, cmp(a="{d}/x.json"), 2, "not valid JSON",
             {**results, "x.json": "not json"}),
        Case("--compare a JSON list", r, cmp(a="{d}/x.json"), 2, "not a JSON object", {**results, "x.json": "[1]"}),
        Case("--compare a folder without results", r, cmp(a="{d}/empty"), 2, "empty", {**results, "empty": DIR}),
        Case("--compare a binary file", r, cmp(a="{d}/x.json"), 2, "x.json", {**results, "x.json": BINARY}),
        Case("--compare a result cut short", r, cmp(a="{d}/x.json"), 2, "x.json",
             {**results, "x.json": lambda w, d: w.suite_a.read_bytes()[:500]}),
        Case("--compare one file", r, ["--compare", "{d}/a/results.json", "--out", "{d}/c"], 2, "expected 2 arguments",
             results),
        Case("--labels without --compare", r, [*quick, "--out", "{d}/r", "--labels", "x", "y"], 2, "--labels"),
        Case("--out an existing file", r, [*quick, "--out", "{d}/f"], 2, "--out {d}/f: is a file", {"f": "x"}),
        Case("--out under a file", r, [*quick, "--out", "{d}/f/r"], 2, "is a file, not a directory", {"f": "x"}),
        Case("--out the model's folder", r, [*quick, "--out", "{model}"], 2, "holds an input"),
        Case("--cache-dir a file", r, [*uncached, "--cache-dir", "{d}/f", "--out", "{d}/r"], 2,
             "--cache-dir {d}/f: is a file", {"f": "x"}),
        Case("unknown task", r, [*quick, "--tasks", "ner", "--out", "{d}/r"], 2, "invalid choice"),
        Case("--limit 0", r, [*quick, "--limit", "0", "--out", "{d}/r"], 2, "limit"),
        Case("--syntax-train-sentences -1", r, [*quick, "--syntax-train-sentences", "-1", "--out", "{d}/r"], 2,
             "number of sentences"),
        Case("unknown precision", r, [*quick, "--precision", "fp16", "--out", "{d}/r"], 2, "invalid choice"),
        Case("--out not given", r, quick, 2, "--out"),
        Case("missing model", r, ["--model", "{d}/nomodel", *quick[2:], "--out", "{d}/r"], 2, "nomodel",
             outputs=("r", "r.lock")),
        Case("a comparison", r, cmp(), 0, "report.html", results, ("c", "c/*", "c.lock")),
        Case("a comparison with labels", r, [*cmp(), "--labels", "before", "after"], 0, "report.md", results,
             ("c", "c/*", "c.lock"), lambda d: "before" in (d / "c" / "report.md").read_text()),
    ]


def _wsd_cases() -> list[Case]:
    w = "wsd"
    m = ["--model", "{model}", "--data-root", "{data}", "--cache-dir", "{cache}", "--limit-semcor", "5"]
    return [
        Case("--json a directory", w, [*m, "--json", "{d}"], 2, "--json {d}: is a directory"),
        Case("--json under a file", w, [*m, "--json", "{d}/f/r.json"], 2, "is a file, not a directory", {"f": "x"}),
        Case("--json the model's options", w, [*m, "--json", "{model}/options.json"], 2, "is also an input"),
        Case("--cache-dir a file", w, [*m[:4], "--cache-dir", "{d}/f"], 2, "--cache-dir {d}/f: is a file", {"f": "x"}),
        Case("missing model", w, ["--model", "{d}/nomodel", *m[2:]], 2, "nomodel"),
        Case("--limit-semcor 0", w, [*m, "--limit-semcor", "0"], 2, "positive integer"),
        Case("--batch-size 0", w, [*m, "--batch-size", "0"], 2, "positive integer"),
        Case("--max-instances 0", w, [*m, "--max-instances", "0"], 2, "positive integer"),
        Case("--mix with --no-mix", w, [*m, "--mix", "1", "1", "1", "--no-mix"], 2, "--no-mix"),
        Case("--mix not numbers", w, [*m, "--mix", "a", "b", "c"], 2, "invalid float"),
        Case("unknown option", w, [*m, "--fast"], 2, "unrecognized arguments"),
        Case("a missing data root", w, [*m, "--data-root", "{d}/nope"], 2, "nope"),
        Case("--mix of the wrong length", w, [*m, "--mix", "1", "2"], 2, "mix_weights"),
        Case("--mix with a negative weight", w, [*m, "--mix", "-1", "0", "2"], 2, "mix_weights"),
        Case("a layer the model lacks", w, [*m, "--layers", "9", "--no-mix"], 2, "9"),
        Case("--mix nan", w, [*m, "--mix", "nan", "1", "1"], 2, "mix"),
        Case("the table and its JSON", w, [*m, "--layers", "1", "--no-mix", "--json", "{d}/r.json"], 0, "4 sets",
             outputs=("r.json", "r.json.*"), check=lambda d: "wsd" in json.loads((d / "r.json").read_text())),
    ]


CASES = (_embedder_cases() + _train_cases() + _model_card_cases() + _kneser_ney_cases() + _data_cases()
         + _suite_cases() + _report_cases() + _wsd_cases())
_WORLD: list[World] = []
_LAST_OUTPUT: list[str] = ["", ""]  # the last case's stdout and stderr


# --------------------------------------------------------------------------------------------
# Running a case
# --------------------------------------------------------------------------------------------


def _make(files: dict, world: World, d: Path) -> None:
    for relative, content in files.items():
        path = d / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if content is DIR:
            path.mkdir(exist_ok=True)
            continue
        if callable(content):
            content = content(world, d)
            if content is None:  # the function made the file itself
                continue
        if isinstance(content, str):
            content = content.encode("utf-8")
        path.write_bytes(content)


def _hashes(folder: Path, outputs: tuple[str, ...] = ()) -> dict[str, str]:
    """sha256 of every file under ``folder`` except those matching ``outputs`` (relative globs)."""
    found = {}
    for path in sorted(folder.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        relative = path.relative_to(folder)
        if any(relative.match(pattern) or str(relative).startswith(pattern.rstrip("*/") + "/")
               for pattern in outputs):
            continue
        found[str(relative)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


@pytest.mark.parametrize("case", [pytest.param(c, id=f"{c.command}: {c.name}") for c in CASES])
def test_sweep(case: Case, world: World, tmp_path: Path, capsys):
    _WORLD[:] = [world]
    d = tmp_path / "case"
    d.mkdir()
    _make(case.files, world, d)
    names = {"d": d, "model": world.model, "model_b": world.model_b, "nan_model": world.nan_model,
             "exported": world.exported, "data": world.data, "cache": world.cache, "suite_a": world.suite_a,
             "corpus": world.corpus, "vocab": world.vocab, "short_data": world.short_data}
    argv = [arg.format(**names) for arg in case.argv]
    shared = {"model": world.model, "model_b": world.model_b, "exported": world.exported, "suite": world.suite_a.parent}
    before = {name: _hashes(folder) for name, folder in shared.items()}
    before["case"] = _hashes(d, case.outputs)
    capsys.readouterr()
    crash = None
    try:
        code = MAINS[case.command](argv)
    except SystemExit as stop:  # argparse's refusals
        code = stop.code if isinstance(stop.code, int) else 2
    except BaseException:  # noqa: BLE001 -- a traceback is what the sweep looks for
        code, crash = None, traceback.format_exc()
    out, err = capsys.readouterr()
    _LAST_OUTPUT[:] = [out, err]
    after = {name: _hashes(folder) for name, folder in shared.items()}
    after["case"] = _hashes(d, case.outputs)
    for name, folder in shared.items():  # put back what a case spoilt, so that one loss fails one case
        if before[name] != after[name]:
            shutil.rmtree(folder)
            shutil.copytree(world.root / "pristine" / name, folder, symlinks=True)
    # the worst first: a lost or changed input, then a traceback, then wrong output, then the message
    for name in before:
        lost = [f for f, digest in before[name].items() if after[name].get(f) != digest]
        assert not lost, f"lost file: {name}: {lost} changed or went missing"
    assert crash is None, f"traceback for {argv}:\n{crash}"
    assert "Traceback" not in err, "traceback: " + err[-3000:]
    for name in before:
        added = sorted(set(after[name]) - set(before[name]))
        assert not added, f"wrong output: {name}: {added} written where nothing should be"
    if code == 0 and case.check is not None:
        assert case.check(d), "wrong output: the output is not what the case expects"
    says = case.says.format(**names)
    if case.code == 0:
        assert code == 0, "unclear: " + err[-3000:]
        assert says in out + err, ("unclear", out[-2000:], err[-2000:])
    else:
        assert code == case.code, ("wrong output" if code == 0 else "unclear", code, out[-1500:], err[-1500:])
        lines = [line for line in err.splitlines() if line.startswith("error:") or ": error: " in line]
        assert len(lines) == 1, "unclear: " + err[-3000:]
        assert says in lines[0], "unclear: " + lines[0]


def test_the_sweep_is_large_and_covers_every_command():
    """At least 150 cases over all eight commands, refusals and successes."""
    assert len(CASES) >= 150
    assert {case.command for case in CASES} == set(MAINS)
    for command in MAINS:
        codes = {case.code for case in CASES if case.command == command}
        assert 2 in codes and 0 in codes, command
    assert len({(c.command, c.name) for c in CASES}) == len(CASES)
