"""Tests for the interpolated Kneser-Ney trigram baseline (elmo_model/training/kneser_ney.py)."""

from __future__ import annotations

import gzip
import itertools
import math
import random
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np
import pytest

from elmo_model.training.kneser_ney import (
    KneserNeyTrigram,
    PerplexityResult,
    fit_bidirectional,
    load_vocab,
    read_sentences,
    whitespace_tokenize,
)


def _paragraphs(path: Path, n: int) -> list[list[str]]:
    """First n paragraphs of an LM corpus file, whitespace tokens (the tokenizer is not tested here)."""
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [line.split() for line in itertools.islice(f, n)]


@pytest.fixture(scope="module")
def wiki_valid(data_root: Path) -> Path:
    return data_root / "lm_corpus" / "wiki-valid.txt.gz"


@pytest.fixture(scope="module")
def wiki_test(data_root: Path) -> Path:
    return data_root / "lm_corpus" / "wiki-test.txt.gz"


@pytest.fixture(scope="module")
def wiki(wiki_valid: Path) -> tuple[list[list[str]], list[str]]:
    """~20k tokens of real text and a vocabulary of its words seen at least twice."""
    sentences = _paragraphs(wiki_valid, 200)
    counts = Counter(t for s in sentences for t in s)
    vocab = sorted(w for w, c in counts.items() if c >= 2)
    return sentences, vocab


def _predictable(model: KneserNeyTrigram) -> list[str]:
    return [w for w in model.id_to_word if w != model.bos]


def _total_probability(model: KneserNeyTrigram, context: tuple[str, str]) -> float:
    return math.fsum(math.exp(model.logprob(context, w)) for w in _predictable(model))


# ------------------------------------------------------------------ a reference implementation


def _reference_kn(sentences, vocab, d):
    """Textbook interpolated KN with dicts (fixed discount d), to check the numpy version."""
    known = set(vocab) | {"</S>"}
    tri = Counter()
    for s in sentences:
        padded = ["<S>", "<S>"] + [t if t in known else "<UNK>" for t in s] + ["</S>"]
        tri.update(zip(padded, padded[1:], padded[2:]))
    bi_left = defaultdict(set)
    bi_raw = Counter()
    for (u, v, w), c in tri.items():
        bi_left[(v, w)].add(u)
        bi_raw[(v, w)] += c
    bi = {k: (bi_raw[k] if k[0] == "<S>" else len(left)) for k, left in bi_left.items()}
    uni_left = defaultdict(set)
    for (v, w) in bi:
        uni_left[w].add(v)
    uni = {w: len(left) for w, left in uni_left.items()}
    n_pred = len(known | {"<UNK>"})

    def group(counts):
        total, types = Counter(), Counter()
        for key, c in counts.items():
            total[key[:-1]] += c
            types[key[:-1]] += 1
        return total, types

    tri_total, tri_types = group(tri)
    bi_total, bi_types = group(bi)
    uni_total, uni_types = sum(uni.values()), len(uni)

    def prob(u, v, w):
        p = (max(uni.get(w, 0) - d, 0) + d * uni_types / n_pred) / uni_total
        if bi_total[(v,)]:
            p = (max(bi.get((v, w), 0) - d, 0) + d * bi_types[(v,)] * p) / bi_total[(v,)]
        if tri_total[(u, v)]:
            p = (max(tri.get((u, v, w), 0) - d, 0) + d * tri_types[(u, v)] * p) / tri_total[(u, v)]
        return p

    return prob


# ------------------------------------------------------------------ tests


def test_hand_computed_probability():
    # <S> <S> a b </S> and <S> <S> a c </S>, D = 0.5, W = {</S>, <UNK>, a, b, c}:
    # P1(b) = (1 - .5)/5 + .5 * 4/5 * 1/5 = 0.18   (continuation counts a:1 b:1 c:1 </S>:2)
    # P2(b|a) = (1 - .5)/2 + .5 * 2/2 * 0.18 = 0.34
    # P3(b|<S> a) = (1 - .5)/2 + .5 * 2/2 * 0.34 = 0.42
    model = KneserNeyTrigram(["a", "b", "c"], discount=0.5).fit([["a", "b"], ["a", "c"]])
    assert math.exp(model.logprob(("<S>", "a"), "b")) == pytest.approx(0.42, abs=1e-12)
    assert math.exp(model.logprob(("x", "a"), "b")) == pytest.approx(0.34, abs=1e-12)
    assert math.exp(model.logprob(("x", "y"), "b")) == pytest.approx(0.18, abs=1e-12)
    assert math.exp(model.logprob(("x", "y"), "</S>")) == pytest.approx(0.38, abs=1e-12)
    assert math.exp(model.logprob(("x", "y"), "zebra")) == pytest.approx(0.08, abs=1e-12)


