"""Numeric precision of the biLM's matrix products: ``"fp32"`` or ``"bf16"``, resolved per device.

``bf16`` means: the operands of every large matrix product (the char-CNN windows, highway and
projection layers, the LSTM's input, recurrent and projection products) are rounded to bfloat16
and multiplied by the device's bf16 units, accumulating in fp32; everything that carries or
accumulates state stays fp32: the LSTM cell state and hidden state, the gates' nonlinearities,
clipping, biases, residual sums and the outputs. Weights stay fp32 (the master copy a trainer
updates); their bf16 copies are cached for inference and re-cast every step while training.

Whether bf16 pays is a property of the device, decided from what it reports, never by timing
(so every process on one machine decides the same):

- **CPU**: bf16 where the processor has bf16 instructions (``avx512_bf16`` or AMX's ``amx_bf16``,
  read from ``/proc/cpuinfo``, or from PyTorch's cpuinfo where there is no such file) and
  oneDNN has bf16 kernels. Elsewhere oneDNN falls back to a reference loop hundreds of times
  slower than fp32, so ``"bf16"`` asked for there runs fp32, with one warning per process.
- **CUDA**: bf16 on GPUs with bf16 tensor cores (compute capability 8.0 and up: A100, H100, ...),
  as CUDA bf16 products (explicit casts to bfloat16 and ``torch.matmul``; never oneDNN, whose
  kernels are CPU-only: ``ProductPrecision.repeated_product`` packs weights for oneDNN only when
  the weight is a CPU tensor). ``"auto"`` picks bf16 there: the fidelity it rests on (mean cosine
  to fp32 >= 0.999 at every layer) is measured on the CPU's bf16 units by
  ``bench/bf16_fidelity.py`` (docs/performance-log.md); on CUDA it is expected, to be measured by
  ``bench/gpu_check.py`` (no GPU run has measured it yet).
- any other device (``meta``, ``mps``): fp32.

``resolve_precision(requested, device)`` turns a request into what will run; ``"auto"`` (the
default of the command lines and the app) is bf16 where it pays and fp32 elsewhere.
``precision_line`` is the one line every command prints first: the model, its device and the
precision that runs.

``"bf16-emulated"`` is for measuring, not for use: the same roundings done with fp32 arithmetic
(operands and products rounded to bf16, fp32 accumulation), so a machine without bf16 units can
measure what bf16 costs in fidelity. ``tests/test_precision.py`` checks it against the real bf16
kernels on small shapes.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from .devices import model_device
from ..plumbing.flags import PRECISION_CHOICES
from .identity import model_identity

log = logging.getLogger(__name__)

#: the precisions that run (``PRECISION_CHOICES``, what a user may ask for, adds "auto")
PRECISIONS = tuple(choice for choice in PRECISION_CHOICES if choice != "auto")
#: internal, for fidelity measurements only (see the module docstring)
EMULATED_BF16 = "bf16-emulated"

#: the CPU instructions that make bf16 products pay (x86 flag names, as /proc/cpuinfo writes them)
CPU_BF16_FLAGS = ("avx512_bf16", "amx_bf16")
# CUDA compute capability from which GPUs have bf16 tensor cores (Ampere)
_CUDA_BF16_CAPABILITY = (8, 0)
_CPUINFO = Path("/proc/cpuinfo")


@dataclass(frozen=True)
class Bf16Support:
    """What a device offers: ``usable`` when bf16 products pay there; ``found`` names what was
    found (the CPU's bf16 instructions, the GPU's compute capability); ``reason`` says why (not)."""

    usable: bool
    found: tuple[str, ...] | None
    reason: str


def cpu_bf16_instructions(cpuinfo: Path = _CPUINFO) -> tuple[str, ...]:
    """The bf16 instructions (of ``CPU_BF16_FLAGS``) this CPU reports: the ``flags`` line of
    ``/proc/cpuinfo`` where there is one (Linux), else PyTorch's cpuinfo queries."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        text = ""
    flags: set[str] = set()
    for line in text.splitlines():
        if line.startswith("flags"):
            flags.update(line.partition(":")[2].split())
    if text:
        return tuple(f for f in CPU_BF16_FLAGS if f in flags)
    queries = (("avx512_bf16", "_is_avx512_bf16_supported"), ("amx_bf16", "_is_amx_tile_supported"))
    found = []
    for flag, name in queries:
        query = getattr(torch.cpu, name, None)
        try:
            if query is not None and query():
                found.append(flag)
        except RuntimeError:
            pass
    return tuple(found)


