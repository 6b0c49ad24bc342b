"""Dependency trees and tree metrics: the gold trees of UD English-EWT (or of a fetched UD treebank
of another language, ``read_treebank_trees``), path lengths and depths in
them, the minimum spanning tree of predicted distances, UUAS, root accuracy and the Spearman
correlations of Hewitt & Manning (2019). The structural probes that predict them are in
``probing.syntax.structural``.

    >>> from probing.syntax.trees import read_ewt_trees, tree_distances
    >>> trees = read_ewt_trees("dev", limit=100)
    >>> tree_distances(trees[0].heads)          # (T, T) int64: path lengths in the gold tree

- ``DependencyTree``: one sentence of UD English-EWT with a head and a relation per token
  (``heads[i]`` is the 0-based index of token i's head, -1 for the root).
- ``tree_distances`` / ``tree_depths``: path lengths between tokens / from the root.
- ``mst_edges``: the minimum spanning tree of a distance matrix (Prim); ``uuas_counts``: how many
  gold arcs (between non-punctuation tokens) the MST of predicted distances recovers.
- ``spearman_by_length``: Spearman correlations grouped by sentence length and averaged over
  lengths 5-50 (the paper's DSpr. and NSpr.).

Punctuation (UPOS ``PUNCT``) is left out of UUAS and root accuracy, as in the paper; the
Spearman correlations use every token.
"""

from __future__ import annotations

import contextlib
import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator, Sequence

import numpy as np
from scipy.stats import rankdata

from elmo_model.text.reader import read_text_lines
from probing.data.registry import Treebank
from probing.data.treebanks import treebank_file
from probing.engine.envelope import JsonDataclass
from probing.engine.renamed_keywords import renamed_keywords
from probing.tagging.tasks import read_conllu

PUNCT_UPOS = "PUNCT"
SPEARMAN_LENGTHS = (5, 50)
"""Sentence lengths (inclusive) the Spearman correlations are averaged over, as in the paper."""


@dataclass(frozen=True)
class DependencyTree(JsonDataclass):
    """One sentence with its gold dependency tree.

    - ``tokens``: the syntactic words, length T (multiword tokens split, as ``read_ewt``).
    - ``heads``: 0-based index of each token's head, -1 for the root, length T.
    - ``relations``: the UD relation of each token to its head (``nsubj``, ``obl:npmod``, ``root``).
    - ``upos``: universal POS tags (punctuation is ``PUNCT``).
    """

    tokens: tuple[str, ...]
    heads: tuple[int, ...]
    relations: tuple[str, ...]
    upos: tuple[str, ...]
    sent_id: str = ""

    def __post_init__(self) -> None:
        n = len(self.tokens)
        if not (len(self.heads) == len(self.relations) == len(self.upos) == n):
            raise ValueError(f"sentence {self.sent_id or '?'}: {n} tokens but {len(self.heads)} heads, "
                             f"{len(self.relations)} relations, {len(self.upos)} UPOS tags")
        if sum(h == -1 for h in self.heads) != 1 or any(not -1 <= h < n or h == i for i, h in enumerate(self.heads)):
            raise ValueError(f"sentence {self.sent_id or '?'}: heads {list(self.heads)} are not a tree "
                             f"(one root, -1; every other head an index in 0..{n - 1}, not the token itself)")

    def __len__(self) -> int:
        return len(self.tokens)

    @property
    def root(self) -> int:
        return self.heads.index(-1)

    @property
    def punct(self) -> np.ndarray:
        """(T,) bool: which tokens are punctuation."""
        return np.array([u == PUNCT_UPOS for u in self.upos], dtype=bool)


def parse_conllu_trees(lines: Iterable[str], source: str = "<conllu>") -> Iterator[DependencyTree]:
    """CoNLL-U lines -> one ``DependencyTree`` a sentence, read by ``probing.tagging.tasks.read_conllu``
    (multiword-token lines and empty nodes skipped, so word IDs are 1..T and a HEAD of h is index
    h - 1). A token line without 10 columns or with a non-numeric HEAD raises ValueError naming
    ``source`` and the line number."""
    for sentence in read_conllu(lines, source):
        for head, lineno in zip(sentence.heads, sentence.lines):
            if not head.isdigit():
                raise ValueError(f"{source}:{lineno}: HEAD column is {head!r}, expected a word number")
        try:
            yield DependencyTree(sentence.forms, tuple(int(h) - 1 for h in sentence.heads), sentence.deprels,
                                 sentence.upos, sentence.sent_id)
        except ValueError as err:
            raise ValueError(f"{source}:{sentence.lines[0]}: {err}") from err


@renamed_keywords(root="data_root")
def read_ewt_trees(split: str, data_root: str | os.PathLike | None = None,
                   limit: int | None = None) -> list[DependencyTree]:
    """UD English-EWT dependency trees of ``split`` ("train", "dev", "test"); ``limit``: the first N.
    The tokens are those of ``probing.tagging.tasks.read_ewt``, so activation caches are shared."""
    return read_treebank_trees("en_ewt", split, data_root, limit)