def test_matches_reference_implementation(wiki):
    sentences, vocab = wiki
    sentences = sentences[:80]
    model = KneserNeyTrigram(vocab, discount=0.7).fit(sentences)
    prob = _reference_kn(sentences, vocab, 0.7)
    rng = random.Random(0)
    queries = []
    for s in rng.sample(sentences, 20):  # seen trigrams, then random (mostly unseen) ones
        padded = ["<S>", "<S>"] + [t if t in model.word_to_id else "<UNK>" for t in s] + ["</S>"]
        queries += list(zip(padded, padded[1:], padded[2:]))
    words = _predictable(model)
    queries += [(rng.choice(words + ["<S>"]), rng.choice(words), rng.choice(words))
                for _ in range(300)]
    for u, v, w in queries:
        assert model.logprob((u, v), w) == pytest.approx(math.log(prob(u, v, w)), abs=1e-10)


@pytest.mark.parametrize("kwargs", [{}, {"discount": 0.3}, {"modified": True},
                                    {"reverse": True}])
def test_distribution_sums_to_one(wiki, kwargs):
    sentences, vocab = wiki
    model = KneserNeyTrigram(vocab, **kwargs).fit(sentences)
    first = sentences[0]
    contexts = [
        ("<S>", "<S>"),                       # sentence start
        ("<S>", first[0]),                    # seen
        (first[0], first[1]),                 # seen
        ("of", "the"),                        # seen, many continuations
        ("the", "of"),                        # unseen pair of known words
        ("zzqx-oov", "the"),                  # OOV -> <UNK> context
        ("zzqx-oov", "qqzz-oov"),             # unseen <UNK> <UNK>, falls to the unigram level
        ("</S>", "<UNK>"),
    ]
    for context in contexts:
        assert _total_probability(model, context) == pytest.approx(1.0, abs=1e-6), context


def test_ney_discounts_from_count_of_counts(wiki):
    sentences, vocab = wiki
    model = KneserNeyTrigram(vocab).fit(sentences)
    tri = Counter()
    for s in sentences:
        padded = ["<S>", "<S>"] + [t if t in model.word_to_id else "<UNK>" for t in s] + ["</S>"]
        tri.update(zip(padded, padded[1:], padded[2:]))
    n = Counter(tri.values())
    assert model.discounts_[2, 1] == pytest.approx(n[1] / (n[1] + 2 * n[2]))
    assert np.all((model.discounts_[:, 1:] > 0) & (model.discounts_[:, 1:] <= 1))
    modified = KneserNeyTrigram(vocab, modified=True).fit(sentences)
    y = n[1] / (n[1] + 2 * n[2])
    assert modified.discounts_[2, 2] == pytest.approx(2 - 3 * y * n[3] / n[2])


def test_training_text_beats_shuffled_words(wiki):
    sentences, vocab = wiki
    model = KneserNeyTrigram(vocab).fit(sentences)
    rng = random.Random(0)
    words = [t for s in sentences for t in s]
    rng.shuffle(words)
    it = iter(words)
    shuffled = [[next(it) for _ in s] for s in sentences]
    on_train = model.perplexity(sentences)
    on_shuffled = model.perplexity(shuffled)
    assert on_train.n_tokens == on_shuffled.n_tokens == len(words) + len(sentences)
    assert on_train.perplexity < on_shuffled.perplexity / 5


def test_heldout_perplexity_is_finite_and_plausible(wiki, wiki_test):
    sentences, vocab = wiki
    forward, backward = fit_bidirectional(sentences, vocab)
    heldout = _paragraphs(wiki_test, 30)
    for model in (forward, backward):
        result = model.perplexity(heldout)
        assert 20 < result.perplexity < len(vocab) + 3
        assert result.n_tokens == sum(len(s) + 1 for s in heldout)
        assert result.n_sentences == len(heldout)
        assert 0 < result.n_unk < result.n_tokens


def test_backward_model_differs_from_forward(wiki):
    sentences, vocab = wiki
    forward, backward = fit_bidirectional(sentences, vocab)
    alone = KneserNeyTrigram(vocab, reverse=True).fit(sentences)
    assert backward.direction == "backward"
    assert np.array_equal(backward._tri_keys, alone._tri_keys)
    fwd = forward.perplexity(sentences[:50])
    bwd = backward.perplexity(sentences[:50], direction="backward")
    assert fwd.n_tokens == bwd.n_tokens
    assert fwd.perplexity != pytest.approx(bwd.perplexity, rel=1e-3)
    # The backward model reads right to left: "the" is seen before "of" there.
    assert backward.logprob(("<S>", "."), "1000") != forward.logprob(("<S>", "."), "1000")
    assert backward.logprob(("<S>", "the"), "of") > forward.logprob(("<S>", "the"), "of")
    with pytest.raises(ValueError, match="backward model"):
        backward.perplexity(sentences[:2], direction="forward")