def _onednn_bf16_kernels() -> bool:
    try:
        return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except (AttributeError, RuntimeError):
        return False


def _device_key(device: str | torch.device | None) -> str:
    """"cpu", "cuda:0", "meta", ...: what bf16 support is decided (and cached) for."""
    device = torch.device("cpu" if device is None else device)
    if device.type == "cuda":
        return f"cuda:{device.index if device.index is not None else torch.cuda.current_device()}"
    return device.type


@functools.lru_cache(maxsize=None)
def _support(key: str) -> Bf16Support:
    if key == "cpu":
        found = cpu_bf16_instructions()
        capability = getattr(torch.backends.cpu, "get_cpu_capability", lambda: "unknown")()
        if not found:
            return Bf16Support(False, found, f"this CPU has no bf16 instructions (needs {' or '.join(CPU_BF16_FLAGS)}; "
                                             f"torch sees {capability})")
        if not _onednn_bf16_kernels():
            return Bf16Support(False, found, f"this PyTorch build has no oneDNN bf16 kernels (the CPU has "
                                             f"{', '.join(found)})")
        return Bf16Support(True, found, f"this CPU has {', '.join(found)}")
    if key.startswith("cuda"):
        index = int(key.partition(":")[2] or 0)
        major, minor = torch.cuda.get_device_capability(index)
        found = (f"sm_{major}{minor}",)
        if (major, minor) < _CUDA_BF16_CAPABILITY:
            return Bf16Support(False, found, f"{key} (compute capability {major}.{minor}) has no bf16 tensor cores "
                                             "(they need 8.0 or later)")
        return Bf16Support(True, found, f"{key} has bf16 tensor cores (compute capability {major}.{minor})")
    return Bf16Support(False, None, f"bf16 products are implemented for CPU and CUDA tensors, not {key}")


def bf16_support(device: str | torch.device | None = "cpu") -> Bf16Support:
    """Whether bf16 products pay on ``device`` (default: the CPU), from what it reports: the
    CPU's instructions, the GPU's compute capability. Decided once per process and device, in
    microseconds, the same way in every process on one machine (no timing)."""
    return _support(_device_key(device))


def resolve_precision(requested: str | None, device: str | torch.device | None = "cpu") -> str:
    """``"auto"`` / ``None`` / ``"fp32"`` / ``"bf16"`` -> the precision that will run on
    ``device`` (default: the CPU; a ``torch.device``, "cuda", "cuda:1", ...). bf16 asked for
    where it does not pay runs fp32, with one warning per process."""
    if requested == EMULATED_BF16 or requested == "fp32":
        return requested
    if requested not in (None, "auto", "bf16"):
        raise ValueError(f"precision {requested!r}: expected one of {', '.join(PRECISION_CHOICES)}")
    support = bf16_support(device)
    if support.usable:
        return "bf16"
    if requested == "bf16":
        _warn_fallback(support.reason)
    return "fp32"


@functools.lru_cache(maxsize=None)
def _warn_fallback(reason: str) -> None:
    log.warning("bf16 requested, running fp32: %s", reason)


def precision_line(model, requested: str | None = None, *, name: str | None = None, extra: str | None = None) -> str:
    """The first line of every command that runs a biLM: which model, where, in which precision,
    e.g. ``biLM elmo-mini (identity 3f1c...) on cuda:0, precision bf16 (auto)`` (the identity that
    keys its caches and results: :func:`elmo_model.bilm.identity.model_identity`, shown for a model loaded
    from files; a model built in memory would need its parameters hashed). ``requested``:
    what the user asked for, shown beside the resolved precision when it differs; ``name``
    instead of "biLM <the model's name>"; ``extra`` appended (", bf16 autocast")."""
    name = name or "biLM " + str(getattr(model, "name", None) or "(in memory)")
    identity = model_identity(model) if getattr(model, "checksum", None) else ""
    return run_line(name + (f" (identity {identity[:12]})" if identity else ""), model_device(model),
                    str(getattr(model, "precision", "fp32")), requested, extra)


