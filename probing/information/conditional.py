"""Conditional probing (Hewitt, Ethayarajh, Liang & Manning 2021): what a layer adds beyond a baseline.

The V-information of labels Y from vectors X, for the family V of linear softmax probes, is
``I_V(X -> Y) = H_V(Y) - H_V(Y | X)``: the entropy of Y under the best constant prediction
(the training label frequencies) minus the held-out cross-entropy of the best probe on X, in
bits per token. Conditional on a baseline B (the biLM's layer 0: the character CNN, no
context), what layer j adds is

    I_V(layer j -> Y | B) = H_V(Y | B) - H_V(Y | [B; layer j])

the drop in cross-entropy when the probe that already sees B also sees layer j. A layer that
only repeats B adds ~0 bits; a probe on layer j alone would credit it with all of B's
information too. Probes are the workbench's ``LinearProbe``, alpha chosen on dev by dev
cross-entropy; cross-entropies are measured on test, and the interval resamples test sentences
(paired: both probes' bits of the same sentences).

    >>> result = conditional_information(base, layer, y, test_sentence_of, layer_index=1)
    >>> result.conditional.estimate     # bits per token layer 1 adds beyond layer 0
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from probing.engine.envelope import JsonDataclass
from probing.engine.metrics import BootstrapInterval, bootstrap_ci_from_stats
from probing.information.mdl import label_bits
from probing.tagging.probes import LinearProbe, fit_on_dev

SPLITS = ("train", "dev", "test")
DEFAULT_ALPHAS = (1e-3, 1e-4)
SMOOTHING = 1e-3  # the uniform share mixed into every prediction (see probing.information.mdl)


@dataclass(frozen=True)
class HeldoutBits:
    """A probe's held-out cross-entropy: ``bits`` (n_test,) = -log2 p(y | x) per test token,
    ``alpha`` chosen on dev, ``accuracy`` on test."""

    bits: np.ndarray
    alpha: float
    accuracy: float

    @property
    def mean(self) -> float:
        """Bits per test token."""
        return float(np.mean(self.bits))


@dataclass(frozen=True)
class ConditionalInformation(JsonDataclass):
    """What ``layer`` adds beyond ``baseline_layer``, in bits per test token.

    ``label_entropy`` H_V(Y); ``baseline_bits`` H_V(Y | B); ``layer_bits`` H_V(Y | layer);
    ``joint_bits`` H_V(Y | [B; layer]); ``conditional``: H_V(Y | B) - H_V(Y | [B; layer]) with
    its bootstrap interval over test sentences; ``layer_information`` H_V(Y) - H_V(Y | layer)
    and ``baseline_information`` H_V(Y) - H_V(Y | B), the unconditional figures beside it;
    ``accuracies``: test accuracy of the probes on B, layer and [B; layer]."""

    layer: int
    baseline_layer: int
    label_entropy: float
    baseline_bits: float
    layer_bits: float
    joint_bits: float
    conditional: BootstrapInterval
    layer_information: float
    baseline_information: float
    accuracies: dict
    alphas: dict
    n_train: int
    n_test: int
    seed: int


def _label_classes(y: Mapping[str, np.ndarray]) -> np.ndarray:
    return np.unique(np.concatenate([np.asarray(y[s]) for s in SPLITS]))


def label_entropy_bits(y_train: np.ndarray, y_test: np.ndarray, classes: np.ndarray,
                       smoothing: float = SMOOTHING) -> np.ndarray:
    """-log2 p(y) per test token (n_test,) under the training label frequencies mixed with the
    uniform share, as the probes' predictions are: the best constant prediction, H_V(Y)."""
    counts = np.array([np.sum(np.asarray(y_train) == c) for c in classes], dtype=np.float64)
    p = (1.0 - smoothing) * counts / counts.sum() + smoothing / len(classes)
    return -np.log2(p[np.searchsorted(classes, np.asarray(y_test))])