def test_reverse_matches_forward_on_reversed_text():
    sentences = [["a", "b", "c"], ["b", "c", "c", "a"], ["c"], []]
    backward = KneserNeyTrigram(["a", "b", "c"], discount=0.6, reverse=True).fit(sentences)
    forward = KneserNeyTrigram(["a", "b", "c"], discount=0.6).fit([s[::-1] for s in sentences])
    test = [["c", "b", "a", "x"], ["a"]]
    assert (backward.perplexity(test).perplexity
            == pytest.approx(forward.perplexity([s[::-1] for s in test]).perplexity, rel=1e-12))


def test_oov_words_are_predicted_as_unk():
    corpus = [["the", "cat", "sat"], ["the", "dog", "sat"], ["a", "dog", "ran"]]
    model = KneserNeyTrigram(["the", "cat", "sat", "a"], discount=0.5).fit(corpus)
    # "dog" and "ran" are out of vocabulary: counted and predicted as <UNK>.
    assert model.logprob(("<S>", "the"), "dog") == model.logprob(("<S>", "the"), "<UNK>")
    assert model.logprob(("<S>", "the"), "anything") == model.logprob(("<S>", "the"), "<UNK>")
    assert model.logprob(("the", "dog"), "sat") == model.logprob(("the", "<UNK>"), "sat")
    # Both seen once after "<S> the"; <UNK> also follows "a", so it backs off to more mass.
    assert model.logprob(("<S>", "the"), "dog") > model.logprob(("<S>", "the"), "cat")
    result = model.perplexity([["the", "wolf", "sat"], ["zebra"]])
    assert result.n_unk == 2 and result.n_tokens == 6 and result.n_sentences == 2
    # A literal <S> in text is not padding: it reads as <UNK>, and <S> is never predicted.
    assert model.encode([["<S>"]]).ids.tolist() == [model.unk_id]
    with pytest.raises(ValueError):
        model.logprob(("the", "cat"), "<S>")


def test_vocab_words_never_seen_get_probability():
    model = KneserNeyTrigram(["a", "b", "never"], discount=0.5).fit([["a", "b"]])
    assert math.isfinite(model.logprob(("a", "b"), "never"))
    assert _total_probability(model, ("a", "b")) == pytest.approx(1.0, abs=1e-12)


def test_unfitted_and_bad_arguments():
    with pytest.raises(RuntimeError, match="fit"):
        KneserNeyTrigram(["a"]).logprob(("a", "a"), "a")
    with pytest.raises(ValueError, match="discount"):
        KneserNeyTrigram(["a"], discount=1.5)
    with pytest.raises(ValueError, match="direction"):
        KneserNeyTrigram(["a"]).fit([["a"]]).perplexity([["a"]], direction="sideways")


def test_result_round_trips_through_json(wiki):
    sentences, vocab = wiki
    result = KneserNeyTrigram(vocab).fit(sentences).perplexity(sentences[:5])
    assert PerplexityResult.from_json(result.to_json()) == result


def test_read_sentences_and_vocab(tmp_path):
    text = tmp_path / "a.txt.gz"
    with gzip.open(text, "wt", encoding="utf-8") as f:
        f.write("One two three.\n\n  Four five  \n")
    assert list(read_sentences([text], whitespace_tokenize)) == [
        ["One", "two", "three."], ["Four", "five"]]
    vocab_file = tmp_path / "vocab.txt"
    vocab_file.write_text("</S>\n<S>\n<UNK>\nthe\nof\n", encoding="utf-8")
    vocab = load_vocab(vocab_file)
    model = KneserNeyTrigram(vocab)
    assert model.id_to_word == ["</S>", "<S>", "<UNK>", "the", "of"]
    assert model.n_predictable == 4


def test_cli(tmp_path, capsys, wiki_valid, wiki_test):
    from elmo_model.training.kneser_ney import main

    sentences = _paragraphs(wiki_valid, 60)
    train = tmp_path / "train.txt"
    train.write_text("\n".join(" ".join(s) for s in sentences) + "\n", encoding="utf-8")
    vocab = tmp_path / "vocab.txt"
    words = [w for w, _ in Counter(t for s in sentences for t in s).most_common(500)]
    vocab.write_text("\n".join(["</S>", "<S>", "<UNK>"] + words) + "\n", encoding="utf-8")
    assert main(["--train", str(train), "--vocab", str(vocab), "--eval", str(wiki_test),
                 "--tokenizer", "whitespace", "--json"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    results = [PerplexityResult.from_json(line) for line in lines]
    assert [r.direction for r in results] == ["forward", "backward"]
    assert all(math.isfinite(r.perplexity) and r.perplexity > 1 for r in results)
