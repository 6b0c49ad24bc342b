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
    python -m probing.tagging.suite --model path/to/french-model --treebank french --tasks upos
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
from datetime import datetime, timezone
from pathlib import Path
from typing import Mapping, Sequence

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
from elmo_model.models.names import model_files, model_language
from elmo_model.models.published import MODEL_HELP
from elmo_model.plumbing.extras import missing_message
from elmo_model.plumbing.commands import check_outputs, error_exit, kept_in_cache, run_command, table_and_json
from elmo_model.plumbing.io_safety import data_root_argument
from elmo_model.plumbing.progress import TerminalProgress, log_through_bars
from elmo_model.plumbing.resources import command_name
from probing.data import DatasetMissing, dataset_folders
from probing.data.treebanks import language_treebank, require_treebank
from probing.engine.activations import ActivationCache, default_cache_dir
from probing.tagging.baselines import ControlTask, MajorityTagger, WordMajorityTagger, random_bilm, reference_numbers
from probing.tagging.results import (Baselines, LayerResult, MixResult, ProbeScore, SuiteResult, TaskResult,
                                     _labels_digest)
from probing.tagging.runner import SuiteProgress, _Runner, _score, _Split, evenly_spaced, sampled_split
from probing.tagging.suite_config import SuiteConfig, add_train_fraction_argument
from probing.tagging.tasks import TASKS, load_task, task_dataset

log = logging.getLogger(__name__)

def checked_layers(model, layers: Sequence[int] | None) -> list[int]:
    """The output layers to probe, sorted: all of them for None; a ValueError names the valid range."""
    n_out = model.config.n_output_layers
    chosen = list(range(n_out)) if layers is None else sorted(set(int(j) for j in layers))
    if not chosen or any(not 0 <= j < n_out for j in chosen):
        raise ValueError(f"layers must be in 0..{n_out - 1} for this model, got {chosen}")
    return chosen


