"""Progress reporting: the callback types long work accepts, and the terminal bars the CLIs draw.

Long work never prints; it calls a progress callback, and whoever runs it decides how to show it:
the command lines pass a :class:`TerminalProgress` (tqdm bars on stderr), the app passes
``app_pages.running.ProgressBar``. Three callback shapes exist, one per kind of work:

- :class:`ProgressCallback` ``(label, done, total, unit)``: work made of labelled stages with their
  own units (downloads in bytes, the SemCor index in sentences, a report in percent).
- :data:`CountCallback` ``(done, total)``: one counted loop (sentences embedded or extracted).
- :data:`StepCallback` ``(label, done, total)``: numbered steps with a changing description (the
  probing suite's fits).

:class:`TerminalProgress` accepts all three, so every CLI draws its bars the same way.

Imports nothing from ``probing`` (the dependency points the other way); tqdm is imported when a
bar is first drawn.
"""

from __future__ import annotations

import logging
import time
from typing import Any, Callable, Protocol


class ProgressCallback(Protocol):
    """``progress(label, done, total, unit)``: long work reports how far it has come.

    ``done`` and ``total`` are in ``unit`` ("B" for bytes, "%" for percent); ``total`` is None
    when unknown.
    """

    def __call__(self, label: str, done: float, total: float | None, unit: str) -> None: ...


#: ``progress(done, total)``: one counted loop.
CountCallback = Callable[[int, int], None]

#: ``progress(label, done, total)``: numbered steps whose description changes.
StepCallback = Callable[[str, int, int], None]


class TerminalProgress:
    """tqdm bars for a command line; usable as any of the three callback shapes.

    With ``single=True`` one bar shows every update and its description follows the label (a
    report or the suite, whose stages add up to one whole); otherwise each label gets its own bar,
    closed when it reaches its total (downloads, the SemCor index's stages). ``quiet`` draws
    nothing. Close it when the work ends (or use it as a context manager) so the terminal's last
    line is clean.
    """

    def __init__(self, desc: str = "", *, single: bool = False, unit: str = "", quiet: bool = False,
                 leave: bool = False, bar_format: str | None = None, width: int = 70) -> None:
        self.desc = desc
        self.single = single
        self.unit = unit
        self.quiet = quiet
        self.leave = leave
        self.bar_format = bar_format
        self.width = width
        self._bars: dict[str, Any] = {}

    # -- the callback shapes ------------------------------------------------------------------

    def __call__(self, label: str, done: float, total: float | None, unit: str = "") -> None:
        """:class:`ProgressCallback`."""
        if self.quiet:
            return
        key = self.desc if self.single else label
        bar = self._bars.get(key)
        if bar is None:
            bar = self._bars[key] = self._new_bar(label if not self.single else (self.desc or label),
                                                  total, unit or self.unit)
        if bar.total != total:
            bar.total = total
        bar.n = min(done, total) if total is not None else done
        if self.single and label:
            bar.set_description(label[:self.width], refresh=False)
        bar.refresh()
        if not self.single and total is not None and done >= total:
            self.close(key)

    def counts(self, done: int, total: int) -> None:
        """:data:`CountCallback`."""
        self(self.desc, done, total, self.unit)

    def steps(self, label: str, done: int, total: int) -> None:
        """:data:`StepCallback`."""
        self(label, done, total, self.unit)

    # -- bars ---------------------------------------------------------------------------------

    def _new_bar(self, label: str, total: float | None, unit: str):
        from tqdm import tqdm  # lazy: callback-only users of this module never draw a bar

        in_bytes = unit == "B"
        options: dict[str, Any] = {"total": total, "desc": label[:self.width], "unit": unit or "it",
                                   "leave": self.leave, "unit_scale": in_bytes,
                                   "unit_divisor": 1024 if in_bytes else 1000}
        if self.bar_format is not None:
            options["bar_format"] = self.bar_format
        return tqdm(**options)

    def close(self, label: str | None = None) -> None:
        """Close the bar of ``label`` (every bar when None)."""
        for key in [label] if label is not None else list(self._bars):
            bar = self._bars.pop(key, None)
            if bar is not None:
                bar.close()

    def __enter__(self) -> "TerminalProgress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class BarSafeHandler(logging.StreamHandler):
    """A logging handler whose lines go through ``tqdm.write``: the bars on the same stream are
    cleared, the line printed, the bars drawn again below it, so a log line never tears a bar."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            from tqdm import tqdm  # lazy, as for the bars

            tqdm.write(self.format(record), file=self.stream)
        except Exception:  # noqa: BLE001 (logging's own convention: report the failure, never raise)
            self.handleError(record)


def log_through_bars(quiet: bool = False, fmt: str = "%(levelname)s %(name)s: %(message)s") -> None:
    """A command's logging: INFO (WARNING with ``quiet``) to stderr in ``fmt``, each line written
    through ``tqdm.write`` so that it does not tear the command's progress bars. Like
    ``logging.basicConfig``, it leaves a root logger that already has handlers alone."""
    logging.basicConfig(level=logging.WARNING if quiet else logging.INFO, format=fmt, handlers=[BarSafeHandler()])


def about(seconds: float) -> str:
    """A duration as people read an estimate: "about 40 s", "about 3 min"."""
    return f"about {seconds:.0f} s" if seconds < 90 else f"about {seconds / 60:.0f} min"


class Throughput:
    """The measured rate of a counted stage and the time it has left, for a progress line.

    ``update(stage, done, total)`` after each step; the rate is the work done since the stage's
    first call over the time since then (so work found done, a resumed or copied part, never
    inflates it), and no estimate is given until a second of work has been measured. A new stage
    name, or a count that goes back, starts the measurement again. ``now``: a clock for tests.
    """

    MIN_SECONDS = 1.0

    def __init__(self) -> None:
        self._stage: str | None = None
        self._start = (0.0, 0.0)  # (time, done) of the stage's first call

    def update(self, stage: str, done: float, total: float | None, now: float | None = None) -> tuple[float, float] | None:
        """(rate per second, seconds left), or None while there is no honest estimate."""
        now = time.monotonic() if now is None else now
        if stage != self._stage or done < self._start[1]:
            self._stage, self._start = stage, (now, done)
            return None
        elapsed, work = now - self._start[0], done - self._start[1]
        if not total or elapsed < self.MIN_SECONDS or work <= 0:
            return None
        rate = work / elapsed
        return rate, max(0.0, (total - done) / rate)

    def describe(self, stage: str, done: float, total: float | None, unit: str, now: float | None = None) -> str:
        """``" · 12.5 sentences/s, about 40 s left", or ``""`` while there is no estimate."""
        measured = self.update(stage, done, total, now)
        if measured is None:
            return ""
        rate, left = measured
        per = f"{rate:,.1f} {unit}/s" if rate < 100 else f"{rate:,.0f} {unit}/s"
        return f" · {per.strip()}, {about(left)} left"
