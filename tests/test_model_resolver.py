"""One rule says which folder a model name means: the loader, the output checks and the app's
model card all follow it, also when the working directory has a folder of the same name."""

import ast
import dataclasses
import logging
import shutil
from pathlib import Path

import pytest

from elmo_model.corpus.embedder import main as embedder_main
from elmo_model.models.names import MODELS_DIR, model_card_rows, model_files, model_place, resolve_model
from elmo_model.models.published import PUBLISHED_MODELS
from elmo_model.models.registry import load_bilm
from elmo_model.plumbing.io_safety import check_output_dir, check_output_path

PROJECT = Path(__file__).resolve().parents[1]


def _model_folder(folder: Path, fixture: Path) -> Path:
    """A loadable model folder: bilm-tf's test model as options.json + weights.hdf5."""
    folder.mkdir(parents=True)
    shutil.copyfile(fixture / "options.json", folder / "options.json")
    shutil.copyfile(fixture / "lm_weights.hdf5", folder / "weights.hdf5")
    return folder


@pytest.fixture
def decoys(tmp_path, data_root, monkeypatch):
    """A data root holding a 'downloaded' elmo-small, and a working directory (the current one for
    the test) with loadable folders named elmo-mini and elmo-small that the names must not mean."""
    fixture = data_root / "fixtures" / "bilm_tf"
    # elmo-small's entry given the fixture's dimensions: a copy is used under a name only if it has them
    monkeypatch.setitem(PUBLISHED_MODELS, "elmo-small", dataclasses.replace(
        PUBLISHED_MODELS["elmo-small"], lstm_dim=64, projection_dim=16, n_highway=2,
        char_filters=((1, 4), (2, 8), (3, 16), (4, 32), (5, 64)), char_embedding_dim=4))
    root = tmp_path / "root"
    _model_folder(root / "models" / "elmo-small", fixture)
    work = tmp_path / "work"
    for name in ("elmo-mini", "elmo-small"):
        _model_folder(work / name, fixture)
    monkeypatch.chdir(work)
    return root, work


@pytest.mark.parametrize("name, in_root", [("elmo-mini", False), ("elmo-small", True)])
def test_the_loader_and_the_output_check_see_the_same_files_of_a_name(decoys, name, in_root, caplog):
    """With a folder named like the model in the working directory, the files the output check
    protects are the files the loader loads (the shipped elmo-mini; elmo-small from the data root),
    and an output over them is refused. Run against the output check that protected the working
    directory's folder instead: the loaded weights were not among the inputs."""
    root, work = decoys
    data_root = root if in_root else None
    expected = (root / "models" / name) if in_root else MODELS_DIR / name
    files = resolve_model(name, data_root)
    with caplog.at_level(logging.WARNING, logger="elmo_model.models.names"):
        model = load_bilm(name, data_root=data_root)
    protected = model_files(name, data_root)
    assert {files.options, files.weights} <= set(protected)
    assert not [p for p in protected if (work / name).resolve() in (p.resolve(), p.resolve().parent)]
    assert Path(model.source) == files.weights and files.weights.parent.resolve() == expected.resolve()
    assert f"the folder {(work / name).resolve()} in the working directory is not read" in caplog.text
    with pytest.raises(ValueError, match="is also an input"):
        check_output_path(model.source, protected, flag="--out")
    with pytest.raises(ValueError, match="holds an input"):
        check_output_dir(files.weights.parent, protected, flag="--out")
    assert model_place(name, data_root).directory == files.directory == files.weights.parent


def test_a_command_refuses_to_write_over_the_published_model_it_would_load(decoys, monkeypatch, capsys):
    """``elmo-embed --model elmo-small`` with a folder elmo-small in the working directory: the
    output named as the data root's weight file (the one it loads) is refused before any work.
    Run against the check that protected the working directory's folder: it embedded and wrote
    over the weights."""
    root, work = decoys
    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(root))
    weights = root / "models" / "elmo-small" / "weights.hdf5"
    before = weights.read_bytes()
    (work / "in.txt").write_text("the bank of the river\n", encoding="utf-8")
    assert embedder_main(["in.txt", str(weights), "--model", "elmo-small"]) == 2
    assert "is also an input" in capsys.readouterr().err
    assert weights.read_bytes() == before