def run_line(what: str, device: str | torch.device, precision: str, requested: str | None = None,
             extra: str | None = None) -> str:
    """``<what> on <device>, precision <precision> (<requested>)[, <extra>]``: the one format of
    :func:`precision_line`, for a run whose model does not exist yet (the trainer's)."""
    asked = f" ({requested})" if requested and requested != precision else ""
    return f"{what} on {device}, precision {precision}{asked}" + (f", {extra}" if extra else "")


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


@functools.lru_cache(maxsize=1)
def packed_fp32_products() -> bool:
    """Whether oneDNN's prepacked fp32 linear is here and multiplies in fp32 (not in a reduced
    precision that a build or a setting may allow): checked once per process against float64."""
    try:
        reorder = torch.ops.mkldnn._reorder_linear_weight
        linear = torch.ops.mkldnn._linear_pointwise
        with torch.no_grad():
            generator = torch.Generator().manual_seed(0)
            x = torch.randn(3, 512, generator=generator)
            w = torch.randn(160, 512, generator=generator)
            got = linear(x, reorder(w, 3), None, "none", [], "").double()
            # fp32 sums of 512 products of N(0, 1) numbers are ~1e-5 off float64; bf16 operands ~0.1
            return bool((got - x.double() @ w.double().t()).abs().max() < 1e-3)
    except (AttributeError, RuntimeError):
        return False


#: below this many rows (a batch of 1 to 63 sentences) the fp32 time loop's two products run on
#: oneDNN's prepacked fp32 kernel (``ProductPrecision.fp32_step_product``): MKL's product of a few
#: rows with the (N, K) weight's transposed view reads it at a fraction of the rate (full-size
#: recurrent product, one thread: 2.0-2.3 ms against 1.0-1.5 ms at 1 row, 5.3-7.7 against 0.8-0.9
#: at 2, 3.5-3.9 against 0.9-1.0 at 4; bench/step_products.py), and a whole full-size forward at
#: batch 32 ran 1.47x faster prepacked (one thread, CPU time); larger batches are not measured yet
#: (docs/performance-log.md)
FP32_PACKED_BELOW_ROWS = 64


#: a CPU weight of at most this many values is read whole by its stamp (vectors, small matrices)
STAMP_WHOLE_AT_MOST = 4096

# the flat positions of one value in every row and every column of a (rows, columns) weight
_STAMP_POSITIONS: dict[tuple[int, int], torch.Tensor] = {}


def _row_and_column_positions(rows: int, columns: int) -> torch.Tensor:
    positions = _STAMP_POSITIONS.get((rows, columns))
    if positions is None:
        i = torch.arange(max(rows, columns))
        positions = _STAMP_POSITIONS[(rows, columns)] = (i % rows) * columns + i % columns
    return positions


