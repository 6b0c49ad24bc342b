"""Three erasure methods side by side, with the damage each does: LEACE, the mean projection and INLP.

For one task at one layer, each method is fitted on the training vectors and labels
(``probing.information.erasure``: ``leace``, ``mean_projection``; ``probing.information.amnesic``:
``inlp``) and then measured on what it leaves:

- the task: a fresh probe's test accuracy on the erased vectors (goal: the majority label's), and the
  rank removed;
- the damage: the other tasks' probe accuracy on their vectors erased by the same eraser, the mean
  squared change of the test vectors (how far the erasure moved them), and, at the top layer of a
  model exported with its softmax, the language model's cross-entropy with each half erased by the
  method fitted on that half;
- the control beside each: a random projection removing as many directions (``random_projection``).

``python -m probing.information --methods erasure`` runs it; the result is one ``ErasureLayer`` per
task and layer, in ``TaskInformation.erasure``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Mapping, Sequence

import numpy as np

from probing.engine.envelope import JsonDataclass
from probing.information.amnesic import inlp, mean_variance, random_projection
from probing.information.erasure import leace, mean_projection, mean_squared_change

ERASURE_METHODS = ("leace", "mean projection", "inlp")


@dataclass(frozen=True)
class ErasureOutcome(JsonDataclass):
    """What one method did at one layer: ``rank`` removed; ``task_accuracy`` and ``random_accuracy``
    (the random projection of the same rank) of a fresh probe; ``mean_squared_change`` of the test
    vectors (and the random projection's); ``other_tasks``: {task: {"after", "random"}} accuracies;
    ``lm``: {"after", "random"}: the language model's bits per prediction (mean of the directions),
    None where not measured."""

    method: str
    rank: int
    task_accuracy: float
    random_accuracy: float
    mean_squared_change: float
    random_mean_squared_change: float
    other_tasks: dict = field(default_factory=dict)
    lm: dict | None = None


@dataclass(frozen=True)
class ErasureLayer(JsonDataclass):
    """One task at one layer: the accuracies before (``original``, ``majority`` on test,
    ``other_original``: {task: accuracy}, ``lm_original``: bits per prediction or None) and each
    method's ``outcomes``, in ``ERASURE_METHODS`` order."""

    layer: int
    original: float
    majority: float
    other_original: dict
    lm_original: float | None
    outcomes: tuple[ErasureOutcome, ...]

    def outcome(self, method: str) -> ErasureOutcome:
        return next(o for o in self.outcomes if o.method == method)

    def lines(self, task: str) -> list[str]:
        """The layer as plain-text lines (accuracies x100)."""
        out = [f"  erasure layer {self.layer}: {task} {100 * self.original:.1f} (majority {100 * self.majority:.1f})"]
        for o in self.outcomes:
            others = "; ".join(f"{t} {100 * self.other_original[t]:.1f} -> {100 * v['after']:.1f} "
                               f"(random {100 * v['random']:.1f})" for t, v in o.other_tasks.items())
            lm = "" if o.lm is None or self.lm_original is None else \
                f"; LM {self.lm_original:.3f} -> {o.lm['after']:.3f} bits (random {o.lm['random']:.3f})"
            out.append(f"    {o.method:<15} rank {o.rank:>3}: {task} -> {100 * o.task_accuracy:.1f} "
                       f"(random {100 * o.random_accuracy:.1f}); moved {o.mean_squared_change:.3f} "
                       f"(random {o.random_mean_squared_change:.3f})" + (f"; {others}" if others else "") + lm)
        return out


def fit_erasers(X_train: np.ndarray, y_train: np.ndarray, X_dev: np.ndarray, y_dev: np.ndarray,
                inlp_options: Mapping, seed: int) -> dict:
    """{method: eraser} for ``ERASURE_METHODS``, each with ``.apply(X)`` and ``.rank``."""
    return {"leace": leace(X_train, y_train), "mean projection": mean_projection(X_train, y_train),
            "inlp": inlp(X_train, y_train, X_dev, y_dev, random_state=seed, **inlp_options).projection}


def compare_erasures(layer: int, X: Mapping[str, np.ndarray], tags: Mapping[str, np.ndarray],
                     others: Sequence[tuple[str, Mapping[str, np.ndarray], Mapping[str, np.ndarray]]],
                     accuracy: Callable[..., float], inlp_options: Mapping, seed: int,
                     language_model: Callable[[dict | None], float] | None = None,
                     halves: Callable[[str], dict] | None = None) -> ErasureLayer:
    """The three methods at one layer. ``X``/``tags``: {split: vectors / labels} of the task;
    ``others``: (task, X, tags) of the other tasks at the same layer; ``accuracy(X, tags, scale)``:
    a fresh probe's test accuracy (whitened at ``scale``, the vectors' variance before erasure);
    ``language_model(erasers)``: bits per prediction with {"forward", "backward"} erasers of the top
    layer's halves (None: the plain model), and ``halves(method)``: those erasers for a method, for
    the top layer of a model with its softmax (else both None)."""
    erasers = fit_erasers(X["train"], tags["train"], X["dev"], tags["dev"], inlp_options, seed)
    scale = mean_variance(X["train"])
    labels, counts = np.unique(tags["train"], return_counts=True)
    majority = float(np.mean(tags["test"] == labels[np.argmax(counts)]))
    other_original = {task: accuracy(Y, y, mean_variance(Y["train"])) for task, Y, y in others}
    lm_original = language_model(None) if language_model is not None else None
    outcomes = []
    for method in ERASURE_METHODS:
        eraser = erasers[method]
        control = random_projection(X["train"].shape[1], eraser.rank, seed)

        def erased(vectors: Mapping[str, np.ndarray], by) -> dict[str, np.ndarray]:
            return {split: by.apply(v) for split, v in vectors.items()}

        other_tasks = {task: {"after": accuracy(erased(Y, eraser), y, mean_variance(Y["train"])),
                              "random": accuracy(erased(Y, control), y, mean_variance(Y["train"]))}
                       for task, Y, y in others}
        lm = None
        if language_model is not None and halves is not None:
            fitted = halves(method)
            lm = {"after": language_model(fitted),
                  "random": language_model({d: random_projection(e.dim, e.rank, seed + 1) for d, e in fitted.items()})}
        outcomes.append(ErasureOutcome(
            method, int(eraser.rank), accuracy(erased(X, eraser), tags, scale),
            accuracy(erased(X, control), tags, scale),
            mean_squared_change(X["test"], eraser.apply(X["test"])),
            mean_squared_change(X["test"], control.apply(X["test"])), other_tasks, lm))
    return ErasureLayer(layer, accuracy(X, tags, scale), majority, other_original, lm_original, tuple(outcomes))


__all__ = ["ERASURE_METHODS", "ErasureLayer", "ErasureOutcome", "compare_erasures", "fit_erasers"]
