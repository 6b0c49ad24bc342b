"""``python -m probing.information``: MDL, conditional and amnesic probing of a biLM, per layer.

    python -m probing.information --model elmo-mini --tasks pos chunk --out information.json
    python -m probing.information --model elmo-mini --random-bilm --out information-random.json
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Sequence

from elmo_model import load_bilm
from elmo_model.bilm.devices import check_device
from elmo_model.plumbing.flags import (
    EXIT_CODES,
    add_device_argument,
    add_models_dir_argument,
    add_precision_argument,
    add_quiet_argument,
)
from elmo_model.bilm.precision import precision_line
from elmo_model.models.names import model_files
from elmo_model.models.published import MODEL_HELP
from elmo_model.plumbing.commands import check_outputs, error_exit, kept_in_cache, run_command, table_and_json
from elmo_model.plumbing.io_safety import data_root_argument
from elmo_model.plumbing.progress import TerminalProgress, log_through_bars
from probing.data import DatasetMissing
from probing.engine.activations import default_cache_dir
from probing.information.results import InformationResult
from probing.information.run import DEFAULT_METHODS, INFORMATION_TASKS, METHODS, InformationConfig, run_information
from probing.tagging.baselines import random_bilm


def _parser() -> argparse.ArgumentParser:
    defaults = InformationConfig()
    parser = argparse.ArgumentParser(
        prog="python -m probing.information",
        description="Beyond probe accuracy, per layer of a biLM: MDL (the online codelength of a task's labels "
                    "and of control labels: how easily the layer gives the property up), conditional probing "
                    "(the bits per token a layer adds beyond layer 0) and amnesic probing (remove the task by "
                    "iterative nullspace projection, then measure what the other tasks and the model's own "
                    "language model lose, against a random removal of as many directions). Prints a table "
                    "and writes the result as JSON.",
        epilog=EXIT_CODES)
    parser.add_argument("--model", default="elmo-mini", help=MODEL_HELP + " (default: %(default)s)")
    parser.add_argument("--random-bilm", action="store_true",
                        help="probe a random-initialised biLM of the model's shape instead (seeded by --seed): "
                             "the baseline that says how much the architecture gives for free")
    parser.add_argument("--tasks", nargs="+", default=["pos", "chunk"], choices=INFORMATION_TASKS,
                        help="tasks (default: pos chunk; lexsample: the Senseval-2 lexical sample's four words, "
                             "pooled); amnesic probing scores each on the others' removal")
    parser.add_argument("--methods", nargs="+", default=list(DEFAULT_METHODS), choices=METHODS,
                        help="which methods (default: mdl conditional amnesic; erasure: LEACE, the mean projection "
                             "and INLP side by side, with the damage each does)")
    parser.add_argument("--layers", nargs="+", type=int, default=None, help="layers (default: all)")
    parser.add_argument("--out", type=Path, default=None, help="write the result here as JSON")
    parser.add_argument("--data-root", type=data_root_argument, default=None,
                        help="data root (default: $ELMO_WORKBENCH_DATA or the user cache; see python -m probing.data)")
    add_models_dir_argument(parser)
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="activation cache (default: $ELMO_WORKBENCH_CACHE or ~/.cache/elmo-workbench/activations)")
    parser.add_argument("--train-limit", type=int, default=defaults.train_limit,
                        help="the first N training sentences of each task (default: %(default)s; 0: all)")
    parser.add_argument("--eval-limit", type=int, default=defaults.eval_limit,
                        help="the first N dev and test sentences (default: %(default)s; 0: all)")
    parser.add_argument("--inlp-iterations", type=int, default=defaults.inlp_iterations,
                        help="INLP removes at most this many probes' directions; it stops earlier, once a probe "
                             "is at the majority level (default: %(default)s)")
    parser.add_argument("--lexsample-instances", type=int, default=defaults.lexsample_instances,
                        help="lexsample: contexts sampled of each word, split 60/20/20 (default: %(default)s; 0: all)")
    parser.add_argument("--no-control", action="store_true", help="skip the control labels' online code")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed of the probes, control labels, random projections, bootstrap (and --random-bilm)")
    add_precision_argument(parser)
    add_device_argument(parser)
    add_quiet_argument(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The command line; returns the exit code."""
    parser = _parser()
    args = parser.parse_args(argv)
    for flag, value in (("--train-limit", args.train_limit), ("--eval-limit", args.eval_limit)):
        if value == 1 or value < 0:
            parser.error(f"{flag} {value}: expected at least 2 sentences, or 0 for all")
    if args.inlp_iterations < 0:
        parser.error(f"--inlp-iterations {args.inlp_iterations}: expected 0 or more")
    if 0 < args.lexsample_instances < 10 or args.lexsample_instances < 0:
        parser.error(f"--lexsample-instances {args.lexsample_instances}: expected at least 10, or 0 for all")
    log_through_bars(args.quiet)
    try:  # $ELMO_WORKBENCH_CACHE naming a file or looping: one line, as --cache-dir would be
        cache_dir = args.cache_dir if args.cache_dir is not None else default_cache_dir()
    except ValueError as err:
        return error_exit(err)
    config = InformationConfig(methods=tuple(args.methods), train_limit=args.train_limit or None,
                               eval_limit=args.eval_limit or None, control=not args.no_control,
                               inlp_iterations=args.inlp_iterations,
                               lexsample_instances=args.lexsample_instances or None)
    bar = TerminalProgress("information probes", single=True, unit="step", quiet=args.quiet, width=60)

    def work() -> InformationResult:
        check_outputs(model_files(args.model, args.data_root, args.models_dir), cache_dir, out=args.out)
        device = str(check_device(args.device, "--device"))
        model = load_bilm(args.model, args.precision, device=device, data_root=args.data_root,
                          cache_dir=args.models_dir)
        print(precision_line(model, args.precision), flush=True)
        if args.random_bilm:
            model = random_bilm(model.config, args.seed, model.precision).to(model.device)
        return run_information(model, args.tasks, layers=args.layers, config=config, data_root=args.data_root,
                               cache_dir=args.cache_dir, seed=args.seed, progress=bar.steps)

    return run_command(work, table_and_json(args.out), bar=bar, errors=(ValueError, DatasetMissing),
                       kept=kept_in_cache("activations", cache_dir))


__all__ = ["main"]