def heldout_bits(X: Mapping[str, np.ndarray], y: Mapping[str, np.ndarray], classes: np.ndarray | None = None,
                 alphas: Sequence[float] = DEFAULT_ALPHAS, max_iter: int = 50, seed: int = 0,
                 smoothing: float = SMOOTHING) -> HeldoutBits:
    """Train a ``LinearProbe`` on ``X["train"]`` (n, d), alpha chosen by dev cross-entropy,
    and return its bits on each test token. ``classes``: every label of every split (sorted)."""
    classes = _label_classes(y) if classes is None else classes
    index = {s: np.searchsorted(classes, np.asarray(y[s])) for s in ("dev", "test")}
    base = LinearProbe(max_iter=max_iter, random_state=seed)
    probe, _ = fit_on_dev(base, X["train"], y["train"],
                          lambda p: -float(np.mean(label_bits(p, X["dev"], index["dev"], classes, smoothing))),
                          alphas, warm_max_iter=max(10, max_iter // 2))
    bits = label_bits(probe, X["test"], index["test"], classes, smoothing)
    accuracy = float(np.mean(probe.predict(X["test"]) == np.asarray(y["test"])))
    return HeldoutBits(bits, float(probe.alpha), accuracy)


def bits_interval(bits_without: np.ndarray, bits_with: np.ndarray, sentence_of: np.ndarray,
                  n_resamples: int = 1000, level: float = 0.95, seed: int = 0) -> BootstrapInterval:
    """Mean of ``bits_without - bits_with`` per token (n,) with a percentile bootstrap interval that
    resamples sentences (``sentence_of`` (n,): each token's sentence index, 0..n_sentences-1)."""
    diff = np.asarray(bits_without, dtype=np.float64) - np.asarray(bits_with, dtype=np.float64)
    n_sentences = int(sentence_of.max()) + 1 if len(sentence_of) else 0
    stats = np.stack([np.bincount(sentence_of, weights=diff, minlength=n_sentences),
                      np.bincount(sentence_of, minlength=n_sentences).astype(np.float64)], axis=1)
    interval = bootstrap_ci_from_stats(stats, "accuracy", n_resamples=n_resamples, level=level, seed=seed)
    return dataclasses.replace(interval, metric="bits_per_token")


def conditional_information(base: Mapping[str, np.ndarray], layer: Mapping[str, np.ndarray],
                            y: Mapping[str, np.ndarray], test_sentence_of: np.ndarray, layer_index: int = 1,
                            baseline_index: int = 0, base_bits: HeldoutBits | None = None,
                            alphas: Sequence[float] = DEFAULT_ALPHAS, max_iter: int = 50, n_resamples: int = 1000,
                            level: float = 0.95, seed: int = 0) -> ConditionalInformation:
    """What ``layer`` (split -> (n, d)) adds beyond ``base`` (split -> (n, d')) about ``y``
    (split -> (n,)), in bits per test token. ``test_sentence_of`` (n_test,): the sentence of each
    test token, for the interval. ``base_bits``: ``heldout_bits(base, y, ...)`` when already
    computed (the same baseline serves every layer)."""
    for name in SPLITS:
        if len(base[name]) != len(y[name]) or len(layer[name]) != len(y[name]):
            raise ValueError(f"{name}: {len(y[name])} labels but {len(base[name])} baseline and "
                             f"{len(layer[name])} layer vectors")
    classes = _label_classes(y)
    kwargs = {"classes": classes, "alphas": alphas, "max_iter": max_iter, "seed": seed}
    base_bits = base_bits if base_bits is not None else heldout_bits(base, y, **kwargs)
    alone = heldout_bits(layer, y, **kwargs)
    joint = heldout_bits({s: np.concatenate([base[s], layer[s]], axis=1) for s in SPLITS}, y, **kwargs)
    entropy = float(np.mean(label_entropy_bits(y["train"], y["test"], classes)))
    interval = bits_interval(base_bits.bits, joint.bits, np.asarray(test_sentence_of), n_resamples, level, seed)
    return ConditionalInformation(
        int(layer_index), int(baseline_index), entropy, base_bits.mean, alone.mean, joint.mean, interval,
        entropy - alone.mean, entropy - base_bits.mean,
        {"baseline": base_bits.accuracy, "layer": alone.accuracy, "joint": joint.accuracy},
        {"baseline": base_bits.alpha, "layer": alone.alpha, "joint": joint.alpha},
        len(y["train"]), len(y["test"]), int(seed))


__all__ = ["ConditionalInformation", "HeldoutBits", "bits_interval", "conditional_information", "heldout_bits",
           "label_entropy_bits"]
