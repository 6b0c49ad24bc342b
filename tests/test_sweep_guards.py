"""The sweep's classes that the command-line rows of ``test_sweep.py`` do not reach: outputs over
inputs where a plain path check does not look, through the Python API as well as the commands.

Rows (``Case``) are run as in ``test_sweep.py``: in-process ``main(argv)``, exit code, exactly
one error line holding the expected words, no traceback, and every file the case was given (the
models', the data root's, the case's own) byte for byte as before. Functions below the rows cover
what a row cannot say: the API (``ElmoEmbedder.embed_file``), a lock held by another run, a
lock file that cannot be opened.

docs/reliability.md gives the counts.
"""

from __future__ import annotations

import errno
import gzip
import hashlib
import os
import shutil
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

from elmo_model.corpus.embedder import main as embedder_main
from elmo_model.embedding import ElmoEmbedder
from elmo_model.training import model_card
from elmo_model.plumbing import io_safety
from elmo_model.text import build_punkt
from elmo_model.training import train as train_cli
from probing.context import static
from probing.data import cli as data_cli
from probing.information.cli import main as information_main
from probing.report import main as report_main
from probing.senses import wsd
from probing.tagging.suite import main as suite_main

pytestmark = pytest.mark.usefixtures("one_torch_thread")

MAINS: dict[str, Callable] = {"embedder": embedder_main, "train": train_cli.main, "suite": suite_main,
                              "report": report_main, "wsd": wsd.main, "data": data_cli.main,
                              "information": information_main, "static": static.main, "build_punkt": build_punkt.main,
                              "model_card": model_card.main}
TEXT = "The bank was closed .\nWe sat on the river bank .\n"
TINY_TRAIN = ["--vocab-size", "300", "--vocab-min-count", "1", "--char-embedding-dim", "4", "--filters",
              "[[1, 8], [2, 8]]", "--n-highway", "1", "--lstm-dim", "16", "--projection-dim", "8",
              "--softmax-cutoffs", "100", "--batch-tokens", "200", "--max-sentence-tokens", "20", "--threads", "1",
              "--precision", "fp32", "--log-every", "2"]
GOLD = "wsd/WSD_Evaluation_Framework/Evaluation_Datasets/ALL/ALL.gold.key.txt"
DEV = "ud_english_ewt/en_ewt-ud-dev.conllu"


@dataclass
class Case:
    """One row: ``argv`` may name ``{d}`` (the case's folder), ``{model}`` (a bilm-tf model
    folder), ``{exported}`` (a model the trainer exported), ``{corpus}`` (a text file), ``{data}``
    (a data root whose dataset files are stand-ins). ``files``: relative path -> text, or a
    function of (world, d) that makes the file itself. ``outputs``: globs the command may write."""

    name: str
    command: str
    argv: list[str]
    code: int
    says: str
    files: dict = field(default_factory=dict)
    outputs: tuple[str, ...] = ()


@dataclass
class World:
    root: Path
    model: Path
    exported: Path
    corpus: Path
    data: Path
    made: dict = field(default_factory=dict)  # every file of root as it was made: put back after each case


@pytest.fixture(scope="module")
def world(tmp_path_factory, data_root) -> World:
    root = tmp_path_factory.mktemp("guards")
    fixture = data_root / "fixtures" / "bilm_tf"
    model = root / "model"
    model.mkdir()
    for name in ("options.json", "lm_weights.hdf5"):
        shutil.copy(fixture / name, model / name)
    corpus = root / "corpus.txt"
    with gzip.open(data_root / "lm_corpus" / "wiki-valid.txt.gz", "rt", encoding="utf-8") as handle:
        corpus.write_text("".join(next(handle) for _ in range(60)), encoding="utf-8")
    assert train_cli.main(["--train", str(corpus), "--out", str(root / "run"), "--max-steps", "1", "--no-export",
                           *TINY_TRAIN]) == 0
    assert train_cli.main(["--train", str(corpus), "--out", str(root / "run"), "--max-steps", "1",
                           *TINY_TRAIN]) == 0
    data = root / "data"  # stand-ins: the refusals come before any dataset is read
    for relative in (GOLD, DEV):
        (data / relative).parent.mkdir(parents=True, exist_ok=True)
        (data / relative).write_text("a dataset file\n", encoding="utf-8")
    return World(root, model, root / "run" / "model", corpus, data, _snapshot(root))


