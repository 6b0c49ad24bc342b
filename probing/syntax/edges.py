"""Edge probes on gold dependency arcs (Tenney et al., 2019; Liu et al., 2019), per layer.

- ``arc``: is token j the head of token i? Each non-root token i gives one positive pair (i, its
  gold head) and one negative (i, a token drawn at random among the others of the sentence,
  seeded), so the classes are balanced and chance is 50%.
- ``label``: the UD relation of a gold arc (its universal part: ``obl:npmod`` -> ``obl``),
  one item per non-root token.

A pair (i, j) of a layer is represented as ``[h_i; h_j; h_i * h_j]`` (3 * dim; Liu et al.'s
pairwise input). The probes are the suite's: a ``LinearProbe`` per layer with alpha chosen on
dev along the suite's path, scored on test with a bootstrap interval over sentences
(``probing.tagging.suite``), cached like the suite's probes; a Hewitt & Liang control task trained at the
same alpha (``ControlTask`` labels keyed by the dependent's word type for ``label``, by the
(dependent, candidate) word pair for ``arc``: what a probe memorising words could get);
selectivity = accuracy - control accuracy; the same probe on a random-initialised biLM of the
same shape; the majority class.

    >>> from probing.syntax.edges import run_edges
    >>> result = run_edges("elmo-mini")
    >>> print(result.table())
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from elmo_model import BiLM, load_bilm
from probing.engine.activations import default_cache_dir, extract_activations
from probing.engine.envelope import JsonDataclass
from probing.engine.metrics import BootstrapInterval
from probing.syntax.structural import (SyntaxConfig, SyntaxProgress, extract_trees, load_trees, nonsense_split,
                                       nonsense_test)
from probing.syntax.trees import DependencyTree
from probing.tagging.baselines import ControlTask, MajorityTagger, random_bilm
from probing.tagging.results import ProbeScore
from probing.tagging.results import _labels_digest
from probing.tagging.runner import _Runner, _score, _Split
from probing.tagging.suite import checked_layers
from probing.tagging.suite_config import SuiteConfig
from probing.tagging.tasks import TaggedSentence

log = logging.getLogger(__name__)

EDGE_TASKS = ("arc", "label")
HEAD, NOT_HEAD = "head", "not head"


def edge_items(trees: Sequence[DependencyTree], task: str, seed: int = 0
               ) -> tuple[list[TaggedSentence], np.ndarray, np.ndarray, np.ndarray]:
    """The items of ``task`` over ``trees``: per sentence a ``TaggedSentence`` whose "tokens" are
    the items' control keys and whose tags are their labels (so the suite's per-sentence
    bootstrap applies), and flat arrays ``left``/``right`` (n_items,) of token indices into the
    concatenated sentences (i and the candidate head j), and ``sentence_of`` (n_items,)."""
    if task not in EDGE_TASKS:
        raise ValueError(f"unknown edge task {task!r}; choose from {', '.join(EDGE_TASKS)}")
    rng = np.random.default_rng(seed)
    items, left, right, sentence_of = [], [], [], []
    offset = 0
    for s, tree in enumerate(trees):
        keys, labels = [], []
        for i, h in enumerate(tree.heads):
            if h < 0:
                continue
            if task == "label":
                pairs = [(h, tree.relations[i].split(":")[0])]
                keys.append(tree.tokens[i])
            else:
                others = [j for j in range(len(tree)) if j != i and j != h]
                pairs = [(h, HEAD)] + ([(int(rng.choice(others)), NOT_HEAD)] if others else [])
                keys += [f"{tree.tokens[i]}\x00{tree.tokens[j]}" for j, _ in pairs]
            for j, label in pairs:
                labels.append(label)
                left.append(offset + i)
                right.append(offset + j)
                sentence_of.append(s)
        items.append(TaggedSentence(tuple(keys), tuple(labels), sent_id=tree.sent_id))
        offset += len(tree)
    return items, np.array(left, dtype=np.int64), np.array(right, dtype=np.int64), np.array(sentence_of)


def pair_features(layer: np.ndarray, left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """``[h_i; h_j; h_i * h_j]`` for every item: layer (n_tokens, dim) -> (n_items, 3 * dim) float32."""
    a, b = layer[left], layer[right]
    return np.concatenate([a, b, a * b], axis=1)


@dataclass(frozen=True)
class EdgeLayer(JsonDataclass):
    """One layer of one edge task: the probe, its control task, selectivity (accuracy - control
    accuracy), the probe on the random biLM (None when left out) and, on the Jabberwocky twins of
    the test sentences (``probing.syntax.jabberwocky``), the probe fitted again along the same alpha
    path on the same real sentences (the same fit: it is deterministic) and scored there (None when
    left out)."""

    layer: int
    probe: ProbeScore
    control: ProbeScore
    selectivity: float
    random_bilm: ProbeScore | None
    nonsense: ProbeScore | None = None


@dataclass(frozen=True)
class EdgeTaskResult(JsonDataclass):
    """``task`` ("arc" or "label"): one ``EdgeLayer`` per layer, the majority-class accuracy on
    test with its interval, the number of items per split and of label classes."""

    task: str
    layers: tuple[EdgeLayer, ...]
    majority: BootstrapInterval
    n_items: dict
    n_classes: int

    def best_layer(self) -> EdgeLayer:
        return max(self.layers, key=lambda r: r.probe.test.estimate)


@dataclass(frozen=True)
class EdgeResult(JsonDataclass):
    """Edge probes of one model: one ``EdgeTaskResult`` per task; sentences per split; timings (s)."""

    model_name: str
    tasks: tuple[EdgeTaskResult, ...]
    n_sentences: dict
    seed: int
    timings: dict = field(default_factory=dict)

    def task(self, name: str) -> EdgeTaskResult:
        for t in self.tasks:
            if t.task == name:
                return t
        raise KeyError(f"no edge task {name!r} in this result; it has {[t.task for t in self.tasks]}")

    def table(self) -> str:
        lines = [f"edge probes on gold arcs, {self.model_name} (EWT test, accuracy x100)",
                 f"{'task':<7}{'layer':>6}{'probe':>8}{'control':>9}{'select.':>9}{'random':>8}{'nonsense':>10}"]
        for t in self.tasks:
            for r in t.layers:
                rand = "" if r.random_bilm is None else f"{100 * r.random_bilm.test.estimate:.1f}"
                nonsense = "" if r.nonsense is None else f"{100 * r.nonsense.test.estimate:.1f}"
                lines.append(f"{t.task:<7}{r.layer:>6}{100 * r.probe.test.estimate:>8.1f}"
                             f"{100 * r.control.test_accuracy:>9.1f}{100 * r.selectivity:>9.1f}{rand:>8}{nonsense:>10}")
            lines.append(f"{t.task:<7}{'major.':>6}{100 * t.majority.estimate:>8.1f}")
        return "\n".join(lines)


def _pair_source(caches: Mapping, data: Mapping, j: int):
    """``X(split)`` -> the pair features of layer ``j`` (computed once per split) and the memo that
    holds them (cleared by the caller when the layer is done)."""
    memo: dict[str, np.ndarray] = {}

    def X(split: str) -> np.ndarray:
        if split not in memo:
            memo[split] = pair_features(caches[split].layer(j), data[split][1], data[split][2])
        return memo[split]

    return X, memo


def _nonsense(model, trees, config: SyntaxConfig, seed: int, data_root, cache_root: Path):
    """The Jabberwocky twins of the test trees and their activation cache (the structural section's),
    or (None, None) when the config leaves them out."""
    if not config.jabberwocky:
        return None, None
    nonsense_trees = nonsense_test(trees["test"], seed, data_root, config.treebank)
    return nonsense_trees, extract_activations(model, [list(t.tokens) for t in nonsense_trees], config.dataset,
                                               nonsense_split(config, trees["test"], seed, data_root),
                                               cache_dir=cache_root, batch_size=config.batch_size_extract)


def _on_nonsense(runner: _Runner, name: str, j: int, caches, nonsense_cache, data, nonsense_data, y, splits,
                 key_parts: dict, alphas: tuple[float, ...]) -> ProbeScore:
    """The layer's probe fitted again along the same alpha path on the same real sentences (the same
    fit: it is deterministic) and scored on the nonsense test (the same items and labels)."""
    X, memo = _pair_source({**caches, "test": nonsense_cache}, {**data, "test": nonsense_data}, j)
    key = {**key_parts, "activations": [caches["train"].name, caches["dev"].name, nonsense_cache.name]}
    score = runner.linear_probe(name, "edge", j, None, X, y, {**splits, "test": _Split("test", nonsense_data[0])},
                                "accuracy", key, alphas=alphas)
    memo.clear()
    return score


def run_edges(model, tasks: Sequence[str] = EDGE_TASKS, layers: Sequence[int] | None = None, data_root=None,
              cache_dir=None, seed: int = 0, limit: int | None = None, config: SyntaxConfig | None = None,
              suite_config: SuiteConfig | None = None, progress: SyntaxProgress | None = None) -> EdgeResult:
    """Edge probes (``tasks``: "arc", "label") on every layer of ``model`` (a ``BiLM`` or a shipped
    name), trained on ``config``'s EWT training slice with the suite's probes (``suite_config``:
    alphas, iterations, bootstrap; default ``SuiteConfig()``). Activations come from the same
    caches as the structural probes. ``progress(label, done, total)``."""
    config = config or SyntaxConfig()
    cfg = suite_config or SuiteConfig()
    started = time.perf_counter()
    if not isinstance(model, BiLM):
        model = load_bilm(model)
    unknown = [t for t in tasks if t not in EDGE_TASKS]
    if unknown or not tasks:
        raise ValueError(f"unknown or no edge tasks {unknown or list(tasks)}; choose from {', '.join(EDGE_TASKS)}")
    layers = checked_layers(model, layers)
    cache_root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    total = len(tasks) * len(layers) * (2 + int(config.random_bilm) + int(config.jabberwocky)) + 1 \
        + int(config.random_bilm)
    runner = _Runner(cfg, seed, cache_root, progress, total)
    trees = load_trees(config, data_root, limit)
    t0 = time.perf_counter()
    caches = extract_trees(model, trees, cache_root, config, data_root=data_root)
    runner.report("activations")
    nonsense_trees, nonsense_cache = _nonsense(model, trees, config, seed, data_root, cache_root)
    rand_caches = None
    if config.random_bilm:
        baseline = random_bilm(model.config, seed, getattr(model, "precision", "fp32")).to(model.device)
        rand_caches = extract_trees(baseline, trees, cache_root, config, data_root=data_root)
        runner.report("random biLM activations")
    runner.timed("extract", time.perf_counter() - t0)

    # the edge probes' training sentences are a prefix of the structural probes', so their tokens
    # are the first rows of the same activation cache
    edge_trees = dict(trees)
    if config.edge_train_sentences is not None:
        edge_trees["train"] = trees["train"][:config.edge_train_sentences]
    alphas = tuple(config.edge_alphas) if config.edge_alphas is not None else tuple(cfg.alphas)
    results = []
    for task in tasks:
        data = {s: edge_items(ts, task, seed) for s, ts in edge_trees.items()}
        splits = {s: _Split(s, d[0]) for s, d in data.items()}
        nonsense_data = None if nonsense_trees is None else edge_items(nonsense_trees, task, seed)  # the same items
        y = {s: sp.tags for s, sp in splits.items()}
        control = ControlTask(seed).fit(y["train"])
        y_control = {s: control.labels(sp.words).astype(str) for s, sp in splits.items()}
        key_parts = {"edge_task": task, "activations": [caches[s].name for s in ("train", "dev", "test")],
                     "labels": _labels_digest(*y.values()), "pairs": _labels_digest(*(d[2] for d in data.values()))}
        control_key = {**key_parts, "labels": _labels_digest(*y_control.values()), "control_seed": seed}
        majority = MajorityTagger().fit(list(splits["train"].words), list(y["train"]))
        majority_ci, _ = _score(splits["test"], y["test"], majority.predict(splits["test"].words).astype(str),
                                "accuracy", cfg, seed)
        per_layer = []
        for j in layers:
            X, memo = _pair_source(caches, data, j)
            probe = runner.linear_probe(f"{task} layer {j}", "edge", j, None, X, y, splits, "accuracy", key_parts,
                                        alphas=alphas)
            ctrl = runner.linear_probe(f"{task} control layer {j}", "control", j, None, X, y_control, splits,
                                       "accuracy", control_key, alphas=(probe.alpha,))
            memo.clear()
            rand = None
            if rand_caches is not None:
                X_rand, memo = _pair_source(rand_caches, data, j)
                rand_key = {**key_parts, "activations": [rand_caches[s].name for s in ("train", "dev", "test")]}
                rand = runner.linear_probe(f"{task} random biLM layer {j}", "random_bilm", j, None, X_rand, y, splits,
                                           "accuracy", rand_key, alphas=alphas)
                memo.clear()
            nonsense = None if nonsense_cache is None else _on_nonsense(
                runner, f"{task} layer {j} on nonsense", j, caches, nonsense_cache, data, nonsense_data, y, splits,
                key_parts, alphas)
            per_layer.append(EdgeLayer(j, probe, ctrl, float(probe.test_accuracy - ctrl.test_accuracy), rand,
                                       nonsense))
        results.append(EdgeTaskResult(task, tuple(per_layer), majority_ci, {s: int(len(sp.tags)) for s, sp in splits.items()},
                                      len(set(y["train"]))))
    for c in list(caches.values()) + list((rand_caches or {}).values()) + [nonsense_cache] * bool(nonsense_cache):
        c.close()
    timings = dict(runner.timings)
    timings["total"] = time.perf_counter() - started
    return EdgeResult(str(getattr(model, "name", "") or "biLM"), tuple(results),
                      {s: len(ts) for s, ts in edge_trees.items()}, seed, timings)


__all__ = ["EDGE_TASKS", "EdgeLayer", "EdgeResult", "EdgeTaskResult", "edge_items", "pair_features", "run_edges"]
