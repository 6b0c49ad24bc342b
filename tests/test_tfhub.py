"""TF Hub ELMo modules (elmo_model.models.tfhub, elmo_model.models.tensor_bundle): a module written by
TensorFlow (tests/fixtures/tfhub_elmo, made by tests/fixtures/write_tfhub_fixture.py from bilm-tf's test
biLM) is read without TensorFlow, converted into the AllenNLP layout, and computes bilm-tf's own
numbers; load_bilm and hub.Module open the module folder directly; damaged or foreign files are
refused in one line."""

import json
import shutil
import tarfile
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from elmo_model import hub
from elmo_model.bilm.char_ids import batch_to_char_ids
from elmo_model.models import tfhub
from elmo_model.models.registry import load_bilm
from elmo_model.models.tensor_bundle import read_bundle

MODULE = Path(__file__).parent / "fixtures" / "tfhub_elmo"


@pytest.fixture(scope="module")
def bilm_tf(data_root):
    return data_root / "fixtures" / "bilm_tf"


@pytest.fixture(scope="module")
def converted(tmp_path_factory, bilm_tf):
    """The module converted with the one setting bilm-tf's test biLM has that published modules do not."""
    return tfhub.convert_module(MODULE, tmp_path_factory.mktemp("tfhub") / "model", use_skip_connections=False)


def test_the_reader_gives_the_variables_tensorflow_saved(bilm_tf):
    bundle = read_bundle(MODULE / "variables" / "variables")
    with h5py.File(bilm_tf / "lm_weights.hdf5", "r") as f:
        char_embed = f["char_embed"][...]
        kernel = f["RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_0"][...]
    assert np.array_equal(bundle.arrays["bilm/char_embed"][1:], char_embed)
    assert not bundle.arrays["bilm/char_embed"][0].any()  # the graph's padding row
    assert np.array_equal(bundle.arrays["bilm/RNN_1/RNN/MultiRNNCell/Cell1/rnn/lstm_cell/kernel"], kernel)
    assert bundle.arrays["aggregation/scaling"].shape == () and bundle.skipped == {}


def test_the_converted_module_has_the_weight_file_and_sizes_of_bilm_tf(converted, bilm_tf):
    with h5py.File(bilm_tf / "lm_weights.hdf5", "r") as want, h5py.File(converted / "weights.hdf5", "r") as got:
        names = _datasets(want)
        assert sorted(names) == sorted(_datasets(got))
        for name in names:
            assert np.array_equal(want[name][...], got[name][...]), name
    options = json.loads((converted / "options.json").read_text())
    reference = json.loads((bilm_tf / "options.json").read_text())
    for part in ("lstm", "char_cnn"):
        for key, value in reference[part].items():
            assert options[part][key] == value, (part, key)
    card = json.loads((converted / "model_card.json").read_text())
    assert "use_skip_connections" not in card["settings_assumed"] and "cell_clip" in card["settings_assumed"]


def _datasets(group, prefix=""):
    out = []
    for key, item in group.items():
        out += _datasets(item, f"{prefix}{key}/") if isinstance(item, h5py.Group) else [f"{prefix}{key}"]
    return out


def test_the_converted_module_computes_bilm_tfs_numbers(converted, bilm_tf):
    """bilm-tf's own test (stateful, the i-th sentence of each list in batch i, in order)."""
    model = load_bilm(converted)
    model.stateful = True
    lists = json.loads((bilm_tf / "lm_embeddings_sentences.json").read_text())
    expected = [h5py.File(bilm_tf / f"lm_embeddings_{k}.hdf5", "r") for k in range(3)]
    worst = 0.0
    with torch.no_grad():
        for i in range(10):
            batch = [lists[k][i].split() for k in range(3)]
            top = model(batch_to_char_ids(batch)).layers[-1].numpy()
            for k, sentence in enumerate(batch):
                e = expected[k][str(i)][...]
                worst = max(worst, float(np.abs(top[k, : len(sentence)] - np.concatenate([e[0], e[1]], -1)).max()))
    assert worst <= 1e-5, worst


def test_load_bilm_and_hub_open_a_module_folder_converting_it_once(tmp_path, monkeypatch):
    monkeypatch.setenv("ELMO_WORKBENCH_MODELS", str(tmp_path / "home"))
    module = shutil.copytree(MODULE, tmp_path / "my-module")
    model = load_bilm(module)
    (copy,) = (tmp_path / "home" / "converted").iterdir()
    made = (copy / "weights.hdf5").stat().st_mtime_ns
    assert load_bilm(module).config == model.config and (copy / "weights.hdf5").stat().st_mtime_ns == made
    assert model.config.lstm.use_skip_connections  # the published modules' setting, assumed and recorded
    assert "use_skip_connections" in json.loads((copy / "model_card.json").read_text())["settings_assumed"]
    elmo = hub.Module(str(module))
    assert torch.allclose(elmo.mix.scalar_parameters, torch.tensor([0.1, -0.2, 0.3]))  # the module's own mix
    assert float(elmo.mix.gamma) == pytest.approx(1.5)
    out = elmo(["the cat sat", "a dog"], signature="default", as_dict=True)
    assert out["elmo"].shape == (2, 3, 32) and torch.isfinite(out["elmo"]).all()


