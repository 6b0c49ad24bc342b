"""Tests for probing.senses.projections: per-layer PCA / UMAP of one lemma's occurrences and sense
separability, on the bilm-tf fixture model with the "bank" demo set and a SemCor slice."""

import numpy as np
import pytest
import torch

from elmo_model import load_bilm
from probing.context.playground import load_demo_set
from probing.senses.corpora import wordnet
from probing.senses.projections import (
    ProjectionResult,
    find_lemma,
    loo_1nn_accuracy,
    n_distinct_rows,
    project_lemma,
    sense_silhouette,
)
from probing.senses.wsd import build_semcor_index


@pytest.fixture(scope="module")
def model(data_root):
    torch.set_num_threads(1)
    wordnet(data_root)
    return load_bilm(data_root / "fixtures/bilm_tf")


@pytest.fixture(scope="module")
def bank(model, data_root):
    demo = load_demo_set("bank")
    return project_lemma(model, "bank", root=data_root, sentences=demo.texts, senses=demo.senses,
                         sense_glosses=demo.glosses, methods=("pca",))


def test_layer0_collapses_onto_one_point_and_says_so(bank):
    assert len(bank.points) == 12 and [l.layer for l in bank.layers] == [0, 1, 2]
    layer0 = bank.layers[0]
    assert layer0.collapsed and layer0.n_distinct == 1
    assert "same vector" in layer0.note and "one point" in layer0.note
    assert layer0.loo_1nn_accuracy is None  # undefined, not a number from arbitrary ties
    assert np.allclose(layer0.pca, 0.0)
    for layer in bank.layers[1:]:
        assert not layer.collapsed and layer.n_distinct == 12 and layer.note is None
        assert layer.majority_baseline == pytest.approx(0.5)
        assert 0.0 <= layer.loo_1nn_accuracy <= 1.0 and -1.0 <= layer.silhouette <= 1.0
        assert np.array(layer.pca).shape == (12, 2) and layer.umap is None
        assert layer.pca_explained[0] >= layer.pca_explained[1] > 0


def test_points_carry_sentence_sense_and_gloss(bank):
    demo = load_demo_set("bank")
    for point, text, sense in zip(bank.points, demo.texts, demo.senses):
        assert point.source == "user" and point.words == "bank"
        assert point.sentence.split(" ")[point.start] == "bank"
        assert point.sense == sense and point.gloss == demo.glosses[sense]
    assert bank.senses == demo.glosses
    assert ProjectionResult.from_json(bank.to_json()) == bank


def test_semcor_occurrences_with_umap_are_reproducible(model, data_root, tmp_path_factory):
    index = build_semcor_index(model, data_root, limit_sentences=150,
                               cache_dir=tmp_path_factory.mktemp("activations"))
    lemma = max(index.lemmas, key=lambda name: len(index.lemma_rows(name)))
    n = len(index.lemma_rows(lemma))
    first = project_lemma(model, lemma, index=index, root=data_root, layers=[2], seed=7)
    again = project_lemma(model, lemma, index=index, root=data_root, layers=[2], seed=7)
    (layer,) = first.layers
    assert len(first.points) == n and all(p.source == "semcor" and p.sense for p in first.points)
    assert all(p.gloss for p in first.points)
    assert np.array(layer.umap).shape == (n, 2) and np.all(np.isfinite(layer.umap))
    assert layer.umap == again.layers[0].umap and layer.pca == again.layers[0].pca
    capped = project_lemma(model, lemma, index=index, root=data_root, layers=[1], max_semcor=5,
                           methods=("pca",))
    assert len(capped.points) == 5 and any("random sample of 5" in n for n in capped.notes)
    # separability within SemCor is not moved by typed sentences (their own label set)
    def n_senses(name):
        return len({index.instance(int(r)).sense_keys[0] for r in index.lemma_rows(name)})

    lemma = max((name for name in index.lemmas if n_senses(name) >= 2), key=lambda name: len(index.lemma_rows(name)))
    n = len(index.lemma_rows(lemma))
    pure = project_lemma(model, lemma, index=index, root=data_root, layers=[2], seed=7, methods=("pca",))
    (layer,) = pure.layers
    assert layer.semcor_loo_1nn_accuracy == layer.loo_1nn_accuracy and layer.semcor_n == n
    assert layer.semcor_majority_baseline == layer.majority_baseline
    mixed = project_lemma(model, lemma, index=index, root=data_root, layers=[2], seed=7, methods=("pca",),
                          sentences=[f"I saw the {lemma} again ."] * 3, senses=["mine"] * 3)
    (mixed_layer,) = mixed.layers
    assert len(mixed.points) == n + 3 and mixed_layer.semcor_n == n
    assert mixed_layer.semcor_loo_1nn_accuracy == layer.semcor_loo_1nn_accuracy
    assert mixed_layer.loo_1nn_accuracy != layer.loo_1nn_accuracy  # three identical typed points find each other
    assert any("'mine' are not WordNet sense keys" in note for note in mixed.notes)


def test_separability_scores_on_hand_made_vectors():
    x = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.1, 0.9], [0.8, 0.2]])
    labels = ["a", "a", "b", "b", "b"]
    # the last point's nearest neighbour (cosine) is the second "a": 4 of 5 right
    assert loo_1nn_accuracy(x, labels) == pytest.approx(0.8)
    assert sense_silhouette(x[:4], labels[:4]) > 0.8
    assert sense_silhouette(x, ["a"] * 5) is None
    assert n_distinct_rows(np.array([[1.0, 2.0], [1.0, 2.0], [0.0, 1.0]])) == 2
    # a float16 copy of a vector (as the SemCor index stores it) is the same point
    v = np.array([0.123456789, -1.98765432, 3.3333333])
    assert n_distinct_rows(np.stack([v, v.astype(np.float16), v * 1.01])) == 2
    # equal vectors are ties: the commonest label among them, then the first in order
    # (points 0, 1 right; point 2 "b" sees a, a; point 3 "b" sees a, a, b at cosine 0: all wrong)
    tied = np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0]])
    assert loo_1nn_accuracy(tied, ["a", "a", "b", "b"]) == pytest.approx(0.5)


def test_find_lemma_matches_inflections_and_multiwords(model):
    tokens = "The banks of the river ; it took place there".split()
    assert find_lemma(tokens, "bank") == [(1, 2)]
    assert find_lemma(tokens, "take place") == [(7, 9)]
    assert find_lemma(tokens, "bank", use_wordnet=False) == []


def test_too_few_occurrences_is_a_clear_error(model, data_root):
    with pytest.raises(ValueError, match="at least 2"):
        project_lemma(model, "bank", root=data_root, sentences=["The bank was shut .", "No match ."])
    with pytest.raises(ValueError, match="projection method"):
        project_lemma(model, "bank", root=data_root, sentences=["bank"], methods=("tsne",))
