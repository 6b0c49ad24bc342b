"""Tests for probing.senses.retrieval: nearest SemCor occurrences per layer on the bilm-tf fixture
model and a SemCor slice, plus static nearest word types."""

import numpy as np
import pytest
import torch

from elmo_model import load_bilm
from elmo_model.embedding import ElmoEmbedder
from probing.context.static import layer0_embedding
from probing.context.static_embedding import StaticEmbedding
from probing.senses.corpora import wordnet
from probing.senses.retrieval import RetrievalResult, SenseRetriever
from probing.senses.wsd import build_semcor_index

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
    assert any("that sentence is left out" in note for note in excluded.notes)


def test_a_query_cut_from_a_semcor_sentence_does_not_find_that_sentence(retriever, index, query_instance):
    inst = query_instance
    tokens = list(index.sentence_tokens(inst.sentence))
    source = " ".join(tokens)
    first = max(0, inst.start - 3)
    cut = tokens[first:first + 7]  # a window of the sentence around the word: no longer the whole text
    assert len(cut) >= 5 and cut != tokens
    every = len(index.lemma_rows(inst.lemma))  # k = all of them: the source is in unless left out
    found = retriever.query(cut, inst.start - first, lemma=inst.lemma, k=every, layers=[1, 2])
    assert all(n.sentence != source for layer in found.layers for n in layer.neighbours)
    assert any("that sentence is left out" in note for note in found.notes)
    kept = retriever.query(cut, inst.start - first, lemma=inst.lemma, k=every, layers=[1],
                           exclude_query_sentence=False)
    assert source in {n.sentence for n in kept.layers[0].neighbours}
    by_id = retriever.query(cut, inst.start - first, lemma=inst.lemma, k=every, layers=[1],
                            exclude_query_sentence=False, exclude_sentence_ids=[index.sentence_id(inst.sentence)])
    assert source not in {n.sentence for n in by_id.layers[0].neighbours}
    # a cut too short to be told from chance ("a group") leaves the sentence in
    short = retriever.query(tokens[inst.start - 1:inst.start + 1], 1, lemma=inst.lemma, k=every, layers=[1])
    assert source in {n.sentence for n in short.layers[0].neighbours}


def test_ties_are_counted_and_no_majority_is_claimed_across_a_tie(retriever, index):
    def alike(name):  # instances of ``name`` spelt exactly ``name``, one word, in different sentences
        found = {}
        for row in index.lemma_rows(name):
            inst = index.instance(int(row))
            if index.sentence_tokens(inst.sentence)[inst.start:inst.end] == (name,):
                found.setdefault(inst.sentence, inst)
        return list(found.values())

    lemma = max(index.lemmas, key=lambda name: len(alike(name)))
    same = alike(lemma)
    assert len(same) >= 5
    query = same[0]
    result = retriever.query(list(index.sentence_tokens(query.sentence)), query.start, lemma=lemma, k=2)
    layer0 = result.layers[0]  # context-free: every other occurrence spelled alike ties
    assert layer0.neighbours[0].similarity == pytest.approx(layer0.neighbours[1].similarity, abs=1e-6)
    assert layer0.n_tied_beyond == len(same) - 1 - 2 and layer0.cut_is_arbitrary and not layer0.majority_agrees
    everything = retriever.query(list(index.sentence_tokens(query.sentence)), query.start, lemma=lemma,
                                 k=len(index.lemma_rows(lemma)))
    assert all(layer.n_tied_beyond == 0 for layer in everything.layers)  # nothing left out, no tie across the cut


def test_majority_sense_and_json_round_trip(retriever, index, query_instance):
    tokens = list(index.sentence_tokens(query_instance.sentence))
    result = retriever.query(" ".join(tokens), tokens[query_instance.start], k=4)
    assert result.word == tokens[query_instance.start]
    for layer in result.layers:
        senses = [n.sense_keys[0] for n in layer.neighbours]
        share = max(senses.count(s) for s in senses) / len(senses)
        assert layer.majority_share == pytest.approx(share)
        assert layer.majority_sense in senses
        assert layer.majority_agrees == (share > 0.5 and not layer.cut_is_arbitrary)
    assert RetrievalResult.from_json(result.to_json()) == result


def test_any_word_scope_searches_every_instance(retriever, index, model):
    """scope='any': the 6 neighbours are the 6 instances of the whole index nearest the query, by a
    brute-force cosine written here (the same similarities, each that of the instance it names), and they are
    not only 'bank'. Run against a copy of ``query`` that ranked by ascending similarity (the
    farthest first): the first neighbour's similarity was 0.879 where the brute force's is 0.9997
    (the old test, '>= 1 distinct lemma among 6', passed it)."""
    tokens = "The river bank was muddy after the rain .".split()
    result = retriever.query(" ".join(tokens), "bank", scope="any", k=6, layers=[1, 2])
    assert [layer.layer for layer in result.layers] == [1, 2]
    query = ElmoEmbedder(model).embed_sentence(tokens)[:, 2]  # (L+1, dim): 'bank'
    for layer in result.layers:
        assert layer.n_searched == index.n_instances
        assert len(layer.neighbours) == 6
        # the index's unit rows as stored (float16): the fixture model's cosines all lie near 0.999, so
        # the stored rounding decides the order; the query's norm is taken here
        every = index.unit_layer(layer.layer).astype(np.float64)  # (instances, dim)
        q = query[layer.layer].astype(np.float64)
        cosine = every @ (q / np.linalg.norm(q))
        best = np.sort(cosine)[::-1][:6]
        assert [n.similarity for n in layer.neighbours] == pytest.approx(best, abs=2e-6)
        # each neighbour is the instance it names (ties may be ordered either way)
        row_of = {(index.sentence_id(index.instance(r).sentence), index.instance(r).start): r
                  for r in range(index.n_instances)}
        assert [cosine[row_of[(n.sentence_id, n.start)]] for n in layer.neighbours] == pytest.approx(
            [n.similarity for n in layer.neighbours], abs=2e-6)
        assert {n.lemma for n in layer.neighbours} != {"bank"}


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
