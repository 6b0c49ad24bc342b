"""Amnesic probing (Elazar, Ravfogel, Jacovi & Goldberg 2021) by iterative nullspace projection
(INLP, Ravfogel, Elazar, Gonen, Twiton & Goldberg 2020).

INLP removes a property from vectors X (n, d): train a linear probe, remove the directions its
weights read (the span of its class rows, centred: rank k - 1 for k classes), train again on the
projected vectors, remove again, until a probe does no better than always predicting the majority
label. The result is one orthogonal projection ``P = I - B^T B`` with B (r, d) an orthonormal basis
of every removed direction: ``X @ P`` keeps everything of X that no linear probe used.

What the model loses is then measured on the projected vectors: the biLM's own language-model
cross-entropy with its top layer projected (``lm_cross_entropy``), and other tasks' probe accuracy.
The control is a random projection that removes as many directions (``random_projection``): the
property's removal should cost more than that.

Why INLP's probes read the raw (centred) vectors, not whitened ones as the workbench's accuracy
probes do: a probe on whitened features reads X through ``coef_ = W Sigma^(-1/2)``, weighted
towards the layer's low-variance directions. Removing those leaves the high-variance directions
that carry most of the property, and the next probe reads them again: on elmo-mini's top layer
(100 EWT sentences) a whitened INLP needed all 512 directions to bring POS near the majority
level, a raw one 9 rounds (351 directions), after which a fresh whitened probe was at the
majority level too. Ravfogel et al.'s linear classifiers work on the raw vectors as well. The
other way round, a raw probe (L2 on the raw weights) cannot use directions of tiny variance: on
layer 0 of the lexical sample (a handful of word forms, so a handful of distinct vectors) it fell
to the majority level after one removal while a whitened probe still read 59.6% of the senses.
So a raw probe at the majority level is checked by a whitened one before INLP stops.

Why the language model gets a projection per direction: the forward LM predicts token t+1 from
the forward half of layer L at t, the backward LM token t-1 from the backward half. A projection of
the whole [forward; backward] vector mixes the halves, and the backward half at t has read token
t+1: the forward LM would be handed the word it must predict. So the LM's projections are learnt on
each half on its own (``inlp`` on ``layer[:, :P]`` and ``layer[:, P:]``) and never mix them.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np
import torch

from elmo_model.training.lm_data import make_batch
from probing.tagging.probes import LinearProbe

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NullspaceProjection:
    """An orthogonal projection removing the rows of ``directions`` (r, d), orthonormal.
    ``apply(X)`` = X @ (I - B^T B), without forming the (d, d) matrix."""

    directions: np.ndarray

    @property
    def dim(self) -> int:
        """d, the width of the vectors it projects."""
        return int(self.directions.shape[1])

    @property
    def rank(self) -> int:
        """r, how many directions it removes."""
        return int(self.directions.shape[0])

    def matrix(self) -> np.ndarray:
        """The projection as a (d, d) float64 matrix, symmetric and idempotent."""
        B = self.directions
        return np.eye(self.dim) - B.T @ B

    def apply(self, X: np.ndarray) -> np.ndarray:
        """X (n, d) -> X projected (n, d), in X's float dtype."""
        X = np.asarray(X)
        if X.shape[-1] != self.dim:
            raise ValueError(f"the projection is {self.dim}-d; the vectors are {X.shape[-1]}-d")
        if self.rank == 0:
            return X.copy()
        B = self.directions.astype(X.dtype if X.dtype in (np.float32, np.float64) else np.float64)
        return X - (X @ B.T) @ B

    def kept(self) -> np.ndarray:
        """An orthonormal basis (d - r, d) of the directions the projection keeps."""
        if self.rank == 0:
            return np.eye(self.dim)
        _, _, vt = np.linalg.svd(self.directions, full_matrices=True)
        return vt[self.rank:]

    def coordinates(self, X: np.ndarray, kept: np.ndarray | None = None) -> np.ndarray:
        """X (n, d) projected, in the coordinates of ``kept()`` (n, d - r), float32: the same
        vectors as ``apply`` (``apply(X) = coordinates(X) @ kept()``) without the rounding residue
        ``apply`` leaves along the removed directions. A probe that whitens its features scales
        that residue up, and where a layer holds a few distinct vectors (layer 0 of one word's
        contexts) the residue still tells them apart: probes read ``coordinates``, not ``apply``."""
        X = np.asarray(X)
        if X.shape[-1] != self.dim:
            raise ValueError(f"the projection is {self.dim}-d; the vectors are {X.shape[-1]}-d")
        C = self.kept() if kept is None else kept
        return (X.astype(np.float64) @ C.T).astype(np.float32)


