"""The LSTM layer with projection as one autograd Function, for training: the time loop runs
forward without building a graph, and backward runs it in reverse with only what must be
sequential (the elementwise gradients of each step and the two products that carry the gradient
to the previous step's h); each weight's gradient is then ONE product over the whole sequence
(stacked states against stacked gate gradients), as is the input's.

Autograd through the loop (``lstm._lstm_step`` with a graph) does, per step and per weight,
one small product and one accumulation of the weight's gradient: T products of (P x B) x (B x 4H)
where one (P x TB) x (TB x 4H) does the same sums, and in bf16 it accumulates those gradients in
bf16. Here the sums are fp32 throughout.

The numbers are those of ``lstm._lstm_step``: c' = clip(sig(f) c + sig(i) tanh(g)),
h' = clip(W_p (sig(o) tanh(c'))), the forget bias added at run time, and with a mask finished
rows keep their state and output zeros. In bf16 (``"bf16"``, ``"bf16-emulated"``) the operands
of every product are rounded to bf16 and its result comes back to fp32 through bf16, as
``elmo_model.bilm.precision.ProductPrecision`` does; the gates, c, h and the gradients' sums stay
fp32, and the fp32 master weights are cast once per forward.

Both forms take a leading direction axis S: one direction is S = 1 (``layer_forward``, for
``LstmWithProjection.forward``), both at once S = 2 (``paired_forward``, for ``_paired_layer``).
Shapes: B batch, T steps, D input, H cell, P projection.
"""

from __future__ import annotations

import contextlib
import math
import threading
import weakref
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import torch

from .precision import ProductPrecision

_Clip = float | torch.Tensor | None  # a bound, None for none, or one per direction (S, 1, 1)

_through_the_loop = 0  # > 0 inside autograd_through_the_loop(): the reference path


@contextlib.contextmanager
def autograd_through_the_loop() -> Iterator[None]:
    """Within the block, training takes the reference path (autograd through ``_lstm_step``'s
    loop) instead of this module's Function: for tests and same-run benchmarks."""
    global _through_the_loop
    _through_the_loop += 1
    try:
        yield
    finally:
        _through_the_loop -= 1


def _autocast_on(device_type: str) -> bool:
    try:
        return torch.is_autocast_enabled(device_type)
    except RuntimeError:  # a device type autocast does not know (meta)
        return False


def takes_gradient(inputs: torch.Tensor, tensors: list[torch.Tensor | None]) -> bool:
    """Whether a layer's forward should run as this module's Function: a gradient is taken
    (grad mode on, and the inputs, a weight or the initial state requires one), no autocast is
    active (its casts would change the products' dtypes inside the Function) and the reference
    path was not asked for."""
    return (torch.is_grad_enabled() and not _through_the_loop
            and not _autocast_on(inputs.device.type)
            and any(t is not None and t.requires_grad for t in [inputs, *tensors]))