# --------------------------------------------------------------------------------------------
# The suite
# --------------------------------------------------------------------------------------------


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
              config: SuiteConfig | None = None, ray: str | None = None, device: str | None = None,
              treebank: str | None = None) -> SuiteResult:
    """Probe ``model`` (a ``BiLM``, a shipped name or a model directory) on ``tasks``.

    ``layers``: which output layers (default all: 0 = token layer, 1..L = LSTM layers);
    ``data_root``: where the datasets are (``probing.data``); ``cache_dir``: activation and
    probe caches (default ``probing.engine.activations.default_cache_dir()``); ``seed``: seeds the
    probes, the control labels, the random biLM, the bootstrap and (seed, seed+1, ...) the
    scalar-mix probes; ``limit``: only the first N sentences of each split (a quick slice;
    ``config.train_fraction`` then samples the training split evenly);
    ``progress(label, done, total)``: called after each step (an extraction or a probe) and
    during extractions; ``config``: a ``SuiteConfig`` (default: its defaults); ``ray``: extract
    activations on Ray ("local", or a cluster address; see ``extract_activations``: the caches
    are identical, so this changes where the work runs, never the results); ``device``: where a
    model given by name runs ("cpu", "cuda", "cuda:N"; None: the GPU when torch sees one, else
    the CPU; a ``BiLM`` runs where it is, and ``config.precision`` is resolved for it); ``treebank``:
    the UD treebank the POS tasks read (a code such as ``fr_gsd``, a language or its ISO code, fetched
    with ``python -m probing.data download ud:LANGUAGE``; None: UD English-EWT). Returns a
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
                results.append(_run_task(runner, model, rand_model, task, layers, data_root, limit, treebank))
        finally:
            if ray_started:
                import ray as ray_module  # optional, as above

                ray_module.shutdown()
        runner.timed("total", time.perf_counter() - started)
        plain = lambda x: json.loads(json.dumps(x))  # noqa: E731  (tuples -> lists: as JSON gives them back)
        return SuiteResult(
            model_name=str(getattr(model, "name", "biLM")), model_identity=model_identity(model),
            model_config=plain(model.config.describe()), tasks=tuple(results),
            config=plain({**config.to_dict(), "layers": layers, "probe_products": runner.products}),
            seeds={"seed": seed, "probes": seed, "control_labels": seed, "random_bilm": seed, "bootstrap": seed,
                   "mix": [seed + i for i in range(config.mix_seeds)] if config.mix else []},
            versions=_versions(), timings=dict(runner.timings),
            created=datetime.now(timezone.utc).isoformat(timespec="seconds"), limit=limit)


def _run_task(runner: _Runner, model, rand_model, task: str, layers: list[int], data_root, limit,
              treebank: str | None = None) -> TaskResult:
    cfg, seed = runner.config, runner.seed
    metric, dataset = TASKS[task].metric, task_dataset(task, treebank)
    timings_before = dict(runner.timings)
    task_start = time.perf_counter()
    splits = {name: _Split(name, load_task(task, name, data_root=data_root, limit=limit, treebank=treebank))
              for name in ("train", "dev", "test")}
    n_all_train = len(splits["train"].sentences)
    splits["train"] = sampled_split(splits["train"], cfg.train_fraction)
    for name, split in splits.items():
        if len(split.tags) == 0:
            raise ValueError(f"task {task}: the {name} split has no tokens")
    caches = {name: runner.extract(model, split, dataset, name, f"{task}: activations of {name}")
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

    layer_results = _layer_probes(runner, layers, caches, y, y_control, splits, metric, key_parts, control_key)

    mix = None
    if cfg.mix and len(layers) > 1:
        best = max(layer_results, key=lambda r: r.probe.dev_score)
        mix_probes = runner.mix_probes([seed + i for i in range(cfg.mix_seeds)], layers, caches, y, splits, metric,
                                       best.probe.alpha, key_parts)
        mix = MixResult.from_probes(tuple(layers), mix_probes)

    random_scores, same_scores, n_random_tokens = [], [], 0
    if cfg.random_bilm:
        random_scores, same_scores, n_random_tokens = _random_bilm_probes(
            runner, rand_model, task, layers, caches, splits, y, metric, key_parts, dataset, n_all_train)

    baselines = Baselines(majority_ci, word_ci, tuple(random_scores), tuple(same_scores), seed, n_random_tokens,
                          tuple(reference_numbers(task) if dataset == TASKS[task].dataset else ()))
    timings = {k: v - timings_before.get(k, 0.0) for k, v in runner.timings.items()}
    timings["task_total"] = time.perf_counter() - task_start
    for cache in caches.values():
        cache.close()
    return TaskResult(task, dataset, metric,
                      {n: len(s.sentences) for n, s in splits.items()},
                      {n: int(len(s.tags)) for n, s in splits.items()},
                      tuple(layer_results), mix, baselines, timings)


def _layer_probes(runner: _Runner, layers: list[int], caches: Mapping[str, ActivationCache],
                  y: Mapping[str, np.ndarray], y_control: Mapping[str, np.ndarray], splits: Mapping[str, _Split],
                  metric: str, key_parts: dict, control_key: dict) -> list[LayerResult]:
    """Per layer: its probe (alpha on dev), the same probe on control labels, and the forward and
    backward halves of an LSTM layer at the layer's alpha."""
    cfg = runner.config
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
    return layer_results


