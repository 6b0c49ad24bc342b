"""The LSTM cell's elementwise work of one time step, in one pass where PyTorch's compiler is here.

Every time step of the biLM's LSTMs does two matrix products (the recurrent one and the projection)
and, between them, the cell's elementwise work over the (B, 4H) gates: the gate sum (the step's input
product plus the recurrent product), three sigmoids and a tanh, the new cell state, its clip, the
mask, and the projection's operand ``sigmoid(o) * tanh(c)`` cast to the products' precision. Eager
PyTorch does that in a dozen passes over memory, one kernel each; :func:`cell_update` written once
and compiled by ``torch.compile`` (Inductor's C++ backend on a CPU) does it in one loop, with the
same numbers up to the last bits of the nonlinearities' vectorised code (max |difference| 1.2e-7 on
the cell state in fp32, bf16 operands bit-identical in ``tests/test_fused_step.py``).

Compiling takes seconds to a minute the first time on a machine (C++ builds; later processes reuse
torch's on-disk cache), so it never blocks the app: :func:`cell_for` answers the compiled cell
only once a background thread has compiled it for that kind of call (precision, masked or not,
batch of one or more, clip bounds, grad mode), and the eager :func:`cell_update` until then.
Commands whose numbers must not depend on how fast the compiler was (a report, the suite, WSD, a
long embedding: ``enable(wait=True)``) wait for each kind's compilation instead, so a rerun gives
the same numbers to the last bit (eager and compiled differ in the last bits). Where
the compiler cannot work (no C++ compiler, an unusual build) the eager step runs, said once.

Which processes compile: compiling pays where a process runs many steps (the app's server, an
embedding or probe run); a short command would spend more on it than it saves. So it is off
until :func:`enable` is called (the app and the long commands call it), and the environment
variable ``ELMO_WORKBENCH_FUSED_STEP`` decides over both: ``1`` on everywhere, ``0`` off
everywhere (the eager step, same numbers up to the last bits).

Inference only (no gradient), CPU tensors only: training takes its own path, and on a GPU the
step stays eager until a GPU run has measured a compiled one (``bench/gpu_check.py``).
"""

from __future__ import annotations

import logging
import os
import queue
import shutil
import threading
from typing import Callable

import torch

log = logging.getLogger(__name__)

ENV = "ELMO_WORKBENCH_FUSED_STEP"

Clip = float | torch.Tensor | None

# from how many cells a step (batch x cell dim) runs compiled: a compiled call costs ~70 us more than
# eager calls before its loop starts (Python wrappers, guards), which a batch of one on the full-size
# model (4,096 cells) does not earn back (a forward 85 ms eager, 85-95 ms compiled, one thread, AMD
# EPYC Zen 4); at batch 32 the one pass wins (1.11 s -> 1.02 s). On Zen 5 with the bound at 4,096, whole
# full-size forwards at batch 1 ran compiled / eager 0.99x in bf16 and 0.96x in fp32 (docs/performance.md)
MIN_CELLS = 16384

# compiled graphs of cell_update a process may hold (torch's per-function limit is raised to it)
RECOMPILE_LIMIT = 64


