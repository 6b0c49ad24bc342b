"""The optional extras (pyproject.toml's [app], [report], [cluster], [word2vec]) as a user without
them meets them: every console script's ``--help`` and argument errors work, and a run that needs
an extra says in one line which packages to install (exit code 2, no traceback).

The commands run in a subprocess where those packages are absent: a ``sitecustomize`` on
``PYTHONPATH`` makes Python's path finder skip them, so ``import plotly`` raises
ModuleNotFoundError and ``importlib.util.find_spec("plotly")`` is None, as in an environment
that never installed them (the first test proves the blocker does that)."""

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ABSENT = ("plotly", "umap", "kaleido", "streamlit", "ray", "gensim")
BLOCKER = f"""import sys
from importlib.machinery import PathFinder

ABSENT = {set(ABSENT)!r}


class Absent(PathFinder):
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.partition(".")[0] in ABSENT:
            return None
        return PathFinder.find_spec(name, path, target)


sys.meta_path[:] = [Absent if finder is PathFinder else finder for finder in sys.meta_path]
"""
# each call: (entry point, arguments) -> {"code", "out", "err"}, in one interpreter (torch imported once)
CALLS = """import contextlib, importlib, io, json, sys, traceback
results = []
for target, argv in json.loads(sys.argv[1]):
    module, _, function = target.partition(":")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = getattr(importlib.import_module(module), function)(argv)
        except SystemExit as exit:
            code = exit.code
        except BaseException:
            code, _ = "raised", traceback.print_exc()
    results.append({"code": code, "out": out.getvalue(), "err": err.getvalue()})
print(json.dumps(results))
"""


@pytest.fixture(scope="module")
def without_extras(tmp_path_factory):
    """Run calls (entry point, argv) in a Python where the extras' packages are absent."""
    folder = tmp_path_factory.mktemp("no-extras")
    (folder / "sitecustomize.py").write_text(BLOCKER, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(folder), str(ROOT)])}

    def run(calls: list[tuple[str, list[str]]]) -> list[dict]:
        done = subprocess.run([sys.executable, "-c", CALLS, json.dumps(calls)], cwd=folder, env=env,
                              capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[-1])

    run.env, run.cwd = env, folder
    return run


def _scripts() -> dict[str, str]:
    """pyproject.toml's console scripts -> their entry points as a checkout imports them (the wheel's
    elmo_workbench package is the checkout's root)."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
    return {name: target.removeprefix("elmo_workbench.") for name, target in scripts.items()}


def _one_line_naming(result: dict, hint: str) -> None:
    assert result["code"] == 2, result
    lines = result["err"].strip().splitlines()
    assert len(lines) == 1 and hint in lines[0] and "Traceback" not in result["err"], result["err"]


def test_the_blocker_makes_the_extras_absent(without_extras):
    check = ("import importlib.util\n"
             f"for name in {ABSENT!r}:\n"
             "    assert importlib.util.find_spec(name) is None, name\n"
             "    try:\n"
             "        __import__(name)\n"
             "    except ModuleNotFoundError:\n"
             "        pass\n"
             "    else:\n"
             "        raise AssertionError(name)\n"
             "import numpy, torch\n"  # and nothing else is hidden
             "print('absent')\n")
    done = subprocess.run([sys.executable, "-c", check], cwd=without_extras.cwd, env=without_extras.env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.stdout.strip() == "absent", done.stderr


def test_every_console_scripts_help_works_without_the_extras(without_extras):
    scripts = _scripts()
    assert {"elmo-probe-report", "elmo-workbench", "elmo-embed"} <= set(scripts)
    calls = [(target, ["--help"]) for target in scripts.values()]
    calls += [(scripts["elmo-data"], [command, "--help"]) for command in ("status", "download")]
    calls += [("probing.report.cli:main", ["--help"]), ("probing.context.static:main", ["train-word2vec", "--help"])]
    for (target, argv), result in zip(calls, without_extras(calls)):
        assert result["code"] == 0 and "usage:" in result["out"] and "Traceback" not in result["err"], \
            (target, argv, result)


def test_python_m_probing_report_help_works_without_plotly(without_extras):
    done = subprocess.run([sys.executable, "-m", "probing.report", "--help"], cwd=without_extras.cwd,
                          env=without_extras.env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0 and "--compare" in done.stdout and not done.stderr, done.stderr


def test_argument_errors_need_no_extra(without_extras):
    scripts = _scripts()
    calls = [(scripts["elmo-probe-report"], ["--tasks", "nonsense", "--out", "x"]),
             (scripts["elmo-probe-report"], ["--labels", "a", "b", "--out", "x"])]
    for result in without_extras(calls):
        assert result["code"] == 2 and "usage:" in result["err"] and "Traceback" not in result["err"], result


def test_a_run_that_needs_an_extra_names_it_in_one_line(without_extras, data_root, tmp_path):
    scripts = _scripts()
    text = tmp_path / "in.txt"
    text.write_text("The bank .\n", encoding="utf-8")
    results = {result_of: result for result_of, result in zip(("report", "compare", "embed", "suite", "word2vec"),
                                                                without_extras([
        (scripts["elmo-probe-report"], ["--out", str(tmp_path / "report"), "--data-root", str(data_root)]),
        (scripts["elmo-probe-report"], ["--compare", "a.json", "b.json", "--out", str(tmp_path / "compare")]),
        (scripts["elmo-embed"], [str(text), str(tmp_path / "out.hdf5"), "--ray"]),
        (scripts["elmo-probe-suite"], ["--ray", "--limit", "2", "--cache-dir", str(tmp_path / "cache"),
                                       "--data-root", str(data_root)]),
        ("probing.context.static:main", ["train-word2vec", "--data-root", str(data_root),
                                         "--out", str(tmp_path / "w2v.npz")]),
    ]))}
    _one_line_naming(results["report"], "pip install plotly umap-learn (the [report] extra; torch stays as it is)")
    _one_line_naming(results["compare"], "pip install plotly umap-learn (the [report] extra")
    for name in ("embed", "suite"):
        _one_line_naming(results[name], "--ray needs ray, not installed here: pip install ray (the [cluster] extra")
    _one_line_naming(results["word2vec"], "pip install gensim (the [word2vec] extra")
    assert not (tmp_path / "report").exists() and not (tmp_path / "out.hdf5").exists()


def test_no_hint_names_a_distribution_the_users_index_may_not_have():
    """Hints name the packages (`pip install ray`), never `pip install 'elmo-workbench[cluster]'`: the
    project may be installed from a checkout or a wheel, with no such distribution on the user's index."""
    named = [f"{path.relative_to(ROOT)}:{n}" for package in ("elmo_model", "probing", "app_pages")
             for path in sorted((ROOT / package).rglob("*.py"))
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1) if "elmo-workbench[" in line]
    assert not named, named
