"""Every command the project names is a real module: each ``python -m NAME`` in the README, the docs,
the scripts, the benchmarks and the help texts, and each console script of pyproject.toml.

No alias answers an earlier module name, so a command written down with a name that is not a module
file (``NAME.py``, or ``NAME/__main__.py`` for a package) would fail for whoever copies it. The
``--help`` runs (11 commands, each importing torch, two at a time) took 43 s on a 2-core machine that a
training run kept busy (37 s one at a time there: the two workers found no free core); 0.2-5 s each.
"""

import importlib
import importlib.util
import os
import re
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ("elmo_model", "probing", "app_pages", "bench", "scripts")

#: Where commands are written down: the front door, the docs, the data's READMEs, the scripts and
#: benchmarks (their subprocess calls too), the packages' docstrings and help texts, the CI and
#: pyproject.toml's comments.
SOURCES = ["README.md", "docs/**/*.md", "data/**/*.md", "scripts/*", "bench/*.py", "examples/*.py",
           "elmo_model/**/*.py", "probing/**/*.py", "app_pages/**/*.py", "app.py", "pyproject.toml",
           "requirements*.txt", ".ci/*"]

#: ``-m NAME`` after ``python``, ``torchrun``, or at the start of a continued line; and the
#: ``[sys.executable, "-m", "NAME", ...]`` of a subprocess call.
_NAME = r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*"
_PATTERNS = [re.compile(rf"(?<![\w-])-m\s+({_NAME})"), re.compile(rf"""["']-m["'],\s*["']({_NAME})["']""")]

#: Modules the docs run that are not the project's (none may start with one of PROJECT's names).
NOT_OURS = {"pip", "venv", "pytest", "streamlit", "torch.distributed.run"}


def named_commands() -> dict[str, list[str]]:
    """NAME -> the places ("file:line") that run ``python -m NAME``."""
    found: dict[str, list[str]] = {}
    files = sorted({path for pattern in SOURCES for path in ROOT.glob(pattern) if path.is_file()})
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for pattern in _PATTERNS:
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                found.setdefault(match.group(1), []).append(f"{path.relative_to(ROOT)}:{line}")
    return found


def module_file(name: str) -> Path | None:
    """The file ``python -m name`` runs when it is a real module of the checkout: ``name.py``, or
    ``name/__main__.py`` for a package; else None."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        return None
    origin = Path(spec.origin).resolve()
    path = ROOT.joinpath(*name.split("."))
    if origin == path.with_suffix(".py"):
        return origin
    if origin == path / "__init__.py" and (path / "__main__.py").is_file():
        return path / "__main__.py"
    return None


def _scripts() -> dict[str, str]:
    """pyproject.toml's console scripts -> ``module:function`` as a checkout imports them (the wheel's
    ``elmo_workbench`` package is this checkout's root: ``package-dir``)."""
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    root_packages = [name for name, folder in pyproject["tool"]["setuptools"]["package-dir"].items() if folder == "."]
    scripts = {}
    for script, target in pyproject["project"]["scripts"].items():
        for package in root_packages:
            target = target.removeprefix(package + ".")
        scripts[script] = target
    return scripts


def test_the_allow_list_names_no_module_of_the_project():
    assert not {name for name in NOT_OURS if name.split(".")[0] in PROJECT}


def test_every_python_m_name_is_a_real_module_file():
    found = named_commands()
    assert {"probing.report", "probing.data", "elmo_model.training.train", "elmo_model.corpus.embedder"} <= set(found)
    missing = {name: places for name, places in found.items() if name not in NOT_OURS and module_file(name) is None}
    assert not missing, f"`python -m NAME` with no module file NAME.py or NAME/__main__.py: {missing}"


def test_every_console_script_names_a_function_that_is_there():
    scripts = _scripts()
    assert {"elmo-embed", "elmo-train", "elmo-probe-report", "elmo-data"} <= set(scripts)
    for script, target in scripts.items():
        module, _, function = target.partition(":")
        assert module_file(module) is not None or (ROOT.joinpath(*module.split(".")) / "__init__.py").is_file(), \
            f"{script} = {target}: no module {module} in the checkout"
        assert callable(getattr(importlib.import_module(module), function, None)), \
            f"{script} = {target}: {module} has no function {function}"


def _help(name: str) -> tuple[str, subprocess.CompletedProcess]:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return name, subprocess.run([sys.executable, "-m", name, "--help"], cwd=ROOT, env=env, capture_output=True,
                                text=True, timeout=180)


def test_every_named_command_answers_help():
    """``python -m NAME --help`` for each of the project's commands, two at a time: exit 0 and a usage."""
    names = sorted(name for name in named_commands() if name not in NOT_OURS)
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = dict(pool.map(_help, names))
    failed = {name: (run.returncode, run.stderr[-1500:]) for name, run in done.items()
              if run.returncode != 0 or not run.stdout.strip()}
    assert not failed, failed
    assert all("usage:" in run.stdout for run in done.values())
