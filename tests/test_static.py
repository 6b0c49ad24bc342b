"""Tests for probing.context.static: the static-embedding class, the biLM's layer 0 as a type
embedding, and word2vec trained on a slice of the LM corpus."""

import numpy as np
import pytest
import torch

from elmo_model import load_bilm
from elmo_model.corpus.embedder import ElmoEmbedder
from probing.context.static import (
    DEFAULT_WORD2VEC,
    Word2VecConfig,
    layer0_embedding,
    load_word2vec,
    model_vocabulary,
    static_baselines,
    train_word2vec,
)
from probing.context.static_embedding import StaticEmbedding


@pytest.fixture(scope="module")
def model(data_root):
    torch.set_num_threads(1)
    return load_bilm(data_root / "fixtures/bilm_tf")


def toy():
    words = ["Bank", "river", "money", "shore", "zero"]
    vectors = np.array([[1.0, 1.0], [0.0, 1.0], [1.0, 0.0], [0.2, 1.0], [0.0, 0.0]])
    return StaticEmbedding(words, vectors, name="toy", lowercase=False)


def test_nearest_excludes_the_word_and_ranks_by_cosine():
    emb = toy()
    assert [w for w, _ in emb.nearest("Bank", 3)] == ["shore", "river", "money"]
    sims = dict(emb.nearest("Bank", 4))
    assert sims["river"] == pytest.approx(1 / np.sqrt(2))
    assert sims["zero"] == 0.0
    assert emb.nearest("bank") == []  # case-sensitive unless lowercase
    assert emb.nearest("unknown", vector=np.array([0.0, 1.0]), k=1) == [("river", 1.0)]
    features, known = emb.embed_tokens(["river", "nope", "money"])
    assert known.tolist() == [True, False, True]
    np.testing.assert_array_equal(features, [[0, 1], [0, 0], [1, 0]])
    with pytest.raises(KeyError, match="toy"):
        emb.vector("nope")


def test_save_load_round_trip_without_pickle(tmp_path):
    emb = StaticEmbedding(["a", "b"], np.array([[0.5, -1.0], [2.0, 0.25]]), name="tiny",
                          lowercase=True, meta={"kind": "test"})
    path = emb.save(tmp_path / "tiny.npz")
    with np.load(path, allow_pickle=False) as data:  # no object arrays in the file
        assert data["vectors"].dtype == np.float16
    back = StaticEmbedding.load(path)
    assert back.words == ["a", "b"] and back.lowercase and back.name == "tiny"
    np.testing.assert_allclose(back.vectors, emb.vectors, rtol=1e-3)
    assert "A" in back and back.meta["kind"] == "test"
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="not a static-embedding file"):
        StaticEmbedding.load(tmp_path / "bad.npz")
    with pytest.raises(FileNotFoundError, match="train-word2vec"):
        load_word2vec(tmp_path / "missing.npz")


def test_layer0_embedding_is_the_context_free_layer(model):
    words = model_vocabulary(model)
    assert len(words) > 400 and "<S>" not in words
    emb = layer0_embedding(model, max_words=None)
    assert len(emb) == len(words) and emb.dim == 16
    # the biLM's layer 0 of a word inside a sentence is [x; x] with x the type vector
    sentence = ["The", "concept", "of", "care", "."]
    layers = ElmoEmbedder(model).embed_sentence(sentence)
    for t in (1, 3):
        np.testing.assert_allclose(layers[0, t, :16], emb.vector(sentence[t]), atol=1e-5)
        np.testing.assert_allclose(layers[0, t, 16:], emb.vector(sentence[t]), atol=1e-5)
    extra = layer0_embedding(model, ["qwertyuiop"])
    assert extra.words == ["qwertyuiop"] and np.linalg.norm(extra.vectors[0]) > 0


def test_word2vec_on_a_corpus_slice_is_deterministic(data_root, tmp_path):
    config = Word2VecConfig(vector_size=16, min_count=2, max_vocab=None, epochs=1,
                            max_tokens=20_000, seed=3)
    first = train_word2vec(data_root, config, out=tmp_path / "w2v.npz")
    second = train_word2vec(data_root, config, out=None)
    assert first.words == second.words and len(first) > 500
    np.testing.assert_array_equal(first.vectors, second.vectors)
    assert first.meta["n_tokens"] >= 20_000 and first.meta["config"]["seed"] == 3
    assert first.lowercase and "the" in first and "The" in first  # looked up lower-cased
    loaded = load_word2vec(tmp_path / "w2v.npz")
    assert loaded.words == first.words and loaded.meta["kind"] == "word2vec"
    assert len(loaded.nearest("the", 5)) == 5


def test_shipped_word2vec_and_the_offline_baselines(model, tmp_path):
    shipped = load_word2vec()
    assert DEFAULT_WORD2VEC.stat().st_size < 20e6
    assert len(shipped) > 30_000 and shipped.dim == 100 and shipped.meta["kind"] == "word2vec"
    assert "play" in [w for w, _ in shipped.nearest("plays", 5)]
    layer0, w2v = static_baselines(model)
    assert layer0.meta["kind"] == "bilm_layer0" and w2v.words == shipped.words
    assert static_baselines(None, tmp_path / "none.npz") == []
