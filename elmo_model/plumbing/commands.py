"""The tail every long command shares, written once: its outputs checked before the work, the
work under Ctrl-C, an expected error as one line, the bar closed, the result shown, the exit code.

A command's ``main`` parses its arguments and hands :func:`run_command` the work (a function
returning the result) and what to show of it::

    bar = TerminalProgress("probing suite", single=True, unit="step", quiet=args.quiet, width=60)
    return run_command(work, table_and_json(args.out), bar=bar,
                       kept=kept_in_cache("activations and probes", cache_dir))

Exit codes (``flags.EXIT_CODES``): 0 done, 2 an expected error (``error: ...``, one line on
stderr), 130 Ctrl-C (``interrupted; ...``: what is kept and how to go on).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Callable, Iterable, Protocol, TypeVar

from .io_safety import check_output_dir, check_output_path, run_interruptible

Result = TypeVar("Result")


class _Closable(Protocol):
    def close(self) -> None: ...


class _TableResult(Protocol):
    def table(self) -> str: ...

    def to_json(self, path: Path) -> object: ...


def error_exit(err: BaseException | str) -> int:
    """Print ``error: <err>`` on stderr, one line, and give the exit code of an expected error (2)."""
    print(f"error: {err}", file=sys.stderr)
    return 2


def check_outputs(inputs: Iterable[Path], cache_dir: Path, out: Path | None = None, out_flag: str = "--out",
                  more_inputs: Iterable[Path] = ()) -> None:
    """Before any work: the result file ``out`` (when given; its folder made) never lands on one of
    ``inputs`` or ``more_inputs``, and the activation cache ``cache_dir`` is a folder that holds none of
    ``inputs``. A ValueError names the flag (``out_flag``, ``--cache-dir``) and the clash."""
    inputs = list(inputs)
    if out is not None:
        check_output_path(out, [*inputs, *more_inputs], create_parents=True, flag=out_flag)
    check_output_dir(cache_dir, inputs, flag="--cache-dir", what="cache directory")


def run_command(work: Callable[[], Result], show: Callable[[Result], None], *, kept: Callable[[], str],
                bar: _Closable | None = None, errors: tuple[type[BaseException], ...] = (ValueError,)) -> int:
    """Run a command's ``work()`` and ``show(result)``; return the exit code.

    One of ``errors`` raised by the work: the bar closed, ``error: ...`` (exit 2). Ctrl-C: the bar
    closed, ``interrupted; <kept()>`` (exit 130, through ``io_safety.run_interruptible``). Done: the
    bar closed, then ``show(result)`` prints (and writes) what the command gives (exit 0)."""

    def attempt() -> int:
        try:
            result = work()
        except errors as err:
            _close(bar)
            return error_exit(err)
        _close(bar)
        show(result)
        return 0

    def interrupted() -> str:
        _close(bar)
        return kept()

    return run_interruptible(attempt, interrupted)


def kept_in_cache(what: str, cache_dir: Path) -> Callable[[], str]:
    """The ``kept`` of a command whose finished work waits in a cache: ``what`` (e.g. "activations and
    probes") finished so far is kept in ``cache_dir``, and the same command goes on from it."""
    return lambda: (f"the {what} finished so far are kept in the cache {cache_dir}; "
                    "rerun the same command to go on from them")


def table_and_json(out: Path | None) -> Callable[[_TableResult], None]:
    """The ``show`` of a command whose result has ``table()`` and ``to_json(path)``: print the table,
    and write the JSON to ``out`` when one is given."""

    def show(result: _TableResult) -> None:
        print(result.table())
        if out is not None:
            result.to_json(out)
            print(f"wrote {out}")

    return show


def _close(bar: _Closable | None) -> None:
    if bar is not None:
        bar.close()


__all__ = ["check_outputs", "error_exit", "kept_in_cache", "run_command", "table_and_json"]