def weight_stamp(w: torch.Tensor) -> tuple:
    """What a cached operand made from ``w`` was made from: its memory, its version (an in-place
    edit under ``no_grad`` bumps it; a tensor made in inference mode has none: a model built under
    ``torch.inference_mode()``) and, for a contiguous weight on the CPU, its values at one position
    in every row and every column (the wrapped diagonal; the whole of a weight of at most
    ``STAMP_WHOLE_AT_MOST`` values, and of a vector such as a bias). The values catch what pointer
    and version miss, an edit through ``.data``: weights loaded or scaled by hand, and any row or
    column set (a unit ablated, an input dimension zeroed). Not seen: a few values edited off the
    diagonal. A complete read costs more than the 2% of a batch-1 forward it is allowed
    (bench/weight_checks.py, docs/reliability.md). No values off the CPU: reading them would wait
    for the device."""
    version = None if w.is_inference() else w._version
    if w.device.type != "cpu" or not w.is_contiguous() or w.numel() == 0:
        return w.data_ptr(), version
    flat = w.detach().reshape(-1)
    if flat.numel() > STAMP_WHOLE_AT_MOST and w.dim() > 1:
        flat = flat[_row_and_column_positions(w.shape[0], flat.numel() // w.shape[0])]
    return w.data_ptr(), version, flat.view(torch.uint8).numpy().tobytes()


class ProductPrecision:
    """The matrix products of one module in a given precision. ``matmul(x, w)`` takes fp32 x
    (..., K) and a weight ``w`` (K, N) and returns fp32 (..., N). ``weight(w)`` gives the
    operand form of a weight once per forward (cached across forwards when no gradient is taken)."""

    def __init__(self, precision: str) -> None:
        self.precision = precision
        self._cache: dict[object, tuple] = {}  # key -> (what it was made from, the operand): ``_kept``

    def __getstate__(self) -> dict:
        """Pickled (a model sent to Ray's workers, saved whole, deep-copied) without the kept
        operands: they are made again at the next forward, and are keyed by the ids of this
        process's weights; oneDNN's packed weights cannot be pickled at all."""
        return {"precision": self.precision}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["precision"])

    @property
    def is_fp32(self) -> bool:
        return self.precision == "fp32"

    def _kept(self, key: object, stamp: object, make: Callable[[], object]) -> object:
        """The operand kept under ``key`` if it was made from ``stamp`` (what its weights were: see
        ``weight_stamp``), else ``make()``'s, kept in its place. The stale one is dropped before the
        new one is made, so a full-size model never holds both."""
        cached = self._cache.get(key)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        self._cache.pop(key, None)
        made = make()
        self._cache[key] = (stamp, made)
        return made

    def weight(self, w: torch.Tensor) -> torch.Tensor:
        """The weight as the products take it: bf16 (native), bf16-rounded fp32 (emulated) or as is."""
        if self.precision == "fp32":
            return w
        convert = (lambda t: t.to(torch.bfloat16)) if self.precision == "bf16" else round_to_bf16
        if torch.is_grad_enabled() and w.requires_grad:
            return convert(w)  # training: cast the current master weight, differentiably
        def make() -> torch.Tensor:
            with torch.no_grad():
                return convert(w.detach())

        return self._kept(("weight", id(w)), weight_stamp(w), make)

    @property
    def operand_dtype(self) -> torch.dtype:
        """The dtype the products take their operands in (bf16 natively, fp32 otherwise)."""
        return torch.bfloat16 if self.precision == "bf16" else torch.float32

    def repeated_product(self, w: torch.Tensor, rows: int, widen: bool = True) -> Callable[[torch.Tensor], torch.Tensor]:
        """``x -> x @ w.T`` (fp32 x (rows, K), weight w (N, K) -> fp32 (rows, N)) for one weight
        applied many times over, as in the LSTM's time loop (and its input product, once a forward,
        forward after forward). At inference in native bf16 the
        weight is packed once into oneDNN's blocked layout (``packed_bf16_products``: the same
        numbers as ``matmul``), which spares every call the layout work: 1.4x on the full-size
        model's recurrent product (32 x 512) @ (512 x 16384) and 1.3x on its projection
        (32 x 4096) @ (4096 x 512), one thread, bench/bilm_throughput.py's machine. A weight on
        another device (CUDA) takes CUDA's bf16 ``matmul``. ``widen=False``: the result as the
        kernel writes it (``raw_result``), for a consumer that widens it in its own pass."""
        # oneDNN's kernels are CPU kernels: a weight on any other device (CUDA) never goes there
        if (self.precision == "bf16" and w.device.type == "cpu" and not (torch.is_grad_enabled() and w.requires_grad)
                and packed_bf16_products()):
            def pack() -> torch.Tensor:
                with torch.no_grad():
                    return torch.ops.mkldnn._reorder_linear_weight(w.detach().to(torch.bfloat16), max(1, rows))

            packed = self._kept(("packed", id(w)), weight_stamp(w), pack)
            linear = torch.ops.mkldnn._linear_pointwise
            if not widen:
                return lambda x: linear(x.to(torch.bfloat16), packed, None, "none", [], "")
            return lambda x: linear(x.to(torch.bfloat16), packed, None, "none", [], "").to(torch.float32)
        operand = self.weight(w).t()
        if not widen:
            return lambda x: self.raw_result(torch.matmul(self.operand(x), operand))
        return lambda x: self.matmul(x, operand)

    def stacked_product(self, weights: tuple[torch.Tensor, ...], rows: int) -> Callable[[torch.Tensor], torch.Tensor]:
        """``x -> x @ cat(weights).T`` (fp32 x (rows, K), weights each (N_i, K) -> fp32 (rows, sum N_i)),
        for weights that one product takes together (the highway's gate and transform). At inference
        the stacked operand is made once and kept while every weight keeps its pointer and version,
        and in native bf16 on a CPU prepacked as ``repeated_product`` packs (the same numbers as
        ``matmul``): a forward then neither concatenates the weights again (a copy of both, more
        than a third of the full-size char CNN's time at batch 1 in bf16) nor lays them out for the
        kernel."""
        if self.precision == "fp32" or (torch.is_grad_enabled() and any(w.requires_grad for w in weights)):
            return lambda x: self.matmul(x, torch.cat([self.weight(w) for w in weights]).t())
        def stack() -> tuple[bool, torch.Tensor]:
            with torch.inference_mode(False), torch.no_grad():
                stacked = torch.cat([w.detach() for w in weights])
                packed = self.precision == "bf16" and stacked.device.type == "cpu" and packed_bf16_products()
                return packed, (torch.ops.mkldnn._reorder_linear_weight(stacked.to(torch.bfloat16), max(1, rows))
                                if packed else self.operand(stacked).t())

        packed, operand = self._kept(("stacked", *map(id, weights)), tuple(weight_stamp(w) for w in weights), stack)
        if not packed:
            return lambda x: self.matmul(x, operand)
        linear = torch.ops.mkldnn._linear_pointwise
        return lambda x: linear(x.to(torch.bfloat16), operand, None, "none", [], "").to(torch.float32)

    def fp32_step_product(self, w: torch.Tensor, rows: int) -> Callable[[torch.Tensor], torch.Tensor] | None:
        """``x -> x @ w.T`` (fp32 x (rows, K), weight w (N, K) -> fp32 (rows, N)) on oneDNN's
        prepacked fp32 kernel, for the fp32 time loop at inference on a CPU below
        ``FP32_PACKED_BELOW_ROWS`` rows (``packed_fp32_products``: fp32 sums in another order than
        MKL's); None elsewhere (and under CPU autocast), where the loop's ``addmm`` takes the
        weight's view. The packed
        weight is kept across forwards and checked at every use as every kept operand is
        (``weight_stamp``). Made outside inference mode, so a
        later forward that takes gradients may meet it."""
        if (self.precision != "fp32" or rows >= FP32_PACKED_BELOW_ROWS or w.device.type != "cpu"
                or w.dtype != torch.float32 or (torch.is_grad_enabled() and w.requires_grad)
                or torch.is_autocast_enabled("cpu")  # autocast's bf16 activations: its own products
                or not packed_fp32_products()):
            return None
        stamp = weight_stamp(w)
        def pack() -> torch.Tensor:
            with torch.inference_mode(False), torch.no_grad():
                return torch.ops.mkldnn._reorder_linear_weight(w.detach(), max(1, rows))

        packed = self._kept(("fp32-packed", id(w)), stamp, pack)
        linear = torch.ops.mkldnn._linear_pointwise
        return lambda x: linear(x, packed, None, "none", [], "")

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

    def raw_result(self, y: torch.Tensor) -> torch.Tensor:
        """A product's result as the bf16 kernels write it, not yet widened: bf16 natively,
        bf16-rounded fp32 when emulated, as is in fp32 (``result`` = this, widened to fp32)."""
        if self.precision == EMULATED_BF16:
            return round_to_bf16(y)
        return y

    def matmul(self, x: torch.Tensor, w_operand: torch.Tensor) -> torch.Tensor:
        """fp32 x (..., K) @ ``weight(w)`` (K, N) -> fp32 (..., N)."""
        if self.precision == "fp32":
            return torch.matmul(x, w_operand)
        return self.result(torch.matmul(self.operand(x), w_operand))
