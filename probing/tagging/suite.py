"""The probing suite: what each layer of a biLM encodes, with baselines, control tasks and s_j.

    >>> from probing.tagging.suite import run_suite
    >>> result = run_suite("elmo-mini", ["pos", "chunk"])
    >>> print(result.table())
    >>> result.to_json("results.json")

For each task (``probing.tagging.tasks.TASKS``): activations of train/dev/test are extracted once
(``probing.engine.activations``); then, per layer, a ``LinearProbe`` with alpha chosen on dev, scored
on test with a bootstrap interval over sentences; the same probe on Hewitt & Liang control
labels (selectivity = task accuracy - control accuracy); probes on the forward and backward
halves of each LSTM layer; a ``ScalarMixProbe`` over the layers with several seeds (s_j with
their spread); and the baselines: majority class, word-conditional majority, probes on a
random-initialised biLM of the same architecture (trained on an evenly spaced subset of the
training sentences, with the model's own probe on that subset beside it) and the published
reference numbers.

Probe results are cached as JSON beside the activations (``<cache_dir>/probes/``), keyed by
the activation files, the labels, the probe configuration and the seed: rerunning a suite
recomputes nothing that has not changed. ``SuiteConfig(probe_cache=False)`` turns that off.

CLI::

    python -m probing.tagging.suite --model elmo-mini --tasks pos chunk --out results.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import math
import platform
import sys
import time
from dataclasses import asdict, dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Mapping, Sequence

import h5py
import numpy as np
import scipy
import sklearn
import torch

from elmo_model import BiLM, load_bilm
from elmo_model.bilm import fused_step
from elmo_model.bilm.devices import check_device
from elmo_model.plumbing.flags import (
    EXIT_CODES,
    add_device_argument,
    add_models_dir_argument,
    add_precision_argument,
    add_quiet_argument,
)
from elmo_model.bilm.identity import model_identity
from elmo_model.bilm.precision import precision_line, resolve_precision
from elmo_model.models.names import model_files
from elmo_model.models.published import MODEL_HELP
from elmo_model.plumbing.extras import missing_message
from elmo_model.plumbing.io_safety import (check_output_dir, check_output_path, data_root_argument, run_interruptible)
from elmo_model.plumbing.progress import TerminalProgress, log_through_bars
from elmo_model.plumbing.resources import command_name
from probing.data import DatasetMissing, dataset_folders
from probing.engine.activations import ActivationCache, default_cache_dir, extract_activations
from probing.engine.metrics import BootstrapInterval, bootstrap_ci_from_stats, chunk_f1, sentence_chunk_stats
from probing.tagging.baselines import ControlTask, MajorityTagger, WordMajorityTagger, random_bilm, reference_numbers
from probing.tagging.probes import LinearProbe, ScalarMixProbe, fit_on_dev
from probing.tagging.results import (PROBE_CACHE_VERSION, Baselines, LayerResult, MixResult, ProbeScore,  # noqa: F401
                                     SuiteResult, TaskResult, _labels_digest, _ProbeCache)
from probing.tagging.tasks import TASKS, TaggedSentence, load_task

log = logging.getLogger(__name__)

SuiteProgress = Callable[[str, int, int], None]  # (what is being done, steps done, total steps)


def checked_layers(model, layers: Sequence[int] | None) -> list[int]:
    """The output layers to probe, sorted: all of them for None; a ValueError names the valid range."""
    n_out = model.config.n_output_layers
    chosen = list(range(n_out)) if layers is None else sorted(set(int(j) for j in layers))
    if not chosen or any(not 0 <= j < n_out for j in chosen):
        raise ValueError(f"layers must be in 0..{n_out - 1} for this model, got {chosen}")
    return chosen


def known_fields(cls, data: Mapping) -> dict:
    """``data`` as a dict of ``cls``'s dataclass fields; a key it does not know is a ValueError
    naming the class (a saved config from another version must not load half-read)."""
    unknown = set(data) - {f.name for f in fields(cls)}
    if unknown:
        raise ValueError(f"unknown {cls.__name__} keys: {sorted(unknown)}")
    return dict(data)


@dataclass(frozen=True)
class SuiteConfig:
    """How the suite trains and scores its probes (defaults measured in bench/probe_suite.py).

    - ``alphas``: the L2 path ``fit_on_dev`` walks (strongest first; stops early on dev). On
      full EWT with a 512-d biLM, 1e-2 was never chosen (dev 1.5-3 points below 1e-3), and
      1e-4 was best on all three layers, so the default path is 1e-3 -> 1e-4.
    - ``max_iter``: L-BFGS iterations per fit (whitened features: ~30 reach the dev optimum);
      ``warm_max_iter`` for the warm-started fits along the path (15 scored within 0.1 point of
      30 on dev in our measurements).
    - ``preprocess``, ``shrinkage``: the probes' feature preprocessing (``probing.tagging.probes``).
    - ``mix_seeds``: how many seeds train the scalar-mix probe; ``mix_max_iter`` its iterations;
      ``mix_l2`` the pull of s_j towards the layer average (``ScalarMixProbe.mix_l2``). The mix
      is not convex and its loss is nearly flat along some mixes: different seeds can end at
      different s_j, which is what the spread over seeds reports.
    - ``halves``, ``control``, ``random_bilm``, ``mix``: which parts to run. The direction
      halves and the control task are trained at the alpha their layer's probe chose on dev
      (one fit each: Hewitt & Liang's "same probe"); the scalar mix at the best layer's alpha.
    - ``random_bilm_train_fraction``: share of the training sentences (evenly spaced) the
      random-biLM probes are trained on; the model's own probe on the same subset is reported
      beside them. Its extraction costs as much as the model's own: this keeps the cold suite
      within its time budget.
    - ``n_bootstrap``, ``level``: bootstrap resamples and coverage of the intervals.
    - ``batch_size``, ``dtype``: activation extraction and storage.
    - ``precision``: the biLM's matrix products, "fp32", "bf16" or "auto" (bf16 where this
      machine's bf16 units pay; ``elmo_model.bilm.precision``). A run records what it resolved to, and
      its caches are kept apart from the other precision's.
    - ``probe_cache``: reuse cached probe results.
    """

    alphas: tuple[float, ...] = (1e-3, 1e-4)
    max_iter: int = 30
    warm_max_iter: int = 15
    preprocess: str = "whiten"
    shrinkage: float = 1e-2
    mix: bool = True
    mix_seeds: int = 3
    mix_max_iter: int = 30
    mix_l2: float = 0.0
    halves: bool = True
    control: bool = True
    random_bilm: bool = True
    random_bilm_train_fraction: float = 0.25
    n_bootstrap: int = 1000
    level: float = 0.95
    batch_size: int = 64
    dtype: str = "float32"
    probe_cache: bool = True
    precision: str = "auto"

    def to_dict(self) -> dict:
        out = asdict(self)
        out["alphas"] = list(self.alphas)
        return out

    @classmethod
    def from_dict(cls, data: Mapping) -> "SuiteConfig":
        values = known_fields(cls, data)
        if "alphas" in values:
            values["alphas"] = tuple(float(a) for a in values["alphas"])
        return cls(**values)

    def probe_key(self) -> dict:
        """The settings a probe's result depends on (the probe cache key)."""
        return {k: getattr(self, k) for k in ("alphas", "max_iter", "preprocess", "shrinkage",
                                              "mix_max_iter", "mix_l2", "n_bootstrap", "level")}


# --------------------------------------------------------------------------------------------
# Data of one split
# --------------------------------------------------------------------------------------------


@dataclass
class _Split:
    """One split of a task, flattened: ``words``/``tags`` (n_tokens,), ``offsets``
    (n_sentences + 1,), ``sentence_of`` (n_tokens,) the sentence index of each token."""

    name: str
    sentences: list[TaggedSentence]
    words: np.ndarray = field(init=False)
    tags: np.ndarray = field(init=False)
    offsets: np.ndarray = field(init=False)
    sentence_of: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        lengths = np.array([len(s) for s in self.sentences], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        self.words = np.array([w for s in self.sentences for w in s.tokens], dtype=object)
        self.tags = np.array([t for s in self.sentences for t in s.tags], dtype=str)
        self.sentence_of = np.repeat(np.arange(len(self.sentences)), lengths)

    @property
    def tokens(self) -> list[tuple[str, ...]]:
        return [s.tokens for s in self.sentences]

    def per_sentence(self, flat: np.ndarray) -> list[np.ndarray]:
        return np.split(np.asarray(flat), self.offsets[1:-1])

    def subset_rows(self, sentence_index: np.ndarray) -> np.ndarray:
        """Token rows of the given sentences, in order."""
        return np.concatenate([np.arange(self.offsets[i], self.offsets[i + 1]) for i in sentence_index])


def _accuracy_stats(split: _Split, gold: np.ndarray, pred: np.ndarray) -> np.ndarray:
    """Per-sentence (correct, total), (n_sentences, 2)."""
    n = len(split.sentences)
    correct = np.bincount(split.sentence_of, weights=(np.asarray(gold) == np.asarray(pred)), minlength=n)
    total = np.diff(split.offsets)
    return np.stack([correct.astype(np.int64), total], axis=1)


def _score(split: _Split, gold: np.ndarray, pred: np.ndarray, metric: str, config: SuiteConfig,
           seed: int) -> tuple[BootstrapInterval, float]:
    """The task metric with its bootstrap interval, and token accuracy."""
    acc_stats = _accuracy_stats(split, gold, pred)
    accuracy = float(acc_stats[:, 0].sum() / max(1, acc_stats[:, 1].sum()))
    if metric == "accuracy":
        stats = acc_stats
    else:
        stats = sentence_chunk_stats(split.per_sentence(gold), split.per_sentence(pred))
    interval = bootstrap_ci_from_stats(stats, metric, n_resamples=config.n_bootstrap, level=config.level, seed=seed)
    return interval, accuracy


def _point(split: _Split, gold: np.ndarray, pred: np.ndarray, metric: str) -> float:
    """The task metric without an interval (dev scores along a regularisation path)."""
    if metric == "accuracy":
        return float(np.mean(np.asarray(gold) == np.asarray(pred)))
    return chunk_f1(split.per_sentence(gold), split.per_sentence(pred)).f1


# --------------------------------------------------------------------------------------------
# The suite
# --------------------------------------------------------------------------------------------


class _Runner:
    """One suite run: shared state (config, caches, progress, timings) and the probe steps."""

    def __init__(self, config: SuiteConfig, seed: int, cache_dir: Path, progress: SuiteProgress | None,
                 total_steps: int, ray: str | None = None) -> None:
        self.config, self.seed = config, seed
        self.ray = ray
        self.cache_dir = cache_dir
        self.probe_cache = _ProbeCache(cache_dir / "probes", config.probe_cache)
        self.progress = progress
        self.step, self.total_steps = 0, total_steps
        self.timings: dict[str, float] = {}
        # each whole training layer's preprocessing by (cache, layer): the layer's probe, its control
        # task and the scalar mix's seeds whiten the same array (a few megabytes a layer)
        self._layer_preprocessing: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = {}

    def _preprocessing(self, probe: LinearProbe, X_train: np.ndarray,
                       layer_key: tuple[str, int] | None) -> tuple[np.ndarray, np.ndarray]:
        """``probe.preprocessing_of(X_train)``, kept under ``layer_key`` (training cache, layer) when
        X_train is that whole layer, or that layer's columns of the stacked layers."""
        if layer_key is None:
            return probe.preprocessing_of(X_train)
        if layer_key not in self._layer_preprocessing:
            self._layer_preprocessing[layer_key] = probe.preprocessing_of(X_train)
        return self._layer_preprocessing[layer_key]

    def report(self, label: str, advance: int = 1) -> None:
        self.step += advance
        if self.progress:
            self.progress(label, min(self.step, self.total_steps), self.total_steps)

    def timed(self, stage: str, seconds: float) -> None:
        self.timings[stage] = self.timings.get(stage, 0.0) + seconds

    def extract(self, model, split: _Split, dataset: str, split_name: str, label: str) -> ActivationCache:
        start = time.perf_counter()

        def inner(done: int, total: int) -> None:
            # the step moves with the sentences, so a long extraction moves the bar too
            if self.progress:
                self.progress(f"{label}: {done}/{total} sentences",
                              min(self.step + (done / total if total else 0.0), self.total_steps), self.total_steps)

        cache = extract_activations(model, split.tokens, dataset, split_name, cache_dir=self.cache_dir,
                                    dtype=self.config.dtype, batch_size=self.config.batch_size, progress=inner,
                                    ray=self.ray)
        self.timed("extract", time.perf_counter() - start)
        self.report(label)
        return cache

    def linear_probe(self, name: str, kind: str, layer: int | None, direction: str | None,
                     X: Callable[[str], np.ndarray], y: Mapping[str, np.ndarray], splits: Mapping[str, _Split],
                     metric: str, key_parts: dict, alphas: Sequence[float] | None = None,
                     layer_key: tuple[str, int] | None = None) -> ProbeScore:
        """Train (or fetch from the cache) one LinearProbe: alpha on dev, scored on test.
        ``X(split)`` gives the features of "train"/"dev"/"test"; ``y`` the labels; ``layer_key``:
        (training cache, layer) when X("train") is that whole layer (its whitening is kept)."""
        cfg = self.config
        alphas = tuple(alphas if alphas is not None else cfg.alphas)
        key = self.probe_cache.key(name=name, kind=kind, layer=layer, direction=direction, metric=metric,
                                   alphas=alphas, config=cfg.probe_key(), seed=self.seed, **key_parts)
        cached = self.probe_cache.get(key)
        if cached is not None:
            self.report(f"{name} (cached)")
            return cached
        start = time.perf_counter()
        X_train, X_dev = X("train"), X("dev")
        base = LinearProbe(max_iter=cfg.max_iter, preprocess=cfg.preprocess, shrinkage=cfg.shrinkage,
                           random_state=self.seed)
        # X_dev bound as a default: the `del` below then frees train and dev before the test split is read
        probe, path = fit_on_dev(base, X_train, y["train"],
                                 lambda p, X_dev=X_dev: _point(splits["dev"], y["dev"], p.predict(X_dev), metric),
                                 alphas, warm_max_iter=cfg.warm_max_iter,
                                 preprocessing=self._preprocessing(base, X_train, layer_key))
        del X_train, X_dev
        pred = probe.predict(X("test"))
        interval, accuracy = _score(splits["test"], y["test"], pred, metric, cfg, self.seed)
        seconds = time.perf_counter() - start
        best = max(path, key=lambda p: p.dev_score)
        score = ProbeScore(name, kind, layer, direction, interval, accuracy, best.dev_score, best.alpha,
                           tuple(path), len(y["train"]), int(probe.n_iter_), seconds, self.seed)
        self.probe_cache.put(key, score)
        self.timed(f"probe_{kind}", seconds)
        self.report(name)
        log.info("%s: dev %.4f test %.4f (alpha %g, %.1f s)", name, score.dev_score, interval.estimate,
                 score.alpha, seconds)
        return score

    def mix_probes(self, seeds: Sequence[int], layers: Sequence[int], caches: Mapping[str, ActivationCache],
                   y: Mapping[str, np.ndarray], splits: Mapping[str, _Split], metric: str, alpha: float,
                   key_parts: dict) -> list[ProbeScore]:
        """One ScalarMixProbe per seed (or its cached result). The layers are stacked side by side
        once for all seeds, and each layer is whitened once: as its own probe was, when it was."""
        cfg = self.config
        stacked: dict[str, np.ndarray] = {}

        def X(split_name: str) -> np.ndarray:  # the training split stacked once; dev and test per seed
            if split_name != "train":
                return _stack_layers(caches[split_name], layers)
            if split_name not in stacked:
                stacked[split_name] = _stack_layers(caches[split_name], layers)
            return stacked[split_name]

        scores = []
        for seed in seeds:
            name = f"mix seed {seed}"
            key = self.probe_cache.key(name=name, kind="mix", layers=list(layers), alpha=alpha, metric=metric,
                                       config=cfg.probe_key(), seed=seed, **key_parts)
            cached = self.probe_cache.get(key)
            if cached is not None:
                self.report(f"{name} (cached)")
                scores.append(cached)
                continue
            start = time.perf_counter()
            probe = ScalarMixProbe(n_layers=len(layers), alpha=alpha, mix_l2=cfg.mix_l2, max_iter=cfg.mix_max_iter,
                                   preprocess=cfg.preprocess, shrinkage=cfg.shrinkage, random_state=seed)
            single, d = LinearProbe(preprocess=cfg.preprocess, shrinkage=cfg.shrinkage), caches["train"].dim
            pre = [self._preprocessing(single, X("train")[:, i * d:(i + 1) * d], (caches["train"].name, j))
                   for i, j in enumerate(layers)]
            probe.fit(X("train"), y["train"], preprocessing=pre)
            dev_score = _point(splits["dev"], y["dev"], probe.predict(X("dev")), metric)
            interval, accuracy = _score(splits["test"], y["test"], probe.predict(X("test")), metric, cfg, self.seed)
            seconds = time.perf_counter() - start
            score = ProbeScore(name, "mix", None, None, interval, accuracy, dev_score, alpha, (), len(y["train"]),
                               int(probe.n_iter_), seconds, seed, tuple(float(s) for s in probe.mix_weights_),
                               float(probe.gamma_))
            self.probe_cache.put(key, score)
            self.timed("probe_mix", seconds)
            self.report(name)
            log.info("%s: s_j %s gamma %.2f test %.4f (%.1f s)", name, np.round(probe.mix_weights_, 3),
                     probe.gamma_, interval.estimate, seconds)
            scores.append(score)
        return scores


def _stack_layers(cache: ActivationCache, layers: Sequence[int]) -> np.ndarray:
    """(n_tokens, len(layers) * dim) float32, the layers side by side, read one at a time."""
    out = np.empty((cache.n_tokens, len(layers) * cache.dim), dtype=np.float32)
    for i, j in enumerate(layers):
        out[:, i * cache.dim:(i + 1) * cache.dim] = cache.layer(j)
    return out


def _versions() -> dict[str, str]:
    return {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
            "scikit-learn": sklearn.__version__, "scipy": scipy.__version__, "h5py": h5py.__version__}


def _steps_per_task(n_layers_probed: int, n_lstm_layers_probed: int, config: SuiteConfig) -> int:
    steps = 3 + n_layers_probed  # extraction of three splits, one probe per layer
    steps += n_layers_probed if config.control else 0
    steps += 2 * n_lstm_layers_probed if config.halves else 0
    steps += config.mix_seeds if config.mix and n_layers_probed > 1 else 0
    steps += (3 + 2 * n_layers_probed) if config.random_bilm else 0
    return steps


def run_suite(model, tasks: Sequence[str], layers: Sequence[int] | None = None,
              data_root: str | Path | None = None, cache_dir: str | Path | None = None, seed: int = 0,
              limit: int | None = None, progress: SuiteProgress | None = None,
              config: SuiteConfig | None = None, ray: str | None = None, device: str | None = None) -> SuiteResult:
    """Probe ``model`` (a ``BiLM``, a shipped name or a model directory) on ``tasks``.

    ``layers``: which output layers (default all: 0 = token layer, 1..L = LSTM layers);
    ``data_root``: where the datasets are (``probing.data``); ``cache_dir``: activation and
    probe caches (default ``probing.engine.activations.default_cache_dir()``); ``seed``: seeds the
    probes, the control labels, the random biLM, the bootstrap and (seed, seed+1, ...) the
    scalar-mix probes; ``limit``: only the first N sentences of each split (a quick slice);
    ``progress(label, done, total)``: called after each step (an extraction or a probe) and
    during extractions; ``config``: a ``SuiteConfig`` (default: its defaults); ``ray``: extract
    activations on Ray ("local", or a cluster address; see ``extract_activations``: the caches
    are identical, so this changes where the work runs, never the results); ``device``: where a
    model given by name runs ("cpu", "cuda", "cuda:N"; None: the GPU when torch sees one, else
    the CPU; a ``BiLM`` runs where it is, and ``config.precision`` is resolved for it). Returns a
    ``SuiteResult``. Peak memory: about one layer of the largest training split (n_tokens x dim
    float32) plus, for the scalar mix, all probed layers of it side by side.
    """
    config = config or SuiteConfig()
    started = time.perf_counter()
    if not isinstance(model, BiLM):
        model = load_bilm(model, device=device)
    config = dataclasses.replace(config, precision=resolve_precision(config.precision, model.device))
    unknown = [t for t in tasks if t not in TASKS]
    if unknown or not tasks:
        raise ValueError(f"unknown or no tasks {unknown or list(tasks)}; choose from {', '.join(TASKS)}")
    layers = checked_layers(model, layers)
    with model.computing_in(config.precision):  # a caller's model is given back as it came
        cache_root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        per_task = _steps_per_task(len(layers), sum(1 for j in layers if j > 0), config)
        runner = _Runner(config, seed, cache_root, progress, per_task * len(tasks), ray)
        rand_model = random_bilm(model.config, seed, config.precision).to(model.device) if config.random_bilm else None

        results = []
        ray_started = False
        if ray is not None:  # one Ray for every extraction of the run
            from elmo_model.corpus.ray_embed import start_ray  # Ray is optional (requirements-cluster.txt)

            ray_started, _ = start_ray(ray, None)
        try:
            for task in tasks:
                results.append(_run_task(runner, model, rand_model, task, layers, data_root, limit))
        finally:
            if ray_started:
                import ray as ray_module  # optional, as above

                ray_module.shutdown()
        runner.timed("total", time.perf_counter() - started)
        plain = lambda x: json.loads(json.dumps(x))  # noqa: E731  (tuples -> lists: as JSON gives them back)
        return SuiteResult(
            model_name=str(getattr(model, "name", "biLM")), model_identity=model_identity(model),
            model_config=plain(model.config.describe()), tasks=tuple(results),
            config=plain({**config.to_dict(), "layers": layers}),
            seeds={"seed": seed, "probes": seed, "control_labels": seed, "random_bilm": seed, "bootstrap": seed,
                   "mix": [seed + i for i in range(config.mix_seeds)] if config.mix else []},
            versions=_versions(), timings=dict(runner.timings),
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"), limit=limit)


def _run_task(runner: _Runner, model, rand_model, task: str, layers: list[int], data_root, limit) -> TaskResult:
    cfg, seed = runner.config, runner.seed
    spec = TASKS[task]
    metric = spec.metric
    timings_before = dict(runner.timings)
    task_start = time.perf_counter()
    splits = {name: _Split(name, load_task(task, name, data_root=data_root, limit=limit))
              for name in ("train", "dev", "test")}
    for name, split in splits.items():
        if len(split.tags) == 0:
            raise ValueError(f"task {task}: the {name} split has no tokens")
    caches = {name: runner.extract(model, split, spec.dataset, name, f"{task}: activations of {name}")
              for name, split in splits.items()}
    y = {name: split.tags for name, split in splits.items()}
    labels_key = _labels_digest(y["train"], y["dev"], y["test"])
    activations_key = [caches[n].name for n in ("train", "dev", "test")]
    key_parts = {"task": task, "activations": activations_key, "labels": labels_key}

    # trivial baselines
    train_words = list(splits["train"].words)
    majority = MajorityTagger().fit(train_words, list(y["train"]))
    word_majority = WordMajorityTagger().fit(train_words, list(y["train"]))
    test = splits["test"]
    majority_ci, _ = _score(test, y["test"], majority.predict(test.words).astype(str), metric, cfg, seed)
    word_ci, _ = _score(test, y["test"], word_majority.predict(test.words).astype(str), metric, cfg, seed)

    control = ControlTask(seed).fit(y["train"])
    y_control = {name: control.labels(split.words).astype(str) for name, split in splits.items()}
    control_key = {**key_parts, "labels": _labels_digest(*y_control.values()), "control_seed": seed}

    half = caches["train"].dim // 2
    layer_results = []
    for j in layers:
        features: dict[str, np.ndarray] = {}

        def X(split_name: str, j=j, features=features) -> np.ndarray:
            if split_name not in features:
                features[split_name] = caches[split_name].layer(j)
            return features[split_name]

        layer_key = (caches["train"].name, j)
        probe = runner.linear_probe(f"layer {j}", "layer", j, None, X, y, splits, metric, key_parts,
                                    layer_key=layer_key)
        if cfg.control:
            control_score = runner.linear_probe(f"control layer {j}", "control", j, None, X, y_control, splits,
                                                "accuracy", control_key, alphas=(probe.alpha,), layer_key=layer_key)
        else:
            control_score = probe
        halves = []
        if cfg.halves and j > 0:
            for direction in ("forward", "backward"):
                columns = slice(0, half) if direction == "forward" else slice(half, 2 * half)
                # the layer's alpha: one fit each instead of a path (halves are for comparison)
                halves.append(runner.linear_probe(
                    f"layer {j} {direction}", "half", j, direction,
                    lambda s, columns=columns, X=X: X(s)[:, columns], y, splits, metric, key_parts,
                    alphas=(probe.alpha,)))
        features.clear()
        selectivity = probe.test_accuracy - control_score.test_accuracy if cfg.control else 0.0
        layer_results.append(LayerResult(j, probe, control_score, float(selectivity), tuple(halves)))

    mix = None
    if cfg.mix and len(layers) > 1:
        best = max(layer_results, key=lambda r: r.probe.dev_score)
        mix_probes = runner.mix_probes([seed + i for i in range(cfg.mix_seeds)], layers, caches, y, splits, metric,
                                       best.probe.alpha, key_parts)
        mix = MixResult.from_probes(tuple(layers), mix_probes)

    random_scores, same_scores, n_random_tokens = [], [], 0
    if cfg.random_bilm:
        n_train = len(splits["train"].sentences)
        m = max(1, math.ceil(cfg.random_bilm_train_fraction * n_train))
        subset = np.unique(np.linspace(0, n_train - 1, m).round().astype(np.int64))
        sub_train = _Split("train", [splits["train"].sentences[i] for i in subset])
        rows = splits["train"].subset_rows(subset)
        n_random_tokens = len(rows)
        sub_splits = {"train": sub_train, "dev": splits["dev"], "test": splits["test"]}
        sub_y = {"train": sub_train.tags, "dev": y["dev"], "test": y["test"]}
        rand_caches = {
            "train": runner.extract(rand_model, sub_train, spec.dataset, f"train-subset-{len(subset)}",
                                    f"{task}: random biLM activations of train ({len(subset)} sentences)"),
            "dev": runner.extract(rand_model, splits["dev"], spec.dataset, "dev", f"{task}: random biLM activations of dev"),
            "test": runner.extract(rand_model, splits["test"], spec.dataset, "test", f"{task}: random biLM activations of test"),
        }
        rand_key = {**key_parts, "activations": [rand_caches[n].name for n in ("train", "dev", "test")],
                    "labels": _labels_digest(sub_y["train"], y["dev"], y["test"])}
        same_key = {**key_parts, "subset": _labels_digest(subset), "labels": rand_key["labels"]}
        for j in layers:
            features = {}

            def X_rand(split_name: str, j=j, features=features) -> np.ndarray:
                if split_name not in features:
                    features[split_name] = rand_caches[split_name].layer(j)
                return features[split_name]

            random_scores.append(runner.linear_probe(f"random biLM layer {j}", "random_bilm", j, None, X_rand,
                                                     sub_y, sub_splits, metric, rand_key))
            features.clear()

            def X_same(split_name: str, j=j, features=features) -> np.ndarray:
                if split_name not in features:
                    layer = caches[split_name].layer(j)
                    features[split_name] = layer[rows] if split_name == "train" else layer
                return features[split_name]

            same_scores.append(runner.linear_probe(f"model layer {j} on the same subset", "same_data", j, None,
                                                   X_same, sub_y, sub_splits, metric, same_key))
            features.clear()
        for cache in rand_caches.values():
            cache.close()

    baselines = Baselines(majority_ci, word_ci, tuple(random_scores), tuple(same_scores), seed, n_random_tokens,
                          tuple(reference_numbers(task)))
    timings = {k: v - timings_before.get(k, 0.0) for k, v in runner.timings.items()}
    timings["task_total"] = time.perf_counter() - task_start
    for cache in caches.values():
        cache.close()
    return TaskResult(task, spec.dataset, metric,
                      {n: len(s.sentences) for n, s in splits.items()},
                      {n: int(len(s.tags)) for n, s in splits.items()},
                      tuple(layer_results), mix, baselines, timings)


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=command_name("elmo-probe-suite", "python -m probing.tagging.suite"),
        epilog=EXIT_CODES,
        description="Probe every layer of a biLM: linear probes per layer and per direction, a learned "
                    "scalar mix (s_j), control tasks (selectivity) and baselines (majority, word majority, "
                    "random-initialised biLM, published numbers). Prints the per-layer table and writes "
                    "the full result as JSON. Activations and probe results are cached, so a rerun is fast.")
    parser.add_argument("--model", default="elmo-mini", help=MODEL_HELP + " (default: %(default)s)")
    parser.add_argument("--tasks", nargs="+", default=["pos", "chunk"], choices=sorted(TASKS),
                        help="tasks to probe (default: pos chunk)")
    parser.add_argument("--layers", nargs="+", type=int, default=None, help="layers to probe (default: all)")
    parser.add_argument("--out", type=Path, default=None, help="write the result here as JSON")
    parser.add_argument("--data-root", type=data_root_argument, default=None,
                        help="data root (default: $ELMO_WORKBENCH_DATA or the user cache; see python -m probing.data)")
    add_models_dir_argument(parser)
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="activation and probe cache (default: $ELMO_WORKBENCH_CACHE or "
                             "~/.cache/elmo-workbench/activations)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N sentences of each split (a quick slice)")
    parser.add_argument("--seed", type=int, default=0, help="seed of probes, control labels, random biLM, bootstrap")
    parser.add_argument("--no-probe-cache", action="store_true", help="retrain every probe even if cached")
    parser.add_argument("--no-random-bilm", action="store_true", help="skip the random-initialised biLM baseline")
    parser.add_argument("--mix-seeds", type=int, default=SuiteConfig.mix_seeds, help="seeds of the scalar-mix probe")
    add_quiet_argument(parser)
    add_precision_argument(parser, default=SuiteConfig.precision)
    add_device_argument(parser)
    parser.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                        help="extract activations on Ray: alone, on this machine (or $RAY_ADDRESS); with ADDRESS "
                             "('auto', 'ray://head:10001') on a cluster started with `ray start`. Same caches, same "
                             "results. Needs Ray: `pip install ray` (the [cluster] extra)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error(f"--limit {args.limit}: expected a positive number of sentences")
    if args.mix_seeds < 0:
        parser.error(f"--mix-seeds {args.mix_seeds}: expected 0 (no scalar mix) or more")
    log_through_bars(args.quiet)
    cache_dir = args.cache_dir if args.cache_dir is not None else default_cache_dir()
    try:  # the output and the cache before the run: never a traceback after it
        if args.out is not None:
            check_output_path(args.out, [*model_files(args.model, args.data_root, args.models_dir),
                                         *dataset_folders(args.data_root)], create_parents=True, flag="--out")
        check_output_dir(cache_dir, model_files(args.model, args.data_root, args.models_dir), flag="--cache-dir",
                         what="cache directory")
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    config = SuiteConfig(probe_cache=not args.no_probe_cache, random_bilm=not args.no_random_bilm,
                         mix_seeds=args.mix_seeds, mix=args.mix_seeds > 0, precision=args.precision)
    bar = TerminalProgress("probing suite", single=True, unit="step", quiet=args.quiet, width=60)

    def kept() -> str:
        bar.close()
        return (f"the activations and probes finished so far are kept in the cache {cache_dir}; "
                "rerun the same command to go on from them")

    return run_interruptible(lambda: _run_and_print(args, config, bar), kept)


def _run_and_print(args: argparse.Namespace, config: SuiteConfig, bar: TerminalProgress) -> int:
    try:
        if args.ray is not None and args.device not in (None, "cpu"):
            raise ValueError(f"--ray extracts on the Ray workers' CPUs; drop --device {args.device} (or --ray)")
        if args.ray is not None and (absent := missing_message("cluster", "--ray")):
            raise ValueError(absent)  # Ray is optional: imported only for --ray
        device = "cpu" if args.ray is not None else str(check_device(args.device, "--device"))
        fused_step.enable(wait=True)  # a long run: the compiled LSTM step pays, the same every run
        model = load_bilm(args.model, args.precision, device=device, data_root=args.data_root, cache_dir=args.models_dir)
        print(precision_line(model, args.precision), flush=True)
        result = run_suite(model, args.tasks, layers=args.layers, data_root=args.data_root,
                           cache_dir=args.cache_dir, seed=args.seed, limit=args.limit, progress=bar.steps,
                           config=config, ray=args.ray)
    except (ValueError, DatasetMissing) as err:
        bar.close()
        print(f"error: {err}", file=sys.stderr)
        return 2
    bar.close()
    print(result.table())
    if args.out is not None:
        result.to_json(args.out)
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
