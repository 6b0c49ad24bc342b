"""The suite's runner, which the syntax section's edge probes share: a split flattened to token
rows, a probe's score with its bootstrap interval, and each probe fitted once (alpha on dev,
scored on test) or fetched from the probe cache, with progress and timings kept for the run."""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from elmo_model.bilm.precision import bf16_support
from probing.engine.activations import ActivationCache, extract_activations
from probing.engine.metrics import BootstrapInterval, bootstrap_ci_from_stats, chunk_f1, sentence_chunk_stats
from probing.engine.result_cache import ResultCache
from probing.tagging.probes import LinearProbe, ScalarMixProbe, fit_on_dev
from probing.tagging.results import PROBE_CACHE_VERSION, ProbeScore
from probing.tagging.suite_config import SuiteConfig
from probing.tagging.tasks import TaggedSentence

log = logging.getLogger(__name__)

SuiteProgress = Callable[[str, int, int], None]  # (what is being done, steps done, total steps)


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


def evenly_spaced(n: int, m: int) -> np.ndarray:
    """``min(m, n)`` indices of ``range(n)`` spread evenly, first and last included when m > 1."""
    m = max(1, min(int(m), n))
    return np.unique(np.linspace(0, n - 1, m).round().astype(np.int64))


def sampled_split(split: _Split, fraction: float) -> _Split:
    """``split`` with ``ceil(fraction * n)`` of its sentences, evenly spaced (itself at 1.0)."""
    n = len(split.sentences)
    if fraction >= 1.0 or n == 0:
        return split
    return _Split(split.name, [split.sentences[i] for i in evenly_spaced(n, math.ceil(fraction * n))])


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


class _Runner:
    """One suite run: shared state (config, caches, progress, timings) and the probe steps."""

    def __init__(self, config: SuiteConfig, seed: int, cache_dir: Path, progress: SuiteProgress | None,
                 total_steps: int, ray: str | None = None) -> None:
        self.config, self.seed = config, seed
        self.ray = ray
        self.cache_dir = cache_dir
        self.probe_cache = ResultCache(cache_dir / "probes", ProbeScore, config.probe_cache, PROBE_CACHE_VERSION)
        # the probes' products in bf16 where the biLM's run in bf16 and this CPU has the units; the
        # key of a bf16 probe says so (an fp32 probe's key is what it always was)
        self.products = "bf16" if config.precision == "bf16" and bf16_support("cpu").usable else "fp32"
        self.probe_key = {**config.probe_key(), **({"products": "bf16"} if self.products == "bf16" else {})}
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
                                   alphas=alphas, config=self.probe_key, seed=self.seed, **key_parts)
        cached = self.probe_cache.get(key)
        if cached is not None:
            self.report(f"{name} (cached)")
            return cached
        start = time.perf_counter()
        X_train, X_dev = X("train"), X("dev")
        base = LinearProbe(max_iter=cfg.max_iter, preprocess=cfg.preprocess, shrinkage=cfg.shrinkage,
                           random_state=self.seed, precision=self.products)
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
                                       config=self.probe_key, seed=seed, **key_parts)
            cached = self.probe_cache.get(key)
            if cached is not None:
                self.report(f"{name} (cached)")
                scores.append(cached)
                continue
            start = time.perf_counter()
            probe = ScalarMixProbe(n_layers=len(layers), alpha=alpha, mix_l2=cfg.mix_l2, max_iter=cfg.mix_max_iter,
                                   preprocess=cfg.preprocess, shrinkage=cfg.shrinkage, random_state=seed,
                                   precision=self.products)
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
