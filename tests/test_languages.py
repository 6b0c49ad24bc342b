"""A biLM of another language: accents, non-Latin scripts and a script written without spaces
(given as tokens separated by spaces), through the character ids, the tokenizer, the embedder, the
model's language and the app's pages. The model is a small random biLM written in the AllenNLP
layout whose model card says French."""

import json
import re
import unicodedata
import zipfile

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from elmo_model import ElmoEmbedder, load_bilm
from elmo_model.bilm.char_ids import word_to_char_ids
from elmo_model.models.names import model_card_rows, model_language
from elmo_model.text.tokenizer import tokenize

pytestmark = pytest.mark.usefixtures("one_torch_thread")

FRENCH = ["Je dépose mon salaire à la banque vendredi. | argent", "La banque a fermé ses guichets. | argent",
          "Nous marchions près de la banque de sable du fleuve. | rive", "Une banque de sable barrait la rivière. | rive"]
RUSSIAN = ["Я положил деньги в банк . | деньги", "Банк закрыт сегодня . | деньги", "Мы поставили банк с водой . | сосуд"]
CHINESE = ["我 去 银行 存 钱 。 | 钱", "银行 今天 关门 了 。 | 钱", "这 家 银行 很 大 。 | 钱"]


def _ids(word):
    return list(word_to_char_ids(word) - 1)  # bilm-tf's ids, without the +1 that leaves 0 for padding


def test_character_ids_are_the_utf8_bytes_cut_at_48():
    pad = 260
    assert _ids("Café")[:8] == [258, 67, 97, 102, 195, 169, 259, pad]  # é: two bytes
    russian = "достопримечательностями" + "ии"  # 25 letters, 50 bytes
    assert _ids(russian)[1:49] == list(russian.encode("utf-8")[:48]) and _ids(russian)[49] == 259
    chinese = "银" * 17  # 51 bytes: the first 16 characters survive
    assert bytes(_ids(chinese)[1:49]).decode("utf-8") == "银" * 16
    cut = "a" + "银" * 16  # 49 bytes: AllenNLP's cut keeps two bytes of the last character
    assert bytes(_ids(cut)[1:49]) == cut.encode("utf-8")[:48]
    assert unicodedata.normalize("NFD", "é") != "é" and _ids(unicodedata.normalize("NFD", "é"))[1:4] == [101, 204, 129]


def test_the_tokenizer_keeps_accents_and_scripts_and_splits_pre_split_tokens_at_the_spaces():
    assert tokenize("Die Straße ist schön. Ça va ?") == [["Die", "Straße", "ist", "schön", "."], ["Ça", "va", "?"]]
    assert tokenize("Я пошёл в банк.") == [["Я", "пошёл", "в", "банк", "."]]
    assert tokenize("Η τράπεζα είναι κλειστή;") == [["Η", "τράπεζα", "είναι", "κλειστή", ";"]]
    assert tokenize("我 去 银行 。") == [["我", "去", "银行", "。"]]
    assert tokenize("我去银行。") == [["我去银行。"]]  # no spaces: one token (give such text as tokens)


def test_a_models_language_comes_from_its_card_or_its_efml_config(french_model, tmp_path):
    assert model_language(french_model) == "French" and model_card_rows(str(french_model))["language"] == "French"
    assert list(model_card_rows(str(french_model)))[:2] == ["name", "language"]
    assert model_language("elmo-mini") == "English" and model_language("elmo-original") == "English"
    efml = tmp_path / "158"
    efml.mkdir()
    (efml / "config.json").write_text(json.dumps({"train_path": "/users4/conll18st/raw_text/Indonesian/id-20m.raw",
                                                  "config_path": "cnn_50_100_512_4096_sample.json"}))
    assert model_language(efml) == "Indonesian"
    archive = tmp_path / "158.zip"
    with zipfile.ZipFile(archive, "w") as zipped:
        zipped.write(efml / "config.json", "158/config.json")
    assert model_language(archive) == "Indonesian" and "archive" in model_card_rows(str(archive))
    (efml / "config.json").write_text(json.dumps({"language": "Greek", "train_path": "x.raw"}))
    assert model_language(efml) == "Greek"
    (efml / "config.json").write_text("{not json")
    assert model_language(efml) == "English"


def test_the_embedder_command_and_elmo_embedder_embed_every_script(french_model, tmp_path):
    from elmo_model.corpus.embedder import main

    import h5py

    sentences = [["Être", "über", "schön", "Café"], ["Я", "положил", "деньги", "в", "банк"], ["我", "去", "银行", "。"],
                 ["Η", "τράπεζα", "είναι", "κλειστή", ";"]]
    embedder = ElmoEmbedder(str(french_model))
    expected = [embedder.embed_sentence(s) for s in sentences]
    assert [e.shape for e in expected] == [(3, len(s), 64) for s in sentences]
    source = tmp_path / "lines.txt"
    source.write_text("".join(" ".join(s) + "\n" for s in sentences), encoding="utf-8")
    assert main([str(source), str(tmp_path / "out.hdf5"), "--model", str(french_model), "--use-sentence-keys",
                 "--quiet"]) == 0
    with h5py.File(tmp_path / "out.hdf5", "r") as out:
        index = json.loads(out["sentence_to_index"][()])
        for s, e in zip(sentences, expected):
            np.testing.assert_allclose(out[index[" ".join(s)]][...], e, atol=1e-5)  # batched: float sums in another order


