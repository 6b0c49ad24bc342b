"""What it costs a forward to check that its kept weight copies are still the weights.

    python bench/weight_checks.py [--models mini full] [--seconds 3] [--threads 2]

The products keep bf16 and packed copies of the weights across forwards (``precision.ProductPrecision``,
the one loop's stacked weights). An edit through ``.data`` is invisible to the version counter, so a
copy is only as fresh as the check on its weight's values. For each model shape (random weights) this
prints a batch-1 forward of 20 tokens (the app's and the playground's case, where a check weighs
most) in fp32 and bf16, and beside it the time of one check of every weight the forward keeps a copy
of, by each rule, as a share of that forward:

- ``sample``: 64 values spread over each weight (the rule before ``rows+columns``);
- ``rows+columns``: one value in every row and every column of each weight, and every value of a
  vector or a small weight (``precision.weight_stamp``, the rule used);
- ``bits``: every value, as the integer sum of the bit patterns (complete: any one edited value moves
  it);
- ``fp64 sum``: every value, summed in float64 (the rule of the model identity).

All times in one run, the forward and the checks alternating; the CPU is printed with them.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from batch_pipeline import cpu_name  # noqa: E402
from bilm_throughput import FULL_SIZE, SENTENCE_TOKENS, model_from_options  # noqa: E402
from elmo_model.bilm.char_ids import batch_to_char_ids  # noqa: E402
from elmo_model.bilm.precision import bf16_support, weight_stamp  # noqa: E402

STAMP_SAMPLE = 64  # the values of the sample rule
from elmo_model.plumbing.resources import shipped_data  # noqa: E402


def sample_rule(w: torch.Tensor) -> bytes:
    flat = w.detach().reshape(-1)
    return flat[:: max(1, flat.numel() // STAMP_SAMPLE)][:STAMP_SAMPLE].contiguous().view(torch.uint8).numpy().tobytes()


def bits_rule(w: torch.Tensor) -> int:
    integers = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16,
                torch.float64: torch.int64}[w.dtype]
    return int(w.detach().view(integers).sum(dtype=torch.int64))


def fp64_rule(w: torch.Tensor) -> float:
    return float(w.detach().sum(dtype=torch.float64))


RULES = {"sample": sample_rule, "rows+columns": weight_stamp, "bits": bits_rule, "fp64 sum": fp64_rule}


def seconds_per_call(call, seconds: float) -> float:
    call()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds or n < 3:
        call()
        n += 1
    return (time.perf_counter() - start) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", choices=["mini", "full"], default=["mini", "full"])
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement (default: 3)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of forward-then-checks; the median is printed")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"{cpu_name()}, {args.threads} threads, torch {torch.__version__}, python {platform.python_version()}")
    import json
    shapes = {"mini": json.loads((shipped_data("models", "elmo-mini") / "options.json").read_text()), "full": FULL_SIZE}
    precisions = ["fp32"] + (["bf16"] if bf16_support().usable else [])
    words = "the bank of the river was steep and the money bank closed early on friday".split()
    ids = batch_to_char_ids([[words[j % len(words)] for j in range(SENTENCE_TOKENS)]])
    print(f"| model | precision | forward, batch 1 x {SENTENCE_TOKENS} tokens | " + " | ".join(RULES) + " |")
    print("|---|---|---:|" + "---:|" * len(RULES))
    for name in args.models:
        model = model_from_options(shapes[name])
        weights = [p for p in model.parameters()]
        for precision in precisions:
            model.set_precision(precision)
            rounds: dict[str, list[float]] = {"forward": [], **{rule: [] for rule in RULES}}
            with torch.inference_mode():
                for _ in range(args.rounds):
                    rounds["forward"].append(seconds_per_call(lambda: model(ids), args.seconds))
                    for rule, check in RULES.items():
                        rounds[rule].append(seconds_per_call(lambda: [check(w) for w in weights], args.seconds / 3))
            forward = statistics.median(rounds["forward"])
            shares = [f"{statistics.median(rounds[rule]) * 1e3:.2f} ms ({statistics.median(rounds[rule]) / forward:.1%})"
                      for rule in RULES]
            print(f"| {name} | {precision} | {forward * 1e3:.0f} ms | " + " | ".join(shares) + " |", flush=True)


if __name__ == "__main__":
    main()