def whitening_at_scale(X: np.ndarray, scale: float, shrinkage: float = 1e-2) -> tuple[np.ndarray, np.ndarray]:
    """The (mean, transform) a whitening ``LinearProbe`` uses for X (n, k), with its shrinkage
    relative to ``scale`` (the mean variance of the layer before any removal) rather than to X's
    own: once the property's directions are gone, what is left of a layer that held a few distinct
    vectors is rounding noise, and whitening relative to its own tiny variance makes that noise
    as loud as a signal. Pass it as ``LinearProbe.fit(..., preprocessing=...)``."""
    X = np.asarray(X, dtype=np.float64)
    mean = X.mean(axis=0)
    centred = X - mean
    eigenvalues, vectors = np.linalg.eigh(centred.T @ centred / max(1, len(X)))
    transform = (vectors / np.sqrt(np.clip(eigenvalues, 0.0, None) + shrinkage * scale)) @ vectors.T
    return mean, transform


def mean_variance(X: np.ndarray) -> float:
    """The mean variance of X's columns (the mean eigenvalue of its covariance)."""
    return float(np.asarray(X, dtype=np.float64).var(axis=0).mean())


@dataclass(frozen=True)
class InlpResult:
    """What INLP did: the ``projection``; ``dev_accuracies`` (n_iterations + 1,): the dev accuracy
    of the probe trained before each removal and of the last one, trained after them;
    ``removed_per_iteration``: directions each removal took; ``majority``: the dev accuracy of
    always predicting the training majority label; ``reached_majority``: whether the last probe
    came within ``tolerance`` of it."""

    projection: NullspaceProjection
    dev_accuracies: tuple[float, ...]
    removed_per_iteration: tuple[int, ...]
    majority: float
    tolerance: float
    reached_majority: bool

    @property
    def n_iterations(self) -> int:
        """How many probes' directions were removed."""
        return len(self.removed_per_iteration)


def _orthonormal_new_directions(rows: np.ndarray, basis: np.ndarray, tol: float = 1e-6) -> np.ndarray:
    """An orthonormal basis (m, d) of the span of ``rows`` (k, d) outside the span of ``basis``
    (r, d, orthonormal)."""
    rows = np.asarray(rows, dtype=np.float64)
    if len(basis):
        rows = rows - (rows @ basis.T) @ basis
    if not len(rows):
        return np.zeros((0, rows.shape[1]))
    _, singular, vt = np.linalg.svd(rows, full_matrices=False)
    keep = singular > tol * max(1.0, float(singular.max(initial=0.0)))
    new = vt[keep]
    if len(basis):  # once more against the basis: rounding of the first pass
        new = new - (new @ basis.T) @ basis
        new /= np.linalg.norm(new, axis=1, keepdims=True)
    return new


def _majority_accuracy(y_train: np.ndarray, y_dev: np.ndarray) -> float:
    labels, counts = np.unique(y_train, return_counts=True)
    majority = labels[np.argmax(counts)]
    return float(np.mean(np.asarray(y_dev) == majority))