def test_an_accent_typed_as_two_code_points_is_the_same_word(french_model):
    from probing.senses.projections import find_lemma
    from probing.senses.retrieval import find_token

    decomposed = unicodedata.normalize("NFD", "Le café est chaud .")
    assert find_token(decomposed, "café")[1] == 1
    assert find_lemma(decomposed.split(), "café", use_wordnet=False) == [(1, 2)]


def test_sense_retrieval_over_labelled_sentences_in_three_scripts(french_model):
    from probing.context.playground import parse_labelled
    from probing.senses.retrieval import labelled_neighbours

    model = load_bilm(french_model)
    for lines, query, word in ((FRENCH, "Il a ouvert un compte à la banque .", "banque"),
                               (RUSSIAN, "Банк выдал кредит .", "банк"), (CHINESE, "我 在 银行 工作 。", "银行")):
        texts, labels = parse_labelled(lines)
        result = labelled_neighbours(model, query, word, texts, labels, k=2)
        assert result.query_tokens[result.token_index].casefold() == word
        first, top = result.layers[0], result.layers[-1]
        assert first.n_searched == len(lines) and len(top.neighbours) == 2
        assert {n.sense_keys[0] for n in top.neighbours} <= set(labels)
        spelled = result.query_tokens[result.token_index]  # layer 0 reads the spelling alone
        assert all(abs(n.similarity - 1) < 1e-5 for n in first.neighbours if n.words == spelled)
        assert any(n.words == spelled for n in first.neighbours)
        assert top.neighbours[0].similarity >= top.neighbours[1].similarity
    itself = labelled_neighbours(model, texts[0], word, texts, labels, k=5)
    assert itself.layers[-1].n_searched == len(texts) - 1  # the query's own line is left out


@pytest.fixture
def app(french_model, data_root, monkeypatch, tmp_path):
    monkeypatch.setenv("ELMO_WORKBENCH_MODEL", str(french_model))
    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(data_root))
    monkeypatch.setenv("ELMO_WORKBENCH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ELMO_WORKBENCH_REPORTS", str(tmp_path / "reports"))
    return AppTest.from_file(str(__import__("pathlib").Path(__file__).parents[1] / "app.py"), default_timeout=120)


def _clean(at):
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def test_the_playground_compares_senses_in_a_russian_text_and_names_the_language(app):
    app.run()
    app.text_area(key="pg_text").set_value("\n".join(RUSSIAN)).run()
    app.text_input(key="pg_word").set_value("банк").run()
    _clean(app)
    captions = [re.sub(r"\\(.)", r"\1", c.value) for c in app.caption]  # markdown escapes removed
    assert any("French" in c and "fr-random" in c for c in captions)  # the model line names the language
    assert any("of the given sentences" in c for c in captions)  # the baseline is drawn from these, not English
    table = app.dataframe[-1].value
    assert list(table["layer"]) == ["layer 0", "layer 1", "layer 2"] and table["permutation p"].between(0, 1).all()


def test_sense_retrieval_and_projections_use_your_sentences_and_english_pages_say_so(app):
    app.run()
    app.switch_page("app_pages/sense_retrieval.py").run()
    assert "SemCor is English" in app.info[0].value
    app.text_area(key="rt_own_query").set_value("我 在 银行 工作 。")
    app.text_input(key="rt_own_word").set_value("银行")
    app.text_area(key="rt_own_text").set_value("\n".join(CHINESE)).run()
    _clean(app)
    assert set(app.dataframe[-1].value["label"]) == {"钱"} and len(app.dataframe[-1].value) == 3
    app.switch_page("app_pages/layer_projections.py").run()
    assert app.checkbox(key="pj_semcor").disabled and app.checkbox(key="pj_demo").disabled
    app.selectbox(key="pj_choice").set_value("type a lemma…").run()
    app.text_input(key="pj_typed").set_value("banque")
    app.text_area(key="pj_text").set_value("\n".join(FRENCH)).run()
    _clean(app)
    assert len(app.get("plotly_chart")) == 2  # the projection and the separability, of your sentences only
    for page in ("scalar_mix", "information", "lesson"):
        app.switch_page(f"app_pages/{page}.py").run()
        _clean(app)
        assert [i.value for i in app.info if "needs English data" in i.value], page
        assert not app.get("plotly_chart"), page
    for page in ("probes", "syntax"):  # no French treebank in the data root: the command that fetches it
        app.switch_page(f"app_pages/{page}.py").run()
        _clean(app)
        assert [i.value for i in app.info if "UD French-GSD, which is not in the data root" in i.value
                and "python -m probing.data download ud:french --data-root" in i.value], page
        assert not [b for b in app.button if b.key == "sy_train_probe"], page
