"""The three information probes on a biLM, per task and layer (``python -m probing.information``).

    >>> from probing.information.run import run_information
    >>> result = run_information("elmo-mini", ["pos", "chunk"])
    >>> result.task("pos").codes[1].task.compression

For each task (``probing.tagging.tasks.TASKS``) the first ``train_limit`` training sentences and
the first ``eval_limit`` dev and test sentences are read; their activations come from the cache
(``probing.engine.activations``: a slice of a split the suite already extracted is a view of it,
computed once). The task ``lexsample`` is the Senseval-2 lexical sample
(``probing.senses.lexical_sample``): ``lexsample_instances`` contexts of each of
``lexsample_words``, split 60/20/20 by word and sense, the four words pooled into one labelling
(their senses are distinct names), one token (the target) a context; its control labels are keyed
by the target and the word after it, as the lexical-sample probe's are. Then, per layer:

- MDL (``probing.information.mdl``): the online codelength of the task's labels on the training
  tokens, and of control labels (Hewitt & Liang: one random label per word type, same label
  distribution).
- Conditional probing (``probing.information.conditional``): for each layer j >= 1, the bits per
  test token that [layer 0; layer j] saves over layer 0, with a bootstrap interval over sentences.
- Amnesic probing (``probing.information.amnesic``): INLP removes the task from the layer; a fresh
  probe measures what is left of it and of the other tasks, on the projected vectors and on
  vectors with as many random directions removed; at the top layer of a model exported with its
  softmax, the language model's own cross-entropy with the top layer projected.

Seeds: the probes, the control labels, the random projection and the bootstrap all take ``seed``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import platform
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np
import sklearn
import torch
from threadpoolctl import threadpool_limits

from elmo_model import BiLM, load_bilm
from elmo_model.bilm.identity import model_identity, weights_digest
from elmo_model.training.language_model import load_language_model
from probing.engine.activations import (
    ActivationCache,
    default_cache_dir,
    extract_activations,
)
from probing.engine.envelope import JsonDataclass
from probing.engine.result_cache import ResultCache
from probing.information.amnesic import (
    NullspaceProjection,
    inlp,
    lm_cross_entropy,
    mean_variance,
    random_projection,
    whitening_at_scale,
)
from probing.information.conditional import conditional_information, heldout_bits
from probing.information.erasure_comparison import ErasureLayer, compare_erasures, fit_erasers
from probing.information.mdl import online_codelength
from probing.information.results import (
    AmnesicLayer,
    InformationResult,
    LayerCodes,
    TaskInformation,
)
from probing.senses.lexical_sample import SENSEVAL_WORDS, control_key, lexical_sample_splits
from probing.tagging.baselines import ControlTask
from probing.tagging.probes import LinearProbe, fit_on_dev
from probing.tagging.tasks import TASKS, load_task

log = logging.getLogger(__name__)

METHODS = ("mdl", "conditional", "amnesic", "erasure")
DEFAULT_METHODS = ("mdl", "conditional", "amnesic")  # "erasure" fits INLP again, beside LEACE and the mean projection
LEXSAMPLE = "lexsample"
INFORMATION_TASKS = (*TASKS, LEXSAMPLE)
"""The tasks the information probes run on: the suite's sequence-labelling tasks and the lexical sample."""
SPLITS = ("train", "dev", "test")
InformationProgress = Callable[[str, int, int], None]  # (what is being done, steps done, total steps)

NO_SOFTMAX = ("this model carries no softmax (softmax.npz): the language model's loss cannot be measured; "
              "only the other tasks' accuracy is")


