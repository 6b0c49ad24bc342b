"""Time and peak memory of the whole probing suite (POS + chunking) for one biLM, cold and warm.

    python bench/probe_suite.py --model elmo-mini [--tasks pos chunk] [--data-root DIR] [--limit N]
    python bench/probe_suite.py --standin       # a random biLM shaped like elmo-mini, before it exists

Runs ``probing.tagging.suite.run_suite`` three times, each in a fresh child process (so each peak RSS
is its own), against one new cache directory:

1. cold:  empty cache: extraction of every split with the model and the random biLM, every probe;
2. warm:  activations and probe results cached (what a rerun costs);
3. warm, probes retrained: activations cached, probe cache off (what the probes cost alone).

Torch uses every core unless ``OMP_NUM_THREADS`` says otherwise; on a machine shared with other
work, ``OMP_NUM_THREADS=1`` is faster than two threads fighting for two busy cores.

Prints the machine (CPU, cores, memory, torch threads, library versions), the three times and
peak RSS figures against the goals (cold <= 15 min, warm <= 2 min, peak <= 6 GB), the
per-stage timings of the cold run and its per-layer table. ``--keep-cache DIR`` keeps the caches
there (default: a temporary directory, deleted at the end).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy
import sklearn
import torch

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from elmo_model.bilm.config import CharCnnConfig, ElmoConfig, LstmConfig  # noqa: E402
from elmo_model.bilm.modules import BiLM  # noqa: E402
from elmo_model.bilm.weights import save_weights  # noqa: E402
from probing.tagging.results import SuiteResult  # noqa: E402
from probing.tagging.suite import run_suite  # noqa: E402
from probing.tagging.suite_config import SuiteConfig  # noqa: E402

GOALS = {"cold": 15 * 60, "warm": 2 * 60, "peak_gb": 6.0}


def machine() -> str:
    """One paragraph describing this machine and the libraries."""
    cpu = platform.processor() or "?"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = "?"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory = f"{int(line.split()[1]) / 1024 ** 2:.1f} GiB"
    except OSError:
        pass
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (f"{cpu}; {os.cpu_count()} cores; {memory} RAM; load average {load}; python "
            f"{platform.python_version()}, torch {torch.__version__} ({torch.get_num_threads()} threads), "
            f"numpy {numpy.__version__}, scikit-learn {sklearn.__version__}")


def make_standin(directory: Path) -> Path:
    """A random biLM with elmo-mini's architecture (runs/elmo-mini/train_config.json: char CNN
    filters [[1,32],[2,32],[3,64],[4,128],[5,256]], 2 highway, LSTM 1024, projection 256,
    2 layers, skip connections), written as a model directory."""
    config = ElmoConfig(char_cnn=CharCnnConfig(filters=((1, 32), (2, 32), (3, 64), (4, 128), (5, 256))),
                        lstm=LstmConfig(dim=1024, projection_dim=256, n_layers=2, use_skip_connections=True))
    torch.manual_seed(1234)
    model = BiLM(config)
    directory.mkdir(parents=True, exist_ok=True)
    config.to_json(directory / "options.json")
    save_weights(model, directory / "weights.hdf5")
    return directory


def child(args: argparse.Namespace) -> int:
    """Run the suite once in this process; print one JSON line with seconds and peak RSS."""
    config = SuiteConfig(probe_cache=not args.no_probe_cache)
    start = time.perf_counter()
    result = run_suite(args.model, args.tasks, data_root=args.data_root, cache_dir=args.cache_dir,
                       limit=args.limit, config=config)
    seconds = time.perf_counter() - start
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    if args.out:
        result.to_json(args.out)
    print(json.dumps({"seconds": seconds, "peak_gb": peak_kb / 1024 ** 2, "timings": result.timings,
                      "task_timings": {t.task: t.timings for t in result.tasks}}))
    return 0


def run_child(args: argparse.Namespace, cache_dir: Path, no_probe_cache: bool, out: Path | None) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--model", str(args.model),
               "--cache-dir", str(cache_dir), "--tasks", *args.tasks]
    if args.data_root:
        command += ["--data-root", str(args.data_root)]
    if args.limit is not None:
        command += ["--limit", str(args.limit)]
    if no_probe_cache:
        command.append("--no-probe-cache")
    if out is not None:
        command += ["--out", str(out)]
    done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True, cwd=PROJECT)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="elmo-mini", help="shipped model name or model directory")
    parser.add_argument("--standin", action="store_true", help="bench a random biLM shaped like elmo-mini instead")
    parser.add_argument("--tasks", nargs="+", default=["pos", "chunk"])
    parser.add_argument("--data-root", type=Path, default=None)
    parser.add_argument("--limit", type=int, default=None, help="first N sentences of each split (a quick check)")
    parser.add_argument("--keep-cache", type=Path, default=None, help="use and keep this (empty) cache directory")
    parser.add_argument("--out", type=Path, default=None, help="also write the cold run's result JSON here")
    parser.add_argument("--no-retrained", action="store_true",
                        help="skip the third run (activations cached, every probe retrained)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cache-dir", type=Path, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--no-probe-cache", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)

    work = Path(tempfile.mkdtemp(prefix="probe-suite-bench-"))
    try:
        if args.standin:
            args.model = make_standin((args.keep_cache or work).parent / "standin-elmo-mini"
                                      if args.keep_cache else work / "standin-elmo-mini")
        cache_dir = args.keep_cache or work / "cache"
        if cache_dir.exists() and any(cache_dir.iterdir()):
            print(f"error: {cache_dir} is not empty: a cold run needs an empty cache", file=sys.stderr)
            return 2
        result_path = args.out or work / "result.json"
        print(f"machine: {machine()}")
        print(f"model: {args.model}; tasks: {' '.join(args.tasks)}; limit: {args.limit}")
        runs = {}
        plan = [("cold", False), ("warm", False)] + ([] if args.no_retrained else [("warm, probes retrained", True)])
        for name, no_probe_cache in plan:
            runs[name] = run_child(args, cache_dir, no_probe_cache, result_path if name == "cold" else None)
            r = runs[name]
            print(f"{name:24} {r['seconds']:8.1f} s   peak RSS {r['peak_gb']:.2f} GB", flush=True)
        print()
        print(f"goals: cold <= {GOALS['cold'] / 60:.0f} min: {runs['cold']['seconds'] / 60:.1f} min "
              f"({'met' if runs['cold']['seconds'] <= GOALS['cold'] else 'MISSED'}); "
              f"warm <= {GOALS['warm'] / 60:.0f} min: {runs['warm']['seconds']:.1f} s "
              f"({'met' if runs['warm']['seconds'] <= GOALS['warm'] else 'MISSED'}); "
              f"peak <= {GOALS['peak_gb']:.0f} GB: {max(r['peak_gb'] for r in runs.values()):.2f} GB "
              f"({'met' if max(r['peak_gb'] for r in runs.values()) <= GOALS['peak_gb'] else 'MISSED'})")
        print("\ncold run, seconds per stage (all tasks):")
        for stage, seconds in sorted(runs["cold"]["timings"].items(), key=lambda kv: -kv[1]):
            print(f"  {stage:20} {seconds:8.1f}")

        print()
        print(SuiteResult.from_json(result_path).table())
        size = sum(f.stat().st_size for f in Path(cache_dir).rglob("*") if f.is_file())
        print(f"\ncache size: {size / 1e9:.2f} GB in {cache_dir}")
    finally:
        shutil.rmtree(work, ignore_errors=True)  # a --keep-cache directory lives elsewhere
    return 0


if __name__ == "__main__":
    sys.exit(main())
