"""Numeric precision of the biLM's matrix products: ``"fp32"`` or ``"bf16"``.

``bf16`` means: the operands of every large matrix product (the char-CNN windows, highway and
projection layers, the LSTM's input, recurrent and projection products) are rounded to bfloat16
and multiplied by the CPU's bf16 units, accumulating in fp32; everything that carries or
accumulates state stays fp32: the LSTM cell state and hidden state, the gates' nonlinearities,
clipping, biases, residual sums and the outputs. Weights stay fp32 (the master copy a trainer
updates); their bf16 copies are cached for inference and re-cast every step while training.

Whether bf16 pays is a property of the machine: processors with bf16 instructions (``avx512_bf16``,
AMX) multiply bf16 several times faster than fp32, while on others oneDNN has no bf16 kernel and
PyTorch falls back to a reference loop hundreds of times slower. ``bf16_support()`` checks both
(kernels present and a bf16 product measurably faster) once per process; ``resolve_precision``
turns a request into what will run and says once, in the log, when bf16 was asked for and fp32
runs instead. ``"auto"`` (the default of the command lines and the app) is bf16 where it pays and
fp32 elsewhere; the fidelity that choice rests on is measured by ``bench/bf16_fidelity.py``.

``"bf16-emulated"`` is for measuring, not for use: the same roundings done with fp32 arithmetic
(operands and products rounded to bf16, fp32 accumulation), so a machine without bf16 units can
measure what bf16 costs in fidelity. ``tests/test_precision.py`` checks it against the real bf16
kernels on small shapes.
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass
from typing import Callable

import torch

log = logging.getLogger(__name__)

PRECISIONS = ("fp32", "bf16")
#: what a user may ask for: a precision, or "auto" (bf16 where this machine's bf16 units pay)
PRECISION_CHOICES = ("auto",) + PRECISIONS
#: internal, for fidelity measurements only (see the module docstring)
EMULATED_BF16 = "bf16-emulated"

# a bf16 product must beat fp32 by this factor on the LSTM-step shape to be worth the roundings
_MIN_SPEEDUP = 1.3


@dataclass(frozen=True)
class Bf16Support:
    """What this machine offers: ``usable`` when bf16 kernels exist and beat fp32 by
    ``_MIN_SPEEDUP`` on a (64 x 512) @ (512 x 4096) product; ``reason`` says why not."""

    usable: bool
    speedup: float | None
    reason: str


@functools.lru_cache(maxsize=1)
def bf16_support() -> Bf16Support:
    """Checked once per process (~0.1 s where bf16 kernels exist, instant where they do not)."""
    try:
        kernels = bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        kernels = False
    if not kernels:
        capability = getattr(torch.backends.cpu, "get_cpu_capability", lambda: "unknown")()
        return Bf16Support(False, None, f"this CPU has no bf16 matrix units (torch sees {capability}; "
                                        "bf16 needs avx512_bf16 or AMX)")
    speedup = _measured_speedup()
    if speedup < _MIN_SPEEDUP:
        return Bf16Support(False, speedup, f"bf16 products are only {speedup:.2f}x as fast as fp32 here")
    return Bf16Support(True, speedup, f"bf16 products {speedup:.1f}x as fast as fp32")


def _measured_speedup(rows: int = 64, inner: int = 512, cols: int = 4096, seconds: float = 0.04) -> float:
    """fp32 time / bf16 time of one LSTM-step-sized product, best of a few repeats each."""
    a, b = torch.randn(rows, inner), torch.randn(inner, cols)

    def best(x: torch.Tensor, y: torch.Tensor) -> float:
        torch.mm(x, y)  # warm-up (kernel selection)
        times, start = [], time.perf_counter()
        while time.perf_counter() - start < seconds or len(times) < 3:
            t = time.perf_counter()
            torch.mm(x, y)
            times.append(time.perf_counter() - t)
            if len(times) >= 200:
                break
        return min(times)

    return best(a, b) / best(a.bfloat16(), b.bfloat16())


def resolve_precision(requested: str | None) -> str:
    """``"auto"`` / ``None`` / ``"fp32"`` / ``"bf16"`` -> the precision that will run. bf16 asked
    for on a machine where it does not pay runs fp32, with one warning per process."""
    if requested in (None, "auto"):
        return "bf16" if bf16_support().usable else "fp32"
    if requested == EMULATED_BF16 or requested == "fp32":
        return requested
    if requested != "bf16":
        raise ValueError(f"precision {requested!r}: expected one of {', '.join(PRECISION_CHOICES)}")
    support = bf16_support()
    if support.usable:
        return "bf16"
    _warn_fallback(support.reason)
    return "fp32"


@functools.lru_cache(maxsize=None)
def _warn_fallback(reason: str) -> None:
    log.warning("bf16 requested, running fp32: %s", reason)


def round_to_bf16(x: torch.Tensor) -> torch.Tensor:
    """fp32 -> the nearest bf16 value, kept in fp32 (round to nearest even, as the hardware)."""
    return x.to(torch.bfloat16).to(torch.float32)


@functools.lru_cache(maxsize=1)
def packed_bf16_products() -> bool:
    """Whether oneDNN's prepacked bf16 linear (the kernel PyTorch's compiler uses on CPUs) is
    here and gives the numbers ``torch.matmul`` gives: checked once per process on an
    LSTM-step-sized product, so using it never changes a result."""
    try:
        reorder = torch.ops.mkldnn._reorder_linear_weight
        linear = torch.ops.mkldnn._linear_pointwise
        with torch.no_grad():
            generator = torch.Generator().manual_seed(0)
            x = torch.randn(7, 96, generator=generator).bfloat16()
            w = torch.randn(160, 96, generator=generator).bfloat16()
            return bool(torch.equal(linear(x, reorder(w, 7), None, "none", [], ""), torch.matmul(x, w.t())))
    except (AttributeError, RuntimeError):
        return False


class ProductPrecision:
    """The matrix products of one module in a given precision. ``matmul(x, w)`` takes fp32 x
    (..., K) and a weight ``w`` (K, N) and returns fp32 (..., N). ``weight(w)`` gives the
    operand form of a weight once per forward (cached across forwards when no gradient is taken)."""

    def __init__(self, precision: str) -> None:
        self.precision = precision
        self._cache: dict[object, tuple[int, int, torch.Tensor]] = {}

    @property
    def is_fp32(self) -> bool:
        return self.precision == "fp32"

    def weight(self, w: torch.Tensor) -> torch.Tensor:
        """The weight as the products take it: bf16 (native), bf16-rounded fp32 (emulated) or as is."""
        if self.precision == "fp32":
            return w
        convert = (lambda t: t.to(torch.bfloat16)) if self.precision == "bf16" else round_to_bf16
        if torch.is_grad_enabled() and w.requires_grad:
            return convert(w)  # training: cast the current master weight, differentiably
        key = id(w)
        cached = self._cache.get(key)
        if cached is not None and cached[0] == w.data_ptr() and cached[1] == w._version:
            return cached[2]
        with torch.no_grad():
            converted = convert(w.detach())
        self._cache[key] = (w.data_ptr(), w._version, converted)
        return converted

    def repeated_product(self, w: torch.Tensor, rows: int) -> Callable[[torch.Tensor], torch.Tensor]:
        """``x -> x @ w.T`` (fp32 x (rows, K), weight w (N, K) -> fp32 (rows, N)) for one weight
        applied many times over, as in the LSTM's time loop. At inference in native bf16 the
        weight is packed once into oneDNN's blocked layout (``packed_bf16_products``: the same
        numbers as ``matmul``), which spares every call the layout work: 1.4x on the full-size
        model's recurrent product (32 x 512) @ (512 x 16384) and 1.3x on its projection
        (32 x 4096) @ (4096 x 512), one thread, bench/bilm_throughput.py's machine."""
        if self.precision == "bf16" and not (torch.is_grad_enabled() and w.requires_grad) and packed_bf16_products():
            key = ("packed", id(w))
            cached = self._cache.get(key)
            if cached is not None and cached[0] == w.data_ptr() and cached[1] == w._version:
                packed = cached[2]
            else:
                with torch.no_grad():
                    packed = torch.ops.mkldnn._reorder_linear_weight(w.detach().to(torch.bfloat16), max(1, rows))
                self._cache[key] = (w.data_ptr(), w._version, packed)
            linear = torch.ops.mkldnn._linear_pointwise
            return lambda x: linear(x.to(torch.bfloat16), packed, None, "none", [], "").to(torch.float32)
        operand = self.weight(w).t()
        return lambda x: self.matmul(x, operand)

    def operand(self, x: torch.Tensor) -> torch.Tensor:
        """An activation as the products take it."""
        if self.precision == "fp32":
            return x
        if self.precision == "bf16":
            return x.to(torch.bfloat16)
        return round_to_bf16(x)

    def result(self, y: torch.Tensor) -> torch.Tensor:
        """A product's result back to fp32 (rounded through bf16, as the bf16 kernels write it)."""
        if self.precision == "fp32":
            return y
        if self.precision == "bf16":
            return y.to(torch.float32)
        return round_to_bf16(y)

    def matmul(self, x: torch.Tensor, w_operand: torch.Tensor) -> torch.Tensor:
        """fp32 x (..., K) @ ``weight(w)`` (K, N) -> fp32 (..., N)."""
        if self.precision == "fp32":
            return torch.matmul(x, w_operand)
        return self.result(torch.matmul(self.operand(x), w_operand))