def _snapshot(folder: Path) -> dict[Path, bytes]:
    return {p.relative_to(folder): p.read_bytes() for p in folder.rglob("*") if p.is_file() and not p.is_symlink()}


def _put_back(folder: Path, snapshot: dict[Path, bytes]) -> None:
    """The shared world as it was made: a case that spoils it (the earlier code wrote a
    ``weights.hdf5`` into the model folder, which then stopped loading) fails alone."""
    for path in sorted(folder.rglob("*"), reverse=True):  # a folder's files before the folder
        relative = path.relative_to(folder)
        if path.is_symlink() or (path.is_file() and relative not in snapshot):
            path.unlink()
        elif path.is_dir() and not any(kept.parts[:len(relative.parts)] == relative.parts for kept in snapshot):
            shutil.rmtree(path)
    for relative, content in snapshot.items():
        target = folder / relative
        if not target.is_file() or target.read_bytes() != content:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)


def _link(target: str) -> Callable:
    def make(world: World, d: Path, name: str) -> None:
        os.symlink(str(target).format(model=world.model, d=d), d / name)
    return make


def _hardlink(target: str) -> Callable:
    def make(world: World, d: Path, name: str) -> None:
        os.link(d / target, d / name)
    return make


def _copy_corpus(world: World, d: Path, name: str) -> None:
    shutil.copy(world.corpus, d / name)


def _copy_exported(world: World, d: Path, name: str) -> None:
    shutil.copytree(world.exported, d / name)