@dataclass(frozen=True)
class InformationConfig(JsonDataclass, strict=True):
    """How the information probes run.

    - ``methods``: which of "mdl", "conditional", "amnesic", "erasure" (LEACE, the mean projection and
      INLP side by side, with the damage each does: ``probing.information.erasure_comparison``;
      not in the default).
    - ``train_limit``, ``eval_limit``: the first N training, and dev and test, sentences of each
      task (None: all). MDL codes the training tokens; the other two train there and score on test.
    - ``lexsample_words``, ``lexsample_instances``: the lexical sample's words and the contexts
      sampled of each (None: all), split 60/20/20 (the limits above do not apply to it).
    - ``mdl_alpha``, ``max_iter``: the online code's fixed L2 penalty; L-BFGS iterations of every probe.
    - ``control``: code the control labels beside the task's.
    - ``alphas``: the path the conditional and accuracy probes choose alpha on, by dev.
    - ``inlp_iterations``, ``inlp_tolerance``, ``inlp_alpha``, ``inlp_max_iter``: INLP's most
      removals, how near the majority accuracy (on dev) its last probe must come, its probes'
      penalty and L-BFGS iterations (a probe need not converge to show the directions it reads).
      INLP stops as soon as a probe is within the tolerance, so the most removals is a cap: each
      removal takes k - 1 directions of a k-label task, and a 512-wide layer of elmo-mini needed
      8-13 removals for POS and chunks at the report's slices (docs/probe-results.md).
    The defaults keep a run of two tasks on a 3-layer biLM within minutes on a 2-core CPU: a few
    thousand training tokens per task, one alpha.
    - ``lm_sentences``: test sentences the language model's cross-entropy is measured on.
    - ``n_bootstrap``, ``level``: the conditional intervals.
    - ``batch_size``, ``dtype``: activation extraction and storage.
    - ``result_cache``: read back each task's results from the cache when a run with the same
      model, sentences, labels, settings and seed stored them (a warm rerun of the report)."""

    methods: tuple[str, ...] = DEFAULT_METHODS
    train_limit: int | None = 500
    eval_limit: int | None = 200
    mdl_alpha: float = 1e-3
    max_iter: int = 30
    control: bool = True
    alphas: tuple[float, ...] = (1e-3,)
    lexsample_words: tuple[str, ...] = SENSEVAL_WORDS
    lexsample_instances: int | None = 600
    inlp_iterations: int = 40
    inlp_tolerance: float = 0.01
    inlp_alpha: float = 1e-3
    inlp_max_iter: int = 20
    lm_sentences: int = 100
    n_bootstrap: int = 1000
    level: float = 0.95
    batch_size: int = 32
    dtype: str = "float32"
    result_cache: bool = True

    def key_parts(self) -> dict:
        """The settings a task's result depends on (the result cache's key)."""
        return {k: v for k, v in self.to_dict().items() if k != "result_cache"}

    def __post_init__(self) -> None:
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown or not self.methods:
            raise ValueError(f"unknown or no methods {unknown or list(self.methods)}; choose from {', '.join(METHODS)}")
        for name in ("train_limit", "eval_limit"):
            value = getattr(self, name)
            if value is not None and value < 2:
                raise ValueError(f"{name} must be at least 2 sentences (or None: all), got {value}")
        if self.lexsample_instances is not None and self.lexsample_instances < 10:
            raise ValueError(f"lexsample_instances must be at least 10 contexts a word (or None: all), "
                             f"got {self.lexsample_instances}")


@dataclass
class _TaskData:
    """One task's slices: per split, the words (what a control label is keyed by), the tags,
    each token's sentence, the activations: a split's cache (every token labelled) or, for the
    lexical sample, its labelled tokens' vectors (n_layers, n, dim)."""

    task: str
    words: dict[str, np.ndarray]
    tags: dict[str, np.ndarray]
    sentence_of: dict[str, np.ndarray]
    tokens: dict[str, list[list[str]]]
    caches: dict[str, ActivationCache]
    vectors: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)

    def split_layer(self, split: str, j: int) -> np.ndarray:
        """Layer j of one split, (n_tokens, dim) float32."""
        return self.vectors[split][j] if split in self.vectors else self.caches[split].layer(j)

    def layer(self, j: int) -> dict[str, np.ndarray]:
        """Layer j of every split, split -> (n_tokens, dim) float32."""
        return {s: self.split_layer(s, j) for s in SPLITS}

    def close(self) -> None:
        """Release the cache files."""
        for cache in self.caches.values():
            cache.close()


