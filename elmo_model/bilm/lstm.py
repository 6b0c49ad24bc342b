"""The biLM's LSTM, one direction: the cell with projection and clipping, its time loop in
fp32 or bf16 products, one layer (``LstmWithProjection``) and a stack of them (``LstmStack``).
Both directions at once (``modules._paired_layer``) take the same step, ``_lstm_step``.

Shapes: B = batch, T = tokens, D = input dim, H = LSTM cell dim, P = projection dim. Gates in
the order i, f, g, o; ``nn.Linear`` weights are (out, in).
"""

from __future__ import annotations

from typing import Callable, NamedTuple

import torch
import torch.nn.functional as F
from torch import nn

from . import fused_step, lstm_gradient
from .config import ElmoConfig
from .precision import ProductPrecision

LstmState = tuple[torch.Tensor, torch.Tensor]  # (h (B, P), c (B, H))


class _CellProducts(NamedTuple):
    """A time loop's two products for ``_lstm_step``, in its precision and layout (one direction (B, ...),
    both at once (2, B, ...)). ``gates(pre_t, h, w_state)`` -> (product, addend): the gates are
    addend + product (fp32: torch's addmm/baddbmm holds the sum, addend None; bf16: the recurrent
    product as its kernel writes it and the step's input product ``pre_t``, summed in fp32 by the
    cell, with ``bias`` where the step's input product comes as its kernel wrote it: the bias folded
    into the cell's pass, not a pass of its own over the whole (B, T, 4H) input product).
    ``project(x, w_proj)`` = x W_proj (..., B, P) in fp32, x in ``operand_dtype`` (what the
    product takes: the cell writes it so). w_* a weight (fp32: no Python frame between step and
    kernel) or a product's function (bf16)."""

    gates: Callable[[torch.Tensor, torch.Tensor, object], tuple[torch.Tensor, torch.Tensor | None]]
    w_state: object
    project: Callable[[torch.Tensor, object], torch.Tensor]
    w_proj: object
    operand_dtype: torch.dtype
    bias: torch.Tensor | None = None  # the gates' fp32 bias, where the addend is the raw input product


def _product_and_addend(pre_t: torch.Tensor, h: torch.Tensor, product: Callable) -> tuple[torch.Tensor, torch.Tensor]:
    return product(h), pre_t


def _summed(pre_t: torch.Tensor, h: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, None]:
    return (torch.addmm(pre_t, h, w) if h.dim() == 2 else torch.baddbmm(pre_t, h, w)), None


def _product(x: torch.Tensor, product: Callable) -> torch.Tensor:
    return product(x)


