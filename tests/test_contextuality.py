"""Tests for probing.context.contextuality (Ethayarajh 2019) on the bilm-tf fixture model."""

import numpy as np
import pytest
import torch

from elmo_model import load_bilm
from probing.context.contextuality import (
    ContextualityResult,
    contextuality,
    mean_pairwise_cosine,
    measure_contextuality,
    sample_lm_sentences,
)
from probing.engine.activations import extract_activations

SAME = "the bank raised its rates again ."
OTHERS = [
    "we walked along the bank of the river .",
    "the bank of the stream was muddy .",
    "she put money in the bank on monday .",
    "a heron stood on the far bank .",
    "the bank closed early that day .",
    "he works at the bank near the station .",
]


@pytest.fixture(scope="module")
def model(data_root):
    torch.set_num_threads(1)
    return load_bilm(data_root / "fixtures/bilm_tf")


def test_identical_contexts_give_self_similarity_one(model, tmp_path):
    # 'raised' occurs only in six copies of one sentence: the same context every time
    sentences = [SAME.split()] * 6 + [s.split() for s in OTHERS]
    result = contextuality(model, sentences, cache_dir=tmp_path, min_contexts=5, n_words=50,
                           n_baseline_pairs=500)
    assert "raised" in result.words and "bank" in result.words
    assert result.word_self_similarity["raised"] == pytest.approx([1.0, 1.0, 1.0], abs=1e-5)
    bank = result.word_self_similarity["bank"]
    assert bank[0] == pytest.approx(1.0, abs=1e-5)  # layer 0 is context-free
    assert bank[1] < 1.0 - 1e-4 and bank[2] < 1.0 - 1e-4  # different contexts, different vectors
    # averages are over the sampled words; adjusted = raw - anisotropy baseline
    for j in range(3):
        expected = np.mean([result.word_self_similarity[w][j] for w in result.words])
        assert result.self_similarity[j] == pytest.approx(expected)
        assert result.self_similarity_adjusted[j] == pytest.approx(result.self_similarity[j] - result.anisotropy[j])
        assert result.intra_sentence_adjusted[j] == pytest.approx(
            result.intra_sentence_similarity[j] - result.anisotropy[j])
        assert -1.0 <= result.anisotropy[j] <= 1.0
    assert result.self_similarity[0] == pytest.approx(1.0, abs=1e-5)
    assert ContextualityResult.from_json(result.to_json()) == result


def test_measures_by_hand(model, tmp_path):
    sentences = [s.split() for s in OTHERS]
    cache = extract_activations(model, sentences, "ctx-test", "hand", cache_dir=tmp_path)
    result = measure_contextuality(cache, sentences, min_contexts=3, n_words=5, seed=4)
    layer = cache.layer(2)
    rows = [int(cache.offsets[i]) + s.index("bank") for i, s in enumerate(sentences)]
    assert result.word_self_similarity["bank"][2] == pytest.approx(mean_pairwise_cosine(layer[rows]))
    # intra-sentence similarity of sentence 0: each token vs the sentence's mean (cosines)
    x = layer[cache.offsets[0]:cache.offsets[1]]
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    mean = unit.mean(axis=0)
    per_sentence = []
    for i in range(len(sentences)):
        u = layer[cache.offsets[i]:cache.offsets[i + 1]]
        u = u / np.linalg.norm(u, axis=1, keepdims=True)
        m = u.mean(axis=0)
        per_sentence.append(np.mean(u @ (m / np.linalg.norm(m))))
    assert np.mean(unit @ (mean / np.linalg.norm(mean))) == pytest.approx(per_sentence[0])
    assert result.intra_sentence_similarity[2] == pytest.approx(np.mean(per_sentence), abs=1e-6)
    # same seed, same numbers
    assert measure_contextuality(cache, sentences, min_contexts=3, n_words=5, seed=4) == result
    with pytest.raises(ValueError, match="do not match"):
        measure_contextuality(cache, sentences[:-1])
    with pytest.raises(ValueError, match="no word occurs"):
        measure_contextuality(cache, sentences, min_contexts=50)


def test_mean_pairwise_cosine_hand_made():
    x = np.array([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0]])
    assert mean_pairwise_cosine(x) == pytest.approx((0 + 1 + 0) / 3)
    with pytest.raises(ValueError):
        mean_pairwise_cosine(x[:1])


def test_lm_sentence_sample_is_seeded(data_root):
    a = sample_lm_sentences(data_root, 40, seed=1)
    assert len(a) == 40 and all(5 <= len(s) <= 50 for s in a)
    assert sample_lm_sentences(data_root, 40, seed=1) == a
    assert sample_lm_sentences(data_root, 40, seed=2) != a


def test_the_anisotropy_baseline_is_the_mean_cosine_of_random_cross_sentence_pairs(model):
    from elmo_model.corpus.embedder import ElmoEmbedder
    from elmo_model.text.tokenizer import tokenize
    from probing.context.contextuality import DEMO_SOURCE, anisotropy_baseline
    from probing.context.playground import demo_set_names, load_demo_set

    texts = [" ".join(s.split()[:-1]) + "." for s in [SAME] + OTHERS]
    baseline = anisotropy_baseline(model, texts, n_pairs=300, seed=3)
    assert (baseline.n_sentences, baseline.n_pairs, len(baseline.cosine)) == (7, 300, 3)
    assert baseline == anisotropy_baseline(model, texts, n_pairs=300, seed=3)  # seeded
    # the same pairs by hand: tokens of different sentences, rows of the sentences laid end to end
    import random

    from probing.context.contextuality import random_token_pairs
    tokens = [[t for part in tokenize(text) for t in part] for text in texts]
    rows_a, rows_b = random_token_pairs([len(t) for t in tokens], 300, random.Random(3))
    sentence_of = np.repeat(np.arange(len(tokens)), [len(t) for t in tokens])
    assert (sentence_of[rows_a] != sentence_of[rows_b]).all()
    vectors = np.concatenate(list(ElmoEmbedder(model).embed_sentences(tokens)), axis=1)
    for j in range(3):
        a, b = vectors[j][rows_a], vectors[j][rows_b]
        cosines = np.sum(a * b, axis=1) / np.linalg.norm(a, axis=1) / np.linalg.norm(b, axis=1)
        assert baseline.cosine[j] == pytest.approx(float(cosines.mean()), abs=1e-5)
    shipped = anisotropy_baseline(model, n_pairs=200)  # default: every demo sentence, no data root
    assert shipped.source == DEMO_SOURCE
    assert shipped.n_sentences == sum(len(load_demo_set(n).texts) for n in demo_set_names())
    with pytest.raises(ValueError, match="at least 2 non-empty sentences"):
        anisotropy_baseline(model, ["only one sentence."])
