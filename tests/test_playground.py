"""probing.context.playground: the demo sets and explore_word on bilm-tf's fixture model (real weights)."""

import json

import numpy as np
from pathlib import Path

import pytest

from elmo_model import load_bilm
from elmo_model.corpus.embedder import ElmoEmbedder
from elmo_model.text.tokenizer import tokenize
from probing.context.playground import (
    MAX_OCCURRENCES,
    MAX_SENTENCES,
    MAX_TOKENS_PER_SENTENCE,
    PlaygroundResult,
    cosine_matrix,
    demo_set_names,
    explore_word,
    layer_names,
    load_demo_set,
    parse_labelled,
    split_contexts,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def model(data_root):
    return load_bilm(data_root / "fixtures" / "bilm_tf")


@pytest.fixture(scope="module")
def bank(model):
    demo = load_demo_set("bank")
    return explore_word(model, demo.texts, demo.word, senses=demo.senses)


def test_demo_sets_keep_their_documented_rules():
    assert demo_set_names() == ["bank", "bark", "play"]
    for name in demo_set_names():
        demo = load_demo_set(name)
        assert demo.word == name and len(demo.glosses) == 2
        assert sorted(demo.senses.count(s) for s in demo.glosses) == [6, 6], name
        assert len(set(demo.texts)) == 12, f"{name}: repeated sentence"
        for text in demo.texts:
            sentences = tokenize(text)
            assert len(sentences) == 1, f"{name}: {text!r} splits into {len(sentences)} sentences"
            assert sentences[0].count(name) == 1 and sentences[0][0] != name, text
            assert [t.lower() for t in sentences[0]].count(name) == 1, text
        assert demo.sense_of(demo.texts[0]) == demo.senses[0]
        assert demo.sense_of("  " + demo.texts[-1] + " ") == demo.senses[-1]
        assert demo.sense_of("not in the set") is None
        # both senses nouns: a contrast whose senses follow part of speech would show that instead
        assert all(key is not None and key.startswith(f"{name}%1:") for key in demo.sense_keys), name


def test_the_held_out_sense_set_keeps_the_same_rules_and_shares_no_sentence():
    import json

    held_out = json.loads((Path(__file__).resolve().parents[1] / "data/eval/senses_heldout.json").read_text())
    demo_texts = {t for name in demo_set_names() for t in load_demo_set(name).texts}
    words = [entry["word"] for entry in held_out["words"]]
    assert len(set(words) - set(demo_set_names())) >= 3  # words besides the demos'
    for entry in held_out["words"]:
        word, senses = entry["word"], [s["sense"] for s in entry["sentences"]]
        assert len(entry["senses"]) == 2 and all(senses.count(s) >= 4 for s in entry["senses"]), word
        for item in entry["sentences"]:
            assert item["text"] not in demo_texts, item["text"]
            (sentence,) = tokenize(item["text"])
            assert [t.lower() for t in sentence].count(word) == 1 and sentence[0] != word, item["text"]


def test_missing_demo_set_names_what_exists():
    with pytest.raises(ValueError, match="bank, bark, play"):
        load_demo_set("zebra")


def test_bank_demo_layer0_is_static_and_lstm_layers_are_contextual(bank):
    assert bank.notes == []
    assert bank.similarity.shape == (3, 12, 12) and bank.norms.shape == (3, 12)
    assert bank.occurrences == [(k, bank.positions[k][0]) for k in range(12)]
    np.testing.assert_allclose(bank.similarity[0], 1.0, atol=1e-6)  # same spelling, char CNN only
    for layer in range(3):
        np.testing.assert_allclose(np.diag(bank.similarity[layer]), 1.0, atol=1e-6)
        np.testing.assert_allclose(bank.similarity[layer], bank.similarity[layer].T, atol=1e-12)
    for layer in (1, 2):  # the LSTM layers see the sentence: the vectors differ
        assert bank.similarity[layer].min() < 0.999
    np.testing.assert_allclose(bank.norms[0], bank.norms[0, 0], rtol=1e-6)
    assert (bank.norms > 0).all() and np.ptp(bank.norms[2]) > 1e-3
    contrast = bank.sense_contrast()
    np.testing.assert_allclose([contrast["within"][0], contrast["across"][0]], 1.0, atol=1e-6)
    assert len(contrast["within"]) == len(contrast["across"]) == 3
    assert bank.occurrence_labels()[0] == "S1 (river)" and bank.occurrence_labels()[-1] == "S12 (money)"


def test_similarities_are_those_of_each_sentence_embedded_alone(model, bank):
    """A sentence's vectors do not depend on the other sentences (stateless embedding)."""
    embedder = ElmoEmbedder(model)
    (k1, t1), (k2, t2) = bank.occurrences[0], bank.occurrences[8]
    a = embedder.embed_sentence(bank.tokens[k1])[:, t1]
    b = embedder.embed_sentence(bank.tokens[k2])[:, t2]
    for layer in range(3):
        expected = a[layer] @ b[layer] / np.linalg.norm(a[layer]) / np.linalg.norm(b[layer])
        assert bank.similarity[layer, 0, 8] == pytest.approx(expected, abs=1e-5)
        assert bank.norms[layer, 0] == pytest.approx(np.linalg.norm(a[layer]), rel=1e-5)
    focus = embedder.embed_sentence(bank.tokens[bank.focus_sentence])
    assert bank.token_similarity.shape == (3, len(bank.tokens[0]), len(bank.tokens[0]))
    np.testing.assert_allclose(bank.token_similarity[2], cosine_matrix(focus[2]), atol=1e-6)


def test_result_round_trips_through_json(bank):
    back = PlaygroundResult.from_json(bank.to_json())
    assert back == bank and back is not bank
    assert len(bank.model_identity) == 64 and bank.model_name == "bilm_tf"
    for name in ("word", "model_name", "model_identity", "layer_names", "sentences", "tokens", "token_offsets",
                 "positions", "senses", "occurrences", "focus_sentence", "notes"):
        assert getattr(back, name) == getattr(bank, name), name
    for name in ("similarity", "norms", "token_similarity"):
        np.testing.assert_array_equal(getattr(back, name), getattr(bank, name))
    with pytest.raises(ValueError, match="not a playground result"):
        PlaygroundResult.from_json('{"format": "elmo-workbench/probe-suite", "version": 1}')
    changed = PlaygroundResult.from_json(bank.to_json())
    changed.similarity[1, 0, 1] += 1e-9
    assert changed != bank


def test_a_result_written_before_the_identity_field_was_renamed_still_reads(bank):
    """Results files written before the field was named for what it holds call it model_checksum."""
    data = json.loads(bank.to_json())
    data["model_checksum"] = data.pop("model_identity")
    assert PlaygroundResult.from_json(json.dumps(data)) == bank


def test_same_input_gives_the_same_numbers(model):
    texts = ["The dog will bark at night.", "Rough bark covers the oak."]
    first, second = explore_word(model, texts, "bark"), explore_word(model, texts, "bark")
    np.testing.assert_array_equal(first.similarity, second.similarity)
    np.testing.assert_array_equal(first.token_similarity, second.token_similarity)


def test_match_ignores_case_but_layer0_sees_the_spelling(model):
    result = explore_word(model, "Bank holidays are long.\nWe sat on the bank.\nThe BANK is shut.", "bank")
    assert result.positions == [[0], [4], [1]] and result.notes == []
    assert result.similarity[0, 0, 1] < 0.9999  # "Bank" and "bank" are different spellings


def test_word_not_found_is_a_note_not_an_error(model):
    result = explore_word(model, ["The river bank flooded.", "Nothing here.", "A bank loan."], "bank")
    assert result.notes == ["'bank' not found in sentence 2."]
    assert result.positions[1] == [] and [k for k, _ in result.occurrences] == [0, 2]
    assert result.similarity.shape == (3, 2, 2)
    assert result.occurrence_labels() == ["S1", "S3"]
    assert result.sense_contrast() is None


def test_empty_input_gives_an_empty_result_with_a_note(model):
    for text in ("", "   \n\n  ", []):
        result = explore_word(model, text, "bank")
        assert result.notes[0].startswith("No text")
        assert result.tokens == [] and result.focus_sentence is None
        assert result.similarity.shape == (3, 0, 0) and result.token_similarity.shape == (3, 0, 0)
    result = explore_word(model, "A bank.", "  ")
    assert result.notes == ["No target word: type the word to compare across the sentences."]
    assert result.occurrences == [] and result.token_similarity.shape == (3, 3, 3)


def test_blank_lines_are_skipped_and_numbering_follows_the_kept_lines(model):
    result = explore_word(model, "\nThe bank.\n\n   \nNo word here.\n", "bank")
    assert result.sentences == ["The bank.", "No word here."]
    assert result.notes == ["'bank' not found in sentence 2."]
    assert split_contexts("\nThe bank.\n\n   \nNo word here.\n") == result.sentences


def test_a_multi_token_target_asks_for_one_word(model):
    result = explore_word(model, "The river bank.", "river bank")
    assert "2 tokens" in result.notes[0] and result.occurrences == []


def test_emoji_and_other_scripts_pass_through(model):
    result = explore_word(model, ["I love 🎉 parties .", "花 🎉 です", "Ünïcödé 🎉!"], "🎉")
    assert result.notes == [] and [p for p in result.positions] == [[2], [1], [1]]
    np.testing.assert_allclose(result.similarity[0], 1.0, atol=1e-6)
    chinese = explore_word(model, ["我 喜欢 银行", "银行 关门 了"], "银行")
    assert chinese.positions == [[2], [0]] and np.isfinite(chinese.similarity).all()


def test_five_thousand_words_are_capped_around_the_word(model):
    words = ["word"] * 3000 + ["bank"] + ["tail"] * 2000
    result = explore_word(model, " ".join(words), "bank")
    assert len(result.tokens[0]) == MAX_TOKENS_PER_SENTENCE
    assert result.tokens[0][result.positions[0][0]] == "bank"
    assert result.token_offsets[0] + result.positions[0][0] == 3000
    assert result.notes == ["Sentence 1 has 5,001 tokens; only tokens 2951-3050 (around the first "
                            "'bank') are used."]
    no_target = explore_word(model, " ".join(words), "zebra")
    assert len(no_target.tokens[0]) == MAX_TOKENS_PER_SENTENCE and no_target.token_offsets == [0]
    assert no_target.notes[0].endswith(f"only the first {MAX_TOKENS_PER_SENTENCE} are used.")


def test_too_many_sentences_and_occurrences_are_capped(model):
    lines = [f"bank {i} bank, bank" for i in range(MAX_SENTENCES + 8)]
    result = explore_word(model, lines, "bank")
    assert len(result.sentences) == MAX_SENTENCES
    assert f"{MAX_SENTENCES + 8} sentences given; only the first {MAX_SENTENCES} are used." in result.notes
    assert len(result.occurrences) == MAX_OCCURRENCES == result.similarity.shape[1]
    assert any(n.startswith(f"'bank' occurs {3 * MAX_SENTENCES} times") for n in result.notes)
    assert result.occurrence_labels()[:2] == ["S1#1", "S1#2"]


def test_focus_sentence_chooses_the_token_matrix(model):
    texts = ["No word here at all.", "The bank is open."]
    assert explore_word(model, texts, "bank").focus_sentence == 1  # first holding the word
    chosen = explore_word(model, texts, "bank", focus_sentence=0)
    assert chosen.focus_sentence == 0 and chosen.token_similarity.shape == (3, 6, 6)
    wrong = explore_word(model, texts, "bank", focus_sentence=5)
    assert wrong.focus_sentence == 0 and "There is no sentence 6 (there are 2)" in wrong.notes[-1]


def test_sense_labels_must_match_the_sentences(model):
    with pytest.raises(ValueError, match="2 labels for 1 sentences"):
        explore_word(model, ["The bank."], "bank", senses=["a", "b"])


def test_an_embedder_works_as_well_as_a_model(model, bank):
    demo = load_demo_set("bank")
    again = explore_word(ElmoEmbedder(model), demo.texts, "bank", senses=demo.senses)
    np.testing.assert_allclose(again.similarity, bank.similarity, atol=1e-6)


def test_labelled_lines_split_at_the_last_bar():
    sentences, labels = parse_labelled("The bank. | river\n\nA | B | money\nNo label here.\nEmpty label |\n | orphan")
    assert sentences == ["The bank.", "A | B", "No label here.", "Empty label"]
    assert labels == ["river", "money", None, None]
    for name in demo_set_names():  # the demo text box round-trips to the demo's labels
        demo = load_demo_set(name)
        assert parse_labelled(demo.text) == (list(demo.texts), list(demo.senses))


def _synthetic(similarity: np.ndarray, senses: list) -> PlaygroundResult:
    """A result of one occurrence a sentence with a given (L+1, N, N) similarity."""
    n = similarity.shape[1]
    return PlaygroundResult(
        word="w", model_name="m", model_identity="", layer_names=layer_names(similarity.shape[0]),
        sentences=[f"s{k}" for k in range(n)], tokens=[["w"]] * n, token_offsets=[0] * n,
        positions=[[0]] * n, senses=senses, occurrences=[(k, 0) for k in range(n)], similarity=similarity,
        norms=np.ones((similarity.shape[0], n)), focus_sentence=None, token_similarity=np.zeros((similarity.shape[0], 0, 0)))


def test_the_sense_test_finds_a_real_gap_and_not_a_random_one():
    rng = np.random.default_rng(0)
    senses = ["a"] * 6 + ["b"] * 6
    same = np.equal.outer(senses, senses)
    noise = rng.normal(0, 0.02, (12, 12))
    noise = (noise + noise.T) / 2
    layers = np.stack([np.ones((12, 12)), 0.5 + noise, np.where(same, 0.8, 0.5) + noise])
    for layer in layers:
        np.fill_diagonal(layer, 1.0)
    result = _synthetic(layers, senses)
    test = result.sense_contrast_test(n_resamples=500, seed=1)
    assert test.gap[0] == 0 and test.p_value[0] == 1.0 and not test.separates(0)  # one vector: no gap
    assert not test.separates(1) and test.gap_low[1] < 0 < test.gap_high[1]  # noise only
    assert test.separates(2) and test.p_value[2] < 0.01 and 0.25 < test.gap_low[2] <= test.gap_high[2] < 0.35
    assert "reliably more similar" in test.verdict(result.layer_names) and "layer 2" in test.verdict(result.layer_names)
    assert test == result.sense_contrast_test(n_resamples=500, seed=1)  # seeded
    assert (test.n_sentences, test.n_senses, test.n_same_pairs, test.n_different_pairs) == (12, 2, 30, 36)
    flat = _synthetic(layers[:2], senses).sense_contrast_test(n_resamples=200)
    assert "does not separate the senses" in flat.verdict(layer_names(2))


def test_why_the_sense_test_has_nothing_to_compare():
    layers = np.ones((2, 3, 3))
    assert "no sentence has a sense label" in _synthetic(layers, [None] * 3).contrast_missing_reason()
    assert "'a'" in _synthetic(layers, ["a", "a", None]).contrast_missing_reason()
    assert "no same-sense pair" in _synthetic(layers, ["a", "b", None]).contrast_missing_reason()
    assert _synthetic(layers, ["a", "a", "b"]).contrast_missing_reason() is None
    assert _synthetic(layers, ["a", "b", None]).sense_contrast_test() is None


def test_the_sense_test_reads_its_cosines_against_the_anisotropy_baseline():
    senses = ["a"] * 6 + ["b"] * 6
    same = np.equal.outer(senses, senses)
    layers = np.stack([np.ones((12, 12)), np.full((12, 12), 0.9), np.where(same, 0.8, 0.5)])
    for layer in layers:
        np.fill_diagonal(layer, 1.0)
    names = layer_names(3)
    test = _synthetic(layers, senses).sense_contrast_test(n_resamples=300, seed=0)
    text = test.against_baseline(names, [0.2, 0.3, 0.4])
    # layer 1: both kinds of pair 0.6 above the baseline, no gap; layer 2: +0.4 vs +0.1, a gap of 75% of the rise
    assert "layer 1 0.300, layer 2 0.400" in text
    assert "at layer 1, same-sense pairs +0.600 and different-sense pairs +0.600 (the gap is 0.0%" in text
    assert "at layer 2, same-sense pairs +0.400 and different-sense pairs +0.100 (the gap is 75.0%" in text
    assert "not its sense" not in text  # layer 2 separates the senses
    flat = _synthetic(layers[:2], senses).sense_contrast_test(n_resamples=300, seed=0)
    assert "does not separate the senses" in flat.verdict(layer_names(2))
    assert "what makes the occurrences alike is the word, not its sense" in flat.against_baseline(layer_names(2), [0.2, 0.3])
    assert "not its sense" not in flat.against_baseline(layer_names(2), [0.2, 0.95])  # below the baseline
    with pytest.raises(ValueError, match="baseline has 2 layers"):
        test.against_baseline(names, [0.2, 0.3])
