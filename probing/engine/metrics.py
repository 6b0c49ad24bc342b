"""Scores for sequence-labelling probes: token accuracy, CoNLL chunk F1, bootstrap intervals.

NumPy only. Inputs are per-sentence label sequences (lists of lists, tuples or 1-d arrays of
strings or ints); ``accuracy`` also takes two flat sequences.

Chunk F1 follows the CoNLL-2000 ``conlleval`` script: a chunk starts at ``B-X``, or at ``I-X``
after ``O`` or after a chunk of another type, and ends where the next one starts or at ``O``;
a predicted chunk counts as correct only if its start, end and type all equal a gold chunk's.
(IOBES tags ``E-X``/``S-X`` and conlleval's ``[``/``]`` are handled as conlleval does.)

Bootstrap intervals resample *sentences*, not tokens, from per-sentence sufficient statistics:
(correct, total) tokens for accuracy, (correct, gold, predicted) chunks for F1.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from probing.engine.envelope import JsonDataclass

METRICS = ("accuracy", "chunk_f1")
"""The metric names ``bootstrap_ci`` accepts."""


# --------------------------------------------------------------------------------------------
# Input handling
# --------------------------------------------------------------------------------------------


def _is_label(x: Any) -> bool:
    return isinstance(x, (str, bytes)) or np.ndim(x) == 0


def _as_sentences(seqs: Any) -> list[list]:
    """A list of label lists; a flat sequence of labels becomes one sentence."""
    seqs = list(seqs)
    if seqs and _is_label(seqs[0]):
        return [seqs]
    return [list(s) for s in seqs]


def _paired(gold: Any, pred: Any) -> tuple[list[list], list[list]]:
    gold_s, pred_s = _as_sentences(gold), _as_sentences(pred)
    if len(gold_s) != len(pred_s):
        raise ValueError(f"{len(gold_s)} gold sentences but {len(pred_s)} predicted")
    for i, (g, p) in enumerate(zip(gold_s, pred_s)):
        if len(g) != len(p):
            raise ValueError(f"sentence {i}: {len(g)} gold labels but {len(p)} predicted")
    return gold_s, pred_s


# --------------------------------------------------------------------------------------------
# Accuracy
# --------------------------------------------------------------------------------------------


def sentence_accuracy_stats(gold: Any, pred: Any) -> np.ndarray:
    """Per-sentence ``(correct, total)`` token counts, int64 array of shape (n_sentences, 2)."""
    gold_s, pred_s = _paired(gold, pred)
    stats = np.zeros((len(gold_s), 2), dtype=np.int64)
    for i, (g, p) in enumerate(zip(gold_s, pred_s)):
        stats[i, 0] = sum(1 for a, b in zip(g, p) if a == b)
        stats[i, 1] = len(g)
    return stats


def accuracy(gold: Any, pred: Any) -> float:
    """Token accuracy in [0, 1]: the share of tokens whose predicted label equals the gold one.

    ``gold`` and ``pred``: per-sentence label sequences, or two flat label sequences.
    Raises ValueError on mismatched lengths or when there is no token.
    """
    correct, total = sentence_accuracy_stats(gold, pred).sum(axis=0)
    if total == 0:
        raise ValueError("accuracy of no tokens is undefined")
    return float(correct / total)


# --------------------------------------------------------------------------------------------
# Chunk F1 (conlleval)
# --------------------------------------------------------------------------------------------


def _split_tag(label: str) -> tuple[str, str]:
    # conlleval: /^([^-]*)-(.*)$/ -> (prefix, type); no hyphen -> the whole label, type ""
    prefix, hyphen, chunk_type = str(label).partition("-")
    return (prefix, chunk_type) if hyphen else (prefix, "")


def _end_of_chunk(prev_tag: str, tag: str, prev_type: str, chunk_type: str) -> bool:
    """conlleval's endOfChunk: does a chunk end between the previous token and this one?"""
    if prev_tag in ("B", "I") and tag in ("B", "O"):
        return True
    if prev_tag == "E" and tag in ("E", "I", "O"):
        return True
    if prev_tag not in ("O", ".") and prev_type != chunk_type:
        return True
    # conlleval's corrected 1998-12-22 rule: bracket chunks have length 1; S- (IOBES) too
    return prev_tag in ("]", "[", "S")


