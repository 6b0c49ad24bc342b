"""Training's elementwise kernels whose compiled code gives the eager numbers bit for bit, compiled
in the background: the char CNN's max-pooling and the share of its gradient each maximum takes.

Eager PyTorch runs such work as one pass over memory per operation (a comparison, a count, a
division, a product, each with its own temporary); ``torch.compile`` (Inductor's C++ backend on a
CPU) fuses it into one or two loops. Only functions whose compiled code cannot round differently
live here: maxima, comparisons, counts, and at most one rounding (a division) whose operands are
the same either way. So when the compiled code becomes ready never changes a result, and nothing
needs to wait for it: :class:`BackgroundCompiled` answers the eager function until the process's
one background-compile engine (``compile_engine.py``) has compiled its kind of call (dtypes, ranks,
the grad mode, any constants), the compiled one afterwards; the engine counts the calls that ran
compiled and eager per kind.

On when :func:`enable` was called (the trainer calls it: a training run takes thousands of steps)
or ``ELMO_WORKBENCH_FUSED_STEP=1``; ``ELMO_WORKBENCH_FUSED_STEP=0`` turns it off, as it does the
fused LSTM step of inference (``fused_step.py``). CPU tensors only; where no C++ compiler works,
eager (said once).
"""

from __future__ import annotations

from typing import Callable

import torch

from . import compile_engine


def enable(wait: bool = True) -> None:
    """Let this process compile the kernels in the background (a long training run). ``wait``: each
    kind of call waits for its compilation, so every step of a run, and of its resume, runs the same
    code: compiled sums may differ from eager ones in the last bits, and a run whose first steps ran
    eager while the compile finished (a timing) ended with other weights than its twin."""
    compile_engine.enable("training", wait=wait)


def wanted() -> bool:
    """``ELMO_WORKBENCH_FUSED_STEP`` where set, else whether :func:`enable` ran (``fused_step.enable``,
    which the app and inference commands call, does not turn these on)."""
    return compile_engine.ENGINE.wanted("training")


def _constant_key(value: object) -> object:
    """A non-tensor argument as the compiled code is specialised on it (a clip bound, None)."""
    return value if value is None or isinstance(value, (int, float, bool, str)) else repr(value)


def _call_key(*args) -> tuple:
    return tuple((a.dtype, a.dim()) if isinstance(a, torch.Tensor) else _constant_key(a) for a in args) + (
        torch.is_grad_enabled(),)


class BackgroundCompiled(compile_engine.CompiledFunction):
    """``fn`` (tensors and constants -> tensors), compiled in the background per kind of call;
    ``examples(*args)`` gives small inputs of the same kind to compile on (a list of argument
    tuples), with sizes all distinct and above 1. ``fn`` must give the same bits compiled and
    eager (see the module docstring)."""

    def __init__(self, fn: Callable, examples: Callable[..., list]) -> None:
        super().__init__(f"training kernel {fn.__name__}", fn, examples, _call_key, group="training",
                         prepare=compile_engine.unviewed)

    def __call__(self, *args):
        # a size of 1 (a block of one token) is specialised by the compiler, and the examples' sizes
        # are all above 1: such calls take the eager function by design, not as a fallback
        if any(isinstance(a, torch.Tensor) and 1 in a.shape for a in args):
            return self.fn(*args)
        return super().__call__(*args)


def wait_until_ready(timeout: float | None = None) -> bool:
    """Block until every queued compilation is done (tests, benchmarks). True when none is left."""
    return compile_engine.wait_until_ready(timeout)


def unavailable_reason() -> str | None:
    """Why no compiled kernels can run here (None while they can, or have not been tried)."""
    return compile_engine.unavailable_reason()
