"""Throughput of the biLM's forward pass (inference) against this machine's fp32 matmul rate.

    python bench/bilm_throughput.py [--seconds 10] [--threads 2] [--precisions fp32 bf16]

For the bilm-tf fixture config and the full-size ELMo config (2x4096_512_2048cnn_2xhighway), or with
``--models mini`` the shipped elmo-mini's shape (data/models/elmo-mini/options.json), random weights
written with our own writer and read back, at batch sizes 1, 32 and 128, prints tokens/s,
the model's FLOPs per token, the achieved GFLOP/s and its ratio to the fp32 matmul rate measured in
the same run (2048 x 2048 ``torch.mm``). FLOPs count multiply-adds as 2 over the positions the
model processes (sentence tokens plus ``<S>``/``</S>``); tokens/s counts sentence tokens only.

The model runs as the embedder runs it: with 2+ threads the forward and backward LSTM stacks go
side by side, one thread each (``BiLM.parallel_directions``). The last column is the same
measurement with that switched off (both stacks in the calling thread, all threads per product),
taken in the same run, as a ratio.

With ``--baseline DIR`` (another checkout, e.g. ``git worktree add /tmp/base main``) every row is
also timed with that checkout's ``elmo_model`` (imported as a second package, the same weights),
alternating the two in short rounds so that other load on the machine falls on both alike; the
last column is this code's tokens/s over the baseline's, the median of the rounds.

With ``--one-loop`` a column compares, alternating in the same way, both directions in one time
loop of batched products (``BiLM.directions_together``, the default on a GPU) with the CPU's
default (side by side with 2+ threads, else in turn).

With ``--fused`` the LSTM step runs compiled (``elmo_model.bilm.fused_step``: the cell's elementwise
work in one pass; compiled before the timing starts, and the compile time printed), and a column
compares it, alternating in the same way, with the eager step.

With ``--cpu-time`` (one thread only) every time is the calling thread's CPU time
(``time.thread_time``) rather than wall-clock time: on a machine shared with other work a forward's
waits for a core then count for neither side of an A/B (its memory traffic still competes).

Every row's "of own matmul" is its rate over the same run's matmul rate in its own precision (fp32
rows: the fp32 2048^3 product; bf16 rows: the bf16 one).

With ``--precisions fp32 bf16`` every row is measured in both precisions (``elmo_model.bilm.precision``)
and the bf16 row adds its speed-up over fp32 in the same run; the bf16 matmul rate is printed
beside fp32's. Where this CPU's bf16 units do not pay (``bf16_support()``), bf16 rows are skipped
with the reason, unless ``--force-bf16`` (PyTorch's reference bf16 kernels there are hundreds of
times slower than fp32: use a short ``--seconds``).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from elmo_model.bilm import fused_step  # noqa: E402
from elmo_model.bilm.char_ids import batch_to_char_ids  # noqa: E402
from elmo_model.bilm.config import ElmoConfig  # noqa: E402
from elmo_model.bilm.modules import BiLM  # noqa: E402
from elmo_model.bilm.precision import bf16_support  # noqa: E402
from elmo_model.bilm.weights import load_weights, save_weights  # noqa: E402
from elmo_model.plumbing.resources import shipped_data  # noqa: E402

FULL_SIZE = {
    "char_cnn": {"embedding": {"dim": 16}, "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
                 "n_highway": 2, "n_characters": 262, "max_characters_per_token": 50, "activation": "relu"},
    "lstm": {"dim": 4096, "projection_dim": 512, "n_layers": 2, "cell_clip": 3, "proj_clip": 3, "use_skip_connections": True},
}
FIXTURE = {
    "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4], [2, 8], [3, 16], [4, 32], [5, 64]], "n_highway": 2,
                 "n_characters": 262, "max_characters_per_token": 50, "activation": "relu"},
    "lstm": {"dim": 64, "projection_dim": 16, "n_layers": 2, "cell_clip": 3, "proj_clip": 3, "use_skip_connections": False},
}
SENTENCE_TOKENS = 20
#: what the timings read: wall-clock time, or the thread's CPU time (``--cpu-time``)
CLOCK = time.perf_counter


def flops_per_position(config: ElmoConfig) -> dict[str, float]:
    """Forward FLOPs (2 per multiply-add) per processed position, by part."""
    c, l = config.char_cnn, config.lstm
    chars = c.max_characters_per_token
    cnn = sum((chars - w + 1) * w * c.embedding_dim * n * 2 for w, n in c.filters)
    highway = c.n_highway * 2 * c.n_filters ** 2 * 2
    projection = c.n_filters * l.projection_dim * 2
    per_layer = l.projection_dim * 4 * l.dim * 2 + l.projection_dim * 4 * l.dim * 2 + l.dim * l.projection_dim * 2
    lstm = 2 * l.n_layers * per_layer
    return {"char_cnn": cnn, "highway": highway, "projection": projection, "lstm": lstm,
            "total": cnn + highway + projection + lstm}


def matmul_gflops(seconds: float, dtype: torch.dtype = torch.float32, size: int = 2048) -> float:
    a, b = torch.randn(size, size, dtype=dtype), torch.randn(size, size, dtype=dtype)
    torch.mm(a, b)
    n, start = 0, CLOCK()
    while CLOCK() - start < seconds or n < 1:
        torch.mm(a, b)
        n += 1
    return n * 2 * size ** 3 / (CLOCK() - start) / 1e9


def model_from_options(options: dict) -> BiLM:
    """Random weights, written with our writer and read back (exercises the whole I/O path)."""
    config = ElmoConfig.from_options(options)
    torch.manual_seed(0)
    model = BiLM(config)
    with tempfile.TemporaryDirectory() as tmp:
        save_weights(model, Path(tmp) / "weights.hdf5")
        loaded = BiLM(config)
        load_weights(loaded, Path(tmp) / "weights.hdf5")
    return loaded.eval()


def tokens_per_second(model: BiLM, batch_size: int, seconds: float) -> float:
    words = "the bank of the river was steep and the money bank closed early on friday".split()
    batch = [[words[(i + j) % len(words)] for j in range(SENTENCE_TOKENS)] for i in range(batch_size)]
    ids = batch_to_char_ids(batch)
    with torch.inference_mode():
        model(ids)
        n, start = 0, CLOCK()
        while CLOCK() - start < seconds or n < 2:
            model(ids)
            n += 1
        elapsed = CLOCK() - start
    return n * batch_size * SENTENCE_TOKENS / elapsed


def baseline_bilm_class(checkout: Path):
    """``BiLM`` of another checkout's ``elmo_model``, imported as the package ``elmo_model_baseline``
    (its modules import each other relatively, so they stay within that copy)."""
    init = checkout / "elmo_model" / "__init__.py"
    if not init.is_file():
        raise SystemExit(f"--baseline {checkout}: no elmo_model/__init__.py there")
    spec = importlib.util.spec_from_file_location("elmo_model_baseline", init,
                                                  submodule_search_locations=[str(init.parent)])
    package = importlib.util.module_from_spec(spec)
    sys.modules["elmo_model_baseline"] = package
    spec.loader.exec_module(package)
    try:  # the biLM's room today; a checkout from before the rooms kept it at the top
        return importlib.import_module("elmo_model_baseline.bilm.modules").BiLM
    except ModuleNotFoundError:
        return importlib.import_module("elmo_model_baseline.modules").BiLM


def versus_baseline(model: BiLM, baseline: torch.nn.Module, batch_size: int, seconds: float, rounds: int = 8) -> float:
    """Median over ``rounds`` of (this model's tokens/s) / (the baseline's), each round timing both
    for ``seconds / rounds``, in alternating order."""
    ratios = []
    for r in range(rounds):
        pair = [(model, None), (baseline, None)] if r % 2 == 0 else [(baseline, None), (model, None)]
        timed = {id(m): tokens_per_second(m, batch_size, seconds / rounds) for m, _ in pair}
        ratios.append(timed[id(model)] / timed[id(baseline)])
    return statistics.median(ratios)


def one_loop_versus_default(model: BiLM, batch_size: int, seconds: float, rounds: int = 8) -> float:
    """Median over ``rounds`` of tokens/s with ``directions_together`` over tokens/s without it."""
    ratios = []
    for r in range(rounds):
        timed = {}
        for together in ((True, False) if r % 2 == 0 else (False, True)):
            model.directions_together = together
            timed[together] = tokens_per_second(model, batch_size, seconds / rounds)
        ratios.append(timed[True] / timed[False])
    model.directions_together = None
    return statistics.median(ratios)


def fused_versus_eager(model: BiLM, batch_size: int, seconds: float, rounds: int = 8) -> float:
    """Median over ``rounds`` of tokens/s with the compiled step over tokens/s with the eager one."""
    ratios = []
    for r in range(rounds):
        timed = {}
        for fused in ((True, False) if r % 2 == 0 else (False, True)):
            os.environ[fused_step.ENV] = "1" if fused else "0"
            timed[fused] = tokens_per_second(model, batch_size, seconds / rounds)
        ratios.append(timed[True] / timed[False])
    os.environ[fused_step.ENV] = "1"
    return statistics.median(ratios)


def compile_fused_step(model: BiLM, batch_sizes: list[int]) -> float:
    """Compile the fused step for every batch size of the run (the timings then never include a
    compile); returns the seconds it took."""
    os.environ[fused_step.ENV] = "1"
    start = time.perf_counter()
    for batch_size in batch_sizes:
        tokens_per_second(model, batch_size, 0.0)
        fused_step.wait_until_ready()
    if fused_step.unavailable_reason():
        raise SystemExit(f"--fused: {fused_step.unavailable_reason()}")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=10.0, help="time per measurement (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=2, help="torch intra-op threads (default: %(default)s)")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 32, 128])
    parser.add_argument("--precisions", nargs="+", choices=["fp32", "bf16"], default=["fp32", "bf16"])
    parser.add_argument("--force-bf16", action="store_true", help="time bf16 even where it does not pay")
    parser.add_argument("--models", nargs="+", choices=["fixture", "mini", "full"], default=["fixture", "full"])
    parser.add_argument("--one-loop", action="store_true",
                        help="add the A/B of both directions in one loop against the CPU's default (see above)")
    parser.add_argument("--fused", action="store_true",
                        help="run the compiled LSTM step, with a column comparing it to the eager one (see above)")
    parser.add_argument("--baseline", type=Path, default=None,
                        help="another checkout: time each row against its elmo_model too (see above)")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time the thread's CPU time, not wall-clock time (needs --threads 1; see above)")
    args = parser.parse_args()
    if args.cpu_time:
        if args.threads != 1:
            parser.error("--cpu-time needs --threads 1 (it reads the calling thread's CPU time)")
        global CLOCK
        CLOCK = time.thread_time
    torch.set_num_threads(args.threads)
    print(f"machine: {platform.processor() or platform.machine()}, torch {torch.__version__}, {args.threads} threads"
          + (", CPU time" if args.cpu_time else ""))
    support = bf16_support()
    print(f"bf16: {'usable' if support.usable else 'not usable'} ({support.reason})")
    precisions = [p for p in args.precisions if p == "fp32" or support.usable or args.force_bf16]
    if precisions != args.precisions:
        print("bf16 rows skipped (--force-bf16 times them anyway)")
    rate_before = matmul_gflops(args.seconds / 2)
    # where bf16 does not pay, a 2048^3 bf16 product takes about a minute: measure a 512^3 one
    bf16_size = 2048 if support.usable else 512
    bf16_rate = (matmul_gflops(min(args.seconds / 2, 2.0), torch.bfloat16, bf16_size)
                 if "bf16" in args.precisions else None)
    rows = []
    chosen = {"fixture": ("bilm-tf fixture", FIXTURE), "full": ("full-size ELMo", FULL_SIZE),
              "mini": ("elmo-mini shape", None)}
    baseline_class = baseline_bilm_class(args.baseline) if args.baseline else None
    for name, options in (chosen[m] for m in args.models):
        if options is None:  # random weights of the shipped elmo-mini's shape
            options = json.loads(shipped_data("models", "elmo-mini", "options.json").read_text(encoding="utf-8"))
        model = model_from_options(options)
        baseline = None
        if baseline_class is not None:
            baseline = baseline_class(type(model.config).from_options(options)).eval()
            baseline.load_state_dict(model.state_dict())
        flops = flops_per_position(model.config)
        per_token = flops["total"] * (SENTENCE_TOKENS + 2) / SENTENCE_TOKENS
        print(f"\n{name}: {flops['total'] / 1e6:.1f} MFLOP per position ("
              + ", ".join(f"{k} {v / 1e6:.1f}" for k, v in flops.items() if k != "total") + ")")
        for batch_size in args.batch_sizes:
            fp32_tps = None
            for precision in precisions:
                model.set_precision(precision)
                if args.fused:
                    print(f"  {precision}, batch {batch_size}: fused step compiled in "
                          f"{compile_fused_step(model, [batch_size]):.1f} s", flush=True)
                model.parallel_directions = False
                sequential = tokens_per_second(model, batch_size, args.seconds)
                model.parallel_directions = True
                tps = tokens_per_second(model, batch_size, args.seconds)
                fp32_tps = tps if precision == "fp32" else fp32_tps
                vs_fp32 = f"{tps / fp32_tps:.2f}x" if precision != "fp32" and fp32_tps else ""
                vs_base = one_loop = fused = ""
                if baseline is not None:
                    baseline.set_precision(precision)
                    vs_base = f"{versus_baseline(model, baseline, batch_size, args.seconds):.2f}x"
                if args.one_loop:
                    one_loop = f"{one_loop_versus_default(model, batch_size, args.seconds):.2f}x"
                if args.fused:
                    fused = f"{fused_versus_eager(model, batch_size, args.seconds):.2f}x"
                rows.append((name, precision, batch_size, tps, tps * per_token / 1e9, tps / sequential, vs_fp32,
                             vs_base, one_loop, fused))
    rate_after = matmul_gflops(args.seconds / 2)
    rate = (rate_before + rate_after) / 2
    print(f"\nfp32 matmul (2048x2048 torch.mm): {rate:.0f} GFLOP/s (before {rate_before:.0f}, after {rate_after:.0f})")
    if bf16_rate is not None:
        print(f"bf16 matmul ({bf16_size}x{bf16_size} torch.mm): {bf16_rate:.2f} GFLOP/s ({bf16_rate / rate:.3g}x fp32)")
    print(f"{'model':<18}{'prec':>6}{'batch':>6}{'tokens/s':>12}{'GFLOP/s':>10}{'of fp32 matmul':>16}"
          f"{'of own matmul':>15}{'vs directions in turn':>23}{'vs fp32':>9}"
          + (f"{'vs baseline':>13}" if args.baseline else "") + (f"{'one loop':>11}" if args.one_loop else "")
          + (f"{'fused vs eager':>16}" if args.fused else ""))
    for name, precision, batch_size, tps, gflops, speedup, vs_fp32, vs_base, one_loop, fused in rows:
        own = gflops / (bf16_rate if precision == "bf16" and bf16_rate else rate)
        print(f"{name:<18}{precision:>6}{batch_size:>6}{tps:>12.0f}{gflops:>10.1f}{gflops / rate:>16.2f}{own:>15.2f}"
              f"{speedup:>22.2f}x{vs_fp32:>9}" + (f"{vs_base:>13}" if args.baseline else "")
              + (f"{one_loop:>11}" if args.one_loop else "") + (f"{fused:>16}" if args.fused else ""))


if __name__ == "__main__":
    main()
