"""Every command that starts a background thread, run again and again: does each run exit 0, with
no abort at interpreter exit ("terminate called without an active exception", SIGABRT)?

    python bench/clean_exits.py --runs 20 --busy        # each command 20 times, the other core kept busy
    python bench/clean_exits.py --runs 1 --model DIR    # a smoke run on another model folder

The commands, each on the fixture model (``--model``, default the data root's ``fixtures/bilm_tf``)
with tiny sizes, so a run is mostly Python's start-up and its threads' lives:

- ``train``: the trainer for 3 steps on a small text (its batches made by a background thread,
  progress bars, a checkpoint and an export at the end);
- ``embed``: the embedder with the compiled LSTM step on (``ELMO_WORKBENCH_FUSED_STEP=1``: the
  background compile worker, which the process may end in the middle of);
- ``compile-exit``: a process that queues three kinds of call and ends while the first compiles.

``--busy`` keeps one core busy with a spinning process for the whole run, as a loaded machine
would. Prints one row per command: runs, exit 0, aborts (SIGABRT or "terminate called"), other
failures, and the median wall time of a run; exits 1 if any run failed.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
ABORT_TEXT = "terminate called"

COMPILE_EXIT = textwrap.dedent("""
    import torch
    from elmo_model.bilm import compile_engine

    fn = compile_engine.CompiledFunction("scale", lambda x, f: torch.tanh(x * f) + 1.0,
                                         lambda x, f: [(torch.zeros(3, 4), f)], lambda x, f: (x.dtype, x.dim(), f),
                                         group="g")
    compile_engine.enable("g")
    for rank in (2, 3, 4):
        fn(torch.randn(*([5] * rank)), 0.5)
""")

TEXT = "The bank was closed on Sunday .\nWe sat on the river bank and watched the boats .\n" * 40


def _commands(model: Path, scratch: Path) -> dict[str, tuple[list[str], dict[str, str]]]:
    """name -> (argv, extra environment) of each command a run starts."""
    (scratch / "text.txt").write_text(TEXT, encoding="utf-8")
    python = sys.executable
    tiny = ["--vocab-size", "60", "--vocab-min-count", "1", "--char-embedding-dim", "4", "--filters", "[[1, 8], [2, 8]]",
            "--n-highway", "1", "--lstm-dim", "16", "--projection-dim", "8", "--softmax-cutoffs", "30",
            "--batch-tokens", "100", "--max-sentence-tokens", "20", "--threads", "1", "--precision", "fp32",
            "--max-steps", "3", "--log-every", "1"]
    return {
        "train": ([python, "-m", "elmo_model.training.train", "--train", str(scratch / "text.txt"),
                   "--out", str(scratch / "run-{i}"), "--export-to", str(scratch / "export-{i}"), *tiny], {}),
        "embed": ([python, "-m", "elmo_model.corpus.embedder", "--model", str(model), str(scratch / "text.txt"),
                   str(scratch / "out-{i}.hdf5")], {"ELMO_WORKBENCH_FUSED_STEP": "1"}),
        "compile-exit": ([python, "-c", COMPILE_EXIT], {"ELMO_WORKBENCH_FUSED_STEP": ""}),
    }


def _spin() -> None:
    while True:
        pass


def run_each(model: Path, runs: int, names: list[str]) -> dict[str, dict]:
    """Run each command ``runs`` times in turn; per command its counts and wall times."""
    results = {}
    with tempfile.TemporaryDirectory(prefix="clean-exits-") as tmp:
        commands = _commands(model, Path(tmp))
        env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(PROJECT))
        for name in names:
            argv, extra = commands[name]
            row = {"runs": 0, "ok": 0, "aborts": 0, "other": 0, "seconds": [], "last_error": ""}
            for i in range(runs):
                start = time.perf_counter()
                done = subprocess.run([a.replace("{i}", str(i)) for a in argv], cwd=PROJECT, capture_output=True,
                                      text=True, timeout=600, env={**env, **extra})
                row["seconds"].append(time.perf_counter() - start)
                row["runs"] += 1
                if done.returncode == -signal.SIGABRT or ABORT_TEXT in done.stderr:
                    row["aborts"] += 1
                    row["last_error"] = done.stderr[-400:]
                elif done.returncode != 0:
                    row["other"] += 1
                    row["last_error"] = done.stderr[-400:]
                else:
                    row["ok"] += 1
            results[name] = row
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20, help="runs of each command (default 20)")
    parser.add_argument("--busy", action="store_true", help="keep one core busy with a spinning process")
    parser.add_argument("--model", type=Path, default=None,
                        help="the model folder (default: $ELMO_WORKBENCH_DATA/fixtures/bilm_tf)")
    parser.add_argument("--only", nargs="+", choices=("train", "embed", "compile-exit"), default=None)
    args = parser.parse_args(argv)
    model = args.model or Path(os.environ.get("ELMO_WORKBENCH_DATA", PROJECT.parent / "shared")) / "fixtures" / "bilm_tf"
    spinner = multiprocessing.Process(target=_spin, daemon=True) if args.busy else None
    if spinner:
        spinner.start()
    try:
        results = run_each(model, args.runs, args.only or ["train", "embed", "compile-exit"])
    finally:
        if spinner:
            spinner.terminate()
    print(f"clean exits: {args.runs} runs a command{', one core kept busy' if args.busy else ''}; "
          f"{os.cpu_count()} cores")
    print(f"{'command':<14}{'runs':>6}{'exit 0':>8}{'aborts':>8}{'other':>7}{'median s':>10}")
    for name, row in results.items():
        print(f"{name:<14}{row['runs']:>6}{row['ok']:>8}{row['aborts']:>8}{row['other']:>7}"
              f"{statistics.median(row['seconds']):>10.1f}")
    failed = {name: row["last_error"] for name, row in results.items() if row["ok"] != row["runs"]}
    for name, error in failed.items():
        print(f"{name}: last failure: {error}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