def _cut_softmax(world: World, d: Path, name: str) -> None:
    shutil.copytree(world.exported, d / name)
    softmax = d / name / "softmax.npz"
    softmax.write_bytes(softmax.read_bytes()[: softmax.stat().st_size // 2])


def _run_with_an_edited_vocabulary(world: World, d: Path, name: str) -> None:
    assert train_cli.main(["--train", str(world.corpus), "--out", str(d / name), "--max-steps", "1", "--no-export",
                           *TINY_TRAIN]) == 0
    vocab = d / name / "vocab.txt"
    vocab.write_text("".join(vocab.read_text(encoding="utf-8").splitlines(keepends=True)[:-7]), encoding="utf-8")


def _cases() -> list[Case]:
    e, t, m = "embedder", "train", ["--model", "{model}"]
    text = {"in.txt": TEXT}
    pair = ["--options-file", "{model}/options.json", "--weight-file", "{model}/lm_weights.hdf5"]
    suite = ["--model", "{model}", "--tasks", "pos", "--limit", "8", "--layers", "1", "--mix-seeds", "0",
             "--no-random-bilm", "--quiet", "--data-root", "{data}", "--cache-dir", "{d}/cache"]
    base = [*TINY_TRAIN, "--max-steps", "1"]
    return [
        Case("weights.hdf5 beside a bilm-tf lm_weights.hdf5", e, ["{d}/in.txt", "{model}/weights.hdf5", *m], 2,
             "inside an input folder", text),
        Case("a new file in the model folder, by --weight-file", e, ["{d}/in.txt", "{model}/weights.hdf5", *pair],
             2, "inside an input folder", text),
        Case("the model folder through a link", e, ["{d}/in.txt", "{d}/alias/new.hdf5", *m], 2,
             "inside an input folder", {**text, "alias": _link("{model}")}),
        Case("a lock file linked to the input", e, ["{d}/in.txt", "{d}/o.hdf5", *m], 2, "symbolic link",
             {**text, "o.hdf5.lock": _link("{d}/in.txt")}),
        Case("a lock file linked to the weights", e, ["{d}/in.txt", "{d}/o.hdf5", *m], 2, "symbolic link",
             {**text, "o.hdf5.lock": _link("{model}/lm_weights.hdf5")}),
        Case("a lock file hard-linked to the input", e, ["{d}/in.txt", "{d}/o.hdf5", *m], 2, "hard link",
             {**text, "o.hdf5.lock": _hardlink("in.txt")}),
        Case("a name too long once .lock is added", e, ["{d}/in.txt", "{d}/" + "o" * 248 + ".hdf5", *m], 2,
             "too long", text),
        Case("a name too long once .partial is added", e, ["{d}/in.txt", "{d}/" + "o" * 243 + ".hdf5", *m], 2,
             "choose a name of at most", text),
        Case("--export-to a name too long once .lock is added", t, ["--train", "{corpus}", "--out", "{d}/run", *base,
                                                                     "--export-to", "{d}/" + "e" * 252], 2,
             "choose a name of at most"),
        Case("report --out a name too long once .lock is added", "report", [
            "--model", "{model}", "--data-root", "{data}", "--out", "{d}/" + "r" * 252, "--cache-dir", "{d}/cache",
            "--no-png"],
             2, "choose a name of at most"),
        Case("suite --out a dataset file", "suite", [*suite, "--out", "{data}/" + DEV], 2, "inside an input folder"),
        Case("suite --out inside the model folder", "suite", [*suite, "--out", "{model}/results.json"], 2,
             "inside an input folder"),
        Case("suite --cache-dir inside the model folder", "suite", [*suite[:-2], "--cache-dir", "{model}/cache"], 2,
             "inside an input folder"),
        Case("wsd --json the gold key file", "wsd", ["--model", "{model}", "--data-root", "{data}", "--cache-dir",
                                                     "{d}/cache", "--json", "{data}/" + GOLD], 2,
             "inside an input folder"),
        Case("report --out inside the model folder", "report", ["--model", "{model}", "--data-root", "{data}",
                                                                "--out", "{model}/report", "--cache-dir",
                                                                "{d}/cache"], 2, "inside an input folder"),
        Case("--init-from M --export-to M", t, ["--train", "{corpus}", "--out", "{d}/run", *base, "--init-from",
                                                "{exported}", "--export-to", "{exported}"], 2, "holds an input"),
        Case("--export-to inside the --init-from model", t, ["--train", "{corpus}", "--out", "{d}/run", *base,
                                                             "--init-from", "{exported}", "--export-to",
                                                             "{exported}/again"], 2, "inside an input folder"),
        Case("--out inside the --init-from model", t, ["--train", "{corpus}", "--out", "{exported}/run", *base,
                                                       "--init-from", "{exported}"], 2, "inside an input folder"),
        Case("--train corpus --out corpus (a folder)", t, ["--train", "{d}/texts", "--out", "{d}/texts", *base], 2,
             "holds an input", {"texts/c.txt": _copy_corpus}),
        Case("--out the training text's folder", t, ["--train", "{d}/texts/c.txt", "--out", "{d}/texts", *base], 2,
             "holds an input", {"texts/c.txt": _copy_corpus}),
        Case("--out inside the training folder", t, ["--train", "{d}/texts", "--out", "{d}/texts/run", *base], 2,
             "inside an input folder", {"texts/c.txt": _copy_corpus}),
        Case("--init-from a model whose softmax.npz is cut short", t, ["--train", "{corpus}", "--out", "{d}/run",
                                                                        *base, "--init-from", "{d}/m"], 2,
             "softmax.npz: damaged", {"m": _cut_softmax}, ("run", "run/*", "run/")),
        Case("a resume after vocab.txt was edited", t, ["--train", "{corpus}", "--out", "{d}/run", *TINY_TRAIN,
                                                        "--max-steps", "2", "--no-export"], 2,
             "vocab.txt was edited or replaced: restore it to resume (the checkpoint is intact)",
             {"run": _run_with_an_edited_vocabulary}, ("run/train_config.json",)),
        Case("--device meta", t, ["--train", "{corpus}", "--out", "{d}/run", *base, "--device", "meta"], 2,
             "--device meta: the biLM runs on cpu or cuda"),
        Case("--device cuda:3 on a machine without it", t, ["--train", "{corpus}", "--out", "{d}/run", *base,
                                                             "--device", "cuda:3"], 2, "--device cuda:3"),
        Case("suite --out in a folder it may not write", "suite", [*suite, "--out", "{d}/ro/results.json"], 2,
             "is not writable", {"ro/keep.txt": "kept\n"}),
        Case("wsd --json in a folder it may not write", "wsd", ["--model", "{model}", "--data-root", "{data}",
                                                                "--cache-dir", "{d}/cache", "--json",
                                                                "{d}/ro/wsd.json"], 2, "is not writable",
             {"ro/keep.txt": "kept\n"}),
        Case("an output in a folder it may not write", e, ["{d}/in.txt", "{d}/ro/o.hdf5", *m], 2, "is not writable",
             {**text, "ro/keep.txt": "kept\n"}),
        Case("model_card on a model in a folder it may not write", "model_card", ["{d}/ro/m", "--skip-perplexity"],
             2, "is not writable", {"ro/m": _copy_exported}),
        *_data_root_cases(suite),
    ]


def _data_root_cases(suite: list[str]) -> list[Case]:
    """``--data-root`` given a file (or a path under one), on every command that takes it: the
    embedder used it silently, ``status`` listed every dataset missing (exit 0), ``download`` gave
    a NotADirectoryError traceback, the others ran until a dataset was missing and then offered a
    download into the file."""
    root, says = {"root": "a file, not a folder\n"}, "is a file, not a folder"
    cache = ["--cache-dir", "{d}/cache"]
    rows = [("embedder", ["{d}/in.txt", "{d}/o.hdf5", "--model", "{model}"]),
            ("report", ["--model", "{model}", "--out", "{d}/report", *cache]),
            ("data", ["status"]),
            ("information", ["--model", "{model}", "--out", "{d}/info.json", *cache]),
            ("suite", [*suite[:suite.index("--data-root")], "--out", "{d}/s.json", *cache]),
            ("wsd", ["--model", "{model}", "--json", "{d}/wsd.json", *cache]),
            ("static", ["train-word2vec", "--out", "{d}/w.npz", "--max-tokens", "2000"]),
            ("build_punkt", ["--out", "{d}/punkt"])]
    cases = [Case(f"--data-root a file ({command})", command, [*argv, "--data-root", "{d}/root"], 2, says,
                  {**root, "in.txt": TEXT}) for command, argv in rows]
    cases.append(Case("--data-root under a file (download)", "data", ["download", "conll2000", "--data-root",
                                                                      "{d}/root/sub"], 2, says, root))
    return cases


CASES = _cases()


def _make(files: dict, world: World, d: Path) -> None:
    for relative, content in files.items():
        path = d / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if callable(content):
            content(world, d, relative)
        else:
            path.write_text(content, encoding="utf-8")


def _hashes(folder: Path, outputs: tuple[str, ...] = ()) -> dict[str, str]:
    """sha256 of every file under ``folder``, and every folder (a refusal makes none), but ``outputs``."""
    found = {}
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if path.is_symlink() or any(relative.match(pattern) for pattern in outputs):
            continue
        if path.is_dir():
            found[f"{relative}/"] = "folder"
        elif path.is_file():
            found[str(relative)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _run(command: str, argv: list[str], capsys) -> tuple[int | None, str, str, str | None]:
    capsys.readouterr()
    crash = None
    try:
        code = MAINS[command](argv)
    except SystemExit as stop:
        code = stop.code if isinstance(stop.code, int) else 2
    except BaseException:  # noqa: BLE001 -- a traceback is what the sweep looks for
        code, crash = None, traceback.format_exc()
    out, err = capsys.readouterr()
    return code, out, err, crash


def _read_only(d: Path, monkeypatch) -> None:
    """``d/ro`` as a read-only folder is to its writers (the tests run as root, whom a mode of 0o555
    does not stop): ``os.access`` says no for it, as it does on a read-only bind or file system."""
    real_access = os.access
    folder = str(d / "ro")
    monkeypatch.setattr(io_safety.os, "access", lambda path, mode, *a, **k: False if str(path).startswith(folder)
                        and mode & os.W_OK else real_access(path, mode, *a, **k))


@pytest.mark.parametrize("case", [pytest.param(c, id=f"{c.command}: {c.name}") for c in CASES])
def test_guard(case: Case, world: World, tmp_path: Path, capsys, monkeypatch):
    d = tmp_path / "case"
    d.mkdir()
    _make(case.files, world, d)
    _read_only(d, monkeypatch)
    names = {"d": d, "model": world.model, "exported": world.exported, "corpus": world.corpus, "data": world.data}
    argv = [arg.format(**names) for arg in case.argv]
    watched = {"model": world.model, "exported": world.exported, "data": world.data, "corpus": world.corpus.parent,
               "case": d}
    before = {name: _hashes(folder, case.outputs) for name, folder in watched.items()}
    try:
        code, out, err, crash = _run(case.command, argv, capsys)
        after = {name: _hashes(folder, case.outputs) for name, folder in watched.items()}
    finally:
        _put_back(world.root, world.made)
    for name in before:
        lost = [f for f, digest in before[name].items() if after[name].get(f) != digest]
        assert not lost, f"lost file: {name}: {lost} changed or went missing"
    assert crash is None, f"traceback for {argv}:\n{crash}"
    assert "Traceback" not in err, "traceback: " + err[-3000:]
    for name in before:
        added = sorted(set(after[name]) - set(before[name]))
        assert not added, f"wrong output: {name}: {added} written where nothing should be"
    assert code == case.code, ("wrong output" if code == 0 else "unclear", code, out[-1500:], err[-1500:])
    lines = [line for line in err.splitlines() if line.startswith("error:") or ": error: " in line]
    assert len(lines) == 1, "unclear: " + err[-3000:]
    assert case.says in lines[0], "unclear: " + lines[0]


# --------------------------------------------------------------------------------------------
# The Python API and what a row cannot say
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["lm_weights.hdf5", "options.json", "weights.hdf5"])
@pytest.mark.parametrize("how", ["folder", "pair"])
def test_the_api_never_writes_into_the_model_it_embeds_with(world, tmp_path, target, how):
    """``ElmoEmbedder(M).embed_file("in.txt", "M/lm_weights.hdf5")``: the command line refused
    this, the API wrote over the model. Now the API refuses it (and a new file in the model's
    folder) before any work, by model folder or by AllenNLP's (options, weights) pair."""
    (tmp_path / "in.txt").write_text(TEXT, encoding="utf-8")
    embedder = (ElmoEmbedder(world.model, precision="fp32") if how == "folder" else
                ElmoEmbedder(world.model / "options.json", world.model / "lm_weights.hdf5", precision="fp32"))
    before = _hashes(world.model)
    try:
        with pytest.raises(ValueError, match="input"):
            embedder.embed_file(tmp_path / "in.txt", world.model / target)
        assert _hashes(world.model) == before
    finally:
        _put_back(world.root, world.made)
    assert embedder.embed_file(tmp_path / "in.txt", tmp_path / "o.hdf5").is_file()


def test_a_second_trainer_exporting_into_the_same_folder_stops_before_it_trains(world, tmp_path, capsys):
    """Two trainers with one ``--export-to``: B's weights went beside A's vocabulary and softmax,
    and the mix loaded without complaint. The export folder is claimed for the whole run."""
    export = tmp_path / "shared_export"
    with io_safety.output_lock(export, what="export folder"):  # run A, still training
        code, out, err, crash = _run("train", ["--train", str(world.corpus), "--out", str(tmp_path / "b"),
                                               *TINY_TRAIN, "--max-steps", "1", "--export-to", str(export)], capsys)
    assert crash is None and code == 2, (code, err[-2000:])
    assert "another run" in err and "export folder" in err
    assert not export.exists() and not (tmp_path / "b" / "checkpoint.pt").exists()


@pytest.mark.parametrize("failure, says", [(errno.EACCES, "permission denied"), (errno.EROFS, "writable disk"),
                                           (errno.ENOSPC, "free space")])
def test_a_lock_file_that_cannot_be_made_is_one_line(tmp_path, monkeypatch, failure, says):
    """A stale lock owned by another user (EACCES), a read-only folder, a full disk: the lock
    was a traceback; now one ``ValueError`` naming the lock file and what to do."""
    real_open = os.open

    def refuse(path, flags, *args, **kwargs):
        if str(path).endswith(".lock"):
            raise OSError(failure, os.strerror(failure), str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(io_safety.os, "open", refuse)
    with pytest.raises(ValueError, match=says) as caught:
        with io_safety.output_lock(tmp_path / "o.hdf5"):
            pass
    assert "o.hdf5.lock" in str(caught.value)


def test_a_symlinked_lock_never_writes_into_its_target(tmp_path):
    """Every lock goes through ``output_lock``: a ``.lock`` that is a link to an input used to
    be followed and the input became ``pid N``."""
    victim = tmp_path / "input.txt"
    victim.write_text("precious\n", encoding="utf-8")
    os.symlink(victim, tmp_path / "o.lock")
    with pytest.raises(ValueError, match="symbolic link"):
        with io_safety.output_lock(tmp_path / "o"):
            pass
    assert victim.read_text(encoding="utf-8") == "precious\n"
    with io_safety.output_lock(tmp_path / "p"):  # an ordinary lock still works, and goes away after
        assert (tmp_path / "p.lock").read_text().startswith("pid ")
    assert not (tmp_path / "p.lock").exists()


def test_the_sweep_of_guards_covers_its_classes():
    """Rows for every command that writes beside a model, a dataset or a corpus."""
    assert {case.command for case in CASES} == set(MAINS)
    assert len({case.name for case in CASES}) == len(CASES)


def test_a_folder_named_like_the_shipped_model_never_moves_the_guard(tmp_path, monkeypatch, capsys):
    """A folder ``elmo-mini`` of the user's in the working directory: the output check guarded that
    folder while the loader loaded the shipped model, so an output inside the shipped model's folder
    passed. One resolver decides for both: the shipped folder is the input, and is refused."""
    shipped = Path(__file__).resolve().parents[1] / "data" / "models" / "elmo-mini"
    (tmp_path / "elmo-mini").mkdir()
    (tmp_path / "elmo-mini" / "notes.txt").write_text("mine\n", encoding="utf-8")
    (tmp_path / "in.txt").write_text(TEXT, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    before, target = _hashes(shipped), shipped / "sentences.hdf5"
    try:
        code, _out, err, crash = _run("embedder", ["in.txt", str(target), "--model", "elmo-mini"], capsys)
    finally:  # a failing run must not leave its output in the checkout
        for leftover in (target, target.with_name(target.name + ".lock"), target.with_name(target.name + ".partial")):
            leftover.unlink(missing_ok=True)
    assert crash is None and code == 2, (code, err[-2000:], crash)
    assert "inside an input folder" in err and _hashes(shipped) == before
    assert (tmp_path / "elmo-mini" / "notes.txt").read_text(encoding="utf-8") == "mine\n"


@pytest.mark.parametrize("command", ["embedder", "train"])
def test_an_output_name_too_long_for_the_files_beside_it_is_refused_before_any_work(world, tmp_path, capsys,
                                                                                    monkeypatch, command):
    """An output whose ``.partial`` (the embedder) or ``.lock`` (``--export-to``) would pass the
    file system's 255 bytes: an OSError traceback, or a refusal, after the model had loaded. Now
    the path check refuses it first, in one line, and nothing is loaded, trained or written."""
    def no_work(*args, **kwargs):
        raise AssertionError("the work started")

    (tmp_path / "in.txt").write_text(TEXT, encoding="utf-8")
    if command == "embedder":
        monkeypatch.setattr("elmo_model.corpus.embedder.ElmoEmbedder", no_work)
        argv = [str(tmp_path / "in.txt"), str(tmp_path / ("o" * 243 + ".hdf5")), "--model", str(world.model)]
    else:
        monkeypatch.setattr(train_cli, "Trainer", no_work)
        argv = ["--train", str(world.corpus), "--out", str(tmp_path / "run"), *TINY_TRAIN, "--export-to",
                str(tmp_path / ("e" * 252))]
    code, _out, err, crash = _run(command, argv, capsys)
    assert crash is None and code == 2, (code, err[-2000:], crash)
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert "the name is too long" in line and "choose a name of at most 239 bytes" in line, line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.txt"]


def test_training_text_from_a_pipe_is_refused_before_anything_is_written(world, tmp_path):
    """``--train /dev/stdin`` with the text piped in: the check read part of the pipe, the
    vocabulary the rest, and the run stopped blaming the text ("not one training batch"), with
    train_config.json and a vocabulary of half the text written. The trainer reads its text more
    than once, so a pipe is refused in one line saying so, before anything is written."""
    import subprocess
    import sys

    from elmo_model.training.lm_data import expand_inputs

    run = tmp_path / "run"
    done = subprocess.run([sys.executable, "-m", "elmo_model.training.train", "--train", "/dev/stdin", "--out",
                           str(run), *TINY_TRAIN, "--max-steps", "1"], input=world.corpus.read_bytes(),
                          capture_output=True, timeout=300, cwd=Path(__file__).resolve().parents[1],
                          env={**os.environ, "TQDM_DISABLE": "1", "OMP_NUM_THREADS": "1"}, check=False)
    err = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 2 and "Traceback" not in err, err[-3000:]
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert "/dev/stdin: a pipe, not a regular file" in line and "more than once" in line, line
    assert not run.exists() or not any(run.iterdir())
    fifo = tmp_path / "named.txt"  # a named pipe, found by a glob: refused without being opened
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match=r"named\.txt: a pipe, not a regular file"):
        expand_inputs([str(tmp_path / "*.txt")])
