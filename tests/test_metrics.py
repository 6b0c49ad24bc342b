"""Tests for probing.engine.metrics: hand-computed cases, conlleval semantics, bootstrap on real data."""

import json

import numpy as np
import pytest

from probing.engine.metrics import (
    BootstrapInterval,
    ChunkScore,
    accuracy,
    bootstrap_ci,
    bootstrap_ci_from_stats,
    chunk_f1,
    chunk_spans,
    sentence_accuracy_stats,
    sentence_chunk_stats,
)
from probing.tagging.tasks import load_task

# --------------------------------------------------------------------------------------------
# accuracy
# --------------------------------------------------------------------------------------------


def test_accuracy_flat_and_nested():
    assert accuracy(["NN", "VB", "DT", "NN"], ["NN", "VB", "NN", "NN"]) == 0.75
    gold = [["NN", "VB"], ["DT"], ["JJ", "NN", "."]]
    pred = [["NN", "NN"], ["DT"], ["JJ", "NN", ","]]
    assert accuracy(gold, pred) == pytest.approx(4 / 6)
    assert accuracy([np.array([1, 2, 3])], [np.array([1, 0, 3])]) == pytest.approx(2 / 3)
    np.testing.assert_array_equal(sentence_accuracy_stats(gold, pred), [[1, 2], [1, 1], [2, 3]])


def test_accuracy_rejects_bad_input():
    with pytest.raises(ValueError, match="sentence 1: 2 gold labels but 1 predicted"):
        accuracy([["A"], ["B", "C"]], [["A"], ["B"]])
    with pytest.raises(ValueError, match="2 gold sentences but 1 predicted"):
        accuracy([["A"], ["B"]], [["A"]])
    with pytest.raises(ValueError, match="no tokens"):
        accuracy([], [])


# --------------------------------------------------------------------------------------------
# chunk spans and F1 (conlleval)
# --------------------------------------------------------------------------------------------


def test_chunk_spans_follow_conlleval():
    assert chunk_spans(["B-NP", "I-NP", "O", "B-VP"]) == [("NP", 0, 2), ("VP", 3, 4)]
    # I-X after O starts a chunk
    assert chunk_spans(["O", "I-NP", "I-NP", "O"]) == [("NP", 1, 3)]
    # I-X after a chunk of another type starts a new chunk
    assert chunk_spans(["B-NP", "I-VP", "I-VP"]) == [("NP", 0, 1), ("VP", 1, 3)]
    # B-X after B-X: two chunks; a chunk still open at the end is closed there
    assert chunk_spans(["B-NP", "B-NP", "I-NP"]) == [("NP", 0, 1), ("NP", 1, 3)]
    # a sentence starting with I-X, hyphenated types, and no chunk at all
    assert chunk_spans(["I-PP", "B-X-Y", "I-X-Y"]) == [("PP", 0, 1), ("X-Y", 1, 3)]
    assert chunk_spans(["O", "O"]) == [] and chunk_spans([]) == []


def test_chunk_f1_hand_computed():
    gold = ["B-NP", "I-NP", "O", "B-VP", "I-VP", "B-PP", "B-NP"]
    # gold chunks: NP[0,2) VP[3,5) PP[5,6) NP[6,7)
    # pred chunks: NP[0,1) VP[1,2) VP[3,5) PP[5,6) NP[6,7): the first NP is cut by a type change
    pred = ["B-NP", "I-VP", "O", "B-VP", "I-VP", "B-PP", "B-NP"]
    score = chunk_f1([gold], [pred])
    assert (score.n_correct, score.n_gold, score.n_pred) == (3, 4, 5)
    assert score.precision == pytest.approx(3 / 5)
    assert score.recall == pytest.approx(3 / 4)
    assert score.f1 == pytest.approx(2 * 3 / (4 + 5))
    assert score.by_type["NP"].n_correct == 1 and score.by_type["NP"].n_gold == 2
    assert score.by_type["NP"].n_pred == 2
    assert (score.by_type["VP"].n_correct, score.by_type["VP"].n_gold, score.by_type["VP"].n_pred) == (1, 1, 2)
    assert score.by_type["PP"].f1 == 1.0


def test_chunk_f1_scores_spans_not_tags():
    gold = ["B-NP", "I-NP", "O", "B-VP", "I-VP", "B-PP", "B-NP"]
    # different tags, same chunks: I-VP after O starts the VP, I-NP after B-PP starts the NP
    pred = ["B-NP", "I-NP", "O", "I-VP", "I-VP", "B-PP", "I-NP"]
    assert chunk_f1([gold], [pred]).f1 == 1.0
    assert accuracy(gold, pred) < 1.0


