"""ELMoForManyLangs folders (HIT-SCIR's elmoformanylangs 0.0.4.post2) load through load_bilm and
ElmoEmbedder and give the package's own Embedder's numbers. The models are small, with random
weights, built by the package's own classes and saved as its folders are."""

import json
import random
from pathlib import Path

import numpy as np
import pytest
import torch

from elmo_model import ElmoEmbedder, load_bilm
from elmo_model.models import elmoformanylangs as efml
from elmo_model.models.names import LAYOUTS_READ, model_card_rows, resolve_model

elmoformanylangs = pytest.importorskip("elmoformanylangs")
from elmoformanylangs.frontend import Model  # noqa: E402
from elmoformanylangs.modules.embedding_layer import EmbeddingLayer  # noqa: E402

MAX_CHARACTERS = 12
SENTENCES = [
    ["The", "bank", "of", "the", "river", "."],
    ["Internationalisation", "costs", "money"],  # longer than MAX_CHARACTERS - 2: cut, for the word too
    ["Café", "ßtraße", "zebra", "!"],  # non-ASCII, unknown characters (ß), an unknown word (zebra)
    ["a\u3000b", "<bos>", "x"],  # the full-width space (a one-field line of char.dic), a boundary word's spelling
    ["bank"],
]
UNKNOWN_WORDS = {"zebra", "ßtraße", "x", "a\u3000b"}
UNKNOWN_CHARACTERS = {"ß", "x"}


def _architecture(word_dim: int) -> dict:
    return {"encoder": {"name": "elmo", "projection_dim": 16, "cell_clip": 3, "proj_clip": 3, "dim": 32,
                        "n_layers": 2},
            "token_embedder": {"name": "cnn", "activation": "relu", "filters": [[1, 8], [2, 8], [3, 16]],
                               "n_highway": 1, "word_dim": word_dim, "char_dim": 12,
                               "max_characters_per_token": MAX_CHARACTERS},
            "classifier": {"name": "sampled_softmax", "n_samples": 8}, "dropout": 0.1}


def _shuffled_ids(tokens: list[str], seed: int) -> dict[str, int]:
    tokens = list(dict.fromkeys(tokens))
    ids = list(range(len(tokens)))
    random.Random(seed).shuffle(ids)  # the specials at no telling ids: a swap of two would show
    return dict(zip(tokens, ids))


def _write_dic(path: Path, vocabulary: dict[str, int]) -> None:
    path.write_text("".join(f"{token}\t{i}\n" for token, i in vocabulary.items()), encoding="utf-8")


def _efml_folder(folder: Path, word_dim: int, config_path: str = "arch.json", seed: int = 0) -> Path:
    """A random-weight model in the package's own layout, made by its own classes."""
    folder.mkdir()
    architecture = _architecture(word_dim)
    characters = sorted({c for s in SENTENCES for t in s for c in t} - UNKNOWN_CHARACTERS - {"\u3000"})
    chars = _shuffled_ids(["<bow>", "<eow>", "<bos>", "<eos>", "<oov>", "<pad>", "\u3000", *characters], seed)
    words = _shuffled_ids(["<oov>", "<pad>", "<bos>", "<eos>", *sorted({t[: MAX_CHARACTERS - 2] for s in SENTENCES
                                                                         for t in s} - UNKNOWN_WORDS)], seed + 1)
    _write_dic(folder / "char.dic", chars)  # U+3000 is written as a line of one field once stripped
    _write_dic(folder / "word.dic", words)
    (folder / Path(config_path).name).write_text(json.dumps(architecture), encoding="utf-8")
    (folder / "config.json").write_text(json.dumps({"config_path": config_path, "model": "x"}), encoding="utf-8")
    torch.manual_seed(seed)
    char_layer = EmbeddingLayer(12, chars, fix_emb=False, embs=None)
    word_layer = EmbeddingLayer(word_dim, words, fix_emb=False, embs=None) if word_dim else None
    model = Model(architecture, word_layer, char_layer, use_cuda=False)
    with torch.no_grad():
        for parameter in model.parameters():  # every weight random, at a scale that reaches the clips
            parameter.uniform_(-0.6, 0.6)
    torch.save(model.token_embedder.state_dict(), folder / "token_embedder.pkl")
    torch.save(model.encoder.state_dict(), folder / "encoder.pkl")
    return folder


def _reference(folder: Path) -> list[np.ndarray]:
    """The package's Embedder, freshly loaded, every sentence in its one (first) batch: its
    stateful encoder starts from zero there, as ours always does."""
    return elmoformanylangs.Embedder(str(folder), batch_size=64).sents2elmo(SENTENCES, output_layer=-2)


def _assert_close(ours: list[np.ndarray], theirs: list[np.ndarray]) -> float:
    largest = max(float(np.abs(t).max()) for t in theirs)
    worst = 0.0
    for sentence, a, b in zip(SENTENCES, ours, theirs):
        assert a.shape == b.shape == (3, len(sentence), 32)
        worst = max(worst, float(np.abs(a - b).max()))
    assert worst <= 1e-5 * largest, f"max difference {worst:.3g}, largest value {largest:.3g}"
    return worst


