"""Time of the full probe report for one biLM, cold and warm, as a user runs it from the shell.

    python bench/report_time.py --model elmo-mini
    python bench/report_time.py --model elmo-mini --tasks pos chunk wsd --words bank play
    python bench/report_time.py --standin            # a random biLM shaped like elmo-mini
    python bench/report_time.py --model /work/shared/fixtures/bilm_tf --limit 100 --semcor-limit 100   # a quick check

Runs ``python -m probing.report`` twice, each in a fresh child process, against one new cache
directory (activations, probe results, the SemCor index):

1. cold: the cache is empty: every biLM pass (suite splits, random biLM, SemCor, the WSD
   evaluation sets, the LM sample for contextuality), every probe, every figure and PNG;
2. warm: the same command again: everything cached that can be (what a rerun costs).

Prints the machine (CPU, cores, memory, load, torch threads, library versions), both wall-clock
times and the largest child peak RSS against the goals (cold <= 25 min, warm <= 3 min),
the seconds per report section of each run (from their results.json) and the report's summary.
Both runs must give the same numbers (checked). ``--keep DIR`` keeps the caches and the two
reports there (default: a temporary directory, deleted at the end).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))
sys.path.insert(0, str(PROJECT / "bench"))

from probe_suite import machine, make_standin  # noqa: E402  (the probing-suite bench's helpers, on the path above)
from probing.report import load_results, summary_lines  # noqa: E402

GOALS = {"cold": 25 * 60, "warm": 3 * 60}


def run_report(args: argparse.Namespace, cache_dir: Path, out: Path) -> tuple[float, float]:
    """One ``python -m probing.report`` in a child process: (wall seconds, peak RSS in GB so far)."""
    command = [sys.executable, "-m", "probing.report", "--model", str(args.model), "--tasks", *args.tasks,
               "--cache-dir", str(cache_dir), "--out", str(out), "--seed", str(args.seed), "--quiet"]
    if args.words:
        command += ["--words", *args.words]
    if args.data_root is not None:
        command += ["--data-root", str(args.data_root)]
    if args.limit is not None:
        command += ["--limit", str(args.limit)]
    if args.semcor_limit is not None:
        command += ["--semcor-limit", str(args.semcor_limit)]
    if args.no_png:
        command.append("--no-png")
    if getattr(args, "train_fraction", None) is not None:
        command += ["--train-fraction", str(args.train_fraction)]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=PROJECT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        sys.stderr.write(done.stdout + done.stderr)
        raise SystemExit(f"error: the report failed (exit code {done.returncode}): {' '.join(command)}")
    peak_gb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024 ** 2
    return seconds, peak_gb


def minutes(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="elmo-mini", help="shipped model name or model directory")
    parser.add_argument("--standin", action="store_true", help="bench a random biLM shaped like elmo-mini instead")
    parser.add_argument("--tasks", nargs="+", default=["pos", "chunk", "wsd"],
                        help="report tasks (default: pos chunk wsd)")
    parser.add_argument("--words", nargs="*", default=["bank", "play"],
                        help="lemmas for the learned-s_j panel (default: bank play; none: --words)")
    parser.add_argument("--data-root", type=Path, default=None)
    parser.add_argument("--limit", type=int, default=None, help="first N sentences of each dataset (a quick check)")
    parser.add_argument("--semcor-limit", type=int, default=None, help="SemCor sentences to index (default: the report's, the first 10,000; 0: all of SemCor, "
                             "as docs/probe-results.md's runs)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--train-fraction", type=float, default=None, metavar="F",
                        help="the probes' share of each training split (default: the report's; 1: all, as the "
                             "published figures)")
    parser.add_argument("--no-png", action="store_true", help="time the report without its PNG figures")
    parser.add_argument("--keep", type=Path, default=None,
                        help="an empty (or new) folder to keep the caches and both reports in")
    args = parser.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="report-bench-"))
    base = args.keep or work
    try:
        if args.keep is not None and args.keep.exists() and any(args.keep.iterdir()):
            print(f"error: {args.keep} is not empty: a cold run needs an empty cache", file=sys.stderr)
            return 2
        if args.standin:
            args.model = make_standin(base / "standin-elmo-mini")
        cache_dir = base / "cache"
        print(f"machine: {machine()}")
        print(f"model: {args.model}; tasks: {' '.join(args.tasks)}; words: {' '.join(args.words) or '-'}; "
              f"limit: {args.limit}; semcor limit: {args.semcor_limit}; PNG figures: {not args.no_png}; "
              f"probes' training share: {args.train_fraction if args.train_fraction is not None else 'the default'}")
        runs = {}
        for name in ("cold", "warm"):
            out = base / f"report-{name}"
            seconds, peak = run_report(args, cache_dir, out)
            runs[name] = (seconds, peak, load_results(out / "results.json"))
            print(f"{name:5} {seconds:8.1f} s ({minutes(seconds)})   peak RSS of the children so far {peak:.2f} GB",
                  flush=True)
        cold, warm = runs["cold"][0], runs["warm"][0]
        print(f"\ngoals: cold <= {GOALS['cold'] / 60:.0f} min: {minutes(cold)} "
              f"({'met' if cold <= GOALS['cold'] else 'MISSED'}); warm <= {GOALS['warm'] / 60:.0f} min: "
              f"{minutes(warm)} ({'met' if warm <= GOALS['warm'] else 'MISSED'})")
        same = runs["cold"][2].numbers() == runs["warm"][2].numbers()
        print(f"cold and warm give the same numbers: {same}")
        sections = sorted(set(runs["cold"][2].timings) | set(runs["warm"][2].timings),
                          key=lambda k: -runs["cold"][2].timings.get(k, 0.0))
        print("\nseconds per section      cold      warm")
        for section in sections:
            c, w = (runs[n][2].timings.get(section) for n in ("cold", "warm"))
            c, w = (float("nan") if x is None else x for x in (c, w))
            print(f"  {section:20} {c:8.1f}  {w:8.1f}")
        print("  (the rest of each wall time: start-up, imports and writing the files)")
        print("\nsummary:")
        for line in summary_lines(runs["cold"][2]):
            print("- " + line.replace("**", ""))
        size = sum(f.stat().st_size for f in cache_dir.rglob("*") if f.is_file())
        print(f"\ncache size: {size / 1e9:.2f} GB in {cache_dir}")
        if args.keep is not None:
            print(f"reports: {base / 'report-cold' / 'report.html'}, {base / 'report-warm' / 'report.html'}")
        return 0 if same else 1
    finally:
        shutil.rmtree(work, ignore_errors=True)  # a --keep folder lives elsewhere


if __name__ == "__main__":
    sys.exit(main())
