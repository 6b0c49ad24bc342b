"""The one background-compile engine: functions compiled by ``torch.compile`` in a worker thread, per
kind of call, while the eager function answers meanwhile; the fused LSTM step of inference
(``fused_step.py``) and the char CNN's training kernels (``elmo_model/training/kernels.py``) use it.

What it guarantees, whatever the caller:

- **Settings in every thread.** Dynamo's settings are thread-local in torch 2.13 (a ContextVar per
  thread). The raised recompile limits are set around every compilation, in whichever thread does it,
  never once in one thread that then exits.
- **Counts.** Every call made through :meth:`CompiledFunction.for_call` (or ``__call__``) is counted
  per kind of call, as ``compiled`` or ``eager``; a call whose compiled code's guards miss runs the
  eager body, which marks it eager (``torch.compiler.is_compiling()`` is a constant True inside the
  compiled code, so the mark exists only where the eager body runs). :func:`counts` gives them all.
- **Said once.** A kind that was ready and then runs eager says so once, in one line with the reason.
- **A failed compile leaves that kind eager and no other.** Only a missing C++ compiler (nothing can
  compile) turns the whole engine off.
- **Nothing hangs.** A fork resets the engine in the child (a worker thread does not survive a fork,
  and a lock held by it would stay held); waiting for a compilation gives up after ``timeout_s``
  (``ELMO_WORKBENCH_COMPILE_TIMEOUT``, 600 s) and the kind runs eager, said once.

On and off: a function is used compiled only after its group was enabled (``enable(group)``; the app
and long commands enable ``"inference"``, the trainer ``"training"``) or when ``ELMO_WORKBENCH_FUSED_STEP``
is ``1``; ``0`` turns every group off (the eager functions, same numbers up to the last bits).
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import shutil
import threading
import time
import types
from dataclasses import dataclass
from typing import Callable

import torch

log = logging.getLogger(__name__)

ENV = "ELMO_WORKBENCH_FUSED_STEP"
TIMEOUT_ENV = "ELMO_WORKBENCH_COMPILE_TIMEOUT"

# compiled graphs a function may hold: a server with fp32 and bf16 models, masked and unmasked, batches
# of one and more, meets more than torch's default of 8 per function, past which it would run eager
RECOMPILE_LIMIT = 64


@dataclass
class Kind:
    """One kind of call of one function: its state and how its calls ran."""

    state: str = "queued"  # queued, ready, failed
    compiled: int = 0
    eager: int = 0
    reason: str | None = None  # why it failed or stopped running compiled
    said: bool = False
    run: Callable | None = None  # its compiled code, never compiling more

    def as_dict(self) -> dict:
        return {"state": self.state, "compiled": self.compiled, "eager": self.eager, "reason": self.reason}


_local = threading.local()  # the kind whose compiled code a call of this thread is running

#: Held by the compiling thread while it compiles, and by code that draws seeded numbers from torch's
#: global RNG (a random biLM's weights, a probe's first weights): tracing saves the global RNG state
#: and restores it when done, which rewinds any other thread's draws made in between.
RNG_LOCK = threading.Lock()


def _mark_eager() -> None:
    """Called by the eager body only: the call in flight ran eager (a guard miss, a fallback)."""
    kind = getattr(_local, "kind", None)
    if kind is None:
        return
    _local.kind = None
    kind.compiled -= 1
    kind.eager += 1
    if kind.state == "ready" and not kind.said:
        kind.said = True
        kind.reason = kind.reason or "its compiled code's guards missed (TORCH_LOGS=recompiles shows which)"
        log.warning("a compiled kind of call ran eager: %s", kind.reason)


def unviewed(args: tuple) -> tuple:
    """The arguments with every tensor detached: the same memory, no longer a view of a base. The
    compiled code's guards check a view's base too, so a slice (a step's slice of the time loop's
    tensor, a block's rows of a gradient) missed them whenever its base was made another way than
    the example's (the call then ran eager; "tuple index out of range" in torch's recompile log).
    Only for calls that take no gradient through the compiled function (a ``prepare``)."""
    return tuple(a.detach() if isinstance(a, torch.Tensor) else a for a in args)


class CompiledFunction:
    """``fn`` compiled in the background per kind of call. ``examples(*args)`` gives small inputs of
    the same kind to compile on (a list of argument tuples, sizes all distinct and above 1: the
    compiler assumes sizes equal in an example are equal in every call and specialises 0 and 1).
    ``key(*args)`` names the kind (what the compiled code is specialised on). ``prepare(args)``
    turns a call's arguments into what the compiled code takes (for example tensors detached from
    their views' bases)."""

    def __init__(self, name: str, fn: Callable, examples: Callable[..., list], key: Callable[..., tuple],
                 group: str, prepare: Callable[[tuple], tuple] | None = None) -> None:
        self.name, self.fn, self.examples, self.key, self.group = name, fn, examples, key, group
        self.prepare = prepare or (lambda args: args)
        self.kinds: dict[tuple, Kind] = {}

        ENGINE.functions[name] = self

    def for_call(self, *args) -> Callable:
        """The callable to run calls of this kind with: counted, compiled where ready, eager
        otherwise (and, the first time a kind is seen, its compilation is queued)."""
        kind_key = self.key(*args)
        kind = self.kinds.get(kind_key)
        if kind is None:
            kind = ENGINE.queue(self, kind_key, args)
        elif kind.state == "queued" and ENGINE.waits(self.group):
            ENGINE.wait_for(self, kind)
        if kind.state == "ready" and not ENGINE.compiling:
            run, prepare = kind.run, self.prepare

            def compiled(*call_args):
                kind.compiled += 1
                _local.kind = kind
                try:
                    return run(*prepare(call_args))
                finally:
                    _local.kind = None
            return compiled

        fn = self.fn

        def eager(*call_args):
            kind.eager += 1
            return fn(*call_args)
        return eager

    def __call__(self, *args):
        if not self.wanted(args):
            return self.fn(*args)
        return self.for_call(*args)(*args)

    def wanted(self, args: tuple = ()) -> bool:
        """Whether this call goes through the engine: its group is on, the engine can compile,
        the tensors are on the CPU."""
        first = next((a for a in args if isinstance(a, torch.Tensor)), None)
        return (ENGINE.unavailable is None and ENGINE.wanted(self.group)
                and (first is None or first.device.type == "cpu"))

    def _traced(self) -> Callable:
        """A new function object with a code object of its own that runs ``fn`` and, where it runs
        eager, marks the call. Dynamo keeps its compiled code, its recompile count and any failure
        per code object: each kind of call gets its own, so one kind's failed compile or its
        graphs never touch another kind's."""
        fn = self.fn

        def traced(*args):
            if not torch.compiler.is_compiling():
                _mark_eager()
            return fn(*args)

        code = traced.__code__.replace(co_name=f"compiled_{len(self.kinds)}_{self.name.replace(' ', '_')}")
        return types.FunctionType(code, traced.__globals__, code.co_name, None, traced.__closure__)

    def _compile(self, kind: Kind, examples: list, grad: bool, inference: bool) -> None:
        compiled = torch.compile(self._traced(), dynamic=True)
        run = torch._dynamo.run(compiled)
        with torch.inference_mode(inference), torch.set_grad_enabled(grad and not inference):
            for example in examples:
                compiled(*self.prepare(example))
            # the compiled code must take its own examples: a graph the limit refused, or a guard
            # that never holds, would otherwise run eager at every step, marked ready
            probe = Kind(state="ready", said=True)
            for example in examples:
                probe.compiled += 1
                _local.kind = probe
                try:
                    run(*self.prepare(example))
                finally:
                    _local.kind = None
            if probe.eager:
                raise RuntimeError(f"the compiled code did not take {probe.eager} of its {len(examples)} examples")
        kind.run = run


