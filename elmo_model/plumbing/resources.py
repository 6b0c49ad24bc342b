"""Where the shipped data is: the elmo-mini model, the demo sentences, the static embedding and the
tokenizer's parameters (``data/`` of a checkout), whether installed or run from a checkout.

    >>> shipped_data("models", "elmo-mini", "options.json")   # a pathlib.Path to a real file

Two layouts, one answer:

- a checkout (or ``pip install -e .`` of one): ``data/`` beside ``elmo_model/``, under the
  ``pyproject.toml`` that names this project. The code of a checkout always reads its own data,
  never that of a copy installed in the same environment.
- an installed wheel: the package data of ``elmo_workbench`` (``elmo_workbench/data/`` in
  site-packages), found through ``importlib.resources``. ``pyproject.toml`` installs the checkout's
  root under that name, so site-packages gets no top-level ``app`` or ``data``.

Imports nothing heavy (the app's pages use it before torch is loaded).
"""

from __future__ import annotations

import functools
import importlib.resources
import sys
from pathlib import Path

#: The package the wheel installs the checkout's root as: app.py, app_pages/ and data/ go under it.
INSTALLED_PACKAGE = "elmo_workbench"
#: The folder of shipped data: at the root of a checkout, inside ``INSTALLED_PACKAGE`` when installed.
DATA_FOLDER = "data"
#: What a checkout's pyproject.toml says, so that a stray pyproject.toml in site-packages is not taken for one.
PROJECT_NAME_LINE = 'name = "elmo-workbench"'


def shipped_data(*parts: str) -> Path:
    """The shipped data folder, or ``parts`` inside it (``shipped_data("models")``). The path need
    not exist: callers name what is missing in their own terms."""
    return _data_root().joinpath(*parts)


@functools.cache
def _checkout_root() -> Path | None:
    """The checkout this code runs from (the folder holding ``pyproject.toml``, ``elmo_model/`` and
    ``data/``), or None when it runs from an installed wheel."""
    holder = Path(__file__).resolve().parents[2]  # elmo_model/plumbing/ -> what holds elmo_model/: a checkout, or site-packages
    try:
        pyproject = (holder / "pyproject.toml").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return holder if PROJECT_NAME_LINE in pyproject and (holder / DATA_FOLDER).is_dir() else None


@functools.cache
def _data_root() -> Path:
    checkout = _checkout_root()
    if checkout is not None:
        return checkout / DATA_FOLDER
    # installed: elmo_workbench is a namespace package (the checkout's root has no __init__.py);
    # wheels install unpacked, so its resources are real files that h5py and numpy can open
    beside = Path(__file__).resolve().parents[2] / INSTALLED_PACKAGE / DATA_FOLDER
    try:
        found = importlib.resources.files(INSTALLED_PACKAGE).joinpath(DATA_FOLDER)
    except (ModuleNotFoundError, NotADirectoryError):  # not installed (a copy of elmo_model alone)
        return beside
    return found if isinstance(found, Path) and found.is_dir() else beside  # else: a zip, or no data there


def command_name(script: str, module_form: str) -> str:
    """How a hint spells a command: the console script (``elmo-data``) when that is what runs or
    when the project is installed, where ``python -m ...`` needs the venv's own python; in a
    checkout, ``module_form`` (``python -m probing.data``), which needs no install."""
    if Path(sys.argv[0] if sys.argv else "").name == script or _checkout_root() is None:
        return script
    return module_form
