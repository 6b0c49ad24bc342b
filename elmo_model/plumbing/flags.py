"""The ``--precision`` and ``--device`` flags of every command that runs a biLM, written once.

A command adds them with :func:`add_precision_argument` and :func:`add_device_argument`, so the
choices and the help read the same in ``probing.tagging.suite``, ``probing.report``,
``elmo_model.corpus.embedder`` and ``elmo_model.training.train``; a command says what is its own (its
default, a note) and nothing else.
The trainer's ``--bf16`` and the embedder's ``--cuda-device N`` (AllenNLP's) are their own flags.

Imports no torch: the app's sidebar offers the same precisions, in the same words, before torch
is loaded. What a flag's value means is decided elsewhere: ``elmo_model.bilm.precision``
resolves a precision on a device, ``elmo_model.bilm.devices.check_device`` checks a device
against the machine.
"""

from __future__ import annotations

import argparse
import re
from typing import Callable

#: what a user may ask for: a precision, or "auto" (bf16 where the device's bf16 units pay)
PRECISION_CHOICES = ("auto", "fp32", "bf16")
PRECISION_HELP = ("the biLM's matrix products: fp32, bf16, or auto = bf16 where the device has bf16 units "
                  "(a CPU with avx512_bf16 or AMX, a GPU of compute capability 8.0+), else fp32")
DEVICE_HELP = "where the biLM runs: cpu, cuda or cuda:N"
#: the default of a --device left out, in words (``devices.default_device``)
DEFAULT_DEVICE_HELP = "cuda when torch sees a GPU, else cpu"
_DEVICE_PATTERN = re.compile(r"cpu|cuda(:\d+)?")


def parse_device(text: str) -> str:
    """argparse type for ``--device``: "cpu", "cuda" or "cuda:N" (case and spaces ignored)."""
    value = str(text).strip().lower()
    if not _DEVICE_PATTERN.fullmatch(value):
        raise argparse.ArgumentTypeError(f"expected cpu, cuda or cuda:N, got {text!r}")
    return value


def _help(text: str, default: str, note: str) -> str:
    return f"{text} (default: {default}{'; ' + note if note else ''})"


def add_precision_argument(parser: argparse.ArgumentParser, default: str = "auto", note: str = "") -> argparse.Action:
    """Add ``--precision`` (one of :data:`PRECISION_CHOICES`, help :data:`PRECISION_HELP`) to
    ``parser`` or an argument group; ``note``: what the command adds, after the default."""
    return parser.add_argument("--precision", choices=PRECISION_CHOICES, default=default,
                               help=_help(PRECISION_HELP, "%(default)s", note))


def add_device_argument(parser: argparse.ArgumentParser, default: str | None = None, note: str = "",
                        parse: Callable[[str], str] = parse_device) -> argparse.Action:
    """Add ``--device`` (help :data:`DEVICE_HELP`) to ``parser`` or an argument group. ``default``
    None: the GPU when torch sees one, else the CPU (``check_device`` decides, after parsing);
    ``note``: what the command adds; ``parse``: the argparse type (:func:`parse_device`: refused
    at parse time; ``str`` for a command that checks the value with its other inputs)."""
    shown = DEFAULT_DEVICE_HELP if default is None else "%(default)s"
    return parser.add_argument("--device", type=parse, default=default, help=_help(DEVICE_HELP, shown, note))


#: the exit codes every command keeps, for the end of its --help
EXIT_CODES = ("exit codes: 0 done; 2 bad input or usage (one line saying what, before any work starts); "
              "1 a failure while working (a download, a broken run); 130 interrupted (the line says what was kept)")

QUIET_HELP = "no progress bar, warnings only"


def add_quiet_argument(parser: argparse.ArgumentParser) -> argparse.Action:
    """Add ``--quiet`` (help :data:`QUIET_HELP`)."""
    return parser.add_argument("--quiet", action="store_true", help=QUIET_HELP)


MODELS_DIR_HELP = ("the models home: where a published model's name is looked for (after --data-root's models/, "
                   "when given) and where `python -m probing.data download NAME` puts it "
                   "(default: $ELMO_WORKBENCH_MODELS, else ~/.cache/elmo-workbench/models)")


def add_models_dir_argument(parser: argparse.ArgumentParser) -> argparse.Action:
    """Add ``--models-dir DIR`` (help :data:`MODELS_DIR_HELP`; default None: the models home)."""
    return parser.add_argument("--models-dir", metavar="DIR", default=None, help=MODELS_DIR_HELP)


__all__ = ["DEFAULT_DEVICE_HELP", "DEVICE_HELP", "EXIT_CODES", "MODELS_DIR_HELP", "PRECISION_CHOICES",
           "PRECISION_HELP", "QUIET_HELP", "add_device_argument", "add_models_dir_argument", "add_precision_argument",
           "add_quiet_argument", "parse_device"]