class _Engine:
    """The process's one queue and worker thread (module docstring)."""

    def __init__(self) -> None:
        self.functions: dict[str, CompiledFunction] = {}
        self.enabled: set[str] = set()
        self.waiting_groups: set[str] = set()
        self.unavailable: str | None = None
        self._reset_threads()

    def _reset_threads(self) -> None:
        self.lock = threading.Lock()
        self.work: "queue.Queue[tuple]" = queue.Queue()
        self.worker: threading.Thread | None = None
        self.compiling = False
        self.closing = False

    def _close(self) -> None:
        """At interpreter exit (before non-daemon threads are joined): take no more work, so the
        worker finishes the compilation it is in and leaves; it is joined, never killed in native
        code (a daemon thread inside a C++ compile aborted the process at exit: "terminate called
        without an active exception")."""
        self.closing = True

    def _after_fork(self) -> None:
        """In a forked child: no worker thread came along, so nothing queued there will be compiled;
        kinds that were queued are forgotten (the next call queues them again, in the child)."""
        self._reset_threads()
        for fn in self.functions.values():
            fn.kinds = {k: v for k, v in fn.kinds.items() if v.state != "queued"}

    # -- switches ---------------------------------------------------------------------------
    def wanted(self, group: str) -> bool:
        setting = os.environ.get(ENV, "").strip().lower()
        if setting in ("0", "false", "no", "off"):
            return False
        if setting in ("1", "true", "yes", "on"):
            return True
        return group in self.enabled

    def waits(self, group: str) -> bool:
        return group in self.waiting_groups

    # -- queueing and compiling -------------------------------------------------------------
    def queue(self, fn: CompiledFunction, kind_key: tuple, args: tuple) -> Kind:
        with self.lock:
            kind = fn.kinds.get(kind_key)
            if kind is not None:
                return kind
            kind = fn.kinds[kind_key] = Kind()
            if self.closing:
                kind.state, kind.reason = "failed", "the process is exiting"
                return kind
            with torch.no_grad():
                examples = fn.examples(*args)
            inference = torch.is_inference_mode_enabled()
            self.work.put((fn, kind_key, kind, examples, torch.is_grad_enabled(), inference))
            self._ensure_worker()
        if self.waits(fn.group):
            self.wait_for(fn, kind)
        return kind

    def _ensure_worker(self) -> None:
        """A live worker for the queued work (the caller holds the lock: a thread created here is
        started before any other thread can look at it)."""
        if self.worker is None or not self.worker.is_alive():
            # never a daemon, whoever asks: a thread inherits its creator's daemon flag, and Streamlit's
            # script threads are daemons; a daemon worker is not joined at exit, and one still inside
            # a C++ compile when the interpreter finalizes aborts the process
            self.worker = threading.Thread(target=self._compile_queued, name="background-compiler", daemon=False)
            self.worker.start()

    def _worker_gone(self, kind: Kind) -> bool:
        """Whether ``kind`` is queued with nobody left to compile it (a fork, a dead thread). Read
        under the lock: the two directions of a biLM run in two threads, and one of them saw the
        worker the other was starting before it started, and failed the kind. Work still waiting
        in the queue gets a new worker instead."""
        with self.lock:
            if kind.state != "queued" or (self.worker is not None and self.worker.is_alive()):
                return False
            if self.work.empty():
                return True
            self._ensure_worker()
            return False

    def _compile_queued(self) -> None:
        while True:
            try:
                fn, kind_key, kind, examples, grad, inference = self.work.get(timeout=1.0)
                if self.closing:
                    self._fail(fn, kind, "the process is exiting")
                    continue
            except queue.Empty:
                with self.lock:
                    if self.work.empty():
                        if self.worker is threading.current_thread():
                            self.worker = None
                        return
                continue
            if self.unavailable is not None:
                self._fail(fn, kind, self.unavailable)
                continue
            missing = compiler_missing()
            if missing:
                self.unavailable = missing
                log.warning("compiled code is unavailable (%s); running eager (same numbers, slower)", missing)
                self._fail(fn, kind, missing)
                continue
            self.compiling = True
            failure = None
            try:
                with settings(), RNG_LOCK:
                    fn._compile(kind, examples, grad, inference)
            except Exception as err:  # this kind stays eager; the others are untouched
                text = str(err).splitlines()[0] if str(err) else ""
                failure = f"{type(err).__name__}: {text}"[:300]
            finally:
                self.compiling = False
            # the kind's outcome is published only once no compilation runs: a caller that saw it
            # and called another, ready kind at once ran that one eager ("compiling" still set)
            if failure is None:
                kind.state = "ready"
            else:
                self._fail(fn, kind, failure)

    def _fail(self, fn: CompiledFunction, kind: Kind, reason: str) -> None:
        if not kind.said and self.unavailable is None:  # said before a waiting caller can see it
            kind.said = True
            log.warning("%s: compiling a kind of call failed (%s); that kind runs eager (same numbers, slower)",
                        fn.name, reason)
        kind.state, kind.reason = "failed", reason

    def wait_for(self, fn: CompiledFunction, kind: Kind) -> None:
        """Wait until ``kind`` is compiled (or failed) and no compilation runs; give up after the
        timeout, said once, and the kind runs eager meanwhile."""
        deadline = time.monotonic() + timeout_s()
        said = False
        while kind.state == "queued" or (kind.state == "ready" and self.compiling):
            if self._worker_gone(kind):
                self._fail(fn, kind, "the compiling thread is gone")
                return
            if time.monotonic() > deadline:
                if not kind.said:
                    kind.said = True
                    log.warning("%s: compiling a kind of call took over %.0f s (%s); running it eager meanwhile",
                                fn.name, timeout_s(), TIMEOUT_ENV)
                return
            if not said:
                log.info("compiling %s for this kind of call (from torch's cache: seconds; the first time on "
                         "a machine: up to a minute)", fn.name)
                said = True
            time.sleep(0.02)

    def wait_until_ready(self, timeout: float | None = None) -> bool:
        worker = self.worker
        if worker is not None:
            worker.join(timeout)
        return self.worker is None or not self.worker.is_alive()