def _load_lexical_sample(model, config: InformationConfig, data_root, limit, cache_dir: Path, seed: int,
                         progress: Callable[[str], None]) -> _TaskData:
    """The lexical sample's splits and its targets' vectors (the lexical-sample probe's cache entries)."""
    per_word = config.lexsample_instances if limit is None else min(limit, config.lexsample_instances or limit)
    splits = lexical_sample_splits(model, data_root, words=config.lexsample_words, max_instances=per_word,
                                   seed=seed, cache_dir=cache_dir, batch_size=config.batch_size)
    words, tags, sentence_of, tokens, vectors = {}, {}, {}, {}, {}
    for split in SPLITS:
        instances, vectors[split] = splits[split]
        tokens[split] = [list(i.tokens) for i in instances]
        words[split] = np.array([control_key(i) for i in instances], dtype=object)
        tags[split] = np.array([i.sense for i in instances], dtype=str)
        sentence_of[split] = np.arange(len(instances))
        progress(f"{LEXSAMPLE}: activations of {split}")
    return _TaskData(LEXSAMPLE, words, tags, sentence_of, tokens, {}, vectors)


def _load_task_data(model, task: str, config: InformationConfig, data_root, limit, cache_dir: Path,
                    progress: Callable[[str], None], seed: int = 0) -> _TaskData:
    """Read the task's slices and their activations (a view of a whole split's cache when one exists)."""
    if task == LEXSAMPLE:
        return _load_lexical_sample(model, config, data_root, limit, cache_dir, seed, progress)
    spec = TASKS[task]
    words, tags, sentence_of, tokens, caches = {}, {}, {}, {}, {}
    for split in SPLITS:
        whole = load_task(task, split, data_root=data_root, limit=limit)
        first = config.train_limit if split == "train" else config.eval_limit
        sentences = whole[:first] if first is not None else whole
        if not sentences:
            raise ValueError(f"task {task}: the {split} split has no sentences")
        tokens[split] = [list(s.tokens) for s in sentences]
        words[split] = np.array([w for s in sentences for w in s.tokens], dtype=object)
        tags[split] = np.array([t for s in sentences for t in s.tags], dtype=str)
        sentence_of[split] = np.repeat(np.arange(len(sentences)), [len(s) for s in sentences])
        caches[split] = extract_activations(model, tokens[split], spec.dataset, split, cache_dir=cache_dir,
                                            dtype=config.dtype, batch_size=config.batch_size,
                                            within=(split, [list(s.tokens) for s in whole]))
        progress(f"{task}: activations of {split}")
    return _TaskData(task, words, tags, sentence_of, tokens, caches)


