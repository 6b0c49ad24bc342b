"""What sampling the probes' training sentences moves: every figure of the probing suite trained on
a share of each training split, against the same suite on all of it.

    python bench/train_fraction.py --model elmo-mini                    # 0.5 against 1.0, pos chunk
    python bench/train_fraction.py --model elmo-mini --fractions 1 0.5 0.35 --cache-dir DIR
    python bench/train_fraction.py --model M --limit 300 --tasks pos    # a quick check

Runs ``probing.tagging.suite.run_suite`` once per fraction (the first, 1.0 by default, is the
reference), all against one activation and probe cache (``--cache-dir``, default a temporary
directory deleted at the end: each fraction then extracts what it trains on, as a cold report
does). For every figure that has a 95% bootstrap interval on the reference (each layer's probe,
each direction half, each scalar-mix seed, the random-biLM and same-data baselines) it prints the
reference's estimate and interval, each fraction's estimate and whether it lies inside the
reference's interval, and per fraction the suite's seconds by stage (extraction, each kind of
probe) and in all. The last line says how many figures stayed inside, per fraction. Exit status
0 either way: the table is the result.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))


def figures(result) -> dict[str, object]:
    """Every probe score with an interval in a suite result, by a readable name."""
    out = {}
    for t in result.tasks:
        for layer in t.layers:
            out[f"{t.task} {layer.probe.name}"] = layer.probe.test
            for half in layer.halves:
                out[f"{t.task} {half.name}"] = half.test
        if t.mix is not None:
            for p in t.mix.probes:
                out[f"{t.task} {p.name}"] = p.test
        for p in (*t.baselines.random_bilm, *t.baselines.same_data):
            out[f"{t.task} {p.name}"] = p.test
    return out


def compare(reference: dict, sampled: dict) -> tuple[list[list[str]], int]:
    """Rows (name, reference [low, high], sampled, delta, inside) and how many lie inside."""
    rows, inside = [], 0
    for name, ref in reference.items():
        got = sampled.get(name)
        if got is None:
            rows.append([name, _interval(ref), "-", "-", "absent"])
            continue
        ok = ref.low <= got.estimate <= ref.high
        inside += ok
        rows.append([name, _interval(ref), f"{100 * got.estimate:.1f}",
                     f"{100 * (got.estimate - ref.estimate):+.2f}", "yes" if ok else "NO"])
    return rows, inside


def _interval(ci) -> str:
    return f"{100 * ci.estimate:.1f} [{100 * ci.low:.1f}, {100 * ci.high:.1f}]"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="elmo-mini")
    parser.add_argument("--tasks", nargs="+", default=["pos", "chunk"])
    parser.add_argument("--fractions", nargs="+", type=float, default=[1.0, 0.5],
                        help="the first is the reference (default: 1 0.5)")
    parser.add_argument("--limit", type=int, default=None, help="only the first N sentences of each split")
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--data-root", default=None)
    parser.add_argument("--precision", default="auto")
    args = parser.parse_args(argv)
    if any(not 0 < f <= 1 for f in args.fractions) or len(args.fractions) < 2:
        parser.error("--fractions: two or more shares in (0, 1], the first the reference")

    import torch

    from elmo_model import load_bilm
    from elmo_model.bilm import fused_step
    from probe_suite import machine  # noqa: E402  (the probing-suite bench's helpers, beside this file)
    from probing.tagging.suite import run_suite
    from probing.tagging.suite_config import SuiteConfig

    print(machine())
    print(f"torch threads {torch.get_num_threads()}; model {args.model}; tasks {' '.join(args.tasks)}; "
          f"limit {args.limit}")
    fused_step.enable(wait=True)
    model = load_bilm(args.model, args.precision, data_root=args.data_root)
    with tempfile.TemporaryDirectory(prefix="train-fraction-") as tmp:
        cache = args.cache_dir or Path(tmp)
        results = {}
        for fraction in args.fractions:
            start = time.perf_counter()
            result = run_suite(model, args.tasks, data_root=args.data_root, cache_dir=cache, limit=args.limit,
                               config=SuiteConfig(train_fraction=fraction, precision=args.precision))
            seconds = time.perf_counter() - start
            stages = ", ".join(f"{k} {v:.0f}" for k, v in sorted(result.timings.items()) if k != "total")
            print(f"fraction {fraction:g}: {seconds:.0f} s ({stages}); training sentences "
                  + ", ".join(f"{t.task} {t.n_sentences['train']:,}" for t in result.tasks), flush=True)
            results[fraction] = figures(result)
    reference = results[args.fractions[0]]
    for fraction in args.fractions[1:]:
        rows, inside = compare(reference, results[fraction])
        print(f"\nfraction {fraction:g} against {args.fractions[0]:g} (test, %):")
        print("| figure | reference [95% interval] | sampled | change | inside |\n|---|---|---|---|---|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
        print(f"fraction {fraction:g}: {inside} of {len(rows)} figures inside the reference's interval")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(PROJECT / "bench"))
    sys.exit(main())
