"""Every script in bench/ and scripts/ runs end to end for seconds, on the bilm-tf fixture model with
tiny sizes and one repeat, so a benchmark that breaks turns the suite red rather than its next user.

Each script runs as a user runs it (``python bench/NAME.py ...`` in a process of its own, the data
root in ``$ELMO_WORKBENCH_DATA``, one torch thread); what it prints or writes is checked for the
rows its figures live in. The figures themselves are not judged: they are timings of a tiny model
on a shared machine. The browser scripts drive Debian's Chromium as tests/test_browser.py does
(``bash scripts/install_browser.sh``). Three are run by tests of their own: ``bench/gpu_check.py``
(tests/test_gpu_check.py: the whole check on the CPU, ``--help`` and ``--pack``),
``scripts/gpu_job.py`` (tests/test_gpu_job.py) and ``scripts/fp16_model.py`` (the packer both of
those run); :func:`test_every_script_has_a_smoke_test` keeps the list whole.

The runs are started together when the module's first test asks, :data:`AT_ONCE` at a time in
the order of the tests (only those of the selected tests: ``-k`` starts no other), and each test
waits for its own. Each run is one process on one thread, much of it Python's start-up and
imports or a browser waiting on a server: two at a time keep two cores busy.
"""

import json
import os
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[1]
AT_ONCE = 2

#: Scripts whose runs live in another test file (script -> that file).
TESTED_ELSEWHERE = {"bench/gpu_check.py": "tests/test_gpu_check.py", "scripts/gpu_job.py": "tests/test_gpu_job.py",
                    "scripts/fp16_model.py": "tests/test_gpu_check.py"}