@pytest.mark.parametrize("word_dim", [20, 0])
def test_an_efml_folder_gives_the_packages_numbers(tmp_path, word_dim):
    folder = _efml_folder(tmp_path / "efml", word_dim)
    theirs = _reference(folder)
    embedder = ElmoEmbedder(str(folder))
    _assert_close([embedder.embed_sentence(s) for s in SENTENCES], theirs)  # one sentence a batch
    _assert_close(embedder.embed_batch(SENTENCES), theirs)  # padded batches
    model = load_bilm(folder)
    assert resolve_model(folder).layout == "elmoformanylangs"
    assert "ELMoForManyLangs" in model_card_rows(str(folder))["layout"]
    with torch.inference_mode():
        out = model(model.token_ids(SENTENCES))
    layers = torch.stack(out.layers, dim=1).numpy()
    _assert_close([layers[i, :, : len(s)] for i, s in enumerate(SENTENCES)], theirs)


def test_the_quirks_each_matter(tmp_path):
    """The cut, the swapped <bow>/<eow> and the word branch's place change the numbers: the
    equivalence above is not an accident of a model that ignores them."""
    folder = _efml_folder(tmp_path / "efml", 20)
    model = load_bilm(folder)
    vocabulary = model.vocabulary
    row = vocabulary.row("Internationalisation")
    assert row[-1] == vocabulary.words["Internatio"] + 1  # the word looked up after the cut
    assert row[0] == vocabulary.chars["<eow>"] + 1 and row[MAX_CHARACTERS - 1] == vocabulary.chars["<bow>"] + 1
    assert vocabulary.row("zebra")[-1] == vocabulary.words["<oov>"] + 1
    assert vocabulary.row("ß")[1] == vocabulary.chars["<oov>"] + 1
    assert vocabulary.row("a\u3000b")[2] == vocabulary.chars["\u3000"] + 1
    with torch.inference_mode():
        reference = model(model.token_ids(SENTENCES)).layers[2]
        ids = model.token_ids(SENTENCES)
        begin, end = vocabulary.begin + 1, vocabulary.end + 1
        characters = ids[..., :-1]
        characters = torch.where(characters == begin, end, torch.where(characters == end, begin, characters))
        unswapped = torch.cat([characters, ids[..., -1:]], dim=-1)  # <bow> first, as the names say
        assert (model(unswapped).layers[2] - reference).abs().max() > 1e-3


def test_bilm_tf_ids_are_refused_in_one_line(tmp_path):
    from elmo_model.bilm.char_ids import batch_to_char_ids

    model = load_bilm(_efml_folder(tmp_path / "efml", 20))
    with pytest.raises(ValueError, match="ELMoForManyLangs model's token_ids") as err:
        model(batch_to_char_ids(SENTENCES))
    assert "\n" not in str(err.value)


def test_the_architecture_is_found_where_the_package_finds_it(tmp_path):
    # an absolute path from the machine it was trained on: the folder's file of that basename
    folder = _efml_folder(tmp_path / "moved", 20, config_path="/home/someone/configs/arch.json")
    architecture, source = efml.read_architecture(folder)
    assert Path(source) == folder / "arch.json" and architecture == _architecture(20)
    _assert_close(ElmoEmbedder(str(folder)).embed_batch(SENTENCES), _reference(folder))
    # not in the folder: the package's own file of that name, which ours equals
    package_configs = Path(elmoformanylangs.__file__).parent / "configs"
    for name, ours in efml.DEFAULT_ARCHITECTURES.items():
        bare = tmp_path / name
        bare.mkdir()
        (bare / "config.json").write_text(json.dumps({"config_path": f"../configs/{name}"}))
        architecture, source = efml.read_architecture(bare)
        assert architecture == ours == json.loads((package_configs / name).read_text())
    unknown = tmp_path / "unknown"
    unknown.mkdir()
    (unknown / "config.json").write_text(json.dumps({"config_path": "mine.json"}))
    with pytest.raises(ValueError, match="neither in the folder nor one of the package's own"):
        efml.read_architecture(unknown)


def test_a_folder_of_no_known_layout_gets_one_line_naming_the_layouts(tmp_path):
    folder = tmp_path / "something"
    folder.mkdir()
    (folder / "notes.txt").write_text("hello")
    with pytest.raises(ValueError, match="holds no model of a layout read here") as err:
        load_bilm(folder)
    message = str(err.value)
    assert "\n" not in message and LAYOUTS_READ in message
    assert "options.json" in LAYOUTS_READ and "ELMoForManyLangs" in LAYOUTS_READ and "encoder.pkl" in LAYOUTS_READ


