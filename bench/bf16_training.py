"""The trainer in fp32 and in bf16: the same steps from the same start, in one run.

    python bench/bf16_training.py [--steps 300] [--out runs/bf16-training]
    python bench/bf16_training.py --config tiny --steps 4 --log-every 2 --out /tmp/bf16-training   # quick

Trains the elmo-mini shape (the trainer's defaults: LSTM 1024, projection 256, 512 char filters,
50k-word adaptive softmax; vocabulary from the first 1M tokens; ``--config tiny``: a tiny shape) on
the LM corpus's first wiki shard for ``--steps`` steps, once per precision, from the same seed, and prints tokens/s of each and the training loss every
``--log-every`` steps side by side, with the gap at the end. Each run lives under ``--out``
(checkpointed, so an interrupted bench resumes; delete the folder to start over).

bf16 is the real thing where this CPU's bf16 units pay (``elmo_model.bilm.precision``); elsewhere it is
emulated (the same roundings with fp32 arithmetic), which measures the loss curve but not the
speed: the tokens/s of an emulated run is not a bf16 figure and is printed as such.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.distributed_training import CONFIGS  # noqa: E402
from elmo_model.bilm.precision import EMULATED_BF16, bf16_support  # noqa: E402
from elmo_model.training.train import TrainConfig, Trainer  # noqa: E402
from probing.data import data_root  # noqa: E402

# --config: the trainer's defaults (elmo-mini's shape), or the tiny shape of a quick check
SHAPES = {"mini": dict(vocab_max_tokens=1_000_000), "tiny": CONFIGS["tiny"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--log-every", type=int, default=25)
    parser.add_argument("--data-root", type=Path, default=None, help="default: $ELMO_WORKBENCH_DATA")
    parser.add_argument("--out", type=Path, default=Path("runs/bf16-training"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--config", choices=sorted(SHAPES), default="mini",
                        help="mini: the trainer's defaults, elmo-mini's shape (the default); tiny: the tiny shape "
                             "of bench/distributed_training.py, a quick check")
    args = parser.parse_args(argv)

    root = data_root(args.data_root)
    support = bf16_support()
    bf16 = "bf16" if support.usable else EMULATED_BF16
    print(f"bf16 here: {support.reason}; training with {bf16}")
    curves, rates = {}, {}
    for precision in ("fp32", bf16):
        config = TrainConfig(train=[str(root / "lm_corpus" / "wiki-train-00.txt.gz")],
                             out=str(args.out / precision), **SHAPES[args.config],
                             max_steps=args.steps, log_every=args.log_every, threads=args.threads,
                             precision=precision, checkpoint_every_minutes=2.0, validate_every_minutes=1e9)
        vocab = args.out / "fp32" / "vocab.txt"
        if precision != "fp32" and vocab.is_file() and not (args.out / precision / "vocab.txt").exists():
            (args.out / precision).mkdir(parents=True, exist_ok=True)  # the same vocabulary, built once
            (args.out / precision / "vocab.txt").write_bytes(vocab.read_bytes())
        trainer = Trainer(config)
        trainer.train()
        curve = trainer.state["loss_curve"]
        curves[precision] = [(p["step"], p["loss"]) for p in curve]
        rates[precision] = sum(p["tokens_per_second"] for p in curve[1:]) / max(1, len(curve) - 1)
    print(f"\ntokens/s (mean over logging windows after the first): fp32 {rates['fp32']:.0f}, "
          f"{bf16} {rates[bf16]:.0f} ({rates[bf16] / rates['fp32']:.2f}x"
          f"{'' if bf16 == 'bf16' else '; emulated: not a bf16 speed'})")
    print(f"{'step':>6}{'fp32 loss':>11}{bf16 + ' loss':>20}{'gap':>9}")
    for (step, a), (_, b) in zip(curves["fp32"], curves[bf16]):
        print(f"{step:>6}{a:>11.4f}{b:>20.4f}{b - a:>+9.4f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
