"""A model's identity (elmo_model.bilm.identity) covers everything that changes its numbers: two model
folders with one weight file and different options never share a cache, a job manifest or a
printed key."""

import json
import logging
import re
import shutil

import h5py
import pytest

from elmo_model import load_bilm
from elmo_model.bilm.identity import LEGACY_NOTE, device_class, identity_record, legacy_checksum, model_identity
from elmo_model.embedding import ElmoEmbedder
from elmo_model.plumbing.io_safety import manifest_json
from probing.engine.activations import cache_path, extract_activations, tokens_digest
from probing.tagging.suite import main as suite_main

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SENTENCES = [["The", "bank", "by", "the", "river", "."], ["She", "sat", "on", "the", "bank", "."]]


def _model_folder(fixture: dict, folder, **lstm_changes):
    """A model folder holding the fixture's weight file and its options with ``lstm_changes``."""
    folder.mkdir()
    shutil.copy(fixture["weights"], folder / "weights.hdf5")
    options = json.loads(fixture["options"].read_text())
    options["lstm"].update(lstm_changes)
    (folder / "options.json").write_text(json.dumps(options))
    return folder


@pytest.fixture
def fixture_files(data_root):
    base = data_root / "fixtures" / "bilm_tf"
    return {"weights": base / "lm_weights.hdf5", "options": base / "options.json"}


def test_two_folders_with_one_weight_file_and_other_options_share_no_suite_cache(fixture_files, data_root,
                                                                                 tmp_path, capsys):
    """The reproduction: ``probing.tagging.suite --model A ... --cache-dir C``, then ``--model B`` with
    B = A with another cell_clip. Run against the code before the identity covered the options
    (the key was the weight file's sha256): both printed ``sha256 dd04f92cd41c`` and B's
    accuracies were A's, read from A's cache, so this test failed there."""
    a = _model_folder(fixture_files, tmp_path / "A")
    b = _model_folder(fixture_files, tmp_path / "B", cell_clip=0.05)
    def suite(folder, out, cache="C"):
        return suite_main(["--model", str(folder), "--out", str(tmp_path / out), "--tasks", "pos", "--limit", "20",
                           "--no-random-bilm", "--cache-dir", str(tmp_path / cache), "--precision", "fp32", "--quiet",
                           "--layers", "1", "2", "--mix-seeds", "1", "--data-root", str(data_root)])

    printed, results = {}, {}
    for name, folder in (("A", a), ("B", b)):
        assert suite(folder, f"{name}.json") == 0
        out = capsys.readouterr().out
        printed[name] = re.search(r"model \S+ \S+ ([0-9a-f]{12})", out).group(1)
        results[name] = json.loads((tmp_path / f"{name}.json").read_text())
    assert printed["A"] != printed["B"]
    assert results["A"]["model_identity"] != results["B"]["model_identity"]
    accuracy = {name: [layer["probe"]["test"]["estimate"] for layer in r["tasks"][0]["layers"]]
                for name, r in results.items()}
    # B computed its own vectors: a cell clip of 0.05 changes every LSTM layer
    assert accuracy["A"] != accuracy["B"]
    # and B's numbers are B's: a fresh cache gives the same
    assert suite(b, "B2.json", cache="C2") == 0
    fresh = json.loads((tmp_path / "B2.json").read_text())
    assert [layer["probe"]["test"]["estimate"] for layer in fresh["tasks"][0]["layers"]] == accuracy["B"]


def test_the_identity_covers_options_precision_and_device_but_not_names(fixture_files, tmp_path):
    base = load_bilm(_model_folder(fixture_files, tmp_path / "base"))
    changed = {
        "cell_clip": load_bilm(_model_folder(fixture_files, tmp_path / "clip", cell_clip=2.5)),
        "skips": load_bilm(_model_folder(fixture_files, tmp_path / "skips", use_skip_connections=True)),
        "no proj clip": load_bilm(_model_folder(fixture_files, tmp_path / "noclip", proj_clip=None)),
    }
    identities = {model_identity(base)} | {model_identity(m) for m in changed.values()}
    assert len(identities) == 1 + len(changed)
    # names and training-only keys change no number: the same identity
    renamed = _model_folder(fixture_files, tmp_path / "renamed")
    options = json.loads((renamed / "options.json").read_text())
    options.update(name="another name", dropout=0.3, n_tokens_vocab=123)
    (renamed / "options.json").write_text(json.dumps(options, indent=4))
    assert model_identity(load_bilm(renamed)) == model_identity(base)
    # fp32: every device agrees within the stated tolerance, so no device in the key
    assert device_class(base) is None and "device" not in identity_record(base)
    with base.computing_in("bf16-emulated"):
        assert identity_record(base)["device"] == "cpu"
        bf16_identity = model_identity(base)
        # the device is read from the parameters: the same model elsewhere is another identity
        base.to("meta")
        assert identity_record(base)["device"] == "meta" and model_identity(base) != bf16_identity
    assert bf16_identity != model_identity(base)


def test_an_activation_cache_keyed_the_old_way_is_rebuilt_saying_why(fixture_files, tmp_path, caplog):
    """A cache written under the old key (the weights' sha256 alone) is not read for this model;
    the rebuild says why once. Against the old code no new key existed, so the old file was read."""
    model = load_bilm(_model_folder(fixture_files, tmp_path / "A"))
    old = cache_path(legacy_checksum(model), "demo", "test", "stateless", "float32", tokens_digest(SENTENCES), tmp_path)
    old.parent.mkdir(parents=True)
    old.write_bytes(b"an activation cache made before the identity covered the options")
    with caplog.at_level(logging.WARNING):
        cache = extract_activations(model, SENTENCES, "demo", "test", cache_dir=tmp_path)
    assert cache.path != old and cache.model_identity == model_identity(model)
    assert [r for r in caplog.records if LEGACY_NOTE in r.getMessage() and str(old) in r.getMessage()]


def test_an_embedder_partial_from_before_the_identity_starts_over_saying_why(fixture_files, tmp_path, caplog):
    """The embedder's resumable output records the model identity; a ``.partial`` whose manifest
    holds only the old weight checksum is discarded with the reason, never resumed."""
    model = load_bilm(_model_folder(fixture_files, tmp_path / "A"))
    text = tmp_path / "in.txt"
    text.write_text("\n".join(" ".join(s) for s in SENTENCES) + "\n")
    output = tmp_path / "out.hdf5"
    with h5py.File(output.with_name("out.hdf5.partial"), "w") as f:
        f.attrs["job"] = manifest_json({"model_checksum": legacy_checksum(model)})
        f.attrs["lines_done"] = 2
    with caplog.at_level(logging.WARNING):
        ElmoEmbedder(model).embed_file(text, output)
    assert any(LEGACY_NOTE in r.getMessage() for r in caplog.records)
    with h5py.File(output, "r") as f:
        assert f["0"].shape[1] == len(SENTENCES[0])
