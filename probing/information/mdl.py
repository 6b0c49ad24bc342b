"""Minimum description length probing, online code (Voita & Titov 2020).

How many bits it takes to transmit a layer's labels to someone who has the layer's vectors: the
first block of the (shuffled) training set goes with a uniform code, ``log2 K`` bits a label;
then a probe trained on everything sent so far codes the next block, ``-log2 p(y | x)`` bits a
label, and so on over blocks ending at 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.25, 12.5, 25, 50 and 100%
of the set. A property that a layer gives up easily is learnt from few examples, so its online
codelength is short; a probe that reaches the same accuracy by memorising pays for it in the
early blocks. Compression = uniform codelength / online codelength (1 = nothing learnt).

The probe is the workbench's ``LinearProbe``, at a fixed alpha (no choice on held-out data, which
the code would then not pay for). A probe trained on a prefix has seen only some of the labels; its
probabilities are mixed with the uniform distribution over all K labels, ``(1 - eps) p + eps / K``,
so an unseen label costs ``log2(K / eps)`` bits instead of an infinite code (``eps`` = 1e-3 adds at
most 0.0015 bits to any other label).

    >>> code = online_codelength(X, y, random_state=0)
    >>> code.online_bits / 1000, code.compression      # kbits, uniform / online
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from probing.engine.envelope import JsonDataclass
from probing.tagging.probes import LinearProbe

log = logging.getLogger(__name__)

BLOCK_FRACTIONS = (0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.0625, 0.125, 0.25, 0.5, 1.0)
"""Where the online code's blocks end, as shares of the training set (Voita & Titov 2020)."""

DEFAULT_ALPHA = 1e-3
"""The probes' L2 penalty, fixed for every block: a probe trained on the first few dozen tokens
must not be certain of its mistakes, which a weaker penalty lets it be."""


@dataclass(frozen=True)
class OnlineCode(JsonDataclass):
    """The online codelength of one labelling of one set of vectors.

    ``block_ends`` (n_blocks,): the example counts each block ends at (the first block is sent
    uniformly); ``block_bits`` (n_blocks,): bits each block cost; ``online_bits`` their sum;
    ``uniform_bits`` = n_examples * log2(n_classes); ``compression`` = uniform / online.
    ``final_accuracy``: the last block's accuracy under the probe trained on the rest."""

    n_examples: int
    n_classes: int
    block_ends: tuple[int, ...]
    block_bits: tuple[float, ...]
    online_bits: float
    uniform_bits: float
    compression: float
    final_accuracy: float
    alpha: float
    smoothing: float
    seed: int


def block_ends(n: int, fractions: Sequence[float] = BLOCK_FRACTIONS) -> list[int]:
    """Example counts (increasing, the last = n) where the blocks of ``n`` examples end; blocks
    that round to no example are merged into the next."""
    if n < 2:
        raise ValueError(f"an online code needs at least 2 examples, got {n}")
    if not fractions or any(not 0 < f <= 1 for f in fractions) or list(fractions) != sorted(fractions):
        raise ValueError(f"fractions must increase within (0, 1], got {list(fractions)}")
    return sorted({min(n, max(1, int(round(f * n)))) for f in fractions} | {n})


def label_bits(probe: LinearProbe, X: np.ndarray, y_index: np.ndarray, classes: np.ndarray,
               smoothing: float) -> np.ndarray:
    """-log2 p(y | x) per row, (n,) float64, under ``probe`` with its probabilities mixed with the
    uniform distribution over ``classes`` (K,): ``(1 - smoothing) p + smoothing / K``.
    ``y_index`` (n,) int: each row's label as an index into ``classes``; a label the probe never
    saw gets only the uniform share."""
    K = len(classes)
    probabilities = np.full((len(X), K), smoothing / K)
    columns = np.searchsorted(classes, probe.classes_)
    probabilities[:, columns] += (1.0 - smoothing) * probe.predict_proba(X)
    return -np.log2(probabilities[np.arange(len(X)), y_index])


def online_codelength(X: np.ndarray, y: np.ndarray, fractions: Sequence[float] = BLOCK_FRACTIONS,
                      alpha: float = DEFAULT_ALPHA, max_iter: int = 50, smoothing: float = 1e-3, random_state: int = 0,
                      shuffle: bool = True, progress: Callable[[int, int], None] | None = None) -> OnlineCode:
    """The online code of labels ``y`` (n,) given vectors ``X`` (n, d), in bits.

    ``shuffle``: code the examples in an order drawn from ``random_state`` (the prefixes are then
    random samples of the set); ``alpha``, ``max_iter``: the ``LinearProbe`` each block trains;
    ``smoothing``: the uniform share mixed into its probabilities; ``progress(done, total)``
    after each block. Same inputs and seed, same code."""
    X = np.asarray(X)
    y = np.asarray(y)
    if X.ndim != 2 or len(X) != len(y):
        raise ValueError(f"X must be (n, d) with one label per row: X {X.shape}, y {y.shape}")
    if not 0 < smoothing < 1:
        raise ValueError(f"smoothing must be in (0, 1), got {smoothing}")
    n = len(y)
    order = np.random.default_rng(random_state).permutation(n) if shuffle else np.arange(n)
    X, y = X[order], y[order]
    classes, y_index = np.unique(y, return_inverse=True)
    K = len(classes)
    if K < 2:  # zero bits against zero bits: no compression to report (it read as infinite)
        raise ValueError(f"the labels hold {K} class{'es' if K != 1 else ''}: an online code compares a probe with "
                         "the uniform code over at least 2 classes")
    ends = block_ends(n, fractions)
    uniform_per_label = float(np.log2(K)) if K > 1 else 0.0
    bits = [ends[0] * uniform_per_label]
    final_accuracy = float("nan")
    for i, (start, end) in enumerate(zip(ends[:-1], ends[1:])):
        with warnings.catch_warnings():  # the first blocks have few examples and many labels: expected here
            warnings.filterwarnings("ignore", message="The number of unique classes", category=UserWarning)
            probe = LinearProbe(alpha=alpha, max_iter=max_iter, random_state=random_state).fit(X[:start], y[:start])
        block_bits = label_bits(probe, X[start:end], y_index[start:end], classes, smoothing)
        bits.append(float(block_bits.sum()))
        if end == n:
            final_accuracy = float(np.mean(probe.predict(X[start:end]) == y[start:end]))
        log.debug("block %d: %d examples on %d: %.1f bits", i + 1, end - start, start, bits[-1])
        if progress:
            progress(i + 1, len(ends) - 1)
    online = float(sum(bits))
    uniform = n * uniform_per_label
    compression = uniform / online if online > 0 else float("inf")
    return OnlineCode(n, K, tuple(ends), tuple(bits), online, uniform, compression, final_accuracy,
                      float(alpha), float(smoothing), int(random_state))


__all__ = ["BLOCK_FRACTIONS", "DEFAULT_ALPHA", "OnlineCode", "block_ends", "label_bits", "online_codelength"]