def _projected(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.mm(x, w) if x.dim() == 2 else torch.bmm(x, w)


def _fp32_products(w_state: torch.Tensor, w_proj: torch.Tensor) -> _CellProducts:
    """fp32 products: w_state (..., P, 4H), w_proj (..., H, P) as the products take them."""
    return _CellProducts(_summed, w_state, _projected, w_proj, w_proj.dtype)  # fp32, or a float64 model's


def _fold_bias(raw: torch.Tensor, bias: torch.Tensor, p: ProductPrecision) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The input product as its kernel wrote it (``raw``) -> (the time loop's pre, the bias its
    cell adds): at inference the bias goes into each step's one pass over the gates, (raw + bias)
    + recurrent in that order, the numbers of adding it here; while training it is added here,
    once, for autograd to take one sum for its gradient, not one a step."""
    if torch.is_grad_enabled():
        return p.result(raw) + bias, None
    return raw, bias


_Clip = float | torch.Tensor | None  # a bound, None for none, or one per direction (2, 1, 1)


def _lstm_step(ops: _CellProducts, pre_t: torch.Tensor, h: torch.Tensor, c: torch.Tensor, cell_clip: _Clip,
               proj_clip: _Clip, valid: torch.Tensor | None, outputs: list[torch.Tensor], cell: Callable) -> LstmState:
    """One time step of the LSTM cell with projection, the one both time loops take (one direction,
    ``LstmWithProjection.forward``; both at once, ``_paired_layer``): pre_t (..., B, 4H) = the
    step's input product plus bias, h (..., B, P), c (..., B, H) -> the new (h, c); the step's
    output (..., B, P) is appended to ``outputs``. ``valid`` (B, 1) bool, the step's column of the
    mask, or None for a batch without padding: finished rows keep their state and output zeros.
    ``cell``: ``fused_step.cell_update`` or its compiled form (one pass over the gates)."""
    product, addend = ops.gates(pre_t, h, ops.w_state)
    c_new, operand = cell(product, addend, c, valid, cell_clip, ops.operand_dtype, ops.bias)
    h_new = ops.project(operand, ops.w_proj)
    if proj_clip is not None:
        h_new = h_new.clamp(-proj_clip, proj_clip)
    if valid is None:
        outputs.append(h_new)
        return h_new, c_new
    outputs.append(h_new * valid)
    return torch.where(valid, h_new, h), c_new


def _time_loop(ops: _CellProducts, pre: torch.Tensor, h: torch.Tensor, c: torch.Tensor, cell_clip: _Clip,
               proj_clip: _Clip, mask: torch.Tensor) -> tuple[list[torch.Tensor], LstmState]:
    """``_lstm_step`` over the steps of pre (..., B, T, 4H) -> the steps' outputs and the final state.
    The cell is chosen once, at the first step (``fused_step.cell_for``: compiled where ready)."""
    # a batch without padding skips the masking; the check reads the mask on the host, which on
    # a GPU would wait for every queued kernel, so there every batch is masked (same numbers:
    # a True mask keeps c_new and h_new as they are)
    ragged = mask.device.type != "cpu" or not bool(mask.all())
    outputs: list[torch.Tensor] = []
    cell = None
    # unbind, not pre[:, t]: the backward of a slice fills a zero tensor of pre's full size at
    # every step (quadratic in T); unbind's backward is one stack
    for t, pre_t in enumerate(pre.unbind(-2)):
        valid = mask[:, t : t + 1] if ragged else None
        if cell is None:
            cell = fused_step.cell_update
            if not torch.is_grad_enabled():
                product, addend = ops.gates(pre_t, h, ops.w_state)
                cell = fused_step.cell_for(product, addend, c, valid, cell_clip, ops.operand_dtype, ops.bias)
        h, c = _lstm_step(ops, pre_t, h, c, cell_clip, proj_clip, valid, outputs, cell)
    return outputs, (h, c)


class LstmWithProjection(nn.Module):
    """One LSTM layer, one direction: ``c' = clip(sig(f) c + sig(i) tanh(g))``,
    ``h' = clip(W_p (sig(o) tanh(c')))``. The input projections of all time steps are one
    matmul; only the recurrent part runs inside the time loop.

    ``forget_bias`` (1.0, as in TensorFlow's LSTMCell) is added at run time and never stored,
    so reading and writing bilm-tf weights is an exact copy.
    """

    def __init__(self, input_dim: int, cell_dim: int, projection_dim: int,
                 cell_clip: float | None, proj_clip: float | None, forget_bias: float = 1.0) -> None:
        super().__init__()
        self.cell_dim, self.projection_dim = cell_dim, projection_dim
        self.cell_clip, self.proj_clip = cell_clip, proj_clip
        self.input_linear = nn.Linear(input_dim, 4 * cell_dim)  # gates i, f, g, o
        self.state_linear = nn.Linear(projection_dim, 4 * cell_dim, bias=False)
        self.projection = nn.Linear(cell_dim, projection_dim, bias=False)
        offset = torch.zeros(4 * cell_dim)
        offset[cell_dim : 2 * cell_dim] = forget_bias
        self.register_buffer("forget_bias_offset", offset, persistent=False)
        self.products = ProductPrecision("fp32")

    def zero_state(self, batch: int, like: torch.Tensor) -> LstmState:
        """Zero (h (B, P), c (B, H))."""
        return like.new_zeros(batch, self.projection_dim), like.new_zeros(batch, self.cell_dim)

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor, state: LstmState | None = None
                ) -> tuple[torch.Tensor, LstmState]:
        """inputs (B, T, D), mask (B, T) bool (a prefix per row) -> outputs (B, T, P) (zero where
        masked) and the state after each row's last valid step."""
        if lstm_gradient.takes_gradient(inputs, [*self.parameters(), *(state or ())]):
            return lstm_gradient.layer_forward(self, inputs, mask, state)
        batch, steps, _ = inputs.shape
        h, c = state if state is not None else self.zero_state(batch, inputs)
        p = self.products
        bias = self.input_linear.bias + self.forget_bias_offset
        if p.is_fp32:
            pre = F.linear(inputs, self.input_linear.weight, bias)
            state_product = p.fp32_step_product(self.state_linear.weight, batch)
            projection = p.fp32_step_product(self.projection.weight, batch)
            if state_product is not None and projection is not None:  # small batches: prepacked products
                ops = _CellProducts(_product_and_addend, state_product, _product, projection, pre.dtype)
            else:
                ops = _fp32_products(self.state_linear.weight.t(), self.projection.weight.t())  # (P, 4H), (H, P)
        else:  # bf16 operands, fp32 sums: the gates, c and h stay fp32 (see elmo_model.bilm.precision)
            # the whole sequence's input product in one product, prepacked like the step's (faster
            # at one sentence's 22 rows and at 704 alike, on one thread; the same numbers)
            input_product = p.repeated_product(self.input_linear.weight, batch * steps, widen=False)
            pre = input_product(inputs.reshape(batch * steps, -1)).reshape(batch, steps, -1)
            pre, bias = _fold_bias(pre, bias, p)
            ops = _CellProducts(_product_and_addend, p.repeated_product(self.state_linear.weight, batch, widen=False),
                                _product, p.repeated_product(self.projection.weight, batch), p.operand_dtype, bias)
        outputs, (h, c) = _time_loop(ops, pre, h, c, self.cell_clip, self.proj_clip, mask)
        if not outputs:
            return inputs.new_zeros(batch, 0, self.projection_dim), (h, c)
        return torch.stack(outputs, dim=1), (h, c)


class LstmStack(nn.Module):
    """L layers of ``LstmWithProjection`` in one direction; with skip connections, each layer
    above the first adds its input to its output (TensorFlow's ResidualWrapper: the recurrent
    state itself is not affected)."""

    def __init__(self, config: ElmoConfig) -> None:
        super().__init__()
        l = config.lstm
        self.use_skip_connections = l.use_skip_connections
        # between-layer dropout for training (the trainer sets p); identity in eval mode
        self.dropout = nn.Dropout(0.0)
        self.layers = nn.ModuleList(
            LstmWithProjection(l.projection_dim, l.dim, l.projection_dim, l.cell_clip, l.proj_clip)
            for _ in range(l.n_layers)
        )

    def forward(self, inputs: torch.Tensor, mask: torch.Tensor, states: list[LstmState] | None = None
                ) -> tuple[list[torch.Tensor], list[LstmState]]:
        """inputs (B, T, P), mask (B, T) -> per-layer outputs, each (B, T, P), and final states."""
        outputs, finals = [], []
        x = inputs
        for k, layer in enumerate(self.layers):
            out, final = layer(x, mask, None if states is None else states[k])
            if self.use_skip_connections and k > 0:
                out = out + x
            outputs.append(out)
            finals.append(final)
            x = self.dropout(out)
        return outputs, finals
