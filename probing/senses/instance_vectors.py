"""Instance vectors and what is computed from them: the mean of a span's token rows streamed
from the activation cache (a multiword instance is the mean of its words), rows scaled to unit
length for cosine, and the centroid of each sense's instances."""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
from scipy import sparse

from probing.engine.activations import ActivationCache


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows of ``x`` (N, D) scaled to unit Euclidean norm (float32); zero rows stay zero."""
    x = np.asarray(x, dtype=np.float32)
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.divide(x, norm, out=np.zeros_like(x), where=norm > 0)


def span_vectors(cache: ActivationCache, layer: int, starts: np.ndarray, ends: np.ndarray,
                 chunk_tokens: int = 65536) -> np.ndarray:
    """Mean over token rows ``[starts[i], ends[i])`` of layer ``layer`` of ``cache``.

    ``starts``/``ends``: (N,) global token rows (``cache.offsets[sentence] + word index``),
    each span non-empty. Returns (N, dim) float32. Streams the layer once in chunks (a
    multiword span crossing a chunk boundary is kept in a small carry-over buffer), so memory
    stays at one chunk plus the output.
    """
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    n = len(starts)
    out = np.zeros((n, cache.dim), dtype=np.float32)
    if n == 0:
        return out
    if np.any(ends <= starts) or starts.min() < 0 or ends.max() > cache.n_tokens:
        raise ValueError(f"span_vectors: spans must be non-empty and inside 0..{cache.n_tokens}")
    order = np.argsort(ends, kind="stable")
    s_sorted, e_sorted = starts[order], ends[order]
    # the carry-over buffer must keep every row an unfinished span still needs
    keep_from = np.minimum.accumulate(s_sorted[::-1])[::-1]
    buffer: np.ndarray | None = None
    buffer_start = 0
    done = 0
    for start, array in cache.iter_chunks(layer, chunk_tokens):
        if buffer is None or len(buffer) == 0:
            buffer, buffer_start = array, start
        else:
            buffer = np.concatenate([buffer, array])
        buffer_end = start + len(array)
        k = int(np.searchsorted(e_sorted, buffer_end, side="right"))
        if k > done:
            ss = s_sorted[done:k] - buffer_start
            lengths = e_sorted[done:k] - s_sorted[done:k]
            # one-word spans (most of SemCor) are their row; only multiword spans are averaged, in
            # float64 (widening every row of a chunk for the few multiword spans took most of the index's time)
            single = lengths == 1
            out[order[done:k][single]] = buffer[ss[single]]
            if not single.all():
                ss, lengths = ss[~single], lengths[~single]
                first = np.concatenate([[0], np.cumsum(lengths)[:-1]])
                rows = np.repeat(ss - first, lengths) + np.arange(int(lengths.sum()))
                vectors = np.add.reduceat(buffer[rows].astype(np.float64), first, axis=0)
                out[order[done:k][~single]] = (vectors / lengths[:, None]).astype(np.float32)
            done = k
        if done == n:
            break
        drop = int(min(keep_from[done] - buffer_start, len(buffer)))
        if drop > 0:
            buffer = buffer[drop:]
            buffer_start += drop
    return out


def sense_centroids(instance_keys: Sequence[Iterable[str]], vectors: np.ndarray
                    ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Mean vector per sense key.

    ``instance_keys[i]``: the gold keys of instance i (an instance with two gold keys counts
    towards both); ``vectors``: (N, D) or (L, N, D). Returns (sorted keys (S,), centroids
    (S, D) or (L, S, D) float32, counts (S,) int64).
    """
    keys = sorted({k for ks in instance_keys for k in ks})
    position = {k: i for i, k in enumerate(keys)}
    rows, cols = [], []
    for i, ks in enumerate(instance_keys):
        for k in ks:
            rows.append(position[k])
            cols.append(i)
    counts = np.bincount(np.asarray(rows, dtype=np.int64), minlength=len(keys)).astype(np.int64)
    weights = 1.0 / counts[rows] if rows else np.zeros(0)
    n = len(instance_keys)
    mean = sparse.csr_matrix((weights.astype(np.float64), (rows, cols)), shape=(len(keys), n))
    vectors = np.asarray(vectors)
    if vectors.ndim == 2:
        centroids = np.asarray(mean @ vectors.astype(np.float64), dtype=np.float32)
    else:
        centroids = np.stack([np.asarray(mean @ v.astype(np.float64), dtype=np.float32)
                              for v in vectors])
    return keys, centroids, counts
