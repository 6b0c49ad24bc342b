"""Tests for probing.senses.word_senses: learned s_j + gamma for one lemma."""

import numpy as np
import pytest

from elmo_model import load_bilm
from probing.context.playground import load_demo_set
from probing.senses.corpora import wordnet
from probing.senses.word_senses import (
    OTHER,
    SenseOccurrences,
    WordSensesComparison,
    WordSensesRefused,
    WordSensesResult,
    compare_words,
    learn_word_senses,
    prepare_labels,
    semcor_occurrences,
    sentence_occurrences,
)
from probing.senses.wsd import build_semcor_index

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def synthetic(informative_layer: int, n: int = 60, dim: int = 12, seed: int = 0) -> SenseOccurrences:
    """Three layers of noise; only ``informative_layer`` also holds a class-dependent shift."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    x = rng.normal(size=(3, n, dim)).astype(np.float32)
    x[informative_layer] += 1.5 * rng.normal(size=(3, dim))[y].astype(np.float32)
    labels = [f"sense{v}" for v in y]
    return SenseOccurrences("word", None, x, labels, ["..."] * n, ["word"] * n, {}, "synthetic")


@pytest.mark.parametrize("layer", [2, 0])
def test_learned_weights_sit_on_the_layer_that_carries_the_label(layer):
    result = learn_word_senses(synthetic(layer), seeds=(0,), folds=3, steps=200)
    weights = np.array(result.weights_mean)
    assert weights.argmax() == layer and weights[layer] > 0.6
    assert weights.sum() == pytest.approx(1.0)
    assert len(result.weights_runs) == 3 and result.n_folds == 3
    assert result.best_layer == layer
    assert result.layer_accuracy_mean[layer] > 0.8
    assert result.mix_accuracy_mean > result.majority_accuracy_mean + 0.3
    others = [a for j, a in enumerate(result.layer_accuracy_mean) if j != layer]
    assert max(others) < 0.6  # noise layers are near chance (1/3)
    assert result.gamma_mean > 0


def test_same_seed_same_numbers_and_json_round_trip():
    a = learn_word_senses(synthetic(1), seeds=(5,), folds=2, steps=50)
    b = learn_word_senses(synthetic(1), seeds=(5,), folds=2, steps=50)
    assert a == b
    assert WordSensesResult.from_json(a.to_json()) == a


def test_single_sense_and_too_few_are_refused_with_a_message():
    occ = synthetic(1)
    one = SenseOccurrences("lonely", None, occ.vectors, ["only%1:00::"] * 60, occ.sentences,
                           occ.words, {}, "semcor")
    with pytest.raises(WordSensesRefused, match="one sense") as refusal:
        learn_word_senses(one)
    assert refusal.value.lemma == "lonely" and "nothing to separate" in refusal.value.reason
    few = SenseOccurrences("rare", None, occ.vectors[:, :6], occ.labels[:6], occ.sentences[:6],
                           occ.words[:6], {}, "semcor")
    with pytest.raises(WordSensesRefused, match="at least 10"):
        learn_word_senses(few)
    # two senses, but one below the minimum: after dropping it, one sense is left
    labels = ["a"] * 40 + ["b"] * 3
    lopsided = SenseOccurrences("lop", None, occ.vectors[:, :43], labels, occ.sentences[:43],
                                occ.words[:43], {}, "semcor")
    with pytest.raises(WordSensesRefused, match="1 sense is left"):
        learn_word_senses(lopsided, min_per_sense=5)


def test_rare_senses_are_merged_or_dropped_and_said():
    labels = ["a"] * 8 + ["b"] * 6 + ["c"] * 3 + ["d"] * 2 + ["e"]
    merged, which, dropped, notes = prepare_labels(labels, min_per_sense=5)
    assert which == ["c", "d", "e"] and dropped == []
    assert merged.count(OTHER) == 6 and "merged into 'other'" in notes[0]
    kept, which, dropped, notes = prepare_labels(labels, min_per_sense=5, rare="drop")
    assert which == [] and dropped == ["c", "d", "e"] and kept.count(None) == 6
    assert "dropped" in notes[0]
    # a pool still below the minimum is dropped rather than merged
    _, which, dropped, _ = prepare_labels(["a"] * 9 + ["b"] * 9 + ["c", "d"], min_per_sense=5)
    assert which == [] and dropped == ["c", "d"]
    occ = synthetic(2, n=60)
    occ.labels = ["x"] * 25 + ["y"] * 25 + ["z1"] * 4 + ["z2"] * 4 + ["z3"] * 2
    result = learn_word_senses(occ, seeds=(0,), folds=2, steps=30)
    assert result.merged == ["z1", "z2", "z3"] and result.senses == {"other": 10, "x": 25, "y": 25}
    assert any("merged" in note for note in result.notes)
    assert {o["fitted_as"] for o in result.occurrences} == {"x", "y", OTHER}


def test_demo_sentences_and_semcor_lemmas_on_the_fixture(data_root, tmp_path):
    wordnet(data_root)
    model = load_bilm(data_root / "fixtures/bilm_tf")
    demo = load_demo_set("bank")
    occ = sentence_occurrences(model, demo.texts, demo.senses, "bank", glosses=demo.glosses,
                               root=data_root)
    assert occ.vectors.shape == (3, 12, 32) and occ.labels == list(demo.senses)
    result = learn_word_senses(occ, seeds=(0,), folds=3, steps=60)
    assert result.senses == {"money": 6, "river": 6} and result.glosses == demo.glosses
    assert len(result.weights_mean) == 3 and result.majority_accuracy_mean <= 0.5
    index = build_semcor_index(model, data_root, limit_sentences=150, cache_dir=tmp_path)
    lemma = max(index.lemmas, key=lambda name: len(index.lemma_rows(name)))
    from_semcor = semcor_occurrences(index, lemma)
    assert from_semcor.vectors.shape[1] == len(index.lemma_rows(lemma)) == len(from_semcor.labels)
    comparison = compare_words(index, [lemma, "aardvark"], seeds=(0,), folds=2, steps=30,
                               min_per_sense=2, min_occurrences=6, max_occurrences=40)
    assert "aardvark" in comparison.refused and "0 labelled occurrence" in comparison.refused["aardvark"]
    assert len(comparison.results) + len(comparison.refused) == 2
    assert WordSensesComparison.from_json(comparison.to_json()) == comparison
