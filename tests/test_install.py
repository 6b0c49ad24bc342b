"""`pip install .` and `pip install -e .` into a fresh virtual environment, then the commands.

Offline and fast: the new environment sees this one's packages through a ``.pth`` file (so
pip, setuptools and the pinned dependencies are not downloaded again) and pip runs with
``--no-deps --no-build-isolation --no-index``.
"""

import os
import shutil
import site
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOT_SOURCES = shutil.ignore_patterns(".git", ".venv", "runs", "reports", "cache", "build", "*.egg-info",
                                     "__pycache__", ".pytest_cache", "*.partial")

# each command's --help names what it does: a phrase from its own description
COMMANDS = {
    "elmo-embed": "sentence_to_index",
    "elmo-train": "--train",
    "elmo-probe-suite": "--tasks",
    "elmo-probe-report": "--tasks",
    "elmo-data": "download",
    "elmo-workbench": "streamlit run",
}


def _fresh_venv(path: Path) -> Path:
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    python = path / "bin" / "python"
    packages = subprocess.run([str(python), "-c", "import site; print(site.getsitepackages()[0])"],
                              check=True, capture_output=True, text=True).stdout.strip()
    (Path(packages) / "zz_this_environment.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return python


def _run(args: list, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    return subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """A copy of the project, so the build's own files (build/, *.egg-info) stay out of the checkout."""
    copy = tmp_path_factory.mktemp("project") / "elmo-workbench"
    shutil.copytree(ROOT, copy, ignore=NOT_SOURCES)
    return copy


def _install(python: Path, *spec, cwd: Path) -> None:
    done = _run([python, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index", *spec], cwd)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_declared_commands_are_the_main_ones():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert set(scripts) == set(COMMANDS)


def test_pip_install_puts_packages_data_and_commands_in_a_fresh_environment(source, tmp_path):
    python = _fresh_venv(tmp_path / "venv")
    _install(python, source, cwd=tmp_path)
    for command, phrase in COMMANDS.items():
        done = _run([python.parent / command, "--help"], tmp_path)
        assert done.returncode == 0, f"{command} --help: {done.stderr}"
        assert "usage:" in done.stdout and phrase in done.stdout, f"{command} --help:\n{done.stdout}"
    check = ("import importlib.metadata as m, elmo_model, probing, app_pages.launch as launch\n"
             "from elmo_model.registry import resolve_model\n"
             "from elmo_model.tokenizer import tokenize_words\n"
             "print(elmo_model.__file__); print(probing.__file__); print(launch.app_file())\n"
             "print(resolve_model('elmo-mini').weights)\n"
             "print(tokenize_words('Dr. Smith went home.'))\n"
             "print(sorted(m.requires('elmo-workbench')))\n")
    done = _run([python, "-c", check], tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    installed = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                    capture_output=True, text=True, check=True).stdout.strip())
    for line in lines[:4]:  # the packages, the app and the shipped model all come from the environment
        assert Path(line).is_relative_to(installed), line
    assert Path(lines[3]).stat().st_size == (ROOT / "data" / "models" / "elmo-mini" / "weights.hdf5").stat().st_size
    assert lines[4] == str(["Dr.", "Smith", "went", "home", "."])
    requirements = [line.strip() for line in (ROOT / "requirements.txt").read_text().splitlines()
                    if line.strip() and not line.startswith("#")]
    assert lines[5] == str(sorted(requirements))  # the same pins, torch==2.13.0 among them


def test_editable_install_runs_the_working_copy(source, tmp_path):
    python = _fresh_venv(tmp_path / "venv")
    _install(python, "-e", source, cwd=tmp_path)
    done = _run([python.parent / "elmo-workbench", "--print-app"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert Path(done.stdout.strip()) == source / "app.py"
    done = _run([python, "-m", "elmo_model.embedder", "--help"], tmp_path)  # `python -m` still works
    assert done.returncode == 0 and "sentence_to_index" in done.stdout
    done = _run([python, "-c", "import elmo_model; print(elmo_model.__file__)"], tmp_path)
    assert Path(done.stdout.strip()) == source / "elmo_model" / "__init__.py"


def test_the_app_command_passes_the_project_streamlit_settings():
    from app_pages.launch import SETTINGS

    config = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    flattened = {f"{section}.{key}": str(value).lower() if isinstance(value, bool) else str(value)
                 for section, values in config.items() for key, value in values.items()}
    assert SETTINGS == flattened