def run_script(script: str, *args, data_root: Path, timeout: float = 300, env: dict | None = None,
               expect: int = 0, command: tuple[str, ...] = (sys.executable,)) -> subprocess.CompletedProcess:
    """``python SCRIPT ARGS`` in the project folder with one torch thread (``command`` instead of
    ``python`` for a shell script); fails with the end of its output unless it exits with ``expect``."""
    environment = dict(os.environ, ELMO_WORKBENCH_DATA=str(data_root), OMP_NUM_THREADS="1")
    environment.update(env or {})
    done = subprocess.run([*command, str(PROJECT / script), *map(str, args)], cwd=PROJECT, env=environment,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == expect, (f"{script} exited {done.returncode}, not {expect}:\n{done.stdout[-3000:]}\n"
                                       f"{done.stderr[-3000:]}")
    return done


def FIXTURE(data_root: Path, scratch: Path) -> Path:
    """The bilm-tf fixture model, as an argument of :func:`smoke`."""
    return data_root / "fixtures" / "bilm_tf"


def SCRATCH(data_root: Path, scratch: Path) -> Path:
    """The run's own empty folder, as an argument of :func:`smoke`."""
    return scratch


def in_scratch(name: str):
    """A file ``name`` in the run's own folder, as an argument of :func:`smoke`."""
    return lambda data_root, scratch: scratch / name


@dataclass(frozen=True)
class Smoke:
    """What :func:`smoke` marks a test with: its script and, for a background run, the arguments."""

    script: str
    args: tuple | None  # None: the test runs the script itself


def smoke(script: str, *args):
    """Marks a test as the smoke test of ``script``; with ``args`` (:func:`FIXTURE` and :func:`SCRATCH`
    stand for the fixture model and the run's folder), the run it checks is started in the background
    (``done``, ``scratch``)."""
    def mark(test):
        test.smoke = Smoke(script, args or None)
        return test
    return mark


class Runs:
    """The background runs of the selected tests: started at once, :data:`AT_ONCE` at a time."""

    def __init__(self, items, data_root: Path, tmp_path_factory):
        self.pool = ThreadPoolExecutor(max_workers=AT_ONCE)
        self.futures, self.scratch = {}, {}
        for item in items:
            spec = getattr(getattr(item, "function", None), "smoke", None)
            if spec is None or spec.args is None or spec.script in self.futures:
                continue
            scratch = tmp_path_factory.mktemp(Path(spec.script).stem)
            args = [arg(data_root, scratch) if callable(arg) else arg for arg in spec.args]
            self.scratch[spec.script] = scratch
            self.futures[spec.script] = self.pool.submit(run_script, spec.script, *args, data_root=data_root)


@pytest.fixture(scope="module")
def runs(request, data_root, tmp_path_factory):
    """The module's background runs (:class:`Runs`); the ones not started yet are dropped at the end."""
    started = Runs(request.session.items, data_root, tmp_path_factory)
    yield started
    started.pool.shutdown(wait=True, cancel_futures=True)


@pytest.fixture
def done(request, runs) -> subprocess.CompletedProcess:
    """The finished run of this test's script (it exited 0)."""
    return runs.futures[request.function.smoke.script].result()


@pytest.fixture
def scratch(request, runs) -> Path:
    """The folder this test's run wrote in."""
    return runs.scratch[request.function.smoke.script]


def rows_starting(text: str, start: str) -> list[list[str]]:
    """The lines of ``text`` that start with ``start``, split after it."""
    return [line[len(start):].split() for line in text.splitlines() if line.startswith(start)]


def test_every_script_has_a_smoke_test():
    on_disk = {p.relative_to(PROJECT).as_posix() for folder in ("bench", "scripts")
               for p in (PROJECT / folder).iterdir() if p.suffix in (".py", ".sh")}
    here = {test.smoke.script for test in globals().values() if isinstance(getattr(test, "smoke", None), Smoke)}
    missing = on_disk - here - set(TESTED_ELSEWHERE)
    assert not missing, f"scripts without a smoke test: {sorted(missing)}"
    for script, test in TESTED_ELSEWHERE.items():
        assert Path(script).name in (PROJECT / test).read_text(encoding="utf-8"), f"{test} does not run {script}"
    assert not (here | set(TESTED_ELSEWHERE)) - on_disk, "a smoke test names a script that is not there"


# ---- the browser ------------------------------------------------------------------------------

@smoke("bench/app_timing.py", "--model", FIXTURE, "--repeats", 1, "--pages", "syntax", "--timeout", 120, "--prepared")
def test_app_timing_times_the_playground_a_typed_edit_and_the_syntax_page(done):
    """Prepare for class, then the playground's first paint, its figure and a typed edit redrawing
    it, and the syntax page's tree on its first and a later visit, in headless Chromium."""
    table = done.stdout.split("measure (s)", 1)[1]
    for measure in ("Prepare for class (the command)", "server start (HTTP health)", "playground cold server: first paint",
                    "playground warm: first figure", "typing: figure redrawn", "typing: run finished",
                    "syntax 1st visit: first figure", "syntax later: first figure"):
        (row,) = rows_starting(table, measure)
        assert row[0] == "1" and float(row[1]) > 0, (measure, row)
    assert "PROBLEM" not in done.stdout
    # bench/speed_goals.py judges the app's goals from this table
    from bench.speed_goals import app_rows
    rows = app_rows(done.stdout)
    assert rows["typing: figure redrawn"] > 0 and rows["syntax 1st visit: first figure"] > 0, rows
    assert rows["playground warm: first figure"] == float(rows_starting(table, "playground warm: first figure")[0][2])


@smoke("bench/class_load.py", "--visitors", 2, "--model", FIXTURE, "--pages", "--timeout", 120)
def test_class_load_takes_two_visitors_through_the_playground_at_once(done):
    """Two sessions at once on one server: a row each, no errors, the server's memory measured."""
    table = done.stdout.split("errors\n", 1)[1].split("\n\n", 1)[0]  # the rows under the table's header
    rows = {row[0]: row for row in (line.split() for line in table.splitlines())}
    assert set(rows) == {"1", "2"} and all(float(row[1]) > 0 and row[-1] == "0" for row in rows.values()), rows
    summary = next(line for line in done.stdout.splitlines() if line.startswith("2 visitors"))
    assert "2 page visits, 0 errors" in summary and float(summary.split("peak memory ")[1].split()[0]) > 0
    assert "PROBLEM" not in done.stdout


@smoke("scripts/screenshots.py", "--model", FIXTURE, "--pages", "playground", "--out", SCRATCH, "--max-kb", 150,
       "--timeout", 120)
def test_screenshots_saves_the_playground_within_its_size(done, scratch):
    from PIL import Image

    (png,) = scratch.glob("*.png")
    assert png.name == "playground.png" and 10_000 < png.stat().st_size <= 150 * 1024
    assert f"{png}: " in done.stdout
    with Image.open(png) as image:
        assert image.mode == "P" and image.width <= 1100  # scaled down and reduced to a palette


@smoke("scripts/install_browser.sh")
def test_install_browser_installs_chromium_only_where_it_is_missing(tmp_path, data_root):
    """With ``chromium`` on the PATH it does nothing; without, it asks apt for Debian's package
    (``apt-get`` and ``sudo`` are stand-ins here that only record their arguments)."""
    stubs, present = tmp_path / "bin", tmp_path / "present"
    stubs.mkdir()
    present.mkdir()
    calls = tmp_path / "calls.txt"
    for folder, name, body in ((stubs, "apt-get", ""), (stubs, "sudo", '"$@"\n'), (present, "chromium", "")):
        (folder / name).write_text(f'#!/bin/bash\necho "{name} $*" >> {calls}\n{body}', encoding="utf-8")
        (folder / name).chmod(0o755)
    for tool in ("id", "bash"):
        found = next(Path(d) / tool for d in ("/usr/bin", "/bin") if (Path(d) / tool).exists())
        (stubs / tool).symlink_to(found)
    bash = ("/bin/bash",)
    run_script("scripts/install_browser.sh", data_root=data_root, command=bash, env={"PATH": f"{stubs}:{present}"})
    assert not calls.exists()
    run_script("scripts/install_browser.sh", data_root=data_root, command=bash, env={"PATH": str(stubs)})
    apt = [line for line in calls.read_text(encoding="utf-8").splitlines() if line.startswith("apt-get")]
    assert apt == ["apt-get update -qq", "apt-get install -y -qq chromium"]  # through sudo unless root


# ---- the biLM and the trainer -----------------------------------------------------------------

@smoke("bench/bilm_throughput.py", "--seconds", 0.02, "--threads", 1, "--cpu-time", "--models", "fixture",
       "--batch-sizes", 1, 2, "--one-loop", "--baseline", PROJECT, "--fused")
def test_bilm_throughput_times_the_fixture_against_a_baseline_checkout(done):
    """Both precisions, two batch sizes, CPU time, the one-loop A/B, this checkout as its own baseline, and the
    fused step compiled before the timing and timed against the eager one."""
    assert "fp32, batch 2: fused step compiled in" in done.stdout
    assert done.stdout.splitlines()[0].endswith("1 threads, CPU time")
    rows = rows_starting(done.stdout.split("fp32 matmul", 1)[1], "bilm-tf fixture")
    assert {(r[0], r[1]) for r in rows if r[0] == "fp32"} == {("fp32", "1"), ("fp32", "2")}
    for row in rows:
        assert float(row[2]) > 0 and all(cell.endswith("x") for cell in row[-3:]), row
    assert any(r[0] == "bf16" for r in rows) or "bf16 rows skipped" in done.stdout


@smoke("bench/speed_goals.py", "--quick", "--no-app", "--no-report", "--threads", 1, "--baseline", PROJECT)
def test_speed_goals_prints_each_goal_beside_its_figure(done):
    """The forward (batch 32 and 1, batch 1 against this checkout as its baseline), the training step's
    ratios and the goal lines; --quick judges no goal (tiny shapes), --no-app says the tour was skipped."""
    goals = [line for line in done.stdout.split("## goals", 1)[1].splitlines() if line.startswith("- ")]
    assert any(line.startswith("- forward, batch 32, fp32 >= 0.70 of the fp32 matmul rate: 0.") for line in goals)
    batch_1 = [line for line in goals if line.startswith("- forward, batch 1, ")]
    assert batch_1 and all(re.search(r"baseline: \d+\.\d\dx: ", line) for line in batch_1), batch_1
    assert any(re.search(r"training step, the Function's \S+ / fp32 >= 2x: \d+\.\d\dx", line) for line in goals)
    # a CPU without bf16 units times the training step's bf16 emulated, and says so instead of judging it
    assert all(line.endswith(("(--quick: tiny shapes, not the goal's)", "(--no-app)", "(--no-report)",
                              "do not pay: bf16 is not timed)",
                              "(bf16 emulated: not a bf16 speed)"))
               for line in goals), goals
    assert "- the app's pages: -: not measured (--no-app)" in goals
    assert "- the README's report, cold: -: not measured (--no-report)" in goals
    assert "CPU: " in done.stdout and "(family " in done.stdout


def test_speed_goals_judges_each_cold_report_against_its_goal(monkeypatch, tmp_path, data_root, capsys):
    """The report section runs bench/report_time.py's cold report once per model (the report's own
    run is that script's smoke test) and judges each against its goal: 6 min for elmo-mini, 12 for
    the full-size shape, whose random weights it writes first."""
    from bench import report_time, speed_goals

    asked = []
    seconds = {"elmo-mini": 5.5 * 60, "full-size": 13.0 * 60}
    monkeypatch.setattr(speed_goals, "write_full_size", lambda folder: asked.append("written") or folder)
    monkeypatch.setattr(report_time, "run_report", lambda request, cache, out: (
        asked.append((Path(request.model).name, tuple(request.tasks), request.limit)) or
        (seconds["full-size" if Path(request.model).name == "model" else request.model], 3.5)))
    args = speed_goals.parse_args(["--data-root", str(data_root)])
    goals = speed_goals.Goals()
    speed_goals.measure_report(args, goals)
    goals.print()
    out = capsys.readouterr().out
    assert asked == [("elmo-mini", ("pos", "chunk", "wsd"), None), "written", ("model", ("pos", "chunk", "wsd"), None)]
    assert re.search(r"- the README's report, cold, elmo-mini <= 6 min: 5.5 min.*: met", out), out
    assert re.search(r"- the README's report, cold, full-size <= 12 min: 13.0 min.*: NOT MET", out), out


@smoke("bench/sense_gaps.py", "--model", FIXTURE, "--resamples", 50, "--json", lambda data_root, scratch: scratch / "gaps.json")
def test_sense_gaps_prints_both_checks_for_the_demo_and_held_out_sets(done, scratch):
    out = done.stdout
    assert "demo sets (data/demo)" in out and "held-out set" in out
    for word in ("bank", "bark", "play", "crane", "bat", "spring"):
        assert f"  {word} " in out, word
    checks = [line for line in out.splitlines() if line.startswith(("met:", "NOT met:"))]
    assert len(checks) == 2, out
    import json

    figures = json.loads((scratch / "gaps.json").read_text())
    assert set(figures["heldout_best_gap"]) == {"bank", "play", "bark", "crane", "bat", "spring"}


@smoke("bench/weight_checks.py", "--models", "mini", "--seconds", 0.05, "--rounds", 1, "--threads", 1)
def test_weight_checks_prices_each_rule_against_a_batch_1_forward(done):
    rows = [line for line in done.stdout.splitlines() if line.startswith("| mini |")]
    assert rows and rows[0].startswith("| mini | fp32 |"), done.stdout
    assert all(line.count("%)") == 4 for line in rows), rows  # sample, rows+columns, bits, fp64 sum


@smoke("bench/step_products.py", "--cell-dim", 64, "--projection-dim", 16, "--threads", 1, "--repeats", 3,
       "--memory-mb", 0.1)
def test_step_products_times_each_product_form_in_cache_and_from_memory(done):
    rows = [line.split() for line in done.stdout.splitlines() if line.startswith(("recurrent", "projection"))]
    forms = {(r[0], r[2], r[3]) for r in rows}
    assert forms == {(product, dtype, where) for product in ("recurrent", "projection")
                     for dtype in ("float32", "bfloat16") for where in ("cache", "memory")}, forms
    assert {"mm(x, W.t())", "mm(x, Wt) contiguous"} <= {" ".join(r[5:-2]) for r in rows}
    assert all(float(r[-2]) > 0 and float(r[-1]) > 0 for r in rows)


@smoke("bench/bf16_fidelity.py", "--model", FIXTURE, "--sentences", 20, "--limit", 20, "--semcor-limit", 50,
       "--cache-dir", SCRATCH, "--threads", 1)
def test_bf16_fidelity_compares_vectors_probes_and_wsd(done):
    vectors = done.stdout.split("1. vectors", 1)[1].split("\n\n", 1)[0]
    rows = rows_starting(vectors, "    ")
    assert [r[0] for r in rows] == ["0", "1", "2"] and all(0.99 < float(r[2]) <= 1.0 for r in rows), vectors
    probes = done.stdout.split("2. probes", 1)[1].split("\n\n", 1)[0]
    assert [r[0] for r in rows_starting(probes, "   pos")] == ["0", "1", "2"]
    assert [r[0] for r in rows_starting(probes, " chunk")] == ["0", "1", "2"]
    wsd = rows_starting(done.stdout.split("3. 1-NN WSD", 1)[1], "   layer")
    assert [r[0] for r in wsd] == ["0", "1", "2"] and all(r[-1] in ("yes", "NO") for r in wsd), wsd


@smoke("bench/bf16_training.py", "--config", "tiny", "--steps", 4, "--log-every", 2, "--threads", 1, "--out", SCRATCH)
def test_bf16_training_trains_the_tiny_shape_in_both_precisions(done, scratch):
    curve = [line.split() for line in done.stdout.split("gap", 1)[1].strip().splitlines()]
    assert [int(r[0]) for r in curve] == [2, 4] and all(float(r[1]) > 0 and float(r[2]) > 0 for r in curve), curve
    assert "tokens/s (mean over logging windows after the first): fp32" in done.stdout
    bf16 = done.stdout.split("training with ", 1)[1].split()[0]
    assert sorted(p.name for p in scratch.iterdir()) == sorted(["fp32", bf16])  # one run folder per precision


@smoke("bench/training_step.py", "--config", "tiny", "--rounds", 1, "--threads", 1)
def test_training_step_times_the_function_and_the_loop_in_both_precisions(done):
    rows = rows_starting(done.stdout.split("median over rounds:", 1)[1], "  ")[:4]
    assert [r[:2] for r in rows] == [["loop", "fp32"], ["function", "fp32"], ["loop", rows[2][1]],
                                     ["function", rows[2][1]]], rows
    assert all(float(r[2]) > 0 for r in rows)
    assert re.search(r"function \S+ / loop \S+ \d+\.\d\dx", done.stdout), done.stdout


@smoke("bench/char_cnn.py", "--tokens", 200, "--precisions", "fp32", "--repeats", 1, "--threads", 1)
def test_char_cnn_times_the_old_and_new_convolution(done):
    rows = [line.split() for line in done.stdout.splitlines() if " fp32 " in line]
    assert [" ".join(r[2:-3]) for r in rows] == ["char CNN forward+backward", "training step",
                                                  "char CNN forward (no grad)"], rows
    assert all(float(r[-3]) > 0 and float(r[-2]) > 0 for r in rows)


@smoke("bench/batch_pipeline.py", "--workers", 0, 1, "--batches", 2, "--batch-tokens", 2000, "--vocab-tokens", 5000,
       "--start-method", "fork", "--corpus", lambda data_root, scratch: data_root / "lm_corpus" / "wiki-valid.txt.gz")
def test_batch_pipeline_times_the_thread_and_a_worker(done):
    assert "corpus wiki-valid.txt.gz; batches of 2,000 tokens; 2 batches timed" in done.stdout
    thread, worker = rows_starting(done.stdout, "thread (prefetch 4)"), rows_starting(done.stdout, "1 worker process")
    assert len(thread) == len(worker) == 1 and thread[0][1] == worker[0][1]  # the same tokens both ways
    for row in thread + worker:  # first batch s, tokens, seconds, tokens/s, x thread, trainer CPU ms/batch
        assert float(row[3].replace(",", "")) > 0 and row[4].endswith("x") and float(row[5]) >= 0, row


@smoke("bench/distributed_training.py", "--config", "tiny", "--flops-config", "tiny", "--steps", 2, "--log-every", 1,
       "--processes", 2, "--threads-total", 2, "--lines", 300)
def test_distributed_training_runs_two_ranks(done):
    assert "PREDICTION for A100" in done.stdout
    assert re.search(r"2 process\(es\), 1 thread\(s\) each: [\d,]+ tokens in 2 steps", done.stdout), done.stdout
    (row,) = rows_starting(done.stdout.split("processes    tokens/s", 1)[1], "         2")
    assert float(row[0]) > 0


@smoke("bench/clean_exits.py", "--runs", "1", "--only", "train", "compile-exit")
def test_clean_exits_counts_each_commands_runs_and_aborts(done):
    rows = {row[0]: row[1:] for row in rows_starting(done.stdout, "") if row and row[0] in ("train", "compile-exit")}
    assert set(rows) == {"train", "compile-exit"}
    assert all(row[:4] == ["1", "1", "0", "0"] for row in rows.values()), rows  # runs, exit 0, aborts, other


@smoke("bench/kill_resume.py", "--instants", 1, "--jobs", "activations", "--sentences", 40)
def test_kill_resume_resumes_a_killed_extraction_to_the_same_result(done):
    assert "== activations: 1 instants" in done.stdout and "1 resumed results equal" in done.stdout


# ---- the probes and the report ----------------------------------------------------------------

@smoke("bench/probe_suite.py", "--model", FIXTURE, "--tasks", "pos", "--limit", 10, "--no-retrained")
def test_probe_suite_runs_cold_and_warm(done):
    for run in ("cold", "warm"):
        assert re.search(rf"^{run} +[\d.]+ s   peak RSS [\d.]+ GB$", done.stdout, re.MULTILINE), run
    assert "goals: cold <= 15 min" in done.stdout and "pos    layer 2" in done.stdout


@smoke("bench/probe_training.py", "--model", FIXTURE, "--tasks", "pos", "--limit", 10,
       "--cache-dir", in_scratch("cache"), "--rounds", 2)
def test_probe_training_times_every_probe_stage_of_the_suite(done, scratch):
    assert (scratch / "cache").is_dir()  # the first run filled the activation cache, untimed
    assert len(re.findall(r"^round [12] ", done.stdout, re.MULTILINE)) == 2
    stages = {row[0]: float(row[1]) for row in (line.split() for line in done.stdout.split("CPU seconds, ", 1)[1]
                                                .splitlines()[2:]) if len(row) == 2}
    assert {"probe_layer", "probe_control", "probe_mix", "cpu"} <= set(stages) and stages["cpu"] > 0, done.stdout
    (count,) = re.findall(r": 0 of (\d+) probes' numbers differ from ", done.stdout)
    assert int(count) >= 6  # three layers' probe and control at least


@smoke("bench/train_fraction.py", "--model", FIXTURE, "--tasks", "pos", "--limit", 30, "--fractions", 1, 0.5)
def test_train_fraction_compares_every_figure_with_the_whole_splits(done):
    (inside, total), = re.findall(r"^fraction 0\.5: (\d+) of (\d+) figures inside the reference's interval$",
                                   done.stdout, re.MULTILINE)
    rows = [line for line in done.stdout.splitlines() if line.startswith("| pos ")]
    # three layers, four direction halves, three mix seeds, three random-biLM and three same-data probes
    assert int(total) == len(rows) == 16 and 0 <= int(inside) <= 16
    assert re.search(r"^fraction 1: \d+ s \(.*extract.*\); training sentences pos 30$", done.stdout, re.MULTILINE)
    assert re.search(r"^fraction 0\.5: \d+ s \(.*\); training sentences pos 15$", done.stdout, re.MULTILINE)


@smoke("bench/report_time.py", "--model", FIXTURE, "--tasks", "pos", "--words", "--limit", 10, "--semcor-limit", 20,
       "--no-png")
def test_report_time_runs_the_report_cold_and_warm(done):
    assert "cold and warm give the same numbers: True" in done.stdout
    assert rows_starting(done.stdout, "  suite")


@smoke("bench/syntax_curve.py", "--model", FIXTURE, "--sizes", 20, 0, "--limit", 40, "--layers", 1, "--ranks", 2,
       "--alphas", 1.0, "--cache-dir", SCRATCH, "--out", in_scratch("curve.json"))
def test_syntax_curve_writes_one_row_per_size_layer_and_probe(done, scratch):
    rows = json.loads((scratch / "curve.json").read_text(encoding="utf-8"))["rows"]
    assert sorted((r["train_sentences"], r["probe"]) for r in rows) == sorted(
        (n, probe) for n in (20, 40) for probe in ("distance", "depth", "arc", "label"))


@smoke("bench/ray_embedding.py", "--model", FIXTURE, "--sentences", 64, "--batch-size", 8, "--workers", 1)
def test_ray_embedding_embeds_with_one_process_and_one_worker(done):
    table = done.stdout.split("vs single", 1)[1]
    (single,) = rows_starting(table, "single process, 1 thread(s)")
    (ray,) = rows_starting(table, "Ray, 1 worker(s) x 1 thread")
    assert single[-1] == "1.00" and float(single[0]) > 0 and float(ray[0]) > 0


@smoke("scripts/same_report.py")
def test_same_report_tells_dates_and_timings_from_numbers(tmp_path, data_root):
    result = {"format": "elmo-workbench/report", "created": "2026-11-26T10:00:00Z", "timings": {"suite": 1.5},
              "tasks": [{"task": "pos", "accuracy": 0.9, "seconds": 3.0}]}
    later = json.loads(json.dumps(result))
    later["created"], later["timings"], later["tasks"][0]["seconds"] = "2026-11-27T10:00:00Z", {"suite": 9.0}, 1.0
    moved = json.loads(json.dumps(later))
    moved["tasks"][0]["accuracy"] = 0.8
    for name, data in (("a", result), ("b", later), ("c", moved)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(data), encoding="utf-8")
    same = run_script("scripts/same_report.py", tmp_path / "a", tmp_path / "b", data_root=data_root)
    assert same.stdout.startswith("same:") and "created x1, seconds x1, timings x1" in same.stdout
    differ = run_script("scripts/same_report.py", tmp_path / "a", tmp_path / "c" / "results.json", data_root=data_root,
                        expect=1)
    assert "$.tasks[0].accuracy: 0.9 vs 0.8" in differ.stdout
