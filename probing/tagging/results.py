"""The typed result of a probing suite: what the app, the CLI and the report writer all read.

``SuiteResult`` holds one ``TaskResult`` per task; each holds the probes (``ProbeScore``: one
per layer, per direction half, per scalar-mix seed, per control task, per random-biLM layer),
the baselines, the selectivity per layer and the learned s_j with their spread. Scores are
fractions in [0, 1] (the table prints them x100). Everything round-trips through JSON:
``SuiteResult.from_json(result.to_json()) == result``. The probe cache (a ``probing.engine.result_cache.ResultCache`` of
``ProbeScore``) keeps one a JSON file, so a rerun of the suite retrains nothing that has not changed.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from elmo_model.plumbing.io_safety import atomic_write_text
from probing.engine.envelope import (JsonDataclass, check_format, from_plain, read_json_object, to_plain,
                                     with_model_identity)
from probing.engine.metrics import BootstrapInterval
from probing.tagging.baselines import ReferenceNumber
from probing.tagging.probes import PathPoint

RESULT_FORMAT = "elmo-workbench/probe-suite"
RESULT_VERSION = 1
PROBE_CACHE_VERSION = 2  # bump when a change to the probes changes their results

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ProbeScore(JsonDataclass):
    """One trained probe, scored on the test set.

    - ``name``: "layer 1", "layer 1 forward", "mix seed 0", "control layer 1",
      "random biLM layer 1", ...; ``kind``: "layer", "half", "mix", "control", "random_bilm",
      "same_data" (the model's probe on the random biLM's training subset).
    - ``layer`` (None for a mix), ``direction`` ("forward"/"backward" or None).
    - ``test``: the task metric on test with its bootstrap interval (over sentences);
      ``test_accuracy``: token accuracy on test (== test.estimate for POS; for chunking the
      per-token BIO accuracy, which selectivity uses); ``dev_score``: the task metric on dev.
    - ``alpha``: the chosen L2 penalty; ``path``: the regularisation path that chose it.
    - ``n_train_tokens``, ``n_iter`` (L-BFGS iterations of the final fit), ``seconds``, ``seed``.
    - ``mix_weights`` (s_j) and ``gamma`` for a scalar-mix probe, else empty / None.
    """

    name: str
    kind: str
    layer: int | None
    direction: str | None
    test: BootstrapInterval
    test_accuracy: float
    dev_score: float
    alpha: float
    path: tuple[PathPoint, ...]
    n_train_tokens: int
    n_iter: int
    seconds: float
    seed: int
    mix_weights: tuple[float, ...] = ()
    gamma: float | None = None


@dataclass(frozen=True)
class LayerResult(JsonDataclass):
    """One layer of one task: its probe, its control probe, selectivity, its direction halves."""

    layer: int
    probe: ProbeScore
    control: ProbeScore
    selectivity: float  # probe.test_accuracy - control.test_accuracy (Hewitt & Liang)
    halves: tuple[ProbeScore, ...] = ()


@dataclass(frozen=True)
class MixResult(JsonDataclass):
    """The scalar-mix probe over several seeds: s_j per seed, their mean and standard deviation
    (over seeds), gamma likewise, and each seed's probe."""

    layers: tuple[int, ...]
    seeds: tuple[int, ...]
    weights_mean: tuple[float, ...]
    weights_std: tuple[float, ...]
    gamma_mean: float
    gamma_std: float
    probes: tuple[ProbeScore, ...]

    @classmethod
    def from_probes(cls, layers: tuple[int, ...], probes: list[ProbeScore]) -> "MixResult":
        weights = np.array([p.mix_weights for p in probes])  # (seeds, layers)
        gammas = np.array([p.gamma for p in probes], dtype=float)
        return cls(tuple(layers), tuple(p.seed for p in probes),
                   tuple(float(x) for x in weights.mean(axis=0)), tuple(float(x) for x in weights.std(axis=0)),
                   float(gammas.mean()), float(gammas.std()), tuple(probes))

    @property
    def best(self) -> ProbeScore:
        """The seed's probe with the best dev score."""
        return max(self.probes, key=lambda p: p.dev_score)


@dataclass(frozen=True)
class Baselines(JsonDataclass):
    """What a task's probes are compared with. ``majority`` and ``word_majority``: test metric
    with intervals; ``random_bilm``: probes on a random-initialised biLM of the same
    architecture (``random_bilm_train_tokens`` training tokens) and ``same_data``: the model's
    own probes on that same training subset, for a like-for-like comparison; ``reference``:
    published figures (other data: see each one's note)."""

    majority: BootstrapInterval
    word_majority: BootstrapInterval
    random_bilm: tuple[ProbeScore, ...]
    same_data: tuple[ProbeScore, ...]
    random_bilm_seed: int
    random_bilm_train_tokens: int
    reference: tuple[ReferenceNumber, ...]


@dataclass(frozen=True)
class TaskResult(JsonDataclass):
    """Everything measured for one task ("pos", "upos", "chunk")."""

    task: str
    dataset: str
    metric: str  # "accuracy" or "chunk_f1"
    n_sentences: dict[str, int]  # per split
    n_tokens: dict[str, int]
    layers: tuple[LayerResult, ...]
    mix: MixResult | None
    baselines: Baselines
    timings: dict[str, float]  # seconds per stage

    def layer(self, j: int) -> LayerResult:
        """The result of layer ``j``."""
        for result in self.layers:
            if result.layer == j:
                return result
        raise KeyError(f"task {self.task}: no layer {j} (have {[r.layer for r in self.layers]})")

    @property
    def best_layer(self) -> LayerResult:
        """The layer whose probe has the best dev score (chosen on dev, reported on test)."""
        return max(self.layers, key=lambda r: r.probe.dev_score)