def test_chunk_f1_type_mismatch_and_boundaries():
    # same span, wrong type: no credit
    score = chunk_f1([["B-NP", "I-NP"]], [["B-VP", "I-VP"]])
    assert (score.n_correct, score.n_gold, score.n_pred, score.f1) == (0, 1, 1, 0.0)
    # a chunk never crosses a sentence boundary: I-NP opening sentence 2 is a chunk of its own
    score = chunk_f1([["B-NP"], ["I-NP"]], [["B-NP", ], ["B-NP"]])
    assert (score.n_correct, score.n_gold, score.n_pred) == (2, 2, 2)
    np.testing.assert_array_equal(sentence_chunk_stats([["B-NP"], ["I-NP"]], [["B-NP"], ["O"]]),
                                  [[1, 1, 1], [0, 1, 0]])
    # nothing predicted: precision, recall, F1 all 0 (conlleval's convention)
    score = chunk_f1([["B-NP", "O"]], [["O", "O"]])
    assert (score.precision, score.recall, score.f1, score.n_pred) == (0.0, 0.0, 0.0, 0)


def test_chunk_score_round_trips_json():
    score = chunk_f1([["B-NP", "I-NP", "B-VP"]], [["B-NP", "B-NP", "B-VP"]])
    again = ChunkScore.from_dict(json.loads(json.dumps(score.to_dict())))
    assert again == score and again.by_type["NP"] == score.by_type["NP"]


def test_chunk_f1_perfect_on_real_gold(data_root):
    sentences = load_task("chunk", "test", root=data_root, limit=200)
    gold = [s.tags for s in sentences]
    score = chunk_f1(gold, gold)
    assert score.f1 == 1.0 and score.n_gold == score.n_pred == score.n_correct > 1000
    # all-O prediction finds nothing
    assert chunk_f1(gold, [["O"] * len(g) for g in gold]).n_pred == 0


# --------------------------------------------------------------------------------------------
# bootstrap
# --------------------------------------------------------------------------------------------


def _corrupt(gold, rate, seed, labels):
    rng = np.random.default_rng(seed)
    return [[labels[rng.integers(len(labels))] if rng.random() < rate else t for t in g] for g in gold]


def test_bootstrap_accuracy_on_real_slice(data_root):
    sentences = load_task("pos", "dev", root=data_root, limit=400)
    gold = [s.tags for s in sentences]
    pred = _corrupt(gold, 0.1, seed=0, labels=["NN", "VB", "JJ", "IN"])
    ci = bootstrap_ci(gold, pred, "accuracy", n_resamples=500, seed=7)
    assert ci.estimate == pytest.approx(accuracy(gold, pred))
    assert ci.low < ci.estimate < ci.high and ci.high - ci.low < 0.05
    assert (ci.metric, ci.n_resamples, ci.n_sentences, ci.level, ci.seed) == ("accuracy", 500, 400, 0.95, 7)
    assert bootstrap_ci(gold, pred, "accuracy", n_resamples=500, seed=7) == ci
    assert bootstrap_ci(gold, pred, "accuracy", n_resamples=500, seed=8) != ci
    narrower = bootstrap_ci(gold, pred, "accuracy", n_resamples=500, level=0.5, seed=7)
    assert ci.low <= narrower.low <= narrower.high <= ci.high
    assert BootstrapInterval.from_dict(json.loads(json.dumps(ci.to_dict()))) == ci


def test_bootstrap_chunk_f1_on_real_slice(data_root):
    sentences = load_task("chunk", "dev", root=data_root, limit=300)
    gold = [s.tags for s in sentences]
    pred = _corrupt(gold, 0.1, seed=1, labels=["O", "B-NP", "I-NP", "B-VP"])
    ci = bootstrap_ci(gold, pred, "chunk_f1", n_resamples=500, seed=0)
    assert ci.estimate == pytest.approx(chunk_f1(gold, pred).f1)
    assert ci.low < ci.estimate < ci.high
    stats = sentence_chunk_stats(gold, pred)
    assert bootstrap_ci_from_stats(stats, "chunk_f1", n_resamples=500, seed=0) == ci


def test_bootstrap_resamples_sentences_not_tokens():
    # one sentence holds every token: each resample is that sentence, so the interval collapses
    gold = [["A"] * 100]
    pred = [["A"] * 60 + ["B"] * 40]
    ci = bootstrap_ci(gold, pred, "accuracy", n_resamples=200, seed=0)
    assert ci.low == ci.estimate == ci.high == 0.6
    # two sentences, all right vs all wrong: resampled accuracies are sums over whole sentences
    stats = np.array([[10, 10], [0, 10]])
    ci = bootstrap_ci_from_stats(stats, "accuracy", n_resamples=1000, seed=0)
    assert ci.estimate == 0.5 and ci.low == 0.0 and ci.high == 1.0


def test_bootstrap_validates_input():
    with pytest.raises(ValueError, match="unknown metric"):
        bootstrap_ci([["A"]], [["A"]], "bleu")
    with pytest.raises(ValueError, match=r"shape \(n, 3\)"):
        bootstrap_ci_from_stats(np.ones((4, 2)), "chunk_f1")
    with pytest.raises(ValueError, match="no sentences"):
        bootstrap_ci_from_stats(np.zeros((0, 2)), "accuracy")
    with pytest.raises(ValueError, match="level"):
        bootstrap_ci([["A"]], [["A"]], level=95)