ENGINE = _Engine()
os.register_at_fork(after_in_child=lambda: ENGINE._after_fork())
threading._register_atexit(lambda: ENGINE._close())  # runs before threading joins the non-daemon threads


def fresh_engine() -> _Engine:
    """A new engine holding the same functions with no kinds (for tests: the process-wide state
    empty, the functions' compiled code kept). Assign it to ``ENGINE``."""
    engine = _Engine()
    for name, fn in ENGINE.functions.items():
        fn.kinds = {}
        engine.functions[name] = fn
    return engine


@contextlib.contextmanager
def settings():
    """The engine's dynamo settings, in the calling thread (they are thread-local)."""
    config = torch._dynamo.config
    with config.patch(recompile_limit=max(config.recompile_limit, RECOMPILE_LIMIT),
                      accumulated_recompile_limit=max(config.accumulated_recompile_limit, 4 * RECOMPILE_LIMIT)):
        yield


def timeout_s() -> float:
    try:
        return float(os.environ.get(TIMEOUT_ENV, "") or 600)
    except ValueError:
        return 600.0


def compiler_missing() -> str | None:
    """Why no compiled code can be built here (None where a C++ compiler is on PATH)."""
    try:
        import torch._inductor.config as inductor_config
        compiler = inductor_config.cpp.cxx[-1] if isinstance(inductor_config.cpp.cxx, tuple) else inductor_config.cpp.cxx
    except (ImportError, AttributeError):
        return "this PyTorch has no Inductor compiler"
    compiler = os.environ.get("CXX") or compiler or "g++"
    if shutil.which(compiler) is None:
        return f"no C++ compiler ({compiler}) on PATH"
    return None


def enable(group: str, wait: bool = False) -> None:
    """Turn a group on in this process; ``wait``: its calls wait for their kind's compilation."""
    ENGINE.enabled.add(group)
    if wait:
        ENGINE.waiting_groups.add(group)


def counts() -> dict[str, dict[str, dict]]:
    """Per function, per kind of call (as text): state, compiled and eager calls, reason."""
    return {name: {repr(key): kind.as_dict() for key, kind in fn.kinds.items()}
            for name, fn in ENGINE.functions.items()}


def wait_until_ready(timeout: float | None = None) -> bool:
    """Block until every queued compilation is done (tests, benchmarks). True when none is left."""
    return ENGINE.wait_until_ready(timeout)


def unavailable_reason() -> str | None:
    return ENGINE.unavailable
