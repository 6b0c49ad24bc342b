"""Tests for probing.retrieval: nearest SemCor occurrences per layer on the bilm-tf fixture
model and a SemCor slice, plus static nearest word types."""

import numpy as np
import pytest
import torch

from elmo_model import load_bilm
from probing.retrieval import RetrievalResult, SenseRetriever
from probing.static import StaticEmbedding, layer0_embedding
from probing.wsd import build_semcor_index
from probing.wsd_data import wordnet

SEMCOR_SLICE = 150


@pytest.fixture(scope="module")
def model(data_root):
    torch.set_num_threads(1)
    return load_bilm(data_root / "fixtures/bilm_tf")


@pytest.fixture(scope="module")
def index(model, data_root, tmp_path_factory):
    wordnet(data_root)
    return build_semcor_index(model, data_root, limit_sentences=SEMCOR_SLICE,
                              cache_dir=tmp_path_factory.mktemp("activations"))


@pytest.fixture(scope="module")
def retriever(model, index, data_root):
    toy = StaticEmbedding(["bank", "river", "money", "shore"],
                          np.array([[1.0, 1.0], [0.0, 1.0], [1.0, 0.0], [0.2, 1.0]]), name="toy")
    return SenseRetriever(model, index, root=data_root,
                          static=[layer0_embedding(model, max_words=None), toy])


@pytest.fixture(scope="module")
def query_instance(index):
    """A single-word SemCor instance spelt as its lemma, of the most frequent such lemma."""
    best = None
    for lemma in index.lemmas:
        for row in index.lemma_rows(lemma):
            inst = index.instance(int(row))
            words = index.sentence_tokens(inst.sentence)[inst.start:inst.end]
            if len(words) == 1 and words[0].lower() == lemma:
                if best is None or len(index.lemma_rows(lemma)) > len(index.lemma_rows(best.lemma)):
                    best = inst
                break
    assert best is not None and len(index.lemma_rows(best.lemma)) >= 5
    return best


def test_a_semcor_sentence_finds_itself_first_unless_excluded(retriever, index, query_instance):
    inst = query_instance
    tokens = list(index.sentence_tokens(inst.sentence))
    rows = index.lemma_rows(inst.lemma)
    result = retriever.query(tokens, inst.start, lemma=inst.lemma, k=3, exclude_query_sentence=False)
    assert [layer.layer for layer in result.layers] == [0, 1, 2]
    for layer in result.layers:
        assert layer.n_searched == len(rows)
        top = layer.neighbours[0]
        assert top.similarity == pytest.approx(1.0, abs=1e-3)  # float16 index
        sims = [n.similarity for n in layer.neighbours]
        assert sims == sorted(sims, reverse=True)
        assert all(n.lemma == inst.lemma for n in layer.neighbours)
    # in the contextual layers the very same occurrence is the top one, with its gold sense
    for layer in result.layers[1:]:
        top = layer.neighbours[0]
        assert (top.sentence, top.start, top.end) == (" ".join(tokens), inst.start, inst.end)
        assert top.sense_keys == list(inst.sense_keys)
        assert top.gloss and top.words == tokens[inst.start]
    excluded = retriever.query(tokens, inst.start, lemma=inst.lemma, k=3)
    assert all(n.sentence != " ".join(tokens) for layer in excluded.layers for n in layer.neighbours)
    assert any("own instance is left out" in note for note in excluded.notes)


def test_majority_sense_and_json_round_trip(retriever, index, query_instance):
    tokens = list(index.sentence_tokens(query_instance.sentence))
    result = retriever.query(" ".join(tokens), tokens[query_instance.start], k=4)
    assert result.word == tokens[query_instance.start]
    for layer in result.layers:
        senses = [n.sense_keys[0] for n in layer.neighbours]
        share = max(senses.count(s) for s in senses) / len(senses)
        assert layer.majority_share == pytest.approx(share)
        assert layer.majority_sense in senses
        assert layer.majority_agrees == (share > 0.5)
    assert RetrievalResult.from_json(result.to_json()) == result


def test_any_word_scope_searches_every_instance(retriever, index):
    result = retriever.query("The river bank was muddy after the rain .", "bank", scope="any", k=6,
                             layers=[1, 2])
    assert [layer.layer for layer in result.layers] == [1, 2]
    for layer in result.layers:
        assert layer.n_searched == index.n_instances
        assert len(layer.neighbours) == 6
        assert len({n.lemma for n in layer.neighbours}) >= 1


def test_unseen_lemma_and_bad_queries(retriever):
    result = retriever.query("The aardvark slept .", "aardvark")
    assert all(layer.neighbours == [] for layer in result.layers)
    assert any("no sense-tagged instance" in note for note in result.notes)
    with pytest.raises(ValueError, match="not a token"):
        retriever.query("The bank was closed .", "river")
    with pytest.raises(ValueError, match="outside the sentence"):
        retriever.query(["a", "b"], 5)
    with pytest.raises(ValueError, match="scope"):
        retriever.query(["a", "b"], 0, scope="everything")


def test_static_neighbours_beside_the_contextual_ones(retriever):
    result = retriever.query("I sat on the bank .", "bank", k=2)
    layer0, toy = result.static
    assert layer0.embedding.endswith("layer 0") and len(layer0.neighbours) == 10
    assert "bank" not in [w for w, _ in layer0.neighbours]
    assert toy.neighbours[0][0] == "shore"  # cosine: shore (0.2, 1) is nearest to (1, 1)
    assert [w for w, _ in toy.neighbours] == ["shore", "river", "money"]
    missing = retriever.query("The aardvark slept .", "aardvark").static[1]
    assert missing.neighbours == [] and "not in the toy vocabulary" in missing.note


def test_lemma_guess_uses_wordnet_morphology(retriever):
    lemma, pos = retriever.guess_lemma("banks")
    assert lemma == "bank"
    assert retriever.guess_lemma("took")[0] == "take"