def _random_bilm_probes(runner: _Runner, rand_model, task: str, layers: list[int],
                        caches: Mapping[str, ActivationCache], splits: Mapping[str, _Split],
                        y: Mapping[str, np.ndarray], metric: str, key_parts: dict, dataset: str,
                        n_all_train: int) -> tuple[list[ProbeScore], list[ProbeScore], int]:
    """Per layer, a probe on a random-initialised biLM of the same shape and the model's own
    probe on the same evenly spaced subset of the training sentences; and that subset's tokens.
    The subset's size is counted on the whole training split (``n_all_train`` sentences), its
    sentences taken from those the suite kept."""
    cfg = runner.config
    random_scores, same_scores = [], []
    subset = evenly_spaced(len(splits["train"].sentences), math.ceil(cfg.random_bilm_train_fraction * n_all_train))
    sub_train = _Split("train", [splits["train"].sentences[i] for i in subset])
    rows = splits["train"].subset_rows(subset)
    n_random_tokens = len(rows)
    sub_splits = {"train": sub_train, "dev": splits["dev"], "test": splits["test"]}
    sub_y = {"train": sub_train.tags, "dev": y["dev"], "test": y["test"]}
    rand_caches = {
        "train": runner.extract(rand_model, sub_train, dataset, f"train-subset-{len(subset)}",
                                f"{task}: random biLM activations of train ({len(subset)} sentences)"),
        "dev": runner.extract(rand_model, splits["dev"], dataset, "dev", f"{task}: random biLM activations of dev"),
        "test": runner.extract(rand_model, splits["test"], dataset, "test", f"{task}: random biLM activations of test"),
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
    return random_scores, same_scores, n_random_tokens


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
    parser.add_argument("--tasks", nargs="+", default=None, choices=sorted(TASKS),
                        help="tasks to probe (default: pos chunk; upos on another language's treebank)")
    parser.add_argument("--treebank", default=None, metavar="NAME",
                        help="the UD treebank pos and upos read: a language (french), its ISO code (fr) or a "
                             "treebank code (fr_gsd), fetched with `python -m probing.data download ud:french`; pos "
                             "is then the treebank's own XPOS tagset (default: UD English-EWT for an English model, "
                             "the treebank of the model's language for another)")
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
    add_train_fraction_argument(parser, SuiteConfig.train_fraction)
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
    try:  # $ELMO_WORKBENCH_CACHE naming a file or looping: one line, as --cache-dir would be
        cache_dir = args.cache_dir if args.cache_dir is not None else default_cache_dir()
    except ValueError as err:
        return error_exit(err)
    config = SuiteConfig(probe_cache=not args.no_probe_cache, random_bilm=not args.no_random_bilm,
                         mix_seeds=args.mix_seeds, mix=args.mix_seeds > 0, precision=args.precision,
                         train_fraction=args.train_fraction)
    bar = TerminalProgress("probing suite", single=True, unit="step", quiet=args.quiet, width=60)

    def work() -> SuiteResult:
        check_outputs(model_files(args.model, args.data_root, args.models_dir), cache_dir, out=args.out,
                      more_inputs=dataset_folders(args.data_root))
        if args.ray is not None and args.device not in (None, "cpu"):
            raise ValueError(f"--ray extracts on the Ray workers' CPUs; drop --device {args.device} (or --ray)")
        if args.ray is not None and (absent := missing_message("cluster", "--ray")):
            raise ValueError(absent)  # Ray is optional: imported only for --ray
        device = "cpu" if args.ray is not None else str(check_device(args.device, "--device"))
        fused_step.enable(wait=True)  # a long run: the compiled LSTM step pays, the same every run
        treebank = language_treebank(model_language(args.model, args.data_root, args.models_dir), args.treebank,
                                     args.data_root)
        if treebank is not None:  # before the model loads: one line naming the command that fetches it
            require_treebank(treebank, args.data_root)
        tasks = args.tasks or (["upos"] if treebank is not None and treebank.code != "en_ewt" else ["pos", "chunk"])
        model = load_bilm(args.model, args.precision, device=device, data_root=args.data_root, cache_dir=args.models_dir)
        print(precision_line(model, args.precision), flush=True)
        return run_suite(model, tasks, layers=args.layers, data_root=args.data_root, cache_dir=args.cache_dir,
                         seed=args.seed, limit=args.limit, progress=bar.steps, config=config, ray=args.ray,
                         treebank=None if treebank is None else treebank.code)

    return run_command(work, table_and_json(args.out), bar=bar, errors=(ValueError, DatasetMissing),
                       kept=kept_in_cache("activations and probes", cache_dir))


if __name__ == "__main__":
    sys.exit(main())