@renamed_keywords(root="data_root")
def read_treebank_trees(treebank: str | Treebank, split: str, data_root: str | os.PathLike | None = None,
                        limit: int | None = None) -> list[DependencyTree]:
    """The dependency trees of a UD treebank's ``split`` (``treebank``: a code such as ``fr_gsd``, a
    language or its ISO code; fetched with ``python -m probing.data download ud:LANGUAGE``);
    ``limit``: the first N. Whole splits are kept in memory (per file version). Raises
    DatasetMissing, naming the command that fetches it, when the treebank is not in the data root."""
    if split not in ("train", "dev", "test"):
        raise ValueError(f"unknown split {split!r}; choose from train, dev, test")
    path = treebank_file(treebank, split, data_root)
    if limit is None:
        stat = path.stat()
        return list(_whole_split(str(path), stat.st_mtime_ns, stat.st_size))
    out = []
    with contextlib.closing(read_text_lines(path)) as lines:
        for tree in parse_conllu_trees(lines, str(path)):
            if len(out) >= limit:
                break
            out.append(tree)
    return out


@functools.lru_cache(maxsize=6)
def _whole_split(path: str, mtime_ns: int, size: int) -> tuple[DependencyTree, ...]:
    # mtime and size are part of the key so that a replaced file is read again
    with contextlib.closing(read_text_lines(Path(path))) as lines:
        return tuple(parse_conllu_trees(lines, path))


def tree_distances(heads: Sequence[int]) -> np.ndarray:
    """Path lengths between every pair of tokens of a tree, (T, T) int64 (``heads``: 0-based, -1 root).

    Through ancestor sets: with ``A[i, a]`` true when a is i or above it, ``(A @ A.T)[i, j]`` counts
    the common ancestors of i and j, one more than their lowest common ancestor's depth, so
    ``dist(i, j) = depth(i) + depth(j) - 2 * depth(lca)`` without a graph search."""
    heads = np.asarray(heads, dtype=np.int64)
    n = len(heads)
    if n == 0:
        return np.zeros((0, 0), dtype=np.int64)
    if heads.ndim != 1 or ((heads < -1) | (heads >= n)).any() or int((heads == -1).sum()) != 1:
        raise ValueError(f"heads {heads.tolist()} do not connect every token (one root, heads in -1..{n - 1})")
    above = np.eye(n, dtype=np.int64)
    rows = np.arange(n)
    current = heads.copy()
    for _ in range(n):
        live = current >= 0
        if not live.any():
            break
        above[rows[live], current[live]] = 1
        current[live] = heads[current[live]]
    else:
        if (current >= 0).any():
            raise ValueError(f"heads {heads.tolist()} do not connect every token (a cycle)")
    depth = above.sum(axis=1) - 1
    common = above @ above.T
    return depth[:, None] + depth[None, :] - 2 * (common - 1)


def tree_depths(heads: Sequence[int]) -> np.ndarray:
    """Each token's distance from the root, (T,) int64."""
    return tree_distances(heads)[list(heads).index(-1)]


def mst_edges(dist: np.ndarray) -> set[tuple[int, int]]:
    """Edges (i < j) of a minimum spanning tree of the complete graph with weights ``dist``
    (T, T), by Prim's algorithm (ties go to the lower index)."""
    dist = np.asarray(dist, dtype=np.float64)
    n = len(dist)
    if n < 2:
        return set()
    in_tree = np.zeros(n, dtype=bool)
    in_tree[0] = True
    best = dist[0].copy()
    parent = np.zeros(n, dtype=np.int64)
    edges = set()
    for _ in range(n - 1):
        candidates = np.where(in_tree, np.inf, best)
        j = int(np.argmin(candidates))
        i = int(parent[j])
        edges.add((min(i, j), max(i, j)))
        in_tree[j] = True
        closer = dist[j] < best
        best = np.where(closer, dist[j], best)
        parent = np.where(closer, j, parent)
    return edges


def gold_edges(tree: DependencyTree, ignore_punct: bool = True) -> set[tuple[int, int]]:
    """The gold tree's arcs as (i < j) pairs over the kept tokens. With ``ignore_punct`` the
    punctuation tokens are removed and the arcs are those of the minimum spanning tree of the gold
    distances between the rest (as Hewitt & Manning's evaluation): the gold arcs themselves when
    punctuation has no dependents. Indices are into the sentence."""
    keep = np.flatnonzero(~tree.punct) if ignore_punct else np.arange(len(tree))
    if ignore_punct and len(keep) == len(tree):
        return {(min(i, h), max(i, h)) for i, h in enumerate(tree.heads) if h >= 0}
    dist = tree_distances(tree.heads)[np.ix_(keep, keep)]
    return {(int(keep[a]), int(keep[b])) for a, b in mst_edges(dist)}


def predicted_edges(distances: np.ndarray, tree: DependencyTree, ignore_punct: bool = True) -> set[tuple[int, int]]:
    """The minimum spanning tree of predicted ``distances`` (T, T) over the kept tokens, as
    (i < j) index pairs into the sentence."""
    keep = np.flatnonzero(~tree.punct) if ignore_punct else np.arange(len(tree))
    return {(int(keep[a]), int(keep[b])) for a, b in mst_edges(np.asarray(distances)[np.ix_(keep, keep)])}