def inlp(X_train: np.ndarray, y_train: np.ndarray, X_dev: np.ndarray, y_dev: np.ndarray,
         max_iterations: int = 20, tolerance: float = 0.01, alpha: float = 1e-3, max_iter: int = 50,
         random_state: int = 0, progress: Callable[[int, float], None] | None = None,
         preprocess: str = "none", check: str | None = "whiten") -> InlpResult:
    """Iterative nullspace projection of the labels ``y_train`` (n,) out of ``X_train`` (n, d).

    Each iteration trains a ``LinearProbe`` (``alpha``, ``max_iter``, ``preprocess``: "none" by
    default, see the module's docstring) on the projected training vectors, scores it on the
    projected dev vectors, and stops once its dev accuracy is at most
    ``majority + tolerance``; otherwise it removes the probe's directions (its class rows minus
    their mean: softmax scores are unchanged by a shift common to all classes). A probe at the
    majority level is checked by a probe with ``check`` preprocessing ("whiten": every direction
    scaled to unit variance, as the accuracy probes that measure the result see them; None: no
    check); if that one does better, its directions go instead and INLP goes on, so it stops only
    when both kinds of probe are at the majority level. Stops after
    ``max_iterations`` removals too, or when nothing is left to remove. ``progress(iteration,
    dev_accuracy)`` after each probe."""
    X_train, X_dev = np.asarray(X_train), np.asarray(X_dev)
    if X_train.ndim != 2 or X_dev.ndim != 2 or X_train.shape[1] != X_dev.shape[1]:
        raise ValueError(f"X_train and X_dev must be (n, d) with the same d, got {X_train.shape} and {X_dev.shape}")
    if len(X_train) != len(y_train) or len(X_dev) != len(y_dev):
        raise ValueError("one label per row of X_train and of X_dev")
    d = X_train.shape[1]
    majority = _majority_accuracy(y_train, y_dev)
    basis = np.zeros((0, d))
    accuracies: list[float] = []
    removed: list[int] = []
    y_dev = np.asarray(y_dev)

    scale = mean_variance(X_train)
    if not np.isfinite(X_train).all() or not np.isfinite(X_dev).all():
        raise ValueError("X_train or X_dev holds NaN or infinite values: INLP needs finite vectors")
    if not scale > 0:  # every vector the same: whitening would divide by zero (it overflowed)
        raise ValueError(f"X_train has no variance ({len(X_train)} identical vectors of {d} dims): a constant "
                         "layer holds no direction to remove")

    def fitted(kind: str, Xp_train: np.ndarray, Xp_dev: np.ndarray) -> tuple[LinearProbe, float]:
        probe = LinearProbe(alpha=alpha, max_iter=max_iter, random_state=random_state, preprocess=kind)
        probe.fit(Xp_train, y_train,
                  preprocessing=whitening_at_scale(Xp_train, scale) if kind == "whiten" else None)
        return probe, float(np.mean(probe.predict(Xp_dev) == y_dev))

    while True:
        if len(basis) >= d:  # nothing left: every vector is 0, every probe says the majority label
            accuracies.append(majority)
            break
        projection = NullspaceProjection(basis)
        kept = projection.kept()
        Xp_train, Xp_dev = projection.coordinates(X_train, kept), projection.coordinates(X_dev, kept)
        probe, accuracy = fitted(preprocess, Xp_train, Xp_dev)
        if accuracy <= majority + tolerance and check is not None and check != preprocess:
            probe, accuracy = fitted(check, Xp_train, Xp_dev)  # what the first probe's scale could not see
        accuracies.append(accuracy)
        if progress:
            progress(len(removed), accuracy)
        log.debug("INLP iteration %d: %d directions removed, dev accuracy %.4f (majority %.4f)",
                  len(removed), len(basis), accuracy, majority)
        if accuracy <= majority + tolerance or len(removed) >= max_iterations or len(basis) >= d:
            break
        coef = probe.coef_ - probe.coef_.mean(axis=0, keepdims=True) if len(probe.coef_) > 1 else probe.coef_
        new = _orthonormal_new_directions(coef @ kept, basis)  # the probe's rows, back in the units of X
        if not len(new):
            break
        basis = np.concatenate([basis, new])
        removed.append(len(new))
    reached = accuracies[-1] <= majority + tolerance
    return InlpResult(NullspaceProjection(basis), tuple(accuracies), tuple(removed), majority, float(tolerance),
                      bool(reached))


