"""Training's elementwise kernels whose compiled code gives the eager numbers bit for bit, compiled
in the background: the char CNN's max-pooling and the share of its gradient each maximum takes.

Eager PyTorch runs such work as one pass over memory per operation (a comparison, a count, a
division, a product, each with its own temporary); ``torch.compile`` (Inductor's C++ backend on a
CPU) fuses it into one or two loops. Only functions whose compiled code cannot round differently
live here: maxima, comparisons, counts, and at most one rounding (a division) whose operands are
the same either way. So when the compiled code becomes ready never changes a result, and nothing
needs to wait for it: :class:`BackgroundCompiled` answers the eager function until a background
thread has compiled its kind of call (dtypes, ranks, the grad mode, any constants), the compiled
one afterwards, and the eager one for calls whose guards the compiled code does not take (a
block of one token).

On when :func:`enable` was called (the trainer calls it: a training run takes thousands of steps)
or ``ELMO_WORKBENCH_FUSED_STEP=1``; ``ELMO_WORKBENCH_FUSED_STEP=0`` turns it off, as it does the
fused LSTM step of inference (``fused_step.py``). CPU tensors only; where no C++ compiler works,
eager (said once).
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from typing import Callable

import torch

from . import fused_step

log = logging.getLogger(__name__)

_enabled = False
_unavailable: str | None = None
_work: "queue.Queue[tuple]" = queue.Queue()
_worker: threading.Thread | None = None
_lock = threading.Lock()


def enable() -> None:
    """Let this process compile the kernels in the background (a long training run)."""
    global _enabled
    _enabled = True


def wanted() -> bool:
    """``ELMO_WORKBENCH_FUSED_STEP`` where set, else whether :func:`enable` ran (``fused_step.enable``,
    which the app and inference commands call, does not turn these on)."""
    setting = os.environ.get(fused_step.ENV, "").strip().lower()
    if setting in ("0", "false", "no", "off"):
        return False
    return _enabled or setting in ("1", "true", "yes", "on")


class BackgroundCompiled:
    """``fn`` (tensors and constants -> tensors), compiled in a background thread per kind of call;
    ``examples(*args)`` gives small inputs of the same kind to compile on (a list of argument
    tuples), with sizes all distinct and above 1 (the compiler assumes sizes equal in an example
    are equal in every call, and specialises sizes 0 and 1). ``fn`` must give the same bits
    compiled and eager (see the module docstring)."""

    def __init__(self, fn: Callable, examples: Callable[..., list]) -> None:
        self.fn, self.examples = fn, examples
        self._run_only: Callable | None = None
        self._ready: set[tuple] = set()
        self._pending: set[tuple] = set()

    def __call__(self, *args):
        first = next(a for a in args if isinstance(a, torch.Tensor))
        if _unavailable is not None or first.device.type != "cpu" or not wanted():
            return self.fn(*args)
        key = tuple((a.dtype, a.dim()) if isinstance(a, torch.Tensor) else _constant_key(a) for a in args)
        key += (torch.is_grad_enabled(),)
        if key not in self._ready:
            with _lock:
                if key not in self._pending:
                    self._pending.add(key)
                    with torch.no_grad():
                        _work.put((self, key, self.examples(*args)))
                    _start_worker()
            return self.fn(*args)
        return self._run_only(*_unviewed(args))

    def _compile(self, key: tuple, examples: list) -> None:
        if self._run_only is None:
            compiled = torch.compile(self.fn, dynamic=True)
            self._compiled, self._run_only = compiled, torch._dynamo.run(compiled)
        with torch.set_grad_enabled(key[-1]):
            for example in examples:
                self._compiled(*_unviewed(example))
        self._ready.add(key)


def _unviewed(args: tuple) -> tuple:
    """The arguments with every tensor detached: the same memory, no longer a view of a base. The
    compiled code's guards check a view's base too, so a slice (a block's rows of a gradient)
    missed them whenever its base was made another way than the example's (the call then ran
    eager; "tuple index out of range" in torch's recompile log). Only for calls that take no
    gradient through the kernel (the callers here)."""
    return tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args)


def _constant_key(value: object) -> object:
    """A non-tensor argument as the compiled code is specialised on it (a clip bound, None)."""
    return value if value is None or isinstance(value, (int, float, bool, str)) else repr(value)


def _start_worker() -> None:
    global _worker
    if _worker is None:
        _worker = threading.Thread(target=_compile_queued, name="training-kernels-compiler", daemon=True)
        _worker.start()


def _compile_queued() -> None:
    global _worker, _unavailable
    while True:
        try:
            kernel, key, example = _work.get(timeout=1.0)
        except queue.Empty:
            with _lock:
                if _work.empty():
                    _worker = None
                    return
            continue
        if _unavailable is not None:
            continue
        missing = fused_step._compiler_missing()
        try:
            if missing:
                raise RuntimeError(missing)
            torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit,
                                                       fused_step.RECOMPILE_LIMIT)
            kernel._compile(key, example)
        except Exception as err:  # a compiler that fails: the eager kernels, said once
            _unavailable = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"[:300]
            log.warning("the compiled training kernels are unavailable (%s); running eager (same numbers, slower)",
                        _unavailable)


def wait_until_ready(timeout: float | None = None) -> bool:
    """Block until every queued compilation is done (tests, benchmarks). True when none is left."""
    worker = _worker
    if worker is not None:
        worker.join(timeout)
    return _worker is None


def unavailable_reason() -> str | None:
    """Why the compiled kernels cannot run here (None while they can, or have not been tried)."""
    return _unavailable