def test_a_folder_named_like_a_model_is_opened_as_a_path(decoys):
    """``./elmo-mini`` (or an absolute path) is the working directory's folder, for the loader and
    the output check alike; the bare name stays the shipped model."""
    _, work = decoys
    for spec in ("./elmo-mini", "elmo-mini/", str(work / "elmo-mini")):
        files = resolve_model(spec)
        assert files.weights.resolve() == (work / "elmo-mini" / "weights.hdf5").resolve()
        assert Path(load_bilm(spec).source).resolve() == files.weights.resolve()
        assert {p.resolve() for p in model_files(spec)} == {files.directory.resolve(), files.options.resolve(),
                                                             files.weights.resolve()}
    assert resolve_model("elmo-mini").directory == MODELS_DIR / "elmo-mini"


def test_the_model_card_describes_the_folder_the_loader_opens(decoys):
    """The sidebar's card rows follow the same rule: the shipped folder for elmo-mini, the registry
    entry (and where it is on disk) for a published name, the folder for a path."""
    root, work = decoys
    assert model_card_rows("elmo-mini")["folder"] == str(MODELS_DIR / "elmo-mini")
    rows = model_card_rows("elmo-small", root)
    assert rows["on disk"] == str((root / "models" / "elmo-small").resolve()) and "AllenNLP name" in rows
    assert model_card_rows("./elmo-small")["folder"] == "elmo-small"
    assert "not downloaded" in model_card_rows("elmo-medium", root)["on disk"]


def test_a_name_that_is_no_model_is_a_folder_in_the_working_directory(decoys):
    """A bare name that is neither shipped nor published is a path, as it always was."""
    _, work = decoys
    (work / "elmo-mini").rename(work / "my-run")
    assert resolve_model("my-run").weights.resolve() == (work / "my-run" / "weights.hdf5").resolve()
    assert len(model_files("my-run")) == 3  # the folder and its two files
    with pytest.raises(ValueError, match="no such shipped model"):
        resolve_model("no-such-run")
    assert model_files("no-such-run") == []


def test_plumbing_imports_nothing_of_the_project():
    """plumbing < bilm < models: the output checks take the model's files from their callers."""
    found = []
    for path in sorted((PROJECT / "elmo_model" / "plumbing").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level > 1 or (node.module or "").startswith("elmo_model")):
                found.append(f"{path.name}:{node.lineno}")
            elif isinstance(node, ast.Import) and any(a.name.startswith(("elmo_model", "probing")) for a in node.names):
                found.append(f"{path.name}:{node.lineno}")
    assert not found, found


def test_a_folder_given_as_a_folder_is_never_taken_for_a_name(tmp_path, monkeypatch):
    """An export to ./elmo-mini, read back as ``Path("elmo-mini")`` (pathlib drops the ``./``):
    the language model and the model card's check load that folder's biLM, not the shipped one."""
    from elmo_model.training.model_card import model_problem
    from elmo_model.training.language_model import load_language_model

    export = tmp_path / "elmo-mini"
    export.mkdir()
    for item in (MODELS_DIR / "elmo-mini").iterdir():
        (export / item.name).symlink_to(item)
    monkeypatch.chdir(tmp_path)
    lm, _ = load_language_model(Path("elmo-mini"))
    assert Path(lm.bilm.source).parent == export.resolve()
    (export / "weights.hdf5").unlink()
    assert "no weight file" in model_problem(Path("elmo-mini"))


def test_every_model_card_names_its_weights_licence():
    """The shipped elmo-mini's card and each published model's card say under which licence the
    weights are given, as the code's LICENSE does for the code (Apache-2.0)."""
    from elmo_model.models.published import PUBLISHED_MODELS

    assert "Apache License" in (PROJECT / "LICENSE").read_text() and "Version 2.0" in (PROJECT / "LICENSE").read_text()
    assert model_card_rows("elmo-mini")["licence"].startswith("Apache-2.0")
    for name in PUBLISHED_MODELS:
        assert model_card_rows(name)["licence"].startswith("Apache 2.0")
    pyproject = (PROJECT / "pyproject.toml").read_text()
    assert 'license = "Apache-2.0"' in pyproject and 'license-files = ["LICENSE"]' in pyproject