@dataclass(frozen=True)
class SuiteResult:
    """The whole suite for one model: ``tasks`` in the order asked, the model (name, identity
    (``elmo_model.bilm.identity``: weights, options, precision), architecture), the configuration and
    seeds used, library versions, timings."""

    model_name: str
    model_identity: str
    model_config: dict[str, Any]
    tasks: tuple[TaskResult, ...]
    config: dict[str, Any]
    seeds: dict[str, Any]
    versions: dict[str, str]
    timings: dict[str, float]
    created: str
    limit: int | None = None

    def task(self, name: str) -> TaskResult:
        """The result of task ``name``."""
        for result in self.tasks:
            if result.task == name:
                return result
        raise KeyError(f"no task {name!r} in this result (have {[t.task for t in self.tasks]})")

    def to_dict(self) -> dict:
        return {"format": RESULT_FORMAT, "version": RESULT_VERSION, **to_plain(self)}

    @classmethod
    def from_dict(cls, data: Mapping) -> "SuiteResult":
        check_format(data, RESULT_FORMAT, RESULT_VERSION, "probe-suite result")
        return from_plain(cls, with_model_identity(data))

    def to_json(self, path: str | os.PathLike | None = None) -> str:
        """The JSON text; with ``path``, also written there atomically (temp file + rename)."""
        text = json.dumps(self.to_dict(), indent=1, sort_keys=False) + "\n"
        if path is not None:
            atomic_write_text(path, text)
        return text

    @classmethod
    def from_json(cls, text_or_path: str | os.PathLike) -> "SuiteResult":
        """From JSON text or a path to a JSON file written by ``to_json``."""
        return cls.from_dict(read_json_object(text_or_path, "probe-suite result"))

    # -- presentation -------------------------------------------------------------------------
    def table(self) -> str:
        """The per-layer table as plain text (scores x100, 95% intervals)."""
        lines = []
        header = (f"{'task':6} {'probe':30} {'dev':>6} {'test':>6} {'95% interval':>14} {'tok acc':>7} "
                  f"{'control':>7} {'select.':>7}")
        for t in self.tasks:
            lines.append(f"{t.task} ({t.dataset}; {t.metric} x100, 95% bootstrap interval over "
                         f"{t.n_sentences.get('test', 0)} test sentences, {t.n_tokens.get('test', 0)} tokens; "
                         f"control and selectivity in token accuracy)")
            lines.append(header)
            lines.append("-" * len(header))

            def row(name, interval, dev=None, accuracy=None, control=None, selectivity=None):
                cell = lambda x, w, fmt="": " " * w if x is None else f"{100 * x:{fmt}{w}.2f}"  # noqa: E731
                lines.append(f"{t.task:6} {name:30} {cell(dev, 6)} {100 * interval.estimate:6.2f} "
                             f"[{100 * interval.low:5.2f},{100 * interval.high:6.2f}] {cell(accuracy, 7)} "
                             f"{cell(control, 7)} {cell(selectivity, 7, '+')}")

            row("majority class", t.baselines.majority)
            row("word-conditional majority", t.baselines.word_majority)
            for r in t.layers:
                row(r.probe.name, r.probe.test, r.probe.dev_score, r.probe.test_accuracy,
                    r.control.test_accuracy, r.selectivity)
                for h in r.halves:
                    row(f"  {h.name}", h.test, h.dev_score, h.test_accuracy)
            if t.mix is not None:
                for p in t.mix.probes:
                    row(p.name, p.test, p.dev_score, p.test_accuracy)
                spread = ", ".join(f"{m:.2f}±{s:.2f}" for m, s in zip(t.mix.weights_mean, t.mix.weights_std))
                lines.append(f"{t.task:6} s_j over layers {list(t.mix.layers)} (mean±sd over seeds "
                             f"{list(t.mix.seeds)}): {spread}; gamma {t.mix.gamma_mean:.2f}±{t.mix.gamma_std:.2f}")
            n_rand = t.baselines.random_bilm_train_tokens
            for p, same in zip(t.baselines.random_bilm, t.baselines.same_data):
                row(f"{p.name} ({n_rand} tok)", p.test, p.dev_score, p.test_accuracy)
                row(f"  model, same {n_rand} tok", same.test, same.dev_score, same.test_accuracy)
            for ref in t.baselines.reference:
                layer = f" layer {ref.layer}" if ref.layer is not None else ""
                lines.append(f"{t.task:6} reference: {ref.system}{layer} {100 * ref.value:.1f} "
                             f"({ref.source}; {ref.note})")
            lines.append("")
        total = self.timings.get("total")
        lines.append(f"model {self.model_name} identity {self.model_identity[:12]}; "
                     f"seed {self.seeds.get('seed')}; total {total:.1f} s" if total is not None else
                     f"model {self.model_name}")
        return "\n".join(lines)



def _labels_digest(*arrays: np.ndarray) -> str:
    digest = hashlib.sha256()
    for array in arrays:
        digest.update("\x1f".join(map(str, array)).encode("utf-8"))
        digest.update(b"\x1e")
    return digest.hexdigest()


__all__ = ["Baselines", "LayerResult", "MixResult", "ProbeScore", "SuiteResult", "TaskResult"]
