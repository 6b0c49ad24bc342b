"""Tests for probing.tagging.scalar_mix: a probe and nearest neighbours for hand-set s_j, and learned
s_j per lemma for the app, on the bilm-tf fixture model with small slices of EWT and SemCor."""

import numpy as np
import pytest
import torch

from elmo_model import load_bilm
from probing.senses.retrieval import SenseRetriever
from probing.senses.wsd import build_semcor_index
from probing.tagging.scalar_mix import (
    MixView,
    explore_mix,
    lemma_mixes,
    load_mix_task,
    normalise_weights,
    polysemous_lemmas,
)

QUERY = "Olivia De Havilland signed to do a Broadway play for Garson."


@pytest.fixture(scope="module")
def model(data_root):
    torch.set_num_threads(1)
    return load_bilm(data_root / "fixtures/bilm_tf")


@pytest.fixture(scope="module")
def pos(model, data_root, tmp_path_factory):
    return load_mix_task(model, "pos", data_root=data_root, limit=40,
                         cache_dir=tmp_path_factory.mktemp("activations"))


@pytest.fixture(scope="module")
def index(model, data_root, tmp_path_factory):
    return build_semcor_index(model, data_root, limit_sentences=300, cache_dir=tmp_path_factory.mktemp("semcor"))


@pytest.fixture(scope="module")
def retriever(model, index, data_root):
    return SenseRetriever(model, index, root=data_root)


def test_weights_are_checked_and_normalised():
    np.testing.assert_allclose(normalise_weights([1, 3, 0], 3), [0.25, 0.75, 0.0])
    for bad, message in (([1, 1], "expected 3 weights"), ([1, -1, 1], "non-negative"),
                         ([0, 0, 0], "every s_j is 0"), ([1, float("nan"), 1], "non-negative")):
        with pytest.raises(ValueError, match=message):
            normalise_weights(bad, 3)


def test_each_layer_is_whitened_on_the_training_tokens(pos):
    assert pos.layers == [0, 1, 2] and pos.metric == "accuracy"
    for j in pos.layers:
        train = pos.features["train"][j].astype(np.float64)
        np.testing.assert_allclose(train.mean(axis=0), 0.0, atol=1e-4)
        # whitened with shrinkage: every direction's variance is at most 1
        assert np.linalg.eigvalsh(np.cov(train.T)).max() < 1.01
    for split in ("train", "dev", "test"):
        assert pos.features[split].shape[1] == len(pos.labels[split]) == pos.lengths[split].sum()


def test_all_weight_on_one_layer_is_that_layers_probe(pos):
    for j in pos.layers:
        view = explore_mix(pos, [1.0 if i == j else 0.0 for i in pos.layers])
        assert view.score == pos.single_layer[j]
    uniform = explore_mix(pos, [2.0, 2.0, 2.0])  # the scale of s_j does not matter
    assert uniform.weights == pytest.approx([1 / 3] * 3) and uniform.score == pos.uniform
    mixed = explore_mix(pos, [0.1, 0.6, 0.3])
    assert 0.0 < mixed.score.low <= mixed.score.estimate <= mixed.score.high <= 1.0
    assert MixView.from_json(mixed.to_json()) == mixed


def test_neighbours_under_a_mix(pos, retriever):
    view = explore_mix(pos, [0.0, 0.5, 0.5], retriever=retriever, sentence=QUERY, word="Play", k=4)
    assert view.word == "play" and view.lemma == "play" and view.n_searched == 9
    assert len(view.neighbours) == 4 and [n.rank for n in view.neighbours] == [1, 2, 3, 4]
    sims = [n.similarity for n in view.neighbours]
    assert sims == sorted(sims, reverse=True) and all(-1.0 <= s <= 1.0 + 1e-6 for s in sims)
    assert all(n.sense_key.startswith("play%") and n.gloss for n in view.neighbours)
    assert all(n.words.lower().startswith("play") for n in view.neighbours)
    # layer 0 alone sees only the spelling: every "play" is the query's own vector
    layer0 = explore_mix(pos, [1.0, 0.0, 0.0], retriever=retriever, sentence=QUERY, word="play", k=4)
    same_spelling = [n for n in layer0.neighbours if n.words == "play"]
    assert same_spelling and all(n.similarity == pytest.approx(1.0, abs=1e-5) for n in same_spelling)
    assert [n.similarity for n in view.neighbours] != [n.similarity for n in layer0.neighbours]
    missing = explore_mix(pos, [0, 1, 0], retriever=retriever, sentence=QUERY, word="dog")
    assert missing.neighbours is None and "'dog' is not a word of the query sentence: no neighbours" in missing.notes
    unseen = explore_mix(pos, [0, 1, 0], retriever=retriever, sentence="A quokka smiled.", word="quokka")
    assert unseen.neighbours == [] and any("no sense-tagged 'quokka'" in n for n in unseen.notes)


def test_lemma_mixes_fit_demo_and_semcor_lemmas_and_refuse_the_rest(model, index, data_root):
    demo = lemma_mixes(model, ["bank", "Bank", "nosuchword", "word " * 50], source="demo", root=data_root,
                       seeds=(0,), folds=2, steps=100)
    assert [r.lemma for r in demo.results] == ["bank"] and demo.results[0].source == "sentences"
    assert sum(demo.results[0].weights_mean) == pytest.approx(1.0, abs=1e-6)
    pasted = ("word_" * 50)[:60] + "…"
    assert set(demo.refused) == {"nosuchword", pasted}
    assert demo.refused[pasted] == "not a word (249 characters): type one lemma at a time"
    assert demo.refused["nosuchword"].startswith("no demo sentences for 'nosuchword'")
    semcor = lemma_mixes(model, ["say", "bank"], index=index, root=data_root, seeds=(0,), folds=2, steps=100)
    assert [r.lemma for r in semcor.results] == ["say"] and semcor.results[0].source == "semcor"
    assert semcor.refused["bank"].startswith("only 5 labelled occurrence(s)")
    with pytest.raises(ValueError, match="no lemma given"):
        lemma_mixes(model, [" ", ""], index=index, root=data_root)
    with pytest.raises(ValueError, match="needs a SemCor index"):
        lemma_mixes(model, ["say"], root=data_root)


def test_polysemous_lemmas_are_the_commonest_with_two_senses(index):
    found = polysemous_lemmas(index, min_occurrences=10, top=5)
    assert len(found) == 5 and all(n >= 10 and senses >= 2 for _l, n, senses in found)
    assert [n for _l, n, _s in found] == sorted((n for _l, n, _s in found), reverse=True)
    assert ("say", 48, 2) in found