def cell_update(product: torch.Tensor, addend: torch.Tensor | None, c: torch.Tensor, valid: torch.Tensor | None,
                cell_clip: Clip, operand_dtype: torch.dtype, bias: torch.Tensor | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
    """The cell's elementwise work of one step: gates = ``(addend + bias) + product`` (in the cell
    state's dtype, fp32 or a float64 model's, each widened from its product's dtype; ``bias`` None where the addend holds it already, ``addend``
    None where the product already holds the sum),
    in the order i, f, g, o, each (..., B, H) -> the new cell state (fp32, clipped, the old one
    where ``valid`` (B, 1) is False) and the projection's operand ``sigmoid(o) * tanh(c_new)``
    (unmasked, as the output mask applies after the projection) in ``operand_dtype``."""
    wide = c.dtype  # fp32, or float64 for a float64 model
    if addend is None:
        gates = product.to(wide)
    else:
        gates = (addend.to(wide) if bias is None else addend.to(wide) + bias) + product.to(wide)
    if gates.device.type == "cpu":  # each gate's own sigmoid: a sigmoid of g would be work thrown away
        i, f, g, o = gates.chunk(4, dim=-1)
        i, f, o = torch.sigmoid(i), torch.sigmoid(f), torch.sigmoid(o)
    else:  # one sigmoid over the four gates: fewer kernel launches, what a GPU's step time goes to
        i, f, _, o = torch.sigmoid(gates).chunk(4, dim=-1)
        g = gates[..., 2 * c.shape[-1] : 3 * c.shape[-1]]
    c_new = f * c + i * torch.tanh(g)
    if cell_clip is not None:
        c_new = torch.clamp(c_new, -cell_clip, cell_clip)
    operand = (o * torch.tanh(c_new)).to(operand_dtype)
    if valid is not None:
        c_new = torch.where(valid, c_new, c)
    return c_new, operand


_lock = threading.Lock()
_enabled = False
_waits = False  # enable(wait=True): a call waits for its kind's compilation (same numbers every run)
_compiled: Callable | None = None  # torch.compile(cell_update): compiles on a call it has no code for
_run_only: Callable | None = None  # the same code, never compiling: eager where it has none
_compiling = False
_unavailable: str | None = None
_ready: set[tuple] = set()
_pending: set[tuple] = set()
_work: "queue.Queue[tuple]" = queue.Queue()
_worker: threading.Thread | None = None


def enable(wait: bool = False) -> None:
    """Let this process compile the fused step in the background (see the module docstring).
    ``wait``: a step whose kind of call is not compiled yet waits for its compilation instead of
    running eager meanwhile (0.3-6 s a kind from torch's on-disk cache, up to a minute the first
    time on a machine), so every forward of the run takes the same cell and a rerun gives the same
    numbers; for commands (a report, the suite), never for the app's pages."""
    global _enabled, _waits
    _enabled = True
    _waits = _waits or wait


def wanted() -> bool:
    """Whether this process uses the compiled step: ``ELMO_WORKBENCH_FUSED_STEP`` when set, else
    whether :func:`enable` was called."""
    setting = os.environ.get(ENV, "").strip().lower()
    if setting in ("0", "false", "no", "off"):
        return False
    if setting in ("1", "true", "yes", "on"):
        return True
    return _enabled


def unavailable_reason() -> str | None:
    """Why the compiled step cannot run in this process (None while it can, or has not been tried)."""
    return _unavailable


def _clip_key(clip: Clip) -> object:
    if clip is None or isinstance(clip, (int, float)):
        return clip
    return ("tensor", tuple(clip.shape), tuple(clip.flatten().tolist()))


def call_key(product: torch.Tensor, addend: torch.Tensor | None, c: torch.Tensor, valid: torch.Tensor | None,
             cell_clip: Clip, operand_dtype: torch.dtype, bias: torch.Tensor | None = None) -> tuple:
    """What the compiled code is specialised on: dtypes, which inputs are there, a batch of one
    (compiled apart from larger ones), the leading dims, the clip bounds, the grad mode."""
    return (product.dtype, None if addend is None else addend.dtype, None if bias is None else bias.dim(),
            valid is not None, c.dim(), c.shape[-2] == 1, _clip_key(cell_clip),
            operand_dtype, torch.is_inference_mode_enabled(), torch.is_grad_enabled())


def cell_for(product: torch.Tensor, addend: torch.Tensor | None, c: torch.Tensor, valid: torch.Tensor | None,
             cell_clip: Clip, operand_dtype: torch.dtype, bias: torch.Tensor | None = None) -> Callable:
    """The cell to run this step with: the compiled one where it is ready for this kind of call,
    else :func:`cell_update` (and, the first time a kind is seen, its compilation is queued)."""
    # both directions in one loop (c (2, B, H), a GPU's default, on a CPU only when asked for) stay
    # eager: in a fresh process its compiled graphs missed their guards at every step (cause not found)
    if (_unavailable is not None or product.device.type != "cpu" or c.dim() != 2
            or c.shape[-2] * c.shape[-1] < MIN_CELLS or not wanted()):
        return cell_update
    key = call_key(product, addend, c, valid, cell_clip, operand_dtype, bias)
    if key in _ready and not _compiling:
        return _run_only
    with _lock:
        if key not in _pending and _unavailable is None:
            _pending.add(key)
            _work.put((key, _examples(product, addend, c, valid, bias), cell_clip, operand_dtype))
            _start_worker()
    if _waits and _wait_for(key):
        return _run_only
    return cell_update


def _wait_for(key: tuple) -> bool:
    """Wait until ``key`` is compiled and no compilation runs (True), or the compiler failed (False)."""
    said = False
    while _unavailable is None and not (key in _ready and not _compiling):
        if not said:
            log.info("compiling the fused LSTM step for this kind of call (from torch's cache: seconds; "
                     "the first time on a machine: up to a minute)")
            said = True
        threading.Event().wait(0.02)
    return _unavailable is None


def _examples(product, addend, c, valid, bias) -> list[tuple]:
    """Small inputs of the same kind to compile on: dtypes, leading dims, width, a batch of one or
    of several, the addend a step's slice of a (..., B, T, 4H) tensor as the time loops give it,
    each an inference tensor where the real one is (the compiled code is specialised on that).
    The compiler assumes that sizes, strides and offsets equal in the example are equal in every
    call ("duck sizing"), so the example's are all distinct: a batch of 3 (not the 2 of the
    direction pairs), the slice at step 3 of 7 (an offset no size or stride equals); and it
    compiles an offset of 0 apart from the others, so the first step (offset 0) is an example too."""
    batch = 1 if c.shape[-2] == 1 else 3
    lead = tuple(c.shape[:-2])
    hidden = c.shape[-1]

    def like(real: torch.Tensor | None, make: Callable[[], torch.Tensor]) -> torch.Tensor | None:
        if real is None:
            return None
        with torch.inference_mode(real.is_inference()):
            return make()

    examples = []
    for step in [None] if addend is None else [3, 0]:
        examples.append((
            like(product, lambda: torch.zeros(*lead, batch, 4 * hidden, dtype=product.dtype)),
            None if step is None else like(addend, lambda: torch.zeros(  # noqa: B023 (used at once)
                *lead, batch, 7, 4 * hidden, dtype=addend.dtype).select(-2, step)),  # noqa: B023
            like(c, lambda: torch.zeros(*lead, batch, hidden, dtype=c.dtype)),
            like(valid, lambda: torch.ones(batch, 2, dtype=torch.bool)[:, 1:]),  # a mask's column, a view
            like(bias, lambda: torch.zeros(bias.shape, dtype=bias.dtype))))
    return examples


def _start_worker() -> None:
    global _worker
    if _worker is None:
        _worker = threading.Thread(target=_compile_queued, name="fused-lstm-step-compiler", daemon=True)
        _worker.start()


def _compiler_missing() -> str | None:
    try:
        import torch._inductor.config as inductor_config
        compiler = inductor_config.cpp.cxx[-1] if isinstance(inductor_config.cpp.cxx, tuple) else inductor_config.cpp.cxx
    except (ImportError, AttributeError):
        return "this PyTorch has no Inductor compiler"
    compiler = os.environ.get("CXX") or compiler or "g++"
    if shutil.which(compiler) is None:
        return f"no C++ compiler ({compiler}) on PATH"
    return None


def _mark_unavailable(reason: str) -> None:
    global _unavailable
    _unavailable = reason
    log.warning("the fused LSTM step is unavailable (%s); running the eager step (same numbers, slower)", reason)


def _compile_queued() -> None:
    global _compiled, _run_only, _compiling, _worker
    work = _work  # this worker's queue, for its whole life
    while True:
        try:
            key, examples, cell_clip, operand_dtype = work.get(timeout=1.0)
        except queue.Empty:
            with _lock:
                if work.empty():
                    if _worker is threading.current_thread():
                        _worker = None
                    return
            continue
        if _unavailable is not None:
            continue
        _compiling = True
        try:
            if _compiled is None:
                missing = _compiler_missing()
                if missing:
                    _mark_unavailable(missing)
                    continue
                # one compiled graph per kind of call (precision, masked, a batch of one, the first
                # step's offset, ...): a server with fp32 and bf16 models meets more than torch's
                # default limit of 8 per function, past which it would run eager, unsaid
                torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, RECOMPILE_LIMIT)
                _compiled = torch.compile(cell_update, dynamic=True)
                _run_only = torch._dynamo.run(_compiled)
            inference, grad = key[-2], key[-1]
            with torch.inference_mode(inference), torch.set_grad_enabled(grad and not inference):
                for product, addend, c, valid, bias in examples:
                    _compiled(product, addend, c, valid, cell_clip, operand_dtype, bias)
            _ready.add(key)
        except Exception as err:  # a compiler that fails: the eager step, said once
            _mark_unavailable(f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"[:300])
        finally:
            _compiling = False


def wait_until_ready(timeout: float | None = None) -> bool:
    """Block until every queued compilation is done (for tests and benchmarks; pages never wait).
    True when nothing is left queued."""
    worker = _worker
    if worker is not None:
        worker.join(timeout)
    return _worker is None
