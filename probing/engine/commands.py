"""Entry points of installed commands whose packages are optional (pyproject.toml's extras).

``--help`` and argument errors never need an extra: each command parses its arguments before it
imports an optional package, and says in one line which extra to install (exit code 2, no
traceback) only when a run needs it (:func:`elmo_model.plumbing.extras.missing_message`)."""

from __future__ import annotations


def report(argv: list[str] | None = None) -> int:
    """``elmo-probe-report``: ``python -m probing.report``, whose run checks for plotly and UMAP."""
    from probing.report.cli import main

    return main(argv)
