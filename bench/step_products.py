"""What one LSTM step's matrix products cost at a batch of one sentence, against the bytes they read.

    python bench/step_products.py [--threads 1 2] [--repeats 200] [--compiled] [--rows 1]

At batch 1 a time step of one direction's layer multiplies one row by the recurrent weight,
(1, P) x (P, 4H), and one row by the projection, (1, H) x (H, P): each weight element is read once
and used for one multiply-add, so the products are bound by how fast the weights arrive, not by
arithmetic. For the full-size shapes (H 4096, P 512; ``--cell-dim``, ``--projection-dim`` for
others) this times each product in the ways PyTorch offers on a CPU, with fp32 and bf16 weights:

- ``mm(x, W.t())``: the (N, K) weight of ``nn.Linear`` through its transposed view (each output a
  row's dot product with x), as ``F.linear`` also takes it;
- ``mm(x, Wt)``: a contiguous (K, N) copy (the outputs accumulate x_k times row k);
- ``mv(W, x)``; oneDNN's prepacked linear (``torch.ops.mkldnn._linear_pointwise`` on a weight
  packed by ``_reorder_linear_weight``); MKL's packed fp32 linear where this build has it;
- with ``--compiled``, ``torch.compile`` of the row-dot-product form (fp32 accumulation).

Each is timed with the weight staying in the last-level cache ("cache": the same weight every
call) and coming from memory ("memory": calls rotate over copies of it filling ``--memory-mb``),
at each ``--threads``; ``--rows`` multiplies that many rows at once (a batch of that many
sentences; 1 by default). A row prints the median microseconds of a call and the weight bytes read
per second (GB/s). The median of many short calls is robust to other work taking the cores for a
while, but memory-bound timings on a shared machine still move with its neighbours' traffic.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time
from typing import Callable

import torch
import torch.nn.functional as F


def median_seconds(call: Callable, operands: list[tuple], repeats: int) -> float:
    """Median wall-clock seconds of ``call(*operands[i % len])`` over ``repeats`` calls."""
    for args in operands[:2]:
        call(*args)
    times = []
    for i in range(repeats):
        args = operands[i % len(operands)]
        start = time.perf_counter()
        call(*args)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def variants(weights: list[torch.Tensor], x: torch.Tensor, compiled: bool) -> dict[str, tuple[Callable, list[tuple]]]:
    """name -> (call, operands) for weights (N, K) in one dtype and x (rows, K) in the same dtype."""
    linear = torch.ops.mkldnn._linear_pointwise
    copies = [w.t().contiguous() for w in weights]
    found = {
        "mm(x, W.t())": (lambda a, w: torch.mm(a, w.t()), [(x, w) for w in weights]),
        "mm(x, Wt) contiguous": (torch.mm, [(x, w) for w in copies]),
        "F.linear(x, W)": (F.linear, [(x, w) for w in weights]),
    }
    if x.shape[0] == 1:
        found["mv(W, x)"] = (lambda a, w: torch.mv(w, a[0]), [(x, w) for w in weights])
    try:
        packed = [torch.ops.mkldnn._reorder_linear_weight(w, x.shape[0]) for w in weights]
        found["oneDNN prepacked"] = (lambda a, w: linear(a, w, None, "none", [], ""), [(x, w) for w in packed])
    except (AttributeError, RuntimeError):
        pass
    if x.dtype == torch.float32 and hasattr(torch.ops.mkl, "_mkl_linear"):
        try:
            packed = [(torch.ops.mkl._mkl_reorder_linear_weight(w, x.shape[0]), w) for w in weights]
            found["MKL prepacked"] = (lambda a, p, w: torch.ops.mkl._mkl_linear(a, p, w, None, a.shape[0]),
                                      [(x, p, w) for p, w in packed])
        except (AttributeError, RuntimeError):
            pass
    if compiled:
        dots = torch.compile(lambda a, w: (w.float() * a.float().unsqueeze(-2)).sum(-1), dynamic=False)
        found["compiled row dots"] = (dots, [(x, w) for w in weights])
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cell-dim", type=int, default=4096, help="H (default: the full-size model's %(default)s)")
    parser.add_argument("--projection-dim", type=int, default=512, help="P (default: %(default)s)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="torch intra-op threads to time at")
    parser.add_argument("--repeats", type=int, default=200, help="calls timed per row (default: %(default)s)")
    parser.add_argument("--memory-mb", type=float, default=256.0,
                        help="bytes the 'memory' rows rotate over, in MB (default: %(default)s, 8x a 32 MB L3)")
    parser.add_argument("--compiled", action="store_true", help="add torch.compile's row-dot-product gemv")
    parser.add_argument("--rows", type=int, default=1, help="rows multiplied at once (default: %(default)s)")
    args = parser.parse_args()
    print(f"machine: {platform.processor() or platform.machine()}, torch {torch.__version__}, {args.rows} row(s)")
    h, p = args.cell_dim, args.projection_dim
    generator = torch.Generator().manual_seed(0)
    print(f"{'product':<34}{'weight':>7}{'where':>8}{'threads':>8}  {'variant':<22}{'us':>10}{'GB/s':>8}")
    with torch.inference_mode():
        r = args.rows
        for name, k, n in ((f"recurrent ({r},{p})x({p},{4 * h})", p, 4 * h), (f"projection ({r},{h})x({h},{p})", h, p)):
            weight = torch.randn(n, k, generator=generator) * 0.05
            x = torch.randn(r, k, generator=generator)
            for dtype in (torch.float32, torch.bfloat16):
                nbytes = n * k * torch.finfo(dtype).bits // 8
                for where in ("cache", "memory"):
                    count = 1 if where == "cache" else max(2, round(args.memory_mb * 1e6 / nbytes))
                    weights = [weight.to(dtype)] + [(weight * (1 + i / 64)).to(dtype) for i in range(1, count)]
                    for threads in args.threads:
                        torch.set_num_threads(threads)
                        for label, (call, operands) in variants(weights, x.to(dtype), args.compiled).items():
                            seconds = median_seconds(call, operands, args.repeats)
                            print(f"{name:<34}{str(dtype).removeprefix('torch.'):>7}{where:>8}{threads:>8}  "
                                  f"{label:<22}{seconds * 1e6:>10.1f}{nbytes / seconds / 1e9:>8.3g}", flush=True)
                    del weights


if __name__ == "__main__":
    main()
