"""CPU time of the probing suite's probe training alone, for one or several source trees, alternating.

    python bench/probe_training.py --cache-dir DIR                       # this tree
    python bench/probe_training.py --cache-dir DIR --code /tmp/before .  # two trees, alternating
    python bench/probe_training.py --cache-dir DIR --limit 2000 --rounds 3 --tasks pos

Every probe of ``probing.tagging.suite.run_suite`` is retrained (the probe cache off) on
activations already in ``--cache-dir`` (a first run fills it: that extraction is not timed). Each
run is a fresh child process with ``--threads`` torch threads (default 1) that imports
``probing`` from one of the ``--code`` trees (a checkout or ``git archive`` of another commit),
so two versions of the probes are compared under the same load, round after round. The stage
times are the suite's own stages measured in CPU seconds of the main thread (``time.thread_time``,
which with one torch thread is all the probes' compute), so other work on the machine moves them
less than wall time.

Prints, per tree, the CPU seconds of each stage (median over the rounds) and whether every
probe's numbers (test interval, dev score, alpha, s_j) are the same as the first tree's; with
``--show`` the numbers that differ.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))


def child(args: argparse.Namespace) -> int:
    """One suite run in this process, probes retrained; prints one JSON line."""
    sys.path.insert(0, str(Path(args.code).resolve()))
    import torch

    torch.set_num_threads(args.threads)
    import probing.tagging.suite as suite

    class _CpuClock:  # the suite's stage timer, in CPU seconds of this thread
        perf_counter = staticmethod(time.thread_time)

    suite.time = _CpuClock
    config = suite.SuiteConfig(probe_cache=False, random_bilm=not args.no_random_bilm)
    start_cpu, start_wall = time.process_time(), time.perf_counter()
    result = suite.run_suite(args.model, args.tasks, data_root=args.data_root, cache_dir=args.cache_dir,
                             limit=args.limit, config=config, seed=args.seed)
    numbers = {}
    for task in result.tasks:
        scores = [layer.probe for layer in task.layers] + [layer.control for layer in task.layers]
        scores += [h for layer in task.layers for h in layer.halves]
        scores += list(task.mix.probes) if task.mix is not None else []
        scores += list(task.baselines.random_bilm) + list(task.baselines.same_data)
        for s in scores:
            numbers[f"{task.task} {s.kind} {s.name}"] = {
                "test": [round(s.test.estimate, 6), round(s.test.low, 6), round(s.test.high, 6)],
                "dev": round(s.dev_score, 6), "alpha": s.alpha, "n_iter": s.n_iter,
                "mix": [round(x, 4) for x in s.mix_weights]}
    stages = {k: v for k, v in result.timings.items() if k.startswith("probe_")}
    print(json.dumps({"cpu": time.process_time() - start_cpu, "wall": time.perf_counter() - start_wall,
                      "stages": stages, "numbers": numbers}))
    return 0


def run_child(args: argparse.Namespace, code: Path) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--code", str(code), "--model",
               str(args.model), "--cache-dir", str(args.cache_dir), "--tasks", *args.tasks,
               "--threads", str(args.threads), "--seed", str(args.seed)]
    for flag, value in (("--data-root", args.data_root), ("--limit", args.limit)):
        if value is not None:
            command += [flag, str(value)]
    if args.no_random_bilm:
        command.append("--no-random-bilm")
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    done = subprocess.run(command, check=True, stdout=subprocess.PIPE, text=True, cwd=code, env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cache-dir", type=Path, required=True, help="activation cache (filled by a first run)")
    parser.add_argument("--code", type=Path, nargs="+", default=[PROJECT], help="source trees to compare")
    parser.add_argument("--model", default="elmo-mini")
    parser.add_argument("--tasks", nargs="+", default=["pos", "chunk"])
    parser.add_argument("--data-root", type=Path, default=None)
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-random-bilm", action="store_true", help="skip the random-biLM and same-data probes")
    parser.add_argument("--show", action="store_true", help="print the numbers that differ from the first tree's")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        args.code = args.code[0]
        return child(args)
    from elmo_model.models.names import model_files  # no torch

    args.model = str(model_files(args.model, args.data_root, None)[0])  # a name means this project's folder
    if not args.cache_dir.is_dir():
        run_child(args, args.code[0])  # fills the activation cache; not timed
    runs: dict[Path, list[dict]] = {code: [] for code in args.code}
    for round_ in range(args.rounds):
        for code in args.code:
            runs[code].append(run_child(args, code))
            print(f"round {round_ + 1} {code}: {runs[code][-1]['cpu']:.1f} CPU s "
                  f"({runs[code][-1]['wall']:.1f} s wall)", flush=True)
    first = runs[args.code[0]][0]["numbers"]
    print(f"\nCPU seconds, median of {args.rounds} round(s), {args.threads} thread(s), load average "
          f"{os.getloadavg()[0]:.2f}:")
    stages = sorted({s for rs in runs.values() for r in rs for s in r["stages"]})
    print(f"{'stage':16}" + "".join(f"{str(c)[-24:]:>26}" for c in args.code))
    for stage in stages + ["cpu"]:
        row = [statistics.median(r["stages"].get(stage, 0.0) if stage != "cpu" else r["cpu"] for r in runs[c])
               for c in args.code]
        print(f"{stage:16}" + "".join(f"{x:26.1f}" for x in row))
    for code in args.code:
        numbers = runs[code][0]["numbers"]
        differ = [k for k in first if {**first[k], "n_iter": 0} != {**numbers.get(k, {}), "n_iter": 0}]
        print(f"{code}: {len(differ)} of {len(first)} probes' numbers differ from {args.code[0]}'s")
        if args.show:
            for k in differ:
                print(f"  {k}: {first[k]} -> {numbers.get(k)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