def test_a_damaged_efml_folder_is_one_line(tmp_path):
    folder = _efml_folder(tmp_path / "efml", 20)
    (folder / "encoder.pkl").write_bytes(b"not a pickle")
    with pytest.raises(ValueError, match="encoder.pkl: not a readable PyTorch state dict") as err:
        load_bilm(folder)
    assert "\n" not in str(err.value)
    other = _efml_folder(tmp_path / "other", 20, seed=1)
    architecture = json.loads((other / "arch.json").read_text())
    architecture["encoder"]["dim"] = 24
    (other / "arch.json").write_text(json.dumps(architecture))
    with pytest.raises(ValueError, match="the architecture implies"):
        load_bilm(other)


def test_the_activation_cache_and_hub_module_ask_the_model_for_its_ids(tmp_path):
    from elmo_model import hub
    from probing.engine.activations import extract_activations

    folder = _efml_folder(tmp_path / "efml", 20)
    theirs = _reference(folder)
    cache = extract_activations(load_bilm(folder), SENTENCES, "efml-test", "train", cache_dir=tmp_path / "cache")
    _assert_close([cache.sentence(i) for i in range(len(SENTENCES))], theirs)
    top = hub.Module(str(folder)).embed(SENTENCES)["lstm_outputs2"]
    _assert_close([np.stack([t[0], t[1], np.asarray(top[i, : len(s)])])
                   for i, (s, t) in enumerate(zip(SENTENCES, theirs))], theirs)


@pytest.mark.parametrize("inner", ["", "zh.model/"])  # files at the archive's top, or in one folder
def test_an_efml_zip_opens_as_its_folder_unzipped_once(tmp_path, inner, own_models_home):
    import zipfile

    folder = _efml_folder(tmp_path / "efml", 20)
    archive = tmp_path / "179.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in folder.iterdir():
            zipped.write(path, inner + path.name)
    reference = ElmoEmbedder(str(folder)).embed_batch(SENTENCES)
    for _ in range(2):  # unzipped once, then read from the unzipped copy
        assert resolve_model(archive).layout == "elmoformanylangs"
        for a, b in zip(reference, ElmoEmbedder(str(archive)).embed_batch(SENTENCES)):
            np.testing.assert_array_equal(a, b)
    unzipped = own_models_home / "unzipped"
    assert [p.name.startswith("179-") for p in unzipped.iterdir()] == [True]  # no lock file or temporary left


def test_a_second_unzipper_waits_for_the_first_and_reads_its_folder(tmp_path, own_models_home):
    """One unzipper at a time, the NLPL archives' mechanism: a load that finds the target's lock
    held waits, then reads what the holder put there instead of extracting again."""
    import shutil
    import threading
    import zipfile

    from elmo_model.models.names import unzipped_model
    from elmo_model.plumbing.io_safety import output_lock

    folder = _efml_folder(tmp_path / "efml", 0)
    archive = tmp_path / "efml.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        for path in folder.iterdir():
            zipped.write(path, path.name)
    target = unzipped_model(archive)
    shutil.rmtree(target)
    found = []
    with output_lock(target, what="unzipped model"):
        waiting = threading.Thread(target=lambda: found.append(unzipped_model(archive)))
        waiting.start()
        waiting.join(0.5)
        assert waiting.is_alive() and not target.exists()  # it waits; it did not extract beside the holder
        shutil.copytree(folder, target)
        (target / "by-the-holder").write_text("")
    waiting.join(30)
    assert found == [target] and (target / "by-the-holder").is_file()


def test_the_app_opens_on_an_efml_folder(tmp_path, data_root, monkeypatch):
    """The Playground and the sidebar's card on an ELMoForManyLangs model (with its word embedding):
    the sentences embedded, the senses compared, no exception, the layout named on the card."""
    from streamlit.testing.v1 import AppTest

    folder = _efml_folder(tmp_path / "efml-model", word_dim=6)
    monkeypatch.setenv("ELMO_WORKBENCH_MODEL", str(folder))
    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(data_root))
    monkeypatch.setenv("ELMO_WORKBENCH_CACHE", str(tmp_path / "cache"))
    at = AppTest.from_file(str(Path(__file__).parents[1] / "app.py"), default_timeout=240).run()
    words = sorted({t for s in SENTENCES for t in s if t.isalpha() and len(t) > 2})
    word = words[0]
    text = [" ".join([word, "is", "here", "."]) + " | one", " ".join(["the", word, "went", "."]) + " | one",
            " ".join(["a", word, "sat", "."]) + " | two", " ".join(["no", word, "there", "."]) + " | two"]
    at.text_area(key="pg_text").set_value("\n".join(text)).run()
    at.text_input(key="pg_word").set_value(word).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    table = at.dataframe[-1].value
    assert list(table["layer"]) == ["layer 0", "layer 1", "layer 2"]
    captions = [c.value.replace("\\", "") for c in at.caption]  # markdown escapes removed
    assert any("efml-model" in c for c in captions), captions
