"""The trainer's step with the LSTM's training Function against autograd through the time loop,
in fp32 and bf16: four variants in one process, interleaved, on the same batches.

    python bench/training_step.py [--rounds 4] [--config mini]
    python bench/training_step.py --curve 300 --out runs/training-step   # the loss curves, bf16
    python bench/training_step.py --config tiny --rounds 1 --threads 1   # quick
    python bench/training_step.py --rounds 3 --threads 1 --clock cpu     # on a shared machine

Prints tokens/s of one training step (forward, backward, Adam) for: autograd through the loop
("loop", the path before the Function) in fp32 and bf16, the Function ("function") in fp32 and
bf16, and the ratios the goals name: function bf16 / function fp32, function bf16 / loop bf16.
Each round times every variant once on that round's batch, in a rotating order, so load from
other work falls on all four alike; the figure is the median over rounds. ``--config mini``:
elmo-mini's shape with 4,000-token batches (bench/distributed_training.py's "mini"); ``tiny``:
a quick check.

``--curve STEPS`` instead trains STEPS steps twice from the same seed, with the Function and
through the loop, in bf16 (``--precision`` to change), and prints both loss curves and their
largest gap (each run checkpointed under ``--out``; delete it to start over).

bf16 is the real thing where this CPU's bf16 units pay (``elmo_model.bilm.precision``); elsewhere
it is emulated, which is not a bf16 speed, and the output says so.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from bench.distributed_training import CONFIGS
from elmo_model.bilm import gradient_kernels
from elmo_model.bilm.lstm_gradient import autograd_through_the_loop
from elmo_model.bilm.precision import EMULATED_BF16, bf16_support
from elmo_model.training.train import TrainConfig, Trainer
from probing.data import data_root

PATHS = ("loop", "function")


def _path(name: str) -> contextlib.AbstractContextManager:
    return autograd_through_the_loop() if name == "loop" else contextlib.nullcontext()


def _config(args: argparse.Namespace, out: Path, precision: str, steps: int) -> TrainConfig:
    shape = dict(CONFIGS[args.config])
    if args.batch_tokens:
        shape["batch_tokens"] = args.batch_tokens
    return TrainConfig(train=[str(data_root(args.data_root) / "lm_corpus" / "wiki-train-00.txt.gz")], out=str(out),
                       **shape, max_steps=steps, log_every=args.log_every, threads=args.threads,
                       precision=precision, checkpoint_every_minutes=2.0, validate_every_minutes=1e9)


def time_steps(args: argparse.Namespace, bf16: str) -> dict[tuple[str, str], list[float]]:
    """tokens/s of each (path, precision) per round."""
    with tempfile.TemporaryDirectory() as scratch:
        trainer = Trainer(_config(args, Path(scratch), "fp32", 1), progress=False)
        trainer._setup()
    trainer.lm.train()
    variants = [(path, precision) for precision in ("fp32", bf16) for path in PATHS]
    batches = list(itertools.islice(trainer._epoch_batches(0), args.rounds + 1))
    if len(batches) < args.rounds + 1:
        raise SystemExit(f"the corpus gives {len(batches)} batches; --rounds needs {args.rounds + 1}")
    rates: dict[tuple[str, str], list[float]] = {v: [] for v in variants}
    # cpu: this thread's CPU time with one thread (other work on the machine does not count), the
    # process's with more; wall: elapsed time
    clock = time.perf_counter if args.clock == "wall" else time.thread_time if args.threads == 1 else time.process_time
    for round_, batch in enumerate(batches):  # the first round warms up every variant, untimed
        if round_ == 1:  # the char CNN's kernels compiled (queued by the warm-up) before any timing
            gradient_kernels.wait_until_ready()
        for path, precision in variants[round_ % 4 :] + variants[: round_ % 4]:
            trainer.lm.bilm.set_precision(precision)
            with _path(path):
                start = clock()
                trainer._step(batch)
                seconds = clock() - start
            if round_:
                rates[(path, precision)].append(batch.n_tokens / seconds)
        if round_:
            line = ", ".join(f"{p} {q} {rates[(p, q)][-1]:.0f}" for p, q in variants)
            print(f"round {round_}/{args.rounds} ({batch.n_tokens} tokens): {line} tokens/s", flush=True)
    return rates


def print_rates(rates: dict[tuple[str, str], list[float]], bf16: str) -> None:
    median = {v: statistics.median(r) for v, r in rates.items()}
    print("\ntokens/s of one training step (of the chosen clock), median over rounds:")
    for (path, precision), value in median.items():
        print(f"  {path:<9}{precision:<15}{value:>9.0f}")
    note = "" if bf16 == "bf16" else "  (emulated bf16: not a bf16 speed)"
    print("ratios:" + note)
    print(f"  function {bf16} / function fp32 {median[('function', bf16)] / median[('function', 'fp32')]:.2f}x"
          f"   (loop {bf16} / loop fp32 {median[('loop', bf16)] / median[('loop', 'fp32')]:.2f}x)")
    print(f"  function {bf16} / loop {bf16} {median[('function', bf16)] / median[('loop', bf16)]:.2f}x")
    print(f"  function fp32 / loop fp32 {median[('function', 'fp32')] / median[('loop', 'fp32')]:.2f}x")


def curves(args: argparse.Namespace, precision: str) -> int:
    """Train --curve steps twice (the Function, the loop) and print both loss curves."""
    found = {}
    for path in PATHS:
        out = args.out / f"{path}-{precision}"
        vocab = args.out / f"{PATHS[0]}-{precision}" / "vocab.txt"
        if path != PATHS[0] and vocab.is_file() and not (out / "vocab.txt").exists():
            out.mkdir(parents=True, exist_ok=True)  # the same vocabulary, built once
            (out / "vocab.txt").write_bytes(vocab.read_bytes())
        trainer = Trainer(_config(args, out, precision, args.curve))
        with _path(path):
            trainer.train()
        found[path] = [(p["step"], p["loss"], p["tokens_per_second"]) for p in trainer.state["loss_curve"]]
    print(f"\n{'step':>6}{'loop loss':>12}{'function loss':>15}{'gap':>9}")
    gaps = []
    for (step, a, _), (_, b, _) in zip(found["loop"], found["function"]):
        gaps.append(abs(b - a))
        print(f"{step:>6}{a:>12.4f}{b:>15.4f}{b - a:>+9.4f}")
    print(f"largest gap {max(gaps):.4f} nats over {len(gaps)} logging windows ({precision})")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """This bench's options (bench/speed_goals.py takes its step timing with them)."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=4, help="timed rounds, each every variant once (default 4)")
    parser.add_argument("--config", choices=("mini", "tiny"), default="mini",
                        help="mini: elmo-mini's shape, 4,000-token batches (the default); tiny: a quick check")
    parser.add_argument("--batch-tokens", type=int, default=None, help="default: the config's")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                        help="wall: elapsed time (default); cpu: CPU time (one thread's with --threads 1), "
                             "for a machine shared with other work")
    parser.add_argument("--data-root", type=Path, default=None, help="default: $ELMO_WORKBENCH_DATA")
    parser.add_argument("--curve", type=int, default=None, metavar="STEPS",
                        help="train STEPS steps with each path and print the loss curves instead of timing")
    parser.add_argument("--precision", choices=("fp32", "bf16"), default="bf16", help="for --curve (default bf16)")
    parser.add_argument("--log-every", type=int, default=25, help="for --curve: the logging window in steps")
    parser.add_argument("--out", type=Path, default=Path("runs/training-step"), help="for --curve: the run folders")
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.rounds < 1 or (args.curve is not None and args.curve < 1):
        parser.error("--rounds and --curve take a positive number")
    support = bf16_support()
    bf16 = "bf16" if support.usable else EMULATED_BF16
    print(f"bf16 here: {support.reason}; bf16 runs as {bf16}; {args.threads} thread(s), {args.clock} clock, "
          f"torch {torch.__version__}")
    if args.curve is not None:
        return curves(args, bf16 if args.precision == "bf16" else "fp32")
    print_rates(time_steps(args, bf16), bf16)
    return 0


if __name__ == "__main__":
    sys.exit(main())