def uuas_counts(distances: np.ndarray, tree: DependencyTree) -> tuple[int, int]:
    """(gold arcs the MST of ``distances`` recovers, gold arcs) over non-punctuation tokens."""
    gold = gold_edges(tree)
    return len(gold & predicted_edges(distances, tree)), len(gold)


def uuas(predicted: Sequence[np.ndarray], trees: Sequence[DependencyTree]) -> float:
    """Undirected unlabelled attachment score over a corpus: recovered gold arcs / gold arcs."""
    counts = np.array([uuas_counts(d, t) for d, t in zip(predicted, trees)]).reshape(-1, 2)
    return float(counts[:, 0].sum() / max(1, counts[:, 1].sum()))


ARC_LENGTHS = (("1", 1, 1), ("2", 2, 2), ("3-4", 3, 4), ("5+", 5, None))
"""Bins of a gold arc's linear length (|i - j| in the sentence's tokens): name, shortest, longest."""


def _length_bin(length: int) -> str:
    return next(name for name, low, high in ARC_LENGTHS if length >= low and (high is None or length <= high))


def uuas_by_arc_length(predicted: Sequence[np.ndarray] | None, trees: Sequence[DependencyTree]) -> dict[str, float]:
    """UUAS per bin of the gold arc's linear length (:data:`ARC_LENGTHS`): the share of the gold
    arcs of that length that the MST of ``predicted`` distances recovers. ``predicted`` None: the
    linear chain's (each non-punctuation token linked to the next). Bins with no arc are left out."""
    found: dict[str, int] = {}
    total: dict[str, int] = {}
    for k, tree in enumerate(trees):
        gold = gold_edges(tree)
        if predicted is None:
            keep = np.flatnonzero(~tree.punct)
            guess = {(int(a), int(b)) for a, b in zip(keep[:-1], keep[1:])}
        else:
            guess = predicted_edges(predicted[k], tree)
        for i, j in gold:
            name = _length_bin(j - i)
            total[name] = total.get(name, 0) + 1
            found[name] = found.get(name, 0) + ((i, j) in guess)
    return {name: found[name] / total[name] for name, _, _ in ARC_LENGTHS if total.get(name)}


def linear_chain_uuas(trees: Sequence[DependencyTree]) -> float:
    """UUAS of the tree that links each non-punctuation token to the next one (left to right)."""
    correct = total = 0
    for tree in trees:
        keep = np.flatnonzero(~tree.punct)
        chain = {(int(a), int(b)) for a, b in zip(keep[:-1], keep[1:])}
        gold = gold_edges(tree)
        correct, total = correct + len(gold & chain), total + len(gold)
    return correct / max(1, total)


def _row_spearman(pred: np.ndarray, gold: np.ndarray) -> np.ndarray:
    """Spearman correlation of each row of pred (m, T) with the same row of gold, (m,)
    (ties ranked by their average; a constant row gives nan)."""
    a, b = rankdata(pred, axis=-1), rankdata(gold, axis=-1)
    a = a - a.mean(axis=-1, keepdims=True)
    b = b - b.mean(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (a * b).sum(-1) / np.sqrt((a * a).sum(-1) * (b * b).sum(-1))


def spearman_by_length(pairs: Iterable[tuple[np.ndarray, np.ndarray]], lengths: tuple[int, int] = SPEARMAN_LENGTHS
                       ) -> float:
    """The paper's DSpr. / NSpr.: for distances, ``pairs`` of (predicted (T, T), gold (T, T)) give
    one correlation per token (its row); for depths, (predicted (T,), gold (T,)) one per sentence.
    Correlations are averaged within each sentence length, then over the lengths in
    ``lengths`` (inclusive) that occur. nan when no sentence has such a length."""
    per_length: dict[int, list[float]] = {}
    for pred, gold in pairs:
        n = gold.shape[-1]
        if not lengths[0] <= n <= lengths[1]:
            continue
        rho = _row_spearman(np.atleast_2d(pred), np.atleast_2d(gold))
        per_length.setdefault(n, []).extend(float(r) for r in rho if np.isfinite(r))
    means = [float(np.mean(v)) for v in per_length.values() if v]
    return float(np.mean(means)) if means else float("nan")


def root_accuracy(depths: Sequence[np.ndarray], trees: Sequence[DependencyTree]) -> float:
    """Share of sentences whose shallowest predicted non-punctuation token is the gold root."""
    hits = []
    for pred, tree in zip(depths, trees):
        keep = np.flatnonzero(~tree.punct)
        if len(keep):
            hits.append(int(keep[int(np.argmin(np.asarray(pred)[keep]))]) == tree.root)
    return float(np.mean(hits)) if hits else float("nan")


__all__ = ["DependencyTree", "SPEARMAN_LENGTHS", "gold_edges", "linear_chain_uuas", "mst_edges", "parse_conllu_trees",
           "predicted_edges", "read_ewt_trees",
           "read_treebank_trees", "root_accuracy", "spearman_by_length", "tree_depths", "tree_distances",
           "uuas", "uuas_counts"]