def _accuracy(X: Mapping[str, np.ndarray], y: Mapping[str, np.ndarray], config: InformationConfig,
              seed: int, scale: float | None = None) -> float:
    """Test token accuracy of a LinearProbe, alpha chosen on dev (with no feature left, the
    training majority label's). ``scale``: whiten with the shrinkage relative to this variance
    (the layer's before a projection; ``amnesic.whitening_at_scale``), not to X's own."""
    if X["train"].shape[1] == 0:
        labels, counts = np.unique(y["train"], return_counts=True)
        return float(np.mean(y["test"] == labels[np.argmax(counts)]))
    base = LinearProbe(max_iter=config.max_iter, random_state=seed)
    preprocessing = None if scale is None else whitening_at_scale(X["train"], scale)
    probe, _ = fit_on_dev(base, X["train"], y["train"],
                          lambda p: float(np.mean(p.predict(X["dev"]) == y["dev"])), config.alphas,
                          warm_max_iter=max(10, config.max_iter // 2), preprocessing=preprocessing)
    return float(np.mean(probe.predict(X["test"]) == y["test"]))


def _projected(X: Mapping[str, np.ndarray], projection: NullspaceProjection) -> dict[str, np.ndarray]:
    kept = projection.kept()
    return {s: projection.coordinates(x, kept) for s, x in X.items()}


class _Runner:
    """One run: the config, the seed, the progress count and the accuracies already measured."""

    def __init__(self, config: InformationConfig, seed: int, progress: InformationProgress | None, total: int):
        self.config, self.seed = config, seed
        self.progress, self.step, self.total = progress, 0, total
        self.original_accuracy: dict[tuple[str, int], float] = {}

    def report(self, label: str) -> None:
        self.step += 1
        if self.progress:
            self.progress(label, min(self.step, self.total), self.total)

    def codes(self, data: _TaskData, layers: Sequence[int]) -> tuple[LayerCodes, ...]:
        """MDL: the online code of the task's and the control labels per layer (training tokens)."""
        cfg, seed = self.config, self.seed
        y = data.tags["train"]
        control = ControlTask(seed).fit(y).labels(data.words["train"]).astype(str) if cfg.control else None
        out = []
        for j in layers:
            X = data.split_layer("train", j)
            task_code = online_codelength(X, y, alpha=cfg.mdl_alpha, max_iter=cfg.max_iter, random_state=seed)
            self.report(f"{data.task}: MDL layer {j}")
            control_code = None
            if control is not None:
                control_code = online_codelength(X, control, alpha=cfg.mdl_alpha, max_iter=cfg.max_iter,
                                                 random_state=seed)
                self.report(f"{data.task}: MDL control layer {j}")
            log.info("%s layer %d: online code %.1f kbits (compression %.2f), control %s", data.task, j,
                     task_code.online_bits / 1000, task_code.compression,
                     "-" if control_code is None else f"{control_code.online_bits / 1000:.1f} kbits")
            out.append(LayerCodes(j, task_code, control_code))
        return tuple(out)

    def conditional(self, data: _TaskData, layers: Sequence[int]):
        """Conditional probing: what each layer j >= 1 adds beyond layer 0, in bits per test token."""
        cfg, seed = self.config, self.seed
        if not any(j > 0 for j in layers):
            self.report(f"{data.task}: conditional needs a layer above 0")
            return ()
        base = data.layer(0)
        base_bits = heldout_bits(base, data.tags, alphas=cfg.alphas, max_iter=cfg.max_iter, seed=seed)
        self.report(f"{data.task}: conditional, layer 0")
        out = []
        for j in [j for j in layers if j > 0]:
            result = conditional_information(base, data.layer(j), data.tags, data.sentence_of["test"], layer_index=j,
                                             base_bits=base_bits, alphas=cfg.alphas, max_iter=cfg.max_iter,
                                             n_resamples=cfg.n_bootstrap, level=cfg.level, seed=seed)
            self.report(f"{data.task}: conditional, layer {j}")
            log.info("%s layer %d adds %.3f bits/token beyond layer 0 [%.3f, %.3f]", data.task, j,
                     result.conditional.estimate, result.conditional.low, result.conditional.high)
            out.append(result)
        return tuple(out)

    def original(self, data: _TaskData, j: int, X: Mapping[str, np.ndarray] | None = None) -> float:
        """A task's probe accuracy on layer j as the model computes it (measured once)."""
        key = (data.task, j)
        if key not in self.original_accuracy:
            self.original_accuracy[key] = _accuracy(X if X is not None else data.layer(j), data.tags,
                                                    self.config, self.seed)
        return self.original_accuracy[key]

    def amnesic(self, data: _TaskData, others: Sequence[_TaskData], layers: Sequence[int], top: int,
                lm) -> tuple[AmnesicLayer, ...]:
        """Amnesic probing per layer: INLP, then what the task, the other tasks and the LM keep."""
        cfg, seed = self.config, self.seed
        out = []
        for j in layers:
            X = data.layer(j)
            removal = inlp(X["train"], data.tags["train"], X["dev"], data.tags["dev"],
                           max_iterations=cfg.inlp_iterations, tolerance=cfg.inlp_tolerance, alpha=cfg.inlp_alpha,
                           max_iter=cfg.inlp_max_iter, random_state=seed)
            control = random_projection(removal.projection.dim, removal.projection.rank, seed)
            scale = mean_variance(X["train"])
            accuracy = {"original": self.original(data, j, X),
                        "amnesic": _accuracy(_projected(X, removal.projection), data.tags, cfg, seed, scale),
                        "random": _accuracy(_projected(X, control), data.tags, cfg, seed, scale)}
            other_tasks = {}
            for other in others:
                Y = other.layer(j)
                other_scale = mean_variance(Y["train"])
                other_tasks[other.task] = {
                    "original": self.original(other, j, Y),
                    "amnesic": _accuracy(_projected(Y, removal.projection), other.tags, cfg, seed, other_scale),
                    "random": _accuracy(_projected(Y, control), other.tags, cfg, seed, other_scale)}
            lm_result, note = None, ""
            if j == top:
                lm_result, note = self.language_model(data, X, lm)
            elif lm is not None:
                note = "the language model reads the top layer only"
            self.report(f"{data.task}: amnesic layer {j}")
            log.info("%s layer %d: INLP removed %d directions in %d iterations; accuracy %.3f -> %.3f "
                     "(random %.3f)", data.task, j, removal.projection.rank, removal.n_iterations,
                     accuracy["original"], accuracy["amnesic"], accuracy["random"])
            out.append(AmnesicLayer(j, removal.n_iterations, removal.projection.rank, removal.dev_accuracies,
                                    removal.majority, removal.reached_majority, accuracy, other_tasks,
                                    lm_result, note))
        return tuple(out)

    def erasure(self, data: _TaskData, others: Sequence[_TaskData], layers: Sequence[int], top: int,
                lm) -> tuple[ErasureLayer, ...]:
        """LEACE, the mean projection and INLP per layer, with what each leaves of the task, the other
        tasks and, at the top layer, the language model."""
        cfg, seed = self.config, self.seed
        options = {"max_iterations": cfg.inlp_iterations, "tolerance": cfg.inlp_tolerance, "alpha": cfg.inlp_alpha,
                   "max_iter": cfg.inlp_max_iter}
        out = []
        for j in layers:
            X = data.layer(j)
            measure, halves = self._lm_hooks(data, X, lm, options) if j == top else (None, None)
            out.append(compare_erasures(
                j, X, data.tags, [(o.task, o.layer(j), o.tags) for o in others],
                lambda vectors, tags, scale: _accuracy(vectors, tags, cfg, seed, scale), options, seed,
                measure, halves))
            self.report(f"{data.task}: erasure layer {j}")
        return tuple(out)

    def _lm_hooks(self, data: _TaskData, X: Mapping[str, np.ndarray], lm, options: Mapping):
        """For the top layer: the LM's bits per prediction with given erasers of the halves, and each
        method's erasers fitted on the halves; (None, None) without a softmax."""
        if lm is None:
            return None, None
        sentences = data.tokens["test"][:self.config.lm_sentences]
        half = X["train"].shape[1] // 2
        columns = {"forward": slice(0, half), "backward": slice(half, 2 * half)}

        def measure(erasers):
            return lm_cross_entropy(lm[0], lm[1], sentences, erasers)["mean"]

        fitted: dict[str, dict] = {}  # direction -> {method: eraser}, fitted once

        def halves(method):
            for d, c in columns.items():
                if d not in fitted:
                    fitted[d] = fit_erasers(X["train"][:, c], data.tags["train"], X["dev"][:, c], data.tags["dev"],
                                            options, self.seed)
            return {d: fitted[d][method] for d in columns}
        return measure, halves

    def language_model(self, data: _TaskData, X: Mapping[str, np.ndarray], lm) -> tuple[dict | None, str]:
        """The LM's cross-entropy with the top layer's halves projected by INLP of each half, and by
        random projections of the same ranks; (None, why) without a softmax."""
        if lm is None:
            return None, NO_SOFTMAX
        cfg, seed = self.config, self.seed
        language_model, vocab = lm
        half = X["train"].shape[1] // 2
        amnesic, random, ranks = {}, {}, {}
        for direction, columns in (("forward", slice(0, half)), ("backward", slice(half, 2 * half))):
            removal = inlp(X["train"][:, columns], data.tags["train"], X["dev"][:, columns], data.tags["dev"],
                           max_iterations=cfg.inlp_iterations, tolerance=cfg.inlp_tolerance, alpha=cfg.inlp_alpha,
                           max_iter=cfg.inlp_max_iter, random_state=seed)
            amnesic[direction] = removal.projection
            random[direction] = random_projection(half, removal.projection.rank, seed + 1)
            ranks[direction] = removal.projection.rank
        sentences = data.tokens["test"][:cfg.lm_sentences]
        result = {"original": lm_cross_entropy(language_model, vocab, sentences),
                  "amnesic": lm_cross_entropy(language_model, vocab, sentences, amnesic),
                  "random": lm_cross_entropy(language_model, vocab, sentences, random),
                  "rank": ranks, "n_sentences": len(sentences)}
        return result, ""


def _language_model(model, softmax_dir):
    """(LanguageModel, Vocabulary) from the model's folder when it has softmax.npz, else None."""
    if softmax_dir is None or not (Path(softmax_dir) / "softmax.npz").is_file():
        return None
    language_model, vocab = load_language_model(softmax_dir)
    if weights_digest(language_model.bilm) != weights_digest(model):
        log.warning("the softmax in %s belongs to another biLM than the one probed; not used", softmax_dir)
        return None
    return language_model, vocab


def _steps(config: InformationConfig, layers: Sequence[int]) -> int:
    """Progress steps per task: three extractions and each method's probes."""
    steps = 3
    if "mdl" in config.methods:
        steps += len(layers) * (2 if config.control else 1)
    if "conditional" in config.methods:
        steps += 1 + sum(1 for j in layers if j > 0)
    if "amnesic" in config.methods:
        steps += len(layers)
    if "erasure" in config.methods:
        steps += len(layers)
    return steps


@contextlib.contextmanager
def _one_torch_thread():
    """The probes on one torch thread, the count put back afterwards. Their L-BFGS steps are many
    small operations, at each of which two OpenMP threads wait on each other: on the 2-core AMD
    EPYC machine, loaded by other work, the three methods on POS and chunks (the report's slices)
    took 30 s of CPU on one thread and were stopped after 8 min 34 s of CPU on two. numpy's BLAS
    (the projections, the whitening) is held to one thread beside it (``threadpool_limits``)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _versions() -> dict[str, str]:
    return {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
            "scikit-learn": sklearn.__version__}


INFORMATION_CACHE_VERSION = 1  # bump when a change to the methods changes their results


def _data_digest(item: _TaskData, data: Sequence[_TaskData]) -> str:
    """The sentences and labels a task's result depends on: its own and, for what erasing it
    costs the others, every other task's of the run."""
    digest = hashlib.sha256()
    for other in [item] + [d for d in data if d is not item]:
        for split in SPLITS:
            digest.update(json.dumps([other.task, split, other.tokens[split], other.tags[split].tolist()]).encode())
    return digest.hexdigest()


def _lm_source(lm, softmax_dir) -> list | None:
    """The language model a result's LM losses came from: its softmax file as it is on disk."""
    if lm is None:
        return None
    stat = (Path(softmax_dir) / "softmax.npz").stat()
    return [str(Path(softmax_dir).resolve()), stat.st_size, stat.st_mtime_ns]


def _task_information(runner: _Runner, item: _TaskData, data: Sequence[_TaskData], layers: Sequence[int],
                      top: int, lm) -> TaskInformation:
    """Every method of the run's config on one task (``top``: the layer the LM's loss is measured
    after erasing)."""
    config = runner.config
    timings, codes, conditional, amnesic, erasure = {}, (), (), (), ()
    others = [d for d in data if d is not item]
    if "mdl" in config.methods:
        start = time.perf_counter()
        codes = runner.codes(item, layers)
        timings["mdl"] = time.perf_counter() - start
    if "conditional" in config.methods:
        start = time.perf_counter()
        conditional = runner.conditional(item, layers)
        timings["conditional"] = time.perf_counter() - start
    if "amnesic" in config.methods:
        start = time.perf_counter()
        amnesic = runner.amnesic(item, others, layers, top, lm)
        timings["amnesic"] = time.perf_counter() - start
    if "erasure" in config.methods:
        start = time.perf_counter()
        erasure = runner.erasure(item, others, layers, top, lm)
        timings["erasure"] = time.perf_counter() - start
    return TaskInformation(item.task, {s: len(item.tokens[s]) for s in SPLITS},
                           {s: int(len(item.tags[s])) for s in SPLITS}, codes, conditional, amnesic, timings, erasure)


def run_information(model, tasks: Sequence[str], layers: Sequence[int] | None = None,
                    config: InformationConfig | None = None, data_root: str | Path | None = None,
                    cache_dir: str | Path | None = None, seed: int = 0, limit: int | None = None,
                    progress: InformationProgress | None = None, softmax_dir: str | Path | None = None,
                    device: str | None = None) -> InformationResult:
    """MDL, conditional and amnesic probing of ``model`` (a ``BiLM``, a shipped name or a model
    folder) on ``tasks``, per layer (``layers``: default all, 0 = the token layer).

    ``limit``: read only the first N sentences of each split (before ``config``'s train and eval
    limits); ``cache_dir``: the activation cache; ``progress(label, done, total)`` after each
    step; ``softmax_dir``: the folder whose ``softmax.npz`` and ``vocab.txt`` give the language
    model (default: the model's own folder when given by name or folder; a ``BiLM`` object has
    none, so the LM loss is then not measured); ``device``: where a model given by name runs.
    Peak memory: the layers of every task's slices that one layer's step holds (a few times
    n_tokens x dim float32)."""
    config = config or InformationConfig()
    started = time.perf_counter()
    unknown = [t for t in tasks if t not in INFORMATION_TASKS]
    if unknown or not tasks:
        raise ValueError(f"unknown or no tasks {unknown or list(tasks)}; choose from {', '.join(INFORMATION_TASKS)}")
    if not isinstance(model, BiLM):
        model = load_bilm(model, device=device, data_root=data_root)
    if softmax_dir is None and getattr(model, "source", None):
        softmax_dir = Path(model.source).parent  # load_bilm records the weight file it read
    n_out = model.config.n_output_layers
    layers = sorted(set(range(n_out) if layers is None else (int(j) for j in layers)))
    if not layers or any(not 0 <= j < n_out for j in layers):
        raise ValueError(f"layers must be in 0..{n_out - 1} for this model, got {layers}")
    lm = _language_model(model, softmax_dir) if {"amnesic", "erasure"} & set(config.methods) else None
    runner = _Runner(config, seed, progress, _steps(config, layers) * len(tasks))
    cache_root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    data = [_load_task_data(model, task, config, data_root, limit, cache_root, runner.report, seed) for task in tasks]
    seconds: dict[str, float] = {"extract": time.perf_counter() - started}
    results = []
    store = ResultCache(cache_root / "information", TaskInformation, config.result_cache, INFORMATION_CACHE_VERSION)
    threads = contextlib.ExitStack()
    threads.enter_context(_one_torch_thread())
    threads.enter_context(threadpool_limits(limits=1))  # numpy's BLAS too: the same waits, in the projections
    try:
        for item in data:
            key = store.key(model=model_identity(model), task=item.task, data=_data_digest(item, data),
                            layers=layers, config=config.key_parts(), seed=seed, language_model=_lm_source(lm, softmax_dir))
            result = store.get(key)
            if result is None:
                result = _task_information(runner, item, data, layers, n_out - 1, lm)
                store.put(key, result)
            else:
                for _ in range(_steps(config, layers) - 3):  # its extractions were reported as they were read
                    runner.report(f"{item.task} (cached)")
            for name, value in result.seconds.items():
                seconds[name] = seconds.get(name, 0.0) + value
            results.append(result)
    finally:
        threads.close()
        for item in data:
            item.close()
    seconds["total"] = time.perf_counter() - started
    return InformationResult(str(getattr(model, "name", "biLM")), model_identity(model), tuple(results),
                             {**config.to_dict(), "layers": layers, "limit": limit, "seed": seed,
                              "language_model": lm is not None}, seconds,
                             datetime.now(timezone.utc).isoformat(timespec="seconds"), _versions())


__all__ = ["DEFAULT_METHODS", "INFORMATION_TASKS", "LEXSAMPLE", "METHODS", "NO_SOFTMAX", "InformationConfig", "run_information"]