def random_projection(dim: int, rank: int, seed: int = 0) -> NullspaceProjection:
    """The control: a projection removing ``rank`` directions drawn uniformly (an orthonormal
    basis of a Gaussian (rank, dim) matrix) from ``seed``."""
    if not 0 <= rank <= dim:
        raise ValueError(f"rank must be in 0..{dim}, got {rank}")
    gaussian = np.random.default_rng(seed).standard_normal((dim, rank))
    q, _ = np.linalg.qr(gaussian)  # (dim, rank), orthonormal columns
    return NullspaceProjection(q.T.copy())


def _projected(hidden: torch.Tensor, projection: NullspaceProjection | None) -> torch.Tensor:
    """``hidden`` with ``projection`` applied: a ``NullspaceProjection``, or an affine eraser with
    ``mean``, ``read`` and ``write`` (``erasure.LeaceEraser``)."""
    if projection is None or projection.rank == 0:
        return hidden
    if hasattr(projection, "write"):
        mean, read, write = (torch.from_numpy(a).to(hidden.dtype) for a in
                             (projection.mean, projection.read, projection.write))
        return hidden - ((hidden - mean) @ read.T) @ write
    B = torch.from_numpy(projection.directions).to(hidden.dtype)
    return hidden - (hidden @ B.T) @ B


@torch.no_grad()
def lm_cross_entropy(lm, vocab, sentences: Sequence[Sequence[str]],
                     projections: Mapping[str, NullspaceProjection | None] | None = None,
                     batch_sentences: int = 32) -> dict:
    """The language model's cross-entropy on ``sentences``, in bits per prediction, for each
    direction, with its top layer's forward and/or backward half projected.

    ``lm``, ``vocab``: ``elmo_model.training.language_model.load_language_model``'s pair (a
    model exported with its softmax); ``projections``: {"forward": P_f, "backward": P_b}, each
    over one half (P-d), None or absent for none. As ``LanguageModel.forward``: the forward LM
    predicts each next token and ``</S>``, the backward LM each previous token and ``<S>``.
    Returns {"forward", "backward", "mean": bits per prediction; "n_predictions" per direction}."""
    projections = dict(projections or {})
    unknown = set(projections) - {"forward", "backward"}
    if unknown:
        raise ValueError(f"projections are per direction ('forward', 'backward'), got {sorted(unknown)}")
    was_training = lm.training
    lm.eval()
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    sums = {"forward": 0.0, "backward": 0.0}
    n = 0
    try:
        for start in range(0, len(order), batch_sentences):
            batch = make_batch([list(sentences[i]) for i in order[start:start + batch_sentences]], vocab)
            mask, ids = batch.mask, batch.word_ids
            tokens = lm.bilm.token_embedder(batch.char_ids) * mask.unsqueeze(-1)
            fw, bw, _ = lm.bilm.encode(tokens, mask)
            target_mask = mask[:, 1:]
            fw_hidden = _projected(fw[-1], projections.get("forward"))[:, :-1][target_mask]
            bw_hidden = _projected(bw[-1], projections.get("backward"))[:, 1:][target_mask]
            sums["forward"] -= float(lm.softmax(fw_hidden, ids[:, 1:][target_mask]).output.sum())
            sums["backward"] -= float(lm.softmax(bw_hidden, ids[:, :-1][target_mask]).output.sum())
            n += int(target_mask.sum())
    finally:
        lm.train(was_training)
    if n == 0:
        raise ValueError("no sentence to measure the language model's cross-entropy on")
    to_bits = 1.0 / (n * math.log(2.0))
    forward, backward = sums["forward"] * to_bits, sums["backward"] * to_bits
    return {"forward": forward, "backward": backward, "mean": (forward + backward) / 2, "n_predictions": n}


__all__ = ["InlpResult", "NullspaceProjection", "inlp", "lm_cross_entropy", "mean_variance", "random_projection",
           "whitening_at_scale"]
