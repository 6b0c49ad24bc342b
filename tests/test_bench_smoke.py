"""Every script in bench/ and scripts/ runs end to end for seconds, on the bilm-tf fixture model with
tiny sizes and one repeat, so a benchmark that breaks turns the suite red rather than its next user.

Each script runs as a user runs it (``python bench/NAME.py ...`` in a process of its own, the data
root in ``$ELMO_WORKBENCH_DATA``); what it prints is checked for the rows its figures live in. The
figures themselves are not judged: they are timings of a tiny model on a shared machine. Two
scripts are run by tests of their own: ``bench/gpu_check.py`` (tests/test_gpu_check.py) and
``scripts/gpu_job.py`` (tests/test_gpu_job.py); ``test_every_script_has_a_smoke_test`` keeps the
list whole.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[1]


def run_script(script: str, *args, data_root: Path, timeout: float = 300, env: dict | None = None,
               expect: int = 0) -> subprocess.CompletedProcess:
    """``python SCRIPT ARGS`` in the project folder, one torch thread; fails with its output's end
    unless it exits with ``expect``."""
    environment = dict(os.environ, ELMO_WORKBENCH_DATA=str(data_root), OMP_NUM_THREADS="1", **(env or {}))
    done = subprocess.run([sys.executable, str(PROJECT / script), *map(str, args)], cwd=PROJECT, env=environment,
                          capture_output=True, text=True, timeout=timeout)
    assert done.returncode == expect, f"{script} exited {done.returncode}:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def fixture_model(data_root: Path) -> Path:
    return data_root / "fixtures" / "bilm_tf"


def test_app_timing_times_the_playground_and_a_typed_edit(data_root):
    """The playground's first paint, its figure and a typed edit redrawing it, in headless Chromium
    (the browser test's set-up: Debian's chromium, ``bash scripts/install_browser.sh``)."""
    done = run_script("bench/app_timing.py", "--model", fixture_model(data_root), "--repeats", 1, "--pages",
                      "--timeout", 120, data_root=data_root)
    table = done.stdout.split("measure (s)", 1)[1]
    for measure in ("server start (HTTP health)", "playground cold server: first paint", "playground warm: first figure",
                    "typing: figure redrawn", "typing: run finished"):
        row = next(line for line in table.splitlines() if line.startswith(measure))
        n, median = row[len(measure):].split()[:2]
        assert n == "1" and float(median) > 0, row
    assert "PROBLEM" not in done.stdout
