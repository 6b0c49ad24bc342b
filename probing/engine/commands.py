"""Entry points of installed commands whose packages are optional (pyproject.toml's extras): they
check for them first, so that a missing extra is one line naming it and exit code 2, not a
traceback. ``python -m ...`` in a checkout (set up from requirements.txt) goes straight in."""

from __future__ import annotations

import sys

from elmo_model.plumbing.extras import missing_message


def report(argv: list[str] | None = None) -> int:
    """``elmo-probe-report``: ``python -m probing.report``, once plotly and UMAP are there."""
    message = missing_message("report", "elmo-probe-report (the report's figures and projections)")
    if message:
        print(f"error: {message}", file=sys.stderr)
        return 2
    from probing.report.cli import main  # after the check: the report's modules import plotly

    return main(argv)