def test_an_existing_model_folder_is_never_replaced(converted, capsys):
    before = (converted / "weights.hdf5").read_bytes()
    assert tfhub.main([str(MODULE), str(converted)]) == 2
    assert "holds files already" in capsys.readouterr().err
    assert (converted / "weights.hdf5").read_bytes() == before


@pytest.mark.parametrize("damage", ["cut data", "cut index", "not a module"])
def test_damaged_or_foreign_folders_are_refused_in_one_line(tmp_path, damage):
    module = shutil.copytree(MODULE, tmp_path / "module")
    data = module / "variables" / "variables.data-00000-of-00001"
    if damage == "cut data":
        data.write_bytes(data.read_bytes()[:1000])
        match = "cut short or damaged"
    elif damage == "cut index":
        index = module / "variables" / "variables.index"
        index.write_bytes(index.read_bytes()[:-10])
        match = "not a TensorFlow checkpoint index"
    else:
        shutil.rmtree(module / "variables")
        match = "not a TF Hub module"
    with pytest.raises(ValueError, match=match) as err:
        tfhub.convert_module(module, tmp_path / "out")
    assert "\n" not in str(err.value) and not (tmp_path / "out").exists()
    assert not list(tmp_path.glob(".converting-*"))


def test_variables_of_another_network_are_named(tmp_path):
    arrays = read_bundle(MODULE / "variables" / "variables").arrays
    foreign = {k.replace("bilm/", "encoder/"): v for k, v in arrays.items()}
    with pytest.raises(ValueError, match="no ELMo biLM in this module"):
        tfhub.weight_file_arrays(foreign, "m")
    older = {k.replace("rnn/lstm_cell/kernel", "LSTMCell/W_0").replace("rnn/lstm_cell/bias", "LSTMCell/B")
             .replace("rnn/lstm_cell/projection/kernel", "LSTMCell/W_P_0"): v for k, v in arrays.items()}
    new, sizes = tfhub.weight_file_arrays(older, "m")  # an older graph's names for the same cell
    assert sizes["lstm"] == {"dim": 64, "projection_dim": 16, "n_layers": 2} and len(new) == 33


@pytest.mark.parametrize("layout", ["files at the top", "in one folder"])
def test_a_module_archive_as_tf_hub_serves_it_is_converted_and_loaded(tmp_path, monkeypatch, layout, converted):
    archive = tmp_path / "elmo_3.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(MODULE, arcname="." if layout == "files at the top" else "elmo")
    out = tfhub.convert_module(archive, tmp_path / "out", use_skip_connections=False)
    assert (out / "weights.hdf5").read_bytes() == (converted / "weights.hdf5").read_bytes()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # the unpacked copy is gone
    monkeypatch.setenv("ELMO_WORKBENCH_MODELS", str(tmp_path / "home"))
    assert load_bilm(archive).config.lstm.n_layers == 2
    assert [p.name.split("-")[0] for p in (tmp_path / "home" / "converted").iterdir()] == ["elmo_3"]


def test_an_archive_reaching_outside_itself_is_refused(tmp_path):
    archive = tmp_path / "evil.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(MODULE / "saved_model.pb", arcname="../saved_model.pb")
    with pytest.raises(ValueError, match="not a readable module archive"):
        tfhub.convert_module(archive, tmp_path / "out")
    assert not (tmp_path.parent / "saved_model.pb").exists() and not (tmp_path / "out").exists()


def test_the_app_opens_on_a_module_folder(tmp_path, data_root, monkeypatch):
    """The Playground on a TF Hub module folder: converted once into the models home, then embedded."""
    from streamlit.testing.v1 import AppTest

    module = shutil.copytree(MODULE, tmp_path / "tfhub-module")
    for name, value in {"ELMO_WORKBENCH_MODEL": module, "ELMO_WORKBENCH_DATA": data_root,
                        "ELMO_WORKBENCH_CACHE": tmp_path / "cache", "ELMO_WORKBENCH_MODELS": tmp_path / "home"}.items():
        monkeypatch.setenv(name, str(value))
    at = AppTest.from_file(str(Path(__file__).parents[1] / "app.py"), default_timeout=240).run()
    text = ["I left money at the bank . | money", "The bank lent us money . | money",
            "We sat on the river bank . | river", "The bank of the stream was muddy . | river"]
    at.text_area(key="pg_text").set_value("\n".join(text)).run()
    at.text_input(key="pg_word").set_value("bank").run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    assert list(at.dataframe[-1].value["layer"]) == ["layer 0", "layer 1", "layer 2"]
    assert len(list((tmp_path / "home" / "converted").iterdir())) == 1