def _start_of_chunk(prev_tag: str, tag: str, prev_type: str, chunk_type: str) -> bool:
    """conlleval's startOfChunk: does a chunk start at this token?"""
    if tag == "B" and prev_tag in ("B", "I", "O"):
        return True
    if tag == "I" and prev_tag == "O":
        return True
    if tag == "E" and prev_tag in ("E", "O"):
        return True
    if tag == "I" and prev_tag == "E":
        return True
    if tag not in ("O", ".") and prev_type != chunk_type:
        return True
    return tag in ("[", "]", "S")


def chunk_spans(tags: Sequence[str]) -> list[tuple[str, int, int]]:
    """The chunks of one sentence as ``(type, start, end)``, ``end`` exclusive, conlleval rules.

    >>> chunk_spans(["B-NP", "I-NP", "O", "I-VP", "B-PP", "I-NP"])
    [('NP', 0, 2), ('VP', 3, 4), ('PP', 4, 5), ('NP', 5, 6)]
    """
    spans: list[tuple[str, int, int]] = []
    start: int | None = None
    open_type = ""
    prev_tag, prev_type = "O", ""
    # a sentence boundary acts as an O tag, as in conlleval
    for i, label in enumerate([*tags, "O"]):
        tag, chunk_type = _split_tag(label)
        if start is not None and _end_of_chunk(prev_tag, tag, prev_type, chunk_type):
            spans.append((open_type, start, i))
            start = None
        if _start_of_chunk(prev_tag, tag, prev_type, chunk_type):
            if start is not None:  # conlleval counts every start as a new chunk
                spans.append((open_type, start, i))
            start, open_type = i, chunk_type
        prev_tag, prev_type = tag, chunk_type
    return spans


@dataclass(frozen=True)
class ChunkScore(JsonDataclass):
    """Chunk precision, recall and F1 in [0, 1] (conlleval prints them x100) and their counts.

    ``by_type`` holds the same per chunk type ("NP", "VP", ...); empty inside a per-type score.
    """

    precision: float
    recall: float
    f1: float
    n_correct: int
    n_gold: int
    n_pred: int
    by_type: dict[str, "ChunkScore"] = field(default_factory=dict, compare=True, hash=False)

    @classmethod
    def from_counts(cls, n_correct: int, n_gold: int, n_pred: int,
                    by_type: Mapping[str, "ChunkScore"] | None = None) -> "ChunkScore":
        """Precision = correct / pred, recall = correct / gold, F1 = 2 correct / (gold + pred); 0 when undefined."""
        precision = n_correct / n_pred if n_pred else 0.0
        recall = n_correct / n_gold if n_gold else 0.0
        f1 = 2 * n_correct / (n_gold + n_pred) if n_gold + n_pred else 0.0
        return cls(float(precision), float(recall), float(f1), int(n_correct), int(n_gold),
                   int(n_pred), dict(by_type or {}))


def sentence_chunk_stats(gold: Any, pred: Any) -> np.ndarray:
    """Per-sentence ``(correct, gold, predicted)`` chunk counts, int64 array (n_sentences, 3)."""
    gold_s, pred_s = _paired(gold, pred)
    stats = np.zeros((len(gold_s), 3), dtype=np.int64)
    for i, (g, p) in enumerate(zip(gold_s, pred_s)):
        gold_spans, pred_spans = chunk_spans(g), chunk_spans(p)
        stats[i] = (len(set(gold_spans) & set(pred_spans)), len(gold_spans), len(pred_spans))
    return stats


def chunk_f1(gold: Any, pred: Any) -> ChunkScore:
    """Chunk precision, recall and F1 of ``pred`` against ``gold``, as conlleval computes them.

    ``gold`` and ``pred``: per-sentence BIO tag sequences ("B-NP", "I-NP", "O", ...); a flat
    sequence is one sentence. Chunks never cross sentence boundaries.
    """
    gold_s, pred_s = _paired(gold, pred)
    counts: dict[str, list[int]] = {}
    for g, p in zip(gold_s, pred_s):
        gold_spans, pred_spans = set(chunk_spans(g)), set(chunk_spans(p))
        for span in gold_spans:
            counts.setdefault(span[0], [0, 0, 0])[1] += 1
        for span in pred_spans:
            counts.setdefault(span[0], [0, 0, 0])[2] += 1
        for span in gold_spans & pred_spans:
            counts[span[0]][0] += 1
    by_type = {name: ChunkScore.from_counts(*c) for name, c in sorted(counts.items())}
    totals = np.array(list(counts.values()), dtype=np.int64).reshape(-1, 3).sum(axis=0)
    return ChunkScore.from_counts(*totals, by_type=by_type)


