"""Train a biLM on your own text and export it in the AllenNLP / bilm-tf layout: the command line.

    python -m elmo_model.training.train --train 'corpus/*.txt.gz' --valid valid.txt.gz --out runs/my-elmo \
        --max-hours 2
    torchrun --nproc_per_node 2 -m elmo_model.training.train --train 'corpus/*.txt.gz' --out runs/my-elmo

Every flag is a field of ``elmo_model.training.trainer.TrainConfig``; the run itself is
``elmo_model.training.trainer.Trainer`` (one process) or ``elmo_model.training.distributed.DistributedTrainer``
(each torchrun rank). Everything lives in ``--out``: ``train_config.json``, ``vocab.txt``,
``checkpoint.pt`` (rerunning the same command resumes exactly where it stopped) and, at the end,
``model/`` with ``options.json``, ``weights.hdf5``, ``vocab.txt``, ``softmax.npz`` and
``model_card.json``. Ctrl-C (or SIGTERM) stops after the current step with a checkpoint.

The trainer's names are importable from here too (``from elmo_model.training.train import Trainer``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import sys
from dataclasses import fields
from pathlib import Path

from ..bilm.devices import check_device
from ..plumbing.flags import (
    EXIT_CODES,
    add_device_argument,
    add_precision_argument,
    add_quiet_argument,
)
from ..bilm.precision import resolve_precision, run_line
from ..models.names import model_files
from ..plumbing.io_safety import check_output_dir, output_lock, run_interruptible
from ..plumbing.progress import log_through_bars
from ..plumbing.resources import command_name
from . import bilm_tf, distributed
from .batch_workers import BatchWorkerError
from .trainer import (
    RESUMABLE_CHANGES,
    LanguageModel,
    TrainConfig,
    Trainer,
    _default_tokenize,
    build_vocabulary,
    evaluate_perplexity,
    load_language_model,
)
from .lm_data import read_sentences

# the trainer's names, importable from the command's module as they always were
__all__ = ["RESUMABLE_CHANGES", "LanguageModel", "TrainConfig", "Trainer", "_default_tokenize", "build_vocabulary",
           "evaluate_perplexity", "load_language_model", "main", "read_sentences"]

def _parse_args(argv: list[str] | None) -> tuple[TrainConfig, argparse.Namespace]:
    defaults = TrainConfig(train=[])
    parser = argparse.ArgumentParser(
        prog=command_name("elmo-train", "python -m elmo_model.training.train"),
        epilog=EXIT_CODES,
        description="Train an ELMo biLM (character CNN + LSTM with projection, forward and backward LMs) on plain "
                    "text and export it in the AllenNLP / bilm-tf layout (options.json + weights.hdf5). Rerun the "
                    "same command to resume after an interruption. Several processes or machines: launch the same "
                    "command with `torchrun --nproc_per_node N -m elmo_model.training.train ...` "
                    "(DistributedDataParallel; gloo on CPU, NCCL with --device cuda); N ranks train on the same global batches as one "
                    "process would, rank 0 logs, checkpoints and exports. bilm-tf's command (--train_prefix, "
                    "--vocab_file, --save_dir, --options_file) works too: see its --help.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--train", nargs="+", required=True, help=".txt/.txt.gz files, directories or globs (one paragraph per line)")
    parser.add_argument("--valid", nargs="*", default=[], help="held-out text for periodic validation perplexity")
    parser.add_argument("--test", nargs="*", default=[], help="held-out text whose perplexity goes on the model card")
    parser.add_argument("--out", default=defaults.out, help="run directory (checkpoints, vocabulary, exported model)")
    parser.add_argument("--export-to", type=Path, help="export the model here instead of <out>/model")
    for f in fields(TrainConfig):
        if f.name in ("train", "valid", "test", "out"):
            continue
        flag = "--" + f.name.replace("_", "-")
        default = getattr(defaults, f.name)
        if f.name in ("filters",):
            parser.add_argument(flag, type=json.loads, default=default, help="JSON list of [width, n_filters]")
        elif f.name in ("softmax_cutoffs",):
            parser.add_argument(flag, type=int, nargs="+", default=default)
        elif f.name == "bf16":
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=default,
                                help="bf16 autocast for the forward pass on a GPU (ignored on a CPU, which stays fp32)")
        elif isinstance(default, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=default)
        elif f.name == "precision":
            add_precision_argument(parser, default=default,
                                   note="training: on a CPU, with fp32 master weights, optimizer state and softmax; "
                                        "on a GPU --bf16 decides")
        elif f.name == "device":  # checked with the run's paths (_check_paths), naming the flag and the value
            add_device_argument(parser, default=default, note="under torchrun each rank uses cuda:LOCAL_RANK",
                                parse=str)
        elif f.name in ("max_steps", "max_tokens", "threads"):
            parser.add_argument(flag, type=int, default=default)
        elif f.name == "eval_batch_tokens":
            parser.add_argument(flag, type=int, default=default,
                                help="padded tokens per batch of held-out perplexity (default: 4000 on a CPU, "
                                     "64000 on a GPU)")
        elif f.name == "prefetch_batches":
            parser.add_argument(flag, type=int, default=default,
                                help="batches a background thread makes ahead while a step runs (0: between steps)")
        elif f.name == "batch_workers":
            parser.add_argument(flag, type=int, default=default, metavar="N",
                                help="worker processes that tokenise and make the batches outside the trainer's "
                                     "interpreter: the same batches in the same order (0: the background thread "
                                     "of --prefetch-batches; default: 0 on a CPU, min(4, cores - 1) with --device "
                                     "cuda). One process only: under torchrun the ranks use the thread")
        elif f.name == "cooldown_steps":
            parser.add_argument(flag, type=int, default=default,
                                help="decay the learning rate linearly over the last N steps before --max-steps "
                                     "(may be set on a resume: train at a constant rate, then cool down)")
        elif f.name == "max_hours":
            parser.add_argument(flag, type=float, default=default, help="wall-clock budget over all resumes; stops cleanly and exports")
        else:
            parser.add_argument(flag, type=type(default), default=default)
    parser.add_argument("--no-export", action="store_true", help="train (or resume) only")
    parser.add_argument("--init-from", type=Path, metavar="MODEL_DIR",
                        help="start from an exported model (weights + softmax.npz + vocab.txt) when --out has no "
                             "checkpoint: fine-tune on your corpus, or continue the run that exported it after its "
                             "checkpoint was lost (its model card's counters are continued)")
    parser.add_argument("--init-warmup-steps", type=int, default=100,
                        help="with --init-from: linear learning-rate warm-up of the fresh optimizer")
    add_quiet_argument(parser)
    args = parser.parse_args(argv)
    config = TrainConfig(**{f.name: getattr(args, f.name) for f in fields(TrainConfig)})
    return config, args


def _check_paths(config: TrainConfig, args: argparse.Namespace) -> None:
    """The device, and where the run and the export go, before the vocabulary is counted: a device
    torch does not know, a file given as a folder, a folder under a file, a run or export folder
    that is, holds or lies inside the training text or the ``--init-from`` model. ValueError
    naming the flag."""
    if config.device is not None:  # the check every command uses: a device this machine has, cpu or cuda
        check_device(config.device, "--device")
    texts = [Path(p) for p in [*config.train, *config.valid, *config.test] if Path(p).exists()]
    starting_model = model_files(args.init_from.resolve()) if args.init_from is not None else []
    check_output_dir(config.out, [*texts, *starting_model], flag=getattr(args, "out_flag", "--out"),
                     what="run directory")
    if args.export_to is not None:
        check_output_dir(args.export_to, [*texts, *starting_model], flag="--export-to",
                         what="folder for the exported model")
    if args.init_from is not None and not args.init_from.is_dir():
        raise ValueError(f"--init-from {args.init_from}: not a directory; give an exported model directory "
                         "(options.json, weights.hdf5, vocab.txt, softmax.npz)")


def _export_claim(args: argparse.Namespace, is_main: bool) -> contextlib.AbstractContextManager:
    """``--export-to``'s folder, claimed for the whole run (``EXPORT.lock``): a second run
    exporting into the same folder stops before it trains, instead of mixing its weights with the
    first one's vocabulary and softmax. ``Trainer.export`` takes the same lock again inside the
    claim (re-entrant); the default export (``OUT/model``) is locked by the export alone. Under
    torchrun rank 0 (the one that exports) holds the claim and tells every rank whether it got it,
    so a second job stops on all its ranks."""
    if args.export_to is None or args.no_export:
        return contextlib.nullcontext()
    folder = Path(args.export_to).expanduser().resolve()

    def claim() -> contextlib.AbstractContextManager:
        folder.parent.mkdir(parents=True, exist_ok=True)  # for EXPORT.lock
        return output_lock(folder, what="export folder", reentrant=True)

    if distributed.launched_by_torchrun():
        return distributed.claimed_by_rank_zero(claim, is_main)
    return claim()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    bilm_tf_run = None
    if bilm_tf.is_bilm_tf_command(argv):  # the tutorials' bilm-tf command line
        try:
            bilm_tf_run = bilm_tf.parse_command(argv)
        except ValueError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        print(f"bilm-tf options {bilm_tf_run.options_file}, as this trainer takes them:")
        for note in bilm_tf_run.notes:
            print(f"  {note}")
        config = bilm_tf_run.config
        args = argparse.Namespace(export_to=None, init_from=None, init_warmup_steps=100, no_export=False,
                                  out_flag="--save_dir", quiet=False)
    else:
        config, args = _parse_args(argv)
    log_through_bars(args.quiet, fmt="%(asctime)s %(levelname)s %(name)s: %(message)s")
    checkpoint = Path(config.out) / "checkpoint.pt"

    def kept() -> str:  # Ctrl-C before the trainer's own handler is in place (reading text, counting words)
        if checkpoint.is_file():
            return f"the last checkpoint is kept in {checkpoint}; rerun the same command to resume from it"
        return "nothing trained yet; rerun the same command to start"

    return run_interruptible(lambda: _train(config, args, bilm_tf_run), kept)


def _train(config: TrainConfig, args: argparse.Namespace, bilm_tf_run: bilm_tf.BilmTfRun | None = None) -> int:
    try:
        _check_paths(config, args)
        tokenize = None
        if bilm_tf_run is not None:  # its vocabulary file becomes the run's vocab.txt; its text is tokenised
            bilm_tf_run.prepare()
            tokenize = bilm_tf_run.tokenize
        # under torchrun (WORLD_SIZE > 1) the same command trains one model on every rank with DDP
        init = {"init_from": args.init_from, "init_warmup_steps": args.init_warmup_steps}
        progress = not args.quiet
        trainer = (distributed.trainer_for_environment(config, tokenize, progress, **init)
                   if distributed.launched_by_torchrun() else Trainer(config, tokenize, progress, **init))
        if trainer.is_main:  # the trainer's rule: its precision on a CPU, bf16 autocast (--bf16) on a GPU
            cpu = trainer.device.type == "cpu"
            print(run_line(f"training a biLM into {config.out}", trainer.device,
                           resolve_precision(config.precision, "cpu") if cpu else "fp32",
                           config.precision if cpu else None,
                           None if cpu or not config.bf16 else "bf16 autocast"), flush=True)
        try:
            with _export_claim(args, trainer.is_main):
                reason = trainer.train()
                if reason != "interrupted" and not args.no_export and trainer.is_main:
                    directory = trainer.export(args.export_to)
                    print(f"exported {directory}")
                    if bilm_tf_run is not None:
                        options, weights = bilm_tf_run.finish(directory)
                        print(f"wrote {options} and {weights}: Elmo({str(options)!r}, {str(weights)!r}, 1, "
                              "dropout=0.0) loads them")
        finally:
            distributed.shutdown()
    except distributed.ReportedByRankZero:  # rank 0 prints the one message
        return 2
    except (ValueError, FileNotFoundError, BatchWorkerError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if reason == "interrupted":
        if trainer.is_main:
            print(f"interrupted; step {trainer.state['step']} is kept in {Path(config.out) / 'checkpoint.pt'}; "
                  "rerun the same command to resume", file=sys.stderr)
        return 130
    if trainer.is_main:
        print(f"stopped: {reason}")
    return 0


def _leave(code: int) -> None:
    """Exit with ``code``. A torchrun rank ends with ``os._exit`` once its output is flushed: its
    files are written and its process group left, and the interpreter's teardown of torch's C++
    threads aborted a rank now and then ("terminate called without an active exception",
    SIGABRT), which torchrun reports as the whole job failing."""
    if distributed.launched_by_torchrun():
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    _leave(main())
