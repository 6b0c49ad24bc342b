"""The optional parts of the installed distribution (pyproject.toml's extras) and what a command
says when one is missing: one line naming the extra, instead of an ImportError's traceback.

``pip install elmo-workbench`` brings the library (the biLM, the probes, the data commands);
``[app]`` the Streamlit app, ``[report]`` the probe report's figures, ``[cluster]`` Ray,
``[word2vec]`` gensim. A checkout set up with ``pip install -r requirements.txt`` has all but Ray.
Nothing here imports them: the check looks for them with ``importlib.util.find_spec``. A command
checks after it has parsed its arguments, so ``--help`` never needs an extra.
"""

from __future__ import annotations

import importlib.util

#: What a command cannot start without, per extra: module -> the distribution that provides it.
#: (``[report]`` also brings kaleido, which only the PNG figures need; ``--no-png`` does without.)
NEEDED = {
    "app": {"streamlit": "streamlit", "plotly": "plotly", "umap": "umap-learn"},
    "report": {"plotly": "plotly", "umap": "umap-learn"},
    "cluster": {"ray": "ray"},
    "word2vec": {"gensim": "gensim"},
}


def missing(extra: str) -> list[str]:
    """The distributions of ``extra`` (a key of :data:`NEEDED`) that this environment lacks."""
    return [dist for module, dist in NEEDED[extra].items() if importlib.util.find_spec(module) is None]


def missing_message(extra: str, what: str) -> str | None:
    """One line saying what ``what`` needs and how to install it, or None when nothing is missing."""
    absent = missing(extra)
    if not absent:
        return None
    return f"{what} needs {', '.join(absent)}, not installed here: {install_hint(extra, absent)}"


def install_hint(extra: str, packages: list[str]) -> str:
    """``pip install PACKAGES (the [extra] extra; torch stays as it is)``: the packages by name, not
    ``pip install -r requirements.txt`` (it pins torch and would replace the user's own) nor a
    distribution name the user's index may not have."""
    return f"pip install {' '.join(packages)} (the [{extra}] extra; torch stays as it is)"