# --------------------------------------------------------------------------------------------
# Bootstrap
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BootstrapInterval(JsonDataclass):
    """A percentile bootstrap interval: ``low <= estimate <= high`` (usually), all in [0, 1].

    ``estimate`` is the metric on all sentences; ``level`` the coverage (0.95);
    ``n_resamples`` resamples of ``n_sentences`` sentences drawn with replacement by ``seed``.
    """

    metric: str
    estimate: float
    low: float
    high: float
    level: float
    n_resamples: int
    n_sentences: int
    seed: int


def _statistic(sums: np.ndarray, metric: str) -> np.ndarray:
    """The metric from summed sufficient statistics, shape (..., k) -> (...)."""
    sums = np.asarray(sums, dtype=np.float64)
    if metric == "accuracy":
        correct, total = sums[..., 0], sums[..., 1]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(total > 0, correct / np.where(total > 0, total, 1), np.nan)
    correct, n_gold, n_pred = sums[..., 0], sums[..., 1], sums[..., 2]
    denominator = n_gold + n_pred
    return np.where(denominator > 0, 2 * correct / np.where(denominator > 0, denominator, 1), 0.0)


def bootstrap_ci_from_stats(stats: np.ndarray, metric: str, n_resamples: int = 1000, level: float = 0.95,
                            seed: int = 0) -> BootstrapInterval:
    """Percentile bootstrap interval of ``metric`` from per-sentence statistics.

    ``stats``: (n_sentences, 2) ``(correct, total)`` for "accuracy" or (n_sentences, 3)
    ``(correct, gold, pred)`` for "chunk_f1" (see ``sentence_accuracy_stats`` and
    ``sentence_chunk_stats``). Each resample draws n_sentences sentences with replacement and
    recomputes the metric from the summed statistics. Same inputs and seed, same interval.
    """
    if metric not in METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose from {', '.join(METRICS)}")
    stats = np.asarray(stats)
    width = 2 if metric == "accuracy" else 3
    if stats.ndim != 2 or stats.shape[1] != width:
        raise ValueError(f"{metric} needs per-sentence stats of shape (n, {width}), got {stats.shape}")
    n = stats.shape[0]
    if n == 0:
        raise ValueError("bootstrap over no sentences is undefined")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be between 0 and 1, got {level!r}")
    if n_resamples < 1:
        raise ValueError(f"n_resamples must be at least 1, got {n_resamples!r}")
    estimate = float(_statistic(stats.sum(axis=0), metric))
    if np.isnan(estimate):
        raise ValueError(f"{metric} is undefined on these sentences (no tokens)")

    rng = np.random.default_rng(seed)
    values = np.empty(n_resamples, dtype=np.float64)
    batch = max(1, min(n_resamples, 1_000_000 // n))  # bounds memory at ~1M indices a batch
    for first in range(0, n_resamples, batch):
        size = min(batch, n_resamples - first)
        rows = rng.integers(0, n, size=(size, n))  # (size, n): sentence indices per resample
        values[first:first + size] = _statistic(stats[rows].sum(axis=1), metric)
    alpha = (1.0 - level) / 2.0
    low, high = np.nanquantile(values, [alpha, 1.0 - alpha])
    return BootstrapInterval(metric, estimate, float(low), float(high), float(level),
                             int(n_resamples), int(n), int(seed))


def bootstrap_ci(gold: Any, pred: Any, metric: str = "accuracy", n_resamples: int = 1000, level: float = 0.95,
                 seed: int = 0) -> BootstrapInterval:
    """Percentile bootstrap ``level`` interval of ``metric`` ("accuracy" or "chunk_f1").

    Resamples sentences (not tokens) with replacement, ``n_resamples`` times, seeded.
    ``gold``/``pred``: per-sentence label sequences, as for ``accuracy`` and ``chunk_f1``.
    """
    if metric == "accuracy":
        stats = sentence_accuracy_stats(gold, pred)
    elif metric == "chunk_f1":
        stats = sentence_chunk_stats(gold, pred)
    else:
        raise ValueError(f"unknown metric {metric!r}; choose from {', '.join(METRICS)}")
    return bootstrap_ci_from_stats(stats, metric, n_resamples=n_resamples, level=level, seed=seed)


__all__ = [
    "METRICS", "BootstrapInterval", "ChunkScore", "accuracy", "bootstrap_ci",
    "bootstrap_ci_from_stats", "chunk_f1", "chunk_spans", "sentence_accuracy_stats",
    "sentence_chunk_stats",
]
