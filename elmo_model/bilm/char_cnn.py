"""The token representation of the biLM: the character CNN (max-pooled convolutions over
character embeddings, with a backward that recomputes one block at a time) and its highway layers.

Shapes: B = batch, T = tokens, C = characters per token (50), E = character embedding dim, F =
total char-CNN filters, P = projection dim (see ``modules.py``, which builds the biLM on these).
"""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from .config import ElmoConfig
from .gradient_kernels import BackgroundCompiled
from .precision import ProductPrecision

N_CHARACTER_ROWS = 262  # ids 1..261 (byte + 1 and the five specials + 1); row 0 = batch padding

# output floats per block of the char-CNN matmul (~4 MB): measured fastest of 2^16..2^22 here.
# On a GPU a block is one launch each of unfold, matmul and max, so blocks there are 64x larger
# (256 MB of fp32 output at most; 6 blocks for the width-5 filters of a 32,000-token batch).
_CONV_BLOCK_FLOATS = 1 << 20
_CONV_BLOCK_FLOATS_GPU = 1 << 26


class Highway(nn.Module):
    """One highway layer, bilm-tf's formula: ``g * relu(W_t x + b_t) + (1 - g) * x`` with
    ``g = sigmoid(W_g x + b_g)``. (bilm-tf calls g the "carry" gate.) x: (N, F) -> (N, F)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.transform = nn.Linear(dim, dim)
        self.gate = nn.Linear(dim, dim)
        self.products = ProductPrecision("fp32")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        p = self.products
        if p.is_fp32:
            gate = torch.sigmoid(self.gate(x))
            return gate * F.relu(self.transform(x)) + (1.0 - gate) * x
        # one product for both halves: x is rounded once; the gating and the carry stay fp32
        both = p.stacked_product((self.gate.weight, self.transform.weight), x.shape[0])(x)
        gate_pre, transform_pre = both.chunk(2, dim=-1)
        gate = torch.sigmoid(gate_pre + self.gate.bias)
        return gate * F.relu(transform_pre + self.transform.bias) + (1.0 - gate) * x


class CharacterCNN(nn.Module):
    """Character ids (B, T, C) -> context-independent token vectors (B, T, P)."""

    def __init__(self, config: ElmoConfig) -> None:
        super().__init__()
        c = config.char_cnn
        self.activation = torch.tanh if c.activation == "tanh" else F.relu
        self.char_embedding = nn.Embedding(N_CHARACTER_ROWS, c.embedding_dim, padding_idx=0)
        self.convolutions = nn.ModuleList(nn.Conv1d(c.embedding_dim, n, width) for width, n in c.filters)
        self.highways = nn.ModuleList(Highway(c.n_filters) for _ in range(c.n_highway))
        self.projection = nn.Linear(c.n_filters, config.lstm.projection_dim)
        self.products = ProductPrecision("fp32")

    def forward(self, char_ids: torch.Tensor) -> torch.Tensor:
        batch, tokens, _ = char_ids.shape
        return self.project(self.character_features(char_ids)).reshape(batch, tokens, -1)

    def character_features(self, char_ids: torch.Tensor) -> torch.Tensor:
        """Character ids (B, T, C) -> the highway's output (B*T, F), before the projection."""
        batch, tokens, chars = char_ids.shape
        x = self.char_embedding(char_ids.reshape(batch * tokens, chars))  # (B*T, C, E)
        x = self.products.operand(x)  # rounded once for every filter width
        h = torch.cat([self.activation(self._max_pooled_convolution(x, conv)) for conv in self.convolutions],
                      dim=-1)  # (B*T, F); activation after the max-pool, bilm-tf's order
        for highway in self.highways:
            h = highway(h)
        return h

    def project(self, h: torch.Tensor) -> torch.Tensor:
        """Token features (N, D) -> token vectors (N, P), in the products' precision."""
        p = self.products
        if p.is_fp32:
            return self.projection(h)
        projected = p.repeated_product(self.projection.weight, h.shape[0])(h)  # prepacked in bf16 on a CPU
        return projected + self.projection.bias

    def _max_pooled_convolution(self, x: torch.Tensor, conv: nn.Conv1d) -> torch.Tensor:
        """``conv`` over the characters of x (N, C, E), max-pooled over positions -> (N, n).

        Computed as a matmul of the unfolded character windows (N, C-w+1, E*w) with the kernel
        reshaped to (E*w, n), a block of tokens at a time so each block's (tokens, positions, n)
        output stays about 4 MB (cache-sized) before it is max-pooled; memory beyond the result is
        one block's, whatever the batch. On a 2-core machine that is ~3x faster than ``nn.Conv1d``
        for ELMo's 16-channel input (bench/char_cnn.py). The bias is added after the max-pool: a
        per-filter constant does not change the argmax. When a gradient is wanted the blocks run
        inside ``_MaxPooledConvolution``, whose backward is blockwise too (linear in N).
        """
        width, n_filters = conv.kernel_size[0], conv.out_channels
        p = self.products
        kernel = p.weight(conv.weight).reshape(n_filters, -1).t()  # (E*w, n): e-major then k, as unfold
        positions = x.shape[1] - width + 1
        limit = _CONV_BLOCK_FLOATS if x.device.type == "cpu" else _CONV_BLOCK_FLOATS_GPU
        rows = max(1, limit // max(1, positions * n_filters))
        if x.shape[0] == 0:
            return x.new_zeros(0, n_filters, dtype=torch.float32)
        if torch.is_grad_enabled() and (x.requires_grad or kernel.requires_grad):
            pooled = _MaxPooledConvolution.apply(x, kernel, width, rows)
        else:
            pooled = _pooled_blocks(x, kernel, width, rows)
        # x is already in the products' operand form; the max is exact in any precision, so the
        # result is widened to fp32 after the pooling (a 1/positions share of the conversions)
        return p.result(pooled) + conv.bias


def _windows(x: torch.Tensor, width: int) -> torch.Tensor:
    """x (r, C, E) -> its character windows (r, C-w+1, E*w), e-major then k (conv.weight's order)."""
    return x.unfold(1, width, 1).reshape(x.shape[0], x.shape[1] - width + 1, -1)


def _pooled_blocks(x: torch.Tensor, kernel: torch.Tensor, width: int, rows: int) -> torch.Tensor:
    """max over positions of ``windows(x) @ kernel``, ``rows`` tokens of x at a time: x (N, C, E),
    kernel (E*w, n) -> (N, n) in the products' dtype. Blocks are slices of the input, never of a
    tensor that requires grad (see ``_MaxPooledConvolution``)."""
    return torch.cat([_max_over_positions(torch.matmul(_windows(x[i : i + rows], width), kernel))
                      for i in range(0, x.shape[0], rows)])


def _maxima(products: torch.Tensor) -> torch.Tensor:
    """products (r, L, n) -> their max over the positions L, (r, n). Eager, a reduction over the
    middle axis of a bf16 tensor with few filters (n = 32) ran 20x slower than compiled (2.1 vs
    0.09 ms a block, one thread, AMD EPYC Zen 5)."""
    return products.amax(dim=1)


def _gradient_shares(products: torch.Tensor, grad: torch.Tensor) -> torch.Tensor:
    """amax's backward: products (r, L, n), grad (r, n) the gradient of their max over L -> (r, L, n),
    ``grad / (number of maxima)`` on every maximum and 0 elsewhere, in products' dtype. One
    rounding (the division), the same compiled and eager; compiled it is one pass where eager
    takes five (2.2 -> 0.7 ms a block of 1M bf16 products)."""
    ties = products == products.amax(dim=1, keepdim=True)
    return (grad.unsqueeze(1) / ties.sum(1, keepdim=True)) * ties


def _small_products(products: torch.Tensor, *rest: torch.Tensor) -> list:
    """Inputs like (products (r, L, n), grads (r, n)...) to compile on: sizes 3, 7, 5."""
    return [(torch.zeros(3, 7, 5, dtype=products.dtype), *(torch.zeros(3, 5, dtype=t.dtype) for t in rest))]


_max_over_positions = BackgroundCompiled(_maxima, _small_products)
_shares = BackgroundCompiled(_gradient_shares, _small_products)


class _MaxPooledConvolution(torch.autograd.Function):
    """``_pooled_blocks`` with a blockwise backward. Autograd through the blocks would slice the
    unfolded windows of a tensor that requires grad, and each slice's backward fills and adds a
    zero tensor of the whole window tensor's size: quadratic in the batch's tokens. Here the
    backward recomputes one block's products at a time and sends each block's gradient straight
    to its rows of x: linear in N, with the arithmetic of autograd's own backward (ties of the max
    share the gradient equally, as ``amax``'s backward does; the products' dtype throughout, the
    kernel's gradient summed over blocks in fp32, or float64 for a float64 kernel). Differentiable
    once: a second derivative (``create_graph=True`` and a grad of the grad) raises."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, kernel: torch.Tensor, width: int, rows: int) -> torch.Tensor:
        ctx.save_for_backward(x, kernel)
        ctx.width, ctx.rows = width, rows
        # the backward recomputes the products, so it runs under the forward's autocast (GPU bf16)
        device = x.device.type
        try:
            ctx.autocast = dict(device_type=device, enabled=torch.is_autocast_enabled(device),
                                dtype=torch.get_autocast_dtype(device))
        except RuntimeError:  # a device autocast does not know (``meta``): nothing to carry
            ctx.autocast = None
        return _pooled_blocks(x, kernel, width, rows)

    @staticmethod
    @once_differentiable  # a second derivative is refused, never silently wrong
    def backward(ctx, grad: torch.Tensor):
        x, kernel = ctx.saved_tensors
        width, rows = ctx.width, ctx.rows
        want_x, want_kernel = ctx.needs_input_grad[:2]
        grad_x = torch.empty_like(x) if want_x else None
        # summed over blocks in fp32 at least (float64 kernels keep their precision)
        total = torch.promote_types(kernel.dtype, torch.float32)
        grad_kernel = torch.zeros(kernel.shape, dtype=total, device=kernel.device) if want_kernel else None
        with torch.autocast(**ctx.autocast) if ctx.autocast else contextlib.nullcontext():
            for i in range(0, x.shape[0], rows):
                block = x[i : i + rows]
                windows = _windows(block, width)  # (r, L, E*w)
                r, positions, inner = windows.shape
                products = torch.matmul(windows, kernel)  # (r, L, n): the forward's, bit for bit on a CPU
                # the maxima of these products (not the saved forward's: should a GPU's matmul differ
                # in the last bit, every row still has a maximum)
                share = _shares(products, grad[i : i + rows]).reshape(r * positions, -1)
                if want_kernel:
                    grad_kernel += windows.reshape(r * positions, inner).t().mm(share)
                if want_x:
                    grad_windows = share.mm(kernel.t()).to(x.dtype).reshape(r, positions, -1, width)
                    grad_x[i : i + rows] = torch.ops.aten.unfold_backward(grad_windows, list(block.shape), 1,
                                                                          width, 1)
        return grad_x, (grad_kernel.to(kernel.dtype) if want_kernel else None), None, None
