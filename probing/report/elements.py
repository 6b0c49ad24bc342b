"""The pieces a report is made of: headings, paragraphs, commands, tables, notes and
:class:`ReportFigure` objects, which :mod:`~probing.report.blocks` and
:mod:`~probing.report.compare` build and :mod:`~probing.report.render` draws; and the number
formats their cells share."""

from __future__ import annotations

import hashlib
import math
import re
from dataclasses import dataclass
from typing import Any


@dataclass
class ReportFigure:
    """One figure of a report: ``name`` (file-safe, the PNG's name), ``title``, the plotly
    ``figure`` (as :mod:`probing.figures` builds it) and a ``caption``."""

    name: str
    title: str
    figure: Any
    caption: str = ""

    def __post_init__(self) -> None:
        self.name = file_safe_name(self.name)


def file_safe_name(name: str, limit: int = 80) -> str:
    """``name`` as a file name and HTML id: letters, digits, ``-`` and ``_`` only, at most ``limit``
    characters. A name that had to change gets 8 hex digits of its sha1, so two names never merge
    (task names come from uploaded files and end up in ``div_id``, PNG paths and scripts)."""
    text = str(name)
    if re.fullmatch(r"[A-Za-z0-9_-]+", text) and len(text) <= limit:
        return text
    stem = re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")[:limit - 9] or "figure"
    return f"{stem}-{hashlib.sha1(text.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


@dataclass
class _Heading:
    text: str
    level: int = 2

    @property
    def anchor(self) -> str:
        return "s-" + re.sub(r"[^a-z0-9]+", "-", self.text.lower()).strip("-")


@dataclass
class _Text:
    text: str  # ``**bold**`` is the only markup


@dataclass
class _Code:
    code: str  # a command line, shown literally (never markup)


@dataclass
class _Table:
    headers: list[str]
    rows: list[list[str]]
    caption: str = ""
    numeric: list[bool] | None = None  # right-align these columns


@dataclass
class _Notes:
    items: list[str]


def _f(x: float | None, digits: int = 1, scale: float = 100.0, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{scale * x:{'+' if signed else ''}.{digits}f}"


def _ci(interval, digits: int = 1) -> str:
    return f"{100 * interval.estimate:.{digits}f} [{100 * interval.low:.{digits}f}, {100 * interval.high:.{digits}f}]"


def _seconds(s: float | None) -> str:
    if s is None:
        return "–"
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "x"
