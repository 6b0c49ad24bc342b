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
from typing import Callable

import torch

from . import compile_engine

log = logging.getLogger(__name__)

ENV = compile_engine.ENV

Clip = float | torch.Tensor | None

# from how many cells a step (batch x cell dim) runs compiled: a compiled call costs ~70 us more than
# eager calls before its loop starts (Python wrappers, guards), which a batch of one on the full-size
# model (4,096 cells) does not earn back (a forward 85 ms eager, 85-95 ms compiled, one thread, AMD
# EPYC Zen 4); at batch 32 the one pass wins (1.11 s -> 1.02 s). On Zen 5 with the bound at 4,096, whole
# full-size forwards at batch 1 ran compiled / eager 0.99x in bf16 and 0.96x in fp32 (docs/performance-log.md)
MIN_CELLS = 16384



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


def _examples(product, addend, c, valid, cell_clip, operand_dtype, bias) -> list[tuple]:
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
    for step in [3, 0]:  # a step inside the sequence, and the first (offsets of 0 compile apart)
        examples.append((
            like(product, lambda: torch.zeros(*lead, batch, 4 * hidden, dtype=product.dtype)),
            like(addend, lambda: torch.zeros(  # noqa: B023 (used at once)
                *lead, batch, 7, 4 * hidden, dtype=addend.dtype).select(-2, step)),  # noqa: B023
            like(c, lambda: torch.zeros(*lead, batch, hidden, dtype=c.dtype)),
            # a mask's column, a view: of 11 columns (a stride no size equals; 2 would equal the
            # two directions' leading dim, a guard the real mask's stride, its steps, misses), the
            # first column for the first step (offset 0), else the 6th (an offset no size equals)
            like(valid, lambda: torch.ones(batch, 11, dtype=torch.bool)[:, 5 if step else 0][:, None]),  # noqa: B023
            cell_clip, operand_dtype,
            like(bias, lambda: torch.zeros(bias.shape, dtype=bias.dtype))))
    return examples


_CELL = compile_engine.CompiledFunction("fused LSTM step", cell_update, _examples, call_key, group="inference",
                                        prepare=compile_engine.unviewed)


def enable(wait: bool = False) -> None:
    """Let this process compile the fused step in the background (see the module docstring).
    ``wait``: a step whose kind of call is not compiled yet waits for its compilation instead of
    running eager meanwhile (0.3-6 s a kind from torch's on-disk cache, up to a minute the first
    time on a machine), so every forward of the run takes the same cell and a rerun gives the same
    numbers; for commands (a report, the suite), never for the app's pages."""
    compile_engine.enable("inference", wait=wait)


def wanted() -> bool:
    """Whether this process uses the compiled step: ``ELMO_WORKBENCH_FUSED_STEP`` when set, else
    whether :func:`enable` was called."""
    return compile_engine.ENGINE.wanted("inference")


def unavailable_reason() -> str | None:
    """Why no compiled step can run in this process (None while it can, or has not been tried)."""
    return compile_engine.unavailable_reason()


def cell_for(product: torch.Tensor, addend: torch.Tensor | None, c: torch.Tensor, valid: torch.Tensor | None,
             cell_clip: Clip, operand_dtype: torch.dtype, bias: torch.Tensor | None = None) -> Callable:
    """The cell to run a sequence's steps with: counted by the engine, compiled where ready for this
    kind of call, else :func:`cell_update` (and, the first time a kind is seen, its compilation is
    queued)."""
    if product.device.type != "cpu" or c.shape[-2] * c.shape[-1] < MIN_CELLS or not _CELL.wanted():
        return cell_update
    return _CELL.for_call(product, addend, c, valid, cell_clip, operand_dtype, bias)


def counts() -> dict:
    """Per kind of call of the fused step: its state and how many steps ran compiled and eager."""
    return compile_engine.counts().get(_CELL.name, {})


def wait_until_ready(timeout: float | None = None) -> bool:
    """Block until every queued compilation is done (for tests and benchmarks; pages never wait).
    True when nothing is left queued."""
    return compile_engine.wait_until_ready(timeout)
