"""The speed goals in one command: the forward's and the training step's ratios beside the same
run's matmul rates, and the app tour on a full-size model, each beside its goal.

    python bench/speed_goals.py                          # the whole check (minutes on 2 cores)
    python bench/speed_goals.py --baseline /tmp/base     # batch 1 against another checkout too (its 2x goal)
    python bench/speed_goals.py --no-app                 # without the browser tour
    python bench/speed_goals.py --no-app --no-report     # without the tour and the reports (minutes)
    python bench/speed_goals.py --quick --no-app         # every step in seconds, on tiny shapes (a test)

1. The machine: the CPU's model and family, its bf16 and AMX units, torch, threads; the fp32 and
   bf16 matmul rates (2048^3 ``torch.mm``), measured before and after the forward and averaged.
2. The forward (``bench/bilm_throughput.py``'s measure): the full-size ELMo shape with random
   weights, 20-token sentences, batch 32 and 1, fp32 and bf16 (where this CPU's bf16 units pay),
   the LSTM step compiled first; tokens/s and GFLOP/s over the same run's matmul rate in its own
   precision. With ``--baseline DIR`` (``git worktree add DIR <commit>``) batch 1 is also timed
   against that checkout's ``elmo_model``, the two alternating.
3. The training step (``bench/training_step.py``'s measure): elmo-mini's shape, 4,000-token
   batches, the training Function and autograd through the time loop (the path before it), fp32
   and bf16, interleaved; medians of ``--rounds``.
4. The app tour (``bench/app_timing.py``, its own process and headless Chromium) on a full-size
   model: ``--model DIR``, else random full-size weights written to a temporary folder. Skipped,
   saying why, with ``--no-app`` or without Chromium and Playwright.
5. The README's report, cold (``bench/report_time.py``'s run: a fresh cache, PNG figures where
   Chromium is here): on elmo-mini and on random full-size weights (``--report-models``).
   Skipped, saying why, with ``--no-report``; ``--quick`` runs it on the fixture model's first
   sentences.
6. The goals, one line each: met, NOT MET, or not measured and why.

Ratios are from this run only (these machines are noisy: compare runs by their ratios); the
absolute figures belong to the machine printed at the top.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

import torch  # noqa: E402

from bench import bilm_throughput as forward  # noqa: E402
from bench import training_step  # noqa: E402
from elmo_model.bilm.config import ElmoConfig  # noqa: E402
from elmo_model.bilm.modules import BiLM  # noqa: E402
from elmo_model.bilm.precision import EMULATED_BF16, bf16_support, cpu_bf16_instructions  # noqa: E402
from elmo_model.bilm.weights import save_weights  # noqa: E402

#: the forward's share of its own precision's matmul rate at batch 32 (bf16: AMD Zen 4/5; with AMX 0.30)
FORWARD_GOALS = {"fp32": 0.70, "bf16": 0.50, "bf16 with AMX": 0.30}
BATCH_1_GOAL = 2.0  # x the baseline checkout's tokens/s
TRAINING_GOALS = {"bf16 / fp32": 2.0, "bf16 / bf16 through the loop": 1.5}
APP_GOALS = {"first visit": 30.0, "later visit": 3.0, "typing": 2.0}  # seconds, the slowest of the repeats
REPORT_GOALS = {"elmo-mini": 6.0, "full-size": 12.0}  # minutes, the README's report with a cold cache


def cpu_line(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """'model name (family F, model M)' from /proc/cpuinfo (the platform's processor elsewhere): the
    family tells AMD Zen 4 (25) from Zen 5 (26), which share a model name."""
    fields: dict[str, str] = {}
    try:
        for line in cpuinfo.read_text(encoding="utf-8", errors="replace").splitlines():
            if not line.strip():
                break  # the first processor's block is enough
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        return platform.processor() or platform.machine()
    return (f"{fields.get('model name', platform.machine())} (family {fields.get('cpu family', '?')}, "
            f"model {fields.get('model', '?')})")


class Goals:
    """The goal lines, printed at the end."""

    def __init__(self, quick: bool = False) -> None:
        self.lines: list[str] = []
        self.quick = quick  # tiny shapes: the figures show the check runs, they judge no goal

    def add(self, what: str, figure: str, met: bool | None, why: str = "") -> None:
        if self.quick and met is not None:
            met, why = None, "--quick: tiny shapes, not the goal's"
        verdict = "met" if met else ("not measured" if met is None else "NOT MET")
        self.lines.append(f"- {what}: {figure}: {verdict}" + (f" ({why})" if why else ""))

    def print(self) -> None:
        print("\n## goals")
        for line in self.lines:
            print(line)


def section(title: str) -> None:
    print(f"\n## {title}", flush=True)


def measure_forward(args: argparse.Namespace, goals: Goals, bf16_usable: bool, amx: bool) -> None:
    section("2. the forward")
    options = forward.FIXTURE if args.quick else forward.FULL_SIZE
    name = "bilm-tf fixture (--quick)" if args.quick else "full-size ELMo shape"
    precisions = ["fp32"] + (["bf16"] if bf16_usable else [])
    seconds = 0.05 if args.quick else args.seconds
    fp32_before = forward.matmul_gflops(seconds / 2)
    bf16_rate = forward.matmul_gflops(min(seconds / 2, 2.0), torch.bfloat16, 512 if args.quick else 2048) \
        if bf16_usable else None
    model = forward.model_from_options(options)
    baseline = None
    if args.baseline is not None:
        baseline = forward.baseline_bilm_class(args.baseline)(type(model.config).from_options(options)).eval()
        baseline.load_state_dict(model.state_dict())
    per_token = forward.flops_per_position(model.config)["total"] * (forward.SENTENCE_TOKENS + 2) \
        / forward.SENTENCE_TOKENS
    rows = []
    for batch in (32, 1):
        for precision in precisions:
            model.set_precision(precision)
            try:
                compiled = forward.compile_fused_step(model, [batch])
            except SystemExit as err:  # no C++ compiler: the eager step, said once
                compiled = None
                if precision == precisions[0] and batch == 32:
                    print(f"the LSTM step runs eager: {err}")
            tps = forward.tokens_per_second(model, batch, seconds)
            versus = None
            if baseline is not None and batch == 1:
                baseline.set_precision(precision)
                versus = forward.versus_baseline(model, baseline, batch, seconds, rounds=2 if args.quick else 8)
            rows.append((batch, precision, tps, tps * per_token / 1e9, versus, compiled))
            print(f"{name}, batch {batch}, {precision}: {tps:,.0f} tokens/s"
                  + (f" (step compiled in {compiled:.1f} s)" if compiled is not None else ""), flush=True)
    fp32_rate = (fp32_before + forward.matmul_gflops(seconds / 2)) / 2
    print(f"matmul (2048^3 torch.mm): fp32 {fp32_rate:.0f} GFLOP/s"
          + (f", bf16 {bf16_rate:.0f} GFLOP/s ({bf16_rate / fp32_rate:.2f}x fp32)" if bf16_rate else
             ", bf16 not timed (this CPU's bf16 units do not pay)"))
    print(f"{'model':<28}{'batch':>6}{'prec':>6}{'tokens/s':>11}{'GFLOP/s':>10}{'of own matmul':>15}"
          + (f"{'vs baseline':>13}" if baseline is not None else ""))
    for batch, precision, tps, gflops, versus, _ in rows:
        own = gflops / (bf16_rate if precision == "bf16" else fp32_rate)
        print(f"{name:<28}{batch:>6}{precision:>6}{tps:>11,.0f}{gflops:>10.1f}{own:>15.2f}"
              + (f"{versus:>12.2f}x" if versus is not None else ("" if baseline is None else f"{'':>13}")))
        if batch == 32:
            key = "bf16 with AMX" if precision == "bf16" and amx else precision
            goal = FORWARD_GOALS[key]
            goals.add(f"forward, batch 32, {precision} >= {goal:.2f} of the {precision} matmul rate"
                      + (" (a CPU with AMX)" if key.endswith("AMX") else ""), f"{own:.2f} ({tps:,.0f} tokens/s)",
                      own >= goal)
    for precision in precisions:
        versus = next(v for b, p, _, _, v, _ in rows if b == 1 and p == precision)
        goals.add(f"forward, batch 1, {precision} >= {BATCH_1_GOAL:g}x the baseline",
                  f"{versus:.2f}x" if versus is not None else "-",
                  None if versus is None else versus >= BATCH_1_GOAL, "" if versus is not None else "needs --baseline")
    if not bf16_usable:
        goals.add("forward, batch 32, bf16", "-", None, "this CPU's bf16 units do not pay: bf16 is not timed")


def measure_training(args: argparse.Namespace, goals: Goals, bf16: str) -> None:
    section("3. the training step")
    step_args = training_step.build_parser().parse_args(
        ["--rounds", str(1 if args.quick else args.rounds), "--config", "tiny" if args.quick else "mini",
         "--threads", str(args.threads)] + (["--data-root", str(args.data_root)] if args.data_root else []))
    rates = training_step.time_steps(step_args, bf16)
    training_step.print_rates(rates, bf16)
    median = {v: statistics.median(r) for v, r in rates.items()}
    emulated = "" if bf16 == "bf16" else "bf16 emulated: not a bf16 speed"
    for (what, goal), (top, bottom) in zip(TRAINING_GOALS.items(), ((("function", bf16), ("function", "fp32")),
                                                                     (("function", bf16), ("loop", bf16)))):
        ratio = median[top] / median[bottom]
        goals.add(f"training step, the Function's {what} >= {goal:g}x", f"{ratio:.2f}x",
                  None if emulated else ratio >= goal, emulated)


def write_full_size(folder: Path) -> Path:
    """Random weights in the full-size ELMo shape, written as a model folder the app opens."""
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    save_weights(BiLM(ElmoConfig.from_options(forward.FULL_SIZE)), folder / "weights.hdf5")
    (folder / "options.json").write_text(json.dumps(forward.FULL_SIZE, indent=2), encoding="utf-8")
    return folder


def app_rows(output: str) -> dict[str, float]:
    """bench/app_timing.py's table: measure -> its largest value (the slowest of the repeats)."""
    table = output.split("measure (s)", 1)[-1] if "measure (s)" in output else ""
    rows = {}
    for line in table.splitlines():
        found = re.match(r"(.+?)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\b", line)
        if found:
            rows[found.group(1).strip()] = float(found.group(4))
    return rows


def measure_app(args: argparse.Namespace, goals: Goals) -> None:
    section("4. the app tour")
    why = "--no-app" if args.no_app else None
    if why is None:
        try:
            from bench import app_timing
            app_timing.import_playwright()
            app_timing.chromium_path(None)
        except (ImportError, SystemExit, RuntimeError) as err:
            why = f"no browser to drive: {str(err).splitlines()[0] if str(err) else type(err).__name__}"
    if why is not None:
        print(f"skipped: {why}")
        goals.add("the app's pages", "-", None, why)
        return
    with tempfile.TemporaryDirectory(prefix="speed-goals-") as scratch:
        model = args.model or str(write_full_size(Path(scratch) / "full-size"))
        command = [sys.executable, str(PROJECT / "bench" / "app_timing.py"), "--model", model, "--repeats",
                   str(args.app_repeats), "--timeout", str(args.app_timeout)]
        if args.data_root:
            command += ["--data-root", str(args.data_root)]
        print("$ " + " ".join(command), flush=True)
        done = subprocess.run(command, capture_output=True, text=True, cwd=PROJECT)
    print(done.stdout[-6000:] + done.stderr[-2000:])
    rows = app_rows(done.stdout)
    if done.returncode != 0 or not rows:
        goals.add("the app's pages", "-", None, f"bench/app_timing.py exited {done.returncode}")
        return
    kinds = {"first visit": [v for k, v in rows.items() if k.endswith(("cold server: first figure",
                                                                        "1st visit: first figure"))],
             "later visit": [v for k, v in rows.items() if k.endswith(("warm: first figure", "later: first figure"))],
             "typing": [v for k, v in rows.items() if k == "typing: figure redrawn"]}
    for kind, values in kinds.items():
        goal = APP_GOALS[kind]
        what = f"the app, {kind}: every first figure <= {goal:g} s" if kind != "typing" \
            else f"the app, typing -> redrawn figure <= {goal:g} s"
        goals.add(what, f"slowest {max(values):.2f} s of {len(values)}" if values else "-",
                  max(values) <= goal if values else None, "" if values else "not in the tour's table")


def measure_report(args: argparse.Namespace, goals: Goals) -> None:
    section("5. the README's report, cold")
    if args.no_report:
        print("skipped: --no-report")
        goals.add("the README's report, cold", "-", None, "--no-report")
        return
    from bench import app_timing, report_time
    from probing.data import data_root

    try:
        app_timing.chromium_path(None)
        no_png = False
    except app_timing.BenchError:
        no_png = True  # said in the goal's line: the PNG figures were not drawn
    with tempfile.TemporaryDirectory(prefix="speed-goals-report-") as scratch:
        for name in args.report_models[:1] if args.quick else args.report_models:
            folder = Path(scratch) / name
            request = argparse.Namespace(model=name, tasks=["pos", "chunk", "wsd"], words=["bank", "play"],
                                         seed=0, data_root=args.data_root, limit=None, semcor_limit=None,
                                         no_png=no_png)
            if args.quick:  # the fixture's first sentences: the run works, the figure judges nothing
                request.model = str(data_root(args.data_root) / "fixtures" / "bilm_tf")
                request.tasks, request.words, request.limit, request.semcor_limit = ["pos"], [], 20, 20
            elif name == "full-size":
                request.model = str(write_full_size(folder / "model"))
            print(f"{name}: python -m probing.report --model {request.model} (cold cache)", flush=True)
            seconds, peak_gb = report_time.run_report(request, folder / "cache", folder / "report")
            print(f"{name}: {report_time.minutes(seconds)}, peak RSS of the reports so far {peak_gb:.2f} GB", flush=True)
            goal = REPORT_GOALS.get(name)
            goals.add(f"the README's report, cold, {name} <= {goal:g} min" if goal else f"the README's report, {name}",
                      f"{seconds / 60:.1f} min" + (" (without PNG figures: no Chromium)" if no_png else ""),
                      None if goal is None else seconds <= goal * 60, "" if goal else "no goal for this model")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=6.0, help="time per forward measurement (default 6)")
    parser.add_argument("--rounds", type=int, default=3, help="training-step rounds (default 3)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    parser.add_argument("--baseline", type=Path, default=None, help="a checkout to time batch 1 against")
    parser.add_argument("--model", default=None,
                        help="the app tour's model (default: random full-size weights in a temporary folder)")
    parser.add_argument("--no-app", action="store_true", help="skip the browser tour")
    parser.add_argument("--app-repeats", type=int, default=1, help="the tour's --repeats (default 1)")
    parser.add_argument("--app-timeout", type=float, default=400.0, help="the tour's --timeout (default 400 s)")
    parser.add_argument("--data-root", type=Path, default=None, help="default: $ELMO_WORKBENCH_DATA")
    parser.add_argument("--no-report", action="store_true", help="skip the cold reports")
    parser.add_argument("--report-models", nargs="+", default=list(REPORT_GOALS), metavar="MODEL",
                        help="the models the cold report runs on: elmo-mini, full-size (random weights), or a "
                             "model name or folder (default: elmo-mini full-size)")
    parser.add_argument("--quick", action="store_true", help="tiny shapes and one round: a check that it runs")
    args = parser.parse_args(argv)
    if args.seconds <= 0 or args.rounds < 1 or args.threads < 1 or args.app_repeats < 1:
        parser.error("--seconds, --rounds, --threads and --app-repeats take positive numbers")
    if args.baseline is not None and not (args.baseline / "elmo_model").is_dir():
        parser.error(f"--baseline {args.baseline}: no elmo_model folder there (a checkout: git worktree add DIR REV)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    units = cpu_bf16_instructions()  # the project's own reading of the bf16 and AMX units
    support = bf16_support()
    amx = "amx_bf16" in units
    section("1. the machine")
    print(f"CPU: {cpu_line()}; {os.cpu_count()} cores; bf16 units: {'avx512_bf16' in units}, AMX: {amx}")
    print(f"torch {torch.__version__}, {args.threads} threads; bf16 {'pays' if support.usable else 'does not pay'} "
          f"here ({support.reason}); load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    goals = Goals(args.quick)
    measure_forward(args, goals, support.usable, amx)
    measure_training(args, goals, "bf16" if support.usable else EMULATED_BF16)
    measure_app(args, goals)
    measure_report(args, goals)
    goals.print()
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