class _Workspace:
    """The stacked buffers of the time loops, kept from one training step to the next. A fresh
    buffer of tens of MB is fresh pages, and the first write to each page faults: in a profile
    of elmo-mini's layer (one thread, AMD EPYC Zen 5, other work on the machine) the loop's
    elementwise operations writing into new buffers ran 10-20x slower than the same operations
    on warm memory. A buffer goes back when the autograd graph holding it is freed.

    Bounded in bytes, per dtype and device (fp32 and bf16 never compete for one pool): a pool keeps
    at most the most bytes its buffers were ever lent at once (a step's peak at the longest length),
    the largest buffers first. Steps of varying length once grew it past that (48 buffers, 380 MB
    after 40 steps against 288 MB for the longest step's)."""

    def __init__(self) -> None:
        self._free: dict[tuple, list[torch.Tensor]] = {}
        self._lent: dict[tuple, int] = {}  # bytes lent out now, per pool
        self._peak: dict[tuple, int] = {}  # the most bytes lent at once, per pool
        self._lock = threading.Lock()

    @staticmethod
    def _pool(t: torch.Tensor) -> tuple:
        return (t.dtype, t.device)

    @staticmethod
    def _bytes(t: torch.Tensor) -> int:
        return t.numel() * t.element_size()

    def take(self, like: torch.Tensor, *shape: int) -> torch.Tensor:
        """An uninitialised tensor of ``shape``, like's dtype and device, from a kept buffer where
        one is large enough (the smallest such), else a new one with a quarter to spare."""
        need = math.prod(shape)
        pool = (like.dtype, like.device)
        with self._lock:
            free = self._free.setdefault(pool, [])
            fits = [k for k, b in enumerate(free) if b.numel() >= need]
            buffer = free.pop(min(fits, key=lambda k: free[k].numel())) if fits else None
            if buffer is None:
                buffer = torch.empty(need + need // 4, dtype=like.dtype, device=like.device)
            self._lent[pool] = self._lent.get(pool, 0) + self._bytes(buffer)
            self._peak[pool] = max(self._peak.get(pool, 0), self._lent[pool])
        return buffer[:need].view(shape)

    def give(self, tensors: Iterable[torch.Tensor | None]) -> None:
        """Take back tensors made by ``take`` (nothing may read them afterwards); each pool keeps its
        largest buffers up to its peak in bytes."""
        with self._lock:
            for t in tensors:
                if t is None:
                    continue
                buffer = t._base if t._base is not None else t
                pool = self._pool(buffer)
                self._lent[pool] = max(0, self._lent.get(pool, 0) - self._bytes(buffer))
                self._free.setdefault(pool, []).append(buffer)
            for pool, free in self._free.items():
                free.sort(key=lambda b: b.numel(), reverse=True)
                room, kept = self._peak.get(pool, 0), []
                for b in free:
                    if self._bytes(b) <= room:
                        kept.append(b)
                        room -= self._bytes(b)
                free[:] = kept

    def kept_bytes(self) -> dict[str, int]:
        """Bytes kept now, per pool (``"torch.float32 cpu"``: ...)."""
        with self._lock:
            return {f"{dtype} {device}": sum(self._bytes(b) for b in free)
                    for (dtype, device), free in self._free.items() if free}

    def release(self) -> None:
        """Drop every kept buffer (the end of a training run, or a caller outside the trainer that
        is done taking gradients: the process may go on without them)."""
        with self._lock:
            self._free.clear()
            self._peak = dict(self._lent)  # what is still lent keeps its share when it comes back


_WORKSPACE = _Workspace()


def release_workspace() -> None:
    """Give the time loops' kept buffers back to the allocator (the trainer calls it when its run
    ends; the next training step makes them again)."""
    _WORKSPACE.release()


class _Saved(dict):
    """What backward needs from the forward's loop; its buffers go back to the workspace when
    the graph that holds it is freed (after backward, or when no backward comes)."""


class _Settings(NamedTuple):
    products: ProductPrecision
    cell_clip: _Clip
    proj_clip: _Clip


def _mm(a: torch.Tensor, b: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """a (S, M, K) @ b (S, K, N), into ``out`` (S, M, N) where given: one direction takes ``mm`` (on
    this CPU torch's ``bmm`` of one matrix ran 2-4x slower than ``mm``), two take ``bmm``."""
    if a.shape[0] == 1:
        return torch.mm(a[0], b[0]).unsqueeze(0) if out is None else torch.mm(a[0], b[0], out=out[0]).unsqueeze(0)
    return torch.bmm(a, b, out=out)


def _add_mm(c: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """c + a @ b, shapes as ``_mm``'s (c broadcast to (S, M, N))."""
    if a.shape[0] == 1:
        return torch.addmm(c[0], a[0], b[0]).unsqueeze(0)
    return torch.baddbmm(c, a, b)


def _doubled_g(w: torch.Tensor) -> torch.Tensor:
    """w (S, 4H, ...) with the g gate's rows times 2 (exact in fp32 and bf16 alike), so that one
    sigmoid over all four gates gives tanh(g) as 2 sig(2g) - 1: torch's CPU tanh ran 15x slower
    than its sigmoid (303 vs 18 us on (80, 1024) fp32, one thread, AMD EPYC Zen 5)."""
    hidden = w.shape[1] // 4
    w = w.clone()
    w[:, 2 * hidden : 3 * hidden] *= 2
    return w


def _passes(raw: torch.Tensor | None, clipped: torch.Tensor, clip: _Clip) -> torch.Tensor | None:
    """Where a clamp to [-clip, clip] lets the gradient through (-clip <= raw <= clip, as the
    backward of ``clamp``), fp32 0/1 of raw's shape (S, T, ...) in a workspace buffer; None without
    a clip. Read as where the clamp left raw as it was: ``clipped`` holds clamp(raw) in every valid
    row (the others are masked anyway), so this is one pass over warm memory, where |raw| <= clip
    took three and two fresh tensors (16 MB each in elmo-mini's layer: their pages' first writes
    cost more than the arithmetic)."""
    if clip is None:
        return None
    return torch.eq(clipped, raw, out=_WORKSPACE.take(raw, *raw.shape))


def _write_operand(p: ProductPrecision, value: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``p.operand(value)`` written into ``out`` (one cast, no temporary in native bf16)."""
    return out.copy_(value if p.precision == "bf16" else p.operand(value))


def _operand_of_product(p: ProductPrecision, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    """``p.operand(a * b)`` into ``out``: natively one op, which multiplies in fp32 and rounds once
    to bf16 as it stores (the bits of the product cast)."""
    if p.precision == "bf16":
        return torch.mul(a, b, out=out)
    return out.copy_(p.operand(a * b))


def _run_forward(pre: torch.Tensor, w_state: torch.Tensor, w_proj: torch.Tensor,
                 h0: torch.Tensor, c0: torch.Tensor, valid: torch.Tensor | None, s: _Settings) -> dict:
    """The time loop: pre (S, T, B, 4H) = input product plus bias, w_state (S, 4H, P) and w_proj
    (S, P, H) in operand form, pre's and w_state's g rows doubled (``_doubled_g``), h0 (S, B, P),
    c0 (S, B, H), valid (T, B, 1) bool or None. Returns the stacked tensors backward needs, each
    step's local derivatives among them (computed here, while the step's tensors are in cache:
    one pass over the whole sequence in backward ran several times slower); ``hs[:, 1:]``
    (S, T, B, P) are the outputs where valid."""
    p = s.products
    n_dir, steps, batch, four_h = pre.shape
    hidden, proj = four_h // 4, h0.shape[-1]
    # the products' operands of h and m, each written once by the op that makes the value (or its
    # one cast) and read again by backward's weight products; fp32: the fp32 tensors themselves
    h_ops = None if p.is_fp32 else _WORKSPACE.take(w_proj, n_dir, steps + 1, batch, proj)
    m_ops = None if p.is_fp32 else _WORKSPACE.take(w_proj, n_dir, steps, batch, hidden)
    acts = _WORKSPACE.take(pre, n_dir, steps, batch, four_h)  # sig(i), sig(f), tanh(g), sig(o)
    # what multiplies dc' in the gates' gradients: g i(1-i), c f(1-f), i (1-tanh(g)^2), and dm's: tanh(c') o(1-o)
    ks = _WORKSPACE.take(pre, n_dir, steps, batch, four_h)
    kcs = _WORKSPACE.take(pre, n_dir, steps, batch, hidden)  # what carries dm to dc': o (1 - tanh(c')^2)
    ms = _WORKSPACE.take(pre, n_dir, steps, batch, hidden) if p.is_fp32 else None  # m = o tanh(c'), fp32
    hs = _WORKSPACE.take(pre, n_dir, steps + 1, batch, proj)  # the carried h; hs[:, t] enters step t
    cs = _WORKSPACE.take(pre, n_dir, steps + 1, batch, hidden)
    # c' and h' before their clips, for the clips' gradients (taken in one pass in backward)
    c_raws = None if s.cell_clip is None else _WORKSPACE.take(pre, n_dir, steps, batch, hidden)
    h_raws = None if s.proj_clip is None else _WORKSPACE.take(pre, n_dir, steps, batch, proj)
    hs[:, 0], cs[:, 0] = h0, c0
    gate_product = _WORKSPACE.take(w_state, n_dir, batch, four_h) if p.precision == "bf16" else None
    c_clipped, c_scratch = (_WORKSPACE.take(pre, n_dir, batch, hidden) for _ in range(2))
    if h_ops is not None:
        _write_operand(p, h0, h_ops[:, 0])
    # (S, P, 4H), (S, H, P), laid out for the per-step products (the other layouts ran up to 2x slower in bf16)
    w_state_t, w_proj_t = w_state.transpose(1, 2), w_proj.transpose(1, 2).contiguous()
    for t in range(steps):
        h, c, a, k = hs[:, t], cs[:, t], acts[:, t], ks[:, t]
        if p.is_fp32:
            gates = _add_mm(pre[:, t], h, w_state_t)
        elif p.precision == "bf16":
            gates = a.copy_(_mm(h_ops[:, t], w_state_t, out=gate_product)).add_(pre[:, t])
        else:
            gates = pre[:, t] + p.result(_mm(h_ops[:, t], w_state_t))
        torch.sigmoid(gates, out=a)  # g's gate comes doubled: tanh(g) = 2 sig(2g) - 1
        torch.addcmul(a, a, a, value=-1, out=k)  # sig'= sig (1 - sig); tanh'(g) = 4 sig(2g) (1 - sig(2g))
        k[..., 2 * hidden : 3 * hidden].mul_(4)
        a[..., 2 * hidden : 3 * hidden].mul_(2).sub_(1)
        i, f, g, o = a.chunk(4, dim=-1)
        k_i, k_f, k_g, k_o = k.chunk(4, dim=-1)
        k_i.mul_(g), k_f.mul_(c), k_g.mul_(i)
        c_new = torch.mul(f, c, out=None if c_raws is None else c_raws[:, t]).addcmul_(i, g)
        if c_raws is not None:
            c_new = torch.clamp(c_new, -s.cell_clip, s.cell_clip, out=c_clipped)
        sc = torch.mul(c_new, 2, out=c_scratch).sigmoid_()  # tanh(c') = 2 sig(2c') - 1
        torch.addcmul(sc, sc, sc, value=-1, out=kcs[:, t]).mul_(4).mul_(o)
        tc = sc.mul_(2).sub_(1)
        k_o.mul_(tc)
        if p.is_fp32:
            h_new = _mm(torch.mul(o, tc, out=ms[:, t]), w_proj_t)
        else:  # m rounded to the operand's dtype as it is written (the product of fp32s, then one rounding)
            h_new = p.result(_mm(_operand_of_product(p, o, tc, m_ops[:, t]), w_proj_t))
        if h_raws is not None:
            h_raws[:, t] = h_new
            h_new = h_new.clamp(-s.proj_clip, s.proj_clip)
        if valid is None:
            hs[:, t + 1], cs[:, t + 1] = h_new, c_new
        else:
            torch.where(valid[t], h_new, h, out=hs[:, t + 1])
            torch.where(valid[t], c_new, c, out=cs[:, t + 1])
        if h_ops is not None:
            _write_operand(p, hs[:, t + 1], h_ops[:, t + 1])
    saved = _Saved(acts=acts, ks=ks, kcs=kcs, ms=ms, hs=hs, cs=cs, c_raws=c_raws, h_raws=h_raws,
                   h_ops=h_ops, m_ops=m_ops)
    weakref.finalize(saved, _WORKSPACE.give, list(saved.values()))
    _WORKSPACE.give([gate_product, c_clipped, c_scratch])
    return saved


def _gradient_masks(valid: torch.Tensor | None, saved: dict, s: _Settings) -> tuple:
    """Per step, what lets a gradient through: to h' (valid rows where the projection clip
    passes), to c' (valid rows where the cell clip passes), and the carried state's share
    (rows already finished); each (S or 1, T, B, P or H or 1) fp32, or None for all ones; and the
    workspace buffers among them, for the caller to give back."""
    proj_ok = _passes(saved["h_raws"], saved["hs"][:, 1:], s.proj_clip)
    cell_ok = _passes(saved["c_raws"], saved["cs"][:, 1:], s.cell_clip)
    buffers = [b for b in (proj_ok, cell_ok) if b is not None]
    if valid is None:
        return proj_ok, cell_ok, None, buffers
    v = valid.unsqueeze(0).to(saved["hs"].dtype)  # (1, T, B, 1)
    to_h = v if proj_ok is None else proj_ok.mul_(v)
    to_c = v if cell_ok is None else cell_ok.mul_(v)
    return to_h, to_c, 1.0 - v, buffers


def _run_backward(saved: dict, d_out: torch.Tensor, d_h: torch.Tensor, d_c: torch.Tensor, w_state: torch.Tensor,
                  w_proj: torch.Tensor, valid: torch.Tensor | None, s: _Settings) -> tuple[torch.Tensor, ...]:
    """The time loop in reverse: d_out (S, T, B, P), d_h (S, B, P), d_c (S, B, H) the gradients of the
    outputs and of the final state -> the gates' gradients (S, T, B, 4H), h''s before its clip
    (S, T, B, P), both as the products take them (operands; the fp32 tensors themselves in fp32),
    the gates' fp32 gradients, and the gradients of the initial state. The operands are written
    once a step, by the casts the step's own products need."""
    p = s.products
    acts, ks, kcs = saved["acts"], saved["ks"], saved["kcs"]
    n_dir, steps, batch, four_h = acts.shape
    hidden = four_h // 4
    f = acts[..., hidden : 2 * hidden]
    to_h, to_c, carried, masks = _gradient_masks(valid, saved, s)
    d_gates = _WORKSPACE.take(acts, *acts.shape)
    d_h_raw = _WORKSPACE.take(d_out, *d_out.shape)
    g_ops = d_gates if p.is_fp32 else _WORKSPACE.take(w_state, *acts.shape)
    dh_ops = d_h_raw if p.is_fp32 else _WORKSPACE.take(w_state, *d_out.shape)
    ifg = d_gates[..., : 3 * hidden].view(n_dir, steps, batch, 3, hidden)
    dc_to_ifg = ks[..., : 3 * hidden].view(n_dir, steps, batch, 3, hidden)
    native = p.precision == "bf16"
    # dm widened once into a kept buffer: its two readers (mixed bf16 and fp32 operands) each made a widened copy
    dm_wide = _WORKSPACE.take(acts, n_dir, batch, hidden) if native else None
    for t in reversed(range(steps)):
        dh_raw = torch.add(d_out[:, t], d_h, out=d_h_raw[:, t])
        if to_h is not None:
            dh_raw.mul_(to_h[:, t])
        if p.is_fp32:
            dm = _mm(dh_raw, w_proj)
        else:
            dm = _mm(_write_operand(p, dh_raw, dh_ops[:, t]), w_proj)
            dm = dm_wide.copy_(dm) if native else p.result(dm)
        dc_raw = torch.addcmul(d_c, dm, kcs[:, t])
        if to_c is not None:
            dc_raw.mul_(to_c[:, t])
        torch.mul(dc_raw.unsqueeze(-2), dc_to_ifg[:, t], out=ifg[:, t])
        torch.mul(dm, ks[:, t, :, 3 * hidden :], out=d_gates[:, t, :, 3 * hidden :])
        dg = d_gates[:, t]
        d_h_prev = _mm(dg, w_state) if p.is_fp32 else p.result(_mm(_write_operand(p, dg, g_ops[:, t]), w_state))
        d_c_prev = dc_raw.mul_(f[:, t])
        if carried is not None:  # finished rows: the state passed through unchanged
            d_h_prev.addcmul_(d_h, carried[:, t])
            d_c_prev.addcmul_(d_c, carried[:, t])
        d_h, d_c = d_h_prev, d_c_prev
    # d_h_raw is dh_ops itself in fp32 (the caller gives it back); with other operands it is this loop's alone
    _WORKSPACE.give([*masks, dm_wide, None if p.is_fp32 else d_h_raw])
    return g_ops, dh_ops, d_gates, d_h, d_c


def _input_product(p: ProductPrecision, x_op: torch.Tensor, w: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    """x_op (S, TB, D) @ w (S, 4H, D).T + bias (S, 4H) -> fp32 (S, TB, 4H), the time loop's input
    product, in a workspace buffer (the caller gives it back). Made in kept buffers rather than
    fresh tensors: in elmo-mini's layer the product is 64 MB in fp32, and a fresh tensor's pages
    faulting on their first write cost more than the bias sum or the widening itself (a
    one-thread profile: the sum and the widening 47 ms against the product's 18 ms)."""
    n_dir, tokens, _ = x_op.shape
    dtype = torch.float32 if x_op.dtype == torch.bfloat16 else x_op.dtype  # fp64 in gradchecks
    pre = _WORKSPACE.take(x_op.new_empty(0, dtype=dtype), n_dir, tokens, w.shape[1])
    if p.is_fp32:
        if n_dir == 1:
            torch.addmm(bias, x_op[0], w[0].t(), out=pre[0])
        else:
            torch.baddbmm(bias.unsqueeze(1), x_op, w.transpose(1, 2), out=pre)
        return pre
    if p.precision == "bf16":  # the product as the kernel writes it, widened as the bias is added
        product = _WORKSPACE.take(w, *pre.shape)
        if n_dir == 1:
            torch.mm(x_op[0], w[0].t(), out=product[0])
        else:
            torch.bmm(x_op, w.transpose(1, 2), out=product)
        pre.copy_(product).add_(bias.float().unsqueeze(1))
        _WORKSPACE.give([product])
        return pre
    return torch.add(p.result(_mm(x_op, w.transpose(1, 2))), bias.unsqueeze(1), out=pre)


class _LstmSequence(torch.autograd.Function):
    """x (S, B, T, D), w_in (S, 4H, D), bias (S, 4H) (the forget offset included), w_state (S, 4H, P),
    w_proj (S, P, H), h0 (S, B, P), c0 (S, B, H), valid (T, B, 1) bool or None -> outputs
    (S, B, T, P) (zero where masked), h and c after each row's last valid step."""

    @staticmethod
    def forward(ctx, x, w_in, bias, w_state, w_proj, h0, c0, valid, settings: _Settings):
        p = settings.products
        n_dir, batch, steps, dim = x.shape
        x_op = p.operand(x.transpose(1, 2).reshape(n_dir, steps * batch, dim))  # time-major
        w_in_op, w_state_op, w_proj_op = (p.operand(w) for w in (w_in, w_state, w_proj))  # cast once
        w_in_2g, bias_2g, w_state_2g = (p.operand(_doubled_g(w)) for w in (w_in, bias, w_state))
        pre = _input_product(p, x_op, w_in_2g, bias_2g)
        saved = _run_forward(pre.view(n_dir, steps, batch, w_in.shape[1]), w_state_2g, w_proj_op, h0, c0, valid, settings)
        _WORKSPACE.give([pre])
        ctx.saved = saved
        ctx.settings = settings
        ctx.save_for_backward(x_op, w_in_op, w_state_op, w_proj_op, valid)
        hs, cs = saved["hs"], saved["cs"]
        outputs = hs[:, 1:] if valid is None else hs[:, 1:] * valid  # finished rows output zeros
        # copies: nothing returned may share memory with the workspace's buffers
        return (outputs.transpose(1, 2).clone(memory_format=torch.contiguous_format), hs[:, -1].clone(),
                cs[:, -1].clone())

    @staticmethod
    def backward(ctx, d_out, d_h, d_c):
        x_op, w_in_op, w_state_op, w_proj_op, valid = ctx.saved_tensors
        saved, p = ctx.saved, ctx.settings.products
        n_dir, tokens, dim = x_op.shape
        g_ops, dh_ops, d_gates, d_h0, d_c0 = _run_backward(saved, d_out.transpose(1, 2), d_h, d_c,
                                                           w_state_op, w_proj_op, valid, ctx.settings)
        steps, batch = d_gates.shape[1], d_gates.shape[2]
        g_op = g_ops.view(n_dir, tokens, -1)  # (S, TB, 4H)

        def product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:  # operands a (S, M, K), b (S, K, N)
            return p.result(_mm(a, b))

        need = ctx.needs_input_grad
        d_x = d_w_in = d_bias = d_w_state = d_w_proj = None
        if need[0]:
            d_x = product(g_op, w_in_op).view(n_dir, steps, batch, dim).transpose(1, 2)
        if need[1]:
            d_w_in = product(g_op.transpose(1, 2), x_op)
        if need[2]:
            d_bias = d_gates.view(n_dir, tokens, -1).sum(dim=1)
        if need[3]:
            h_prev = (saved["hs"] if p.is_fp32 else saved["h_ops"])[:, :-1].reshape(n_dir, tokens, -1)
            d_w_state = product(g_op.transpose(1, 2), h_prev)
        if need[4]:
            m = (saved["ms"] if p.is_fp32 else saved["m_ops"]).view(n_dir, tokens, -1)
            d_w_proj = product(dh_ops.reshape(n_dir, tokens, -1).transpose(1, 2), m)
        # no gradient returned shares their memory
        _WORKSPACE.give({id(b): b for b in (g_ops, dh_ops, d_gates)}.values())
        return d_x, d_w_in, d_bias, d_w_state, d_w_proj, d_h0, d_c0, None, None


def _clip(bounds: list[float | None], like: torch.Tensor) -> _Clip:
    """Layers' clip bounds as the loop takes them: one bound (or None) where they agree, else
    (S, 1, 1), each direction its own (no clip: infinity)."""
    if all(b == bounds[0] for b in bounds):
        return bounds[0]
    return torch.tensor([float("inf") if b is None else b for b in bounds], device=like.device).view(-1, 1, 1)


def _sequence(layers: list, x: torch.Tensor, mask: torch.Tensor, h0: torch.Tensor, c0: torch.Tensor
              ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Layers (each an ``LstmWithProjection``, one a direction) stacked direction-first through
    the Function: x (S, B, T, D), mask (B, T), h0 (S, B, P), c0 (S, B, H)."""
    def stacked(weights: list[torch.Tensor]) -> torch.Tensor:
        return weights[0].unsqueeze(0) if len(weights) == 1 else torch.stack(weights)

    w_in = stacked([layer.input_linear.weight for layer in layers])
    bias = stacked([layer.input_linear.bias + layer.forget_bias_offset for layer in layers])
    w_state = stacked([layer.state_linear.weight for layer in layers])
    w_proj = stacked([layer.projection.weight for layer in layers])
    # a batch without padding skips the masking; on a GPU every batch is masked (no host sync)
    ragged = mask.device.type != "cpu" or not bool(mask.all())
    valid = mask.t().unsqueeze(-1).contiguous() if ragged else None  # (T, B, 1)
    settings = _Settings(layers[0].products, _clip([layer.cell_clip for layer in layers], x),
                         _clip([layer.proj_clip for layer in layers], x))
    return _LstmSequence.apply(x, w_in, bias, w_state, w_proj, h0, c0, valid, settings)


def layer_forward(layer, inputs: torch.Tensor, mask: torch.Tensor,
                  state: tuple[torch.Tensor, torch.Tensor] | None
                  ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """``LstmWithProjection.forward`` for training: inputs (B, T, D), mask (B, T), state (h (B, P),
    c (B, H)) or None -> outputs (B, T, P) and the final state."""
    h0, c0 = state if state is not None else layer.zero_state(inputs.shape[0], inputs)
    out, h, c = _sequence([layer], inputs.unsqueeze(0), mask, h0.unsqueeze(0), c0.unsqueeze(0))
    return out[0], (h[0], c[0])


def paired_forward(first, second, inputs: torch.Tensor, mask: torch.Tensor,
                   state: tuple[torch.Tensor, torch.Tensor] | None
                   ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """``_paired_layer`` for training: two layers (one a direction), inputs (2, B, T, D), mask (B, T),
    state (h (2, B, P), c (2, B, H)) or None -> outputs (2, B, T, P) and the final state."""
    if state is None:
        batch = inputs.shape[1]
        state = (inputs.new_zeros(2, batch, first.projection_dim), inputs.new_zeros(2, batch, first.cell_dim))
    out, h, c = _sequence([first, second], inputs, mask, *state)
    return out, (h, c)
