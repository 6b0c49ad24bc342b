"""The ELMo biLM in PyTorch: character CNN -> highway -> projection -> forward and backward
LSTM stacks with projection, clipping and (optional) skip connections.

Shapes use B = batch, T = tokens (including the ``<S>``/``</S>`` boundary words where said),
C = characters per token (50), E = character embedding dim, F = total char-CNN filters,
H = LSTM cell dim, P = projection dim, L = number of LSTM layers. Parameter names follow
PyTorch conventions (``nn.Linear`` weights are (out, in), LSTM gates in the order i, f, g, o);
every TensorFlow convention of the bilm-tf files is translated in ``weights.py`` alone.

Stateless by default: each sentence starts from a zero LSTM state, so its vectors do not depend
on the batch it is in. ``BiLM.stateful = True`` carries each batch row's final state over to
the same row of the next batch, as AllenNLP and bilm-tf do.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import weakref
from dataclasses import dataclass
from typing import Callable, Iterator

import torch
from torch import nn

from . import cuda_graphs, lstm_gradient
from .char_cnn import (  # noqa: F401 (the token representation, importable from here as before)
    N_CHARACTER_ROWS,
    CharacterCNN,
    Highway,
)
from .char_ids import bos_char_ids, eos_char_ids
from .config import ElmoConfig
from .lstm import (
    LstmStack,
    LstmState,
    LstmWithProjection,
    _CellProducts,
    _Clip,
    _fold_bias,
    _fp32_products,
    _product,
    _product_and_addend,
    _time_loop,
)
from .precision import ProductPrecision, weight_stamp

# Running the two directions side by side pays for its thread start-up only on real models: A/B
# at 2 threads here, bilm-tf fixture (H*P = 64*16) 0.77x at batch 1 and 32; elmo-mini (1024*256)
# 1.22x / 1.08x / 1.06x at batch 1 / 32 / 128; full-size ELMo (4096*512) 1.45-1.84x / 1.15-1.21x / 1.13-1.17x.
_PARALLEL_MIN_CELLS_X_PROJECTION = 1 << 16
# In bf16 the directions side by side pay only from batch 32 on: below it a step's products are bound
# by reading the weights, and the two directions' layers at once (2 x 21 MB in bf16, full-size) do not
# stay in a 32 MB L3 where one at a time does. Same-run "in turn / side by side", full-size bf16,
# bench/bilm_throughput.py on a 2-core AMD EPYC Zen 5: 1.30x / 1.37x / 1.19x / 1.11x / 1.10x at batch
# 1 / 2 / 4 / 8 / 16, 0.92x at 32. fp32 gains from side by side at batch 1 as well (1.66x).
_PARALLEL_MIN_BF16_BATCH = 32


def _run_two_at_once(first: Callable[[], object], second: Callable[[], object], threads: int) -> tuple[object, object]:
    """``(first(), second())``, each in its own thread with ``threads // 2`` intra-op threads, for
    inference on the CPU (no autograd graph is built). The caller's thread count is restored
    afterwards, and the caller's CPU autocast state (thread-local in PyTorch) is set in each
    worker, so ``torch.autocast("cpu", dtype=torch.bfloat16)`` around a forward computes the
    same numbers side by side as in turn.

    Why: the LSTM's time loop is a chain of small (B, P) x (P, 4H) products, too small for two
    cores to share one efficiently (a fork/join per product); the forward and backward stacks
    are independent, so one core each is faster, with identical outputs (full-size model at
    batch 32: the LSTM part alone 1.3-1.46x in a throwaway timing, the whole model 1.15-1.21x in
    bench/bilm_throughput.py's same-run A/B). A CPU measure only: ``BiLM.encode`` never uses it
    for tensors on a GPU, where the two stacks' kernels queue on one stream anyway."""
    inference = torch.is_inference_mode_enabled()
    autocast = torch.is_autocast_enabled("cpu")
    autocast_dtype = torch.get_autocast_dtype("cpu")
    results: list = [None, None]
    errors: list[BaseException] = []

    def run(index: int, fn: Callable[[], object]) -> None:
        torch.set_num_threads(max(1, threads // 2))
        try:
            with (torch.inference_mode(inference), torch.no_grad(),
                  torch.autocast("cpu", dtype=autocast_dtype, enabled=autocast)):
                results[index] = fn()
        except BaseException as err:  # re-raised in the caller's thread
            errors.append(err)

    workers = [threading.Thread(target=run, args=(i, fn), daemon=True) for i, fn in enumerate((first, second))]
    try:
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    finally:
        torch.set_num_threads(threads)
    if errors:
        raise errors[0]
    return results[0], results[1]


# the stacked weights of the direction pairs, per first layer: (stamp, tensors); see _paired_weights
_PAIRED_WEIGHTS: "weakref.WeakKeyDictionary[nn.Module, tuple]" = weakref.WeakKeyDictionary()
# set while a CUDA graph is captured: the stacks were checked just before, and checking reads the
# weights' sums back to the host, which a capture cannot do
_CAPTURING: contextvars.ContextVar[bool] = contextvars.ContextVar("capturing_cuda_graph", default=False)
# each model's CUDA graphs (cuda_graphs.GraphCache), kept beside the model, not in it (a graph
# cannot be copied or pickled with the model)
_GRAPHS: "weakref.WeakKeyDictionary[nn.Module, cuda_graphs.GraphCache]" = weakref.WeakKeyDictionary()


def _paired_weights(first: LstmWithProjection, second: LstmWithProjection
                    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Two layers' weights stacked direction-first, in the products' operand form: input (2, D, 4H),
    recurrent (2, P, 4H), projection (2, H, P), and the fp32 gate bias with the forget offset
    (2, 1, 4H). While training, stacked anew each forward, differentiably (one stack a weight per
    forward, not per step). At inference built once and kept while the weights stay what they were
    (``precision.weight_stamp``, the rule of every kept operand: an edit through ``.data``, which
    the version counter does not see, rebuilds them) and the precision stays; built outside inference mode (a
    later forward that needs gradients may meet them), and cast from the fp32 stack directly, so
    the stack is the one bf16 copy of these weights."""
    p = first.products
    sources = [first.input_linear.weight, second.input_linear.weight, first.state_linear.weight,
               second.state_linear.weight, first.projection.weight, second.projection.weight,
               first.input_linear.bias, second.input_linear.bias]

    def bias_pair() -> torch.Tensor:
        return torch.stack([first.input_linear.bias + first.forget_bias_offset,
                            second.input_linear.bias + second.forget_bias_offset]).unsqueeze(1)

    if torch.is_grad_enabled() and any(w.requires_grad for w in sources):
        def pair(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return torch.stack([p.weight(a).t(), p.weight(b).t()])

        return pair(sources[0], sources[1]), pair(sources[2], sources[3]), pair(sources[4], sources[5]), bias_pair()
    cached = _PAIRED_WEIGHTS.get(first)
    if cached is not None and _CAPTURING.get():  # a CUDA graph's capture, checked just before it
        return cached[1]
    stamp = (p.precision, tuple(weight_stamp(w) for w in sources))
    if cached is not None and cached[0] == stamp:
        return cached[1]
    _PAIRED_WEIGHTS.pop(first, None)  # the old stack goes before the new one is made
    with torch.inference_mode(False), torch.no_grad():
        def stacked_operand(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return p.operand(torch.stack([a.detach().t(), b.detach().t()]))

        tensors = (stacked_operand(sources[0], sources[1]), stacked_operand(sources[2], sources[3]),
                   stacked_operand(sources[4], sources[5]), bias_pair())
    _PAIRED_WEIGHTS[first] = (stamp, tensors)
    return tensors


def _paired_layer(first: LstmWithProjection, second: LstmWithProjection, inputs: torch.Tensor, mask: torch.Tensor,
                  state: LstmState | None) -> tuple[torch.Tensor, LstmState]:
    """``LstmWithProjection.forward`` of two layers at once (one of each direction), for inference
    and training:
    inputs (2, B, T, D), mask (B, T), state (h (2, B, P), c (2, B, H)) or None -> outputs
    (2, B, T, P) and the final state. Each step is one batched product where the layers in turn
    take two: about half the kernel launches, which is what a GPU's time goes to at ELMo's sizes.
    The step itself is ``_lstm_step``, the one the layers in turn take."""
    if lstm_gradient.takes_gradient(inputs, [*first.parameters(), *second.parameters(), *(state or ())]):
        return lstm_gradient.paired_forward(first, second, inputs, mask, state)
    _, batch, steps, _ = inputs.shape
    p = first.products
    w_in, w_state, w_proj, bias = _paired_weights(first, second)
    if state is None:
        h, c = inputs.new_zeros(2, batch, first.projection_dim), inputs.new_zeros(2, batch, first.cell_dim)
    else:
        h, c = state
    flat = inputs.reshape(2, batch * steps, -1)
    if p.is_fp32:
        pre = torch.baddbmm(bias, flat, w_in)
        ops = _fp32_products(w_state, w_proj)
    else:
        pre, bias = _fold_bias(p.raw_result(torch.bmm(p.operand(flat), w_in)), bias, p)
        ops = _CellProducts(_product_and_addend, lambda h: p.raw_result(torch.bmm(p.operand(h), w_state)),
                            _product, lambda x: p.result(torch.bmm(p.operand(x), w_proj)), p.operand_dtype, bias)
    pre = pre.reshape(2, batch, steps, -1)
    cell_clip, proj_clip = (_paired_clip(first, second, name, h) for name in ("cell_clip", "proj_clip"))
    # each step's pre_t (2, B, 4H); the mask's column (B, 1) broadcasts over both directions
    outputs, (h, c) = _time_loop(ops, pre, h, c, cell_clip, proj_clip, mask)
    if not outputs:
        return inputs.new_zeros(2, batch, 0, first.projection_dim), (h, c)
    return torch.stack(outputs, dim=2), (h, c)


def _paired_clip(first: LstmWithProjection, second: LstmWithProjection, name: str, like: torch.Tensor) -> _Clip:
    """Two layers' clip ``name`` for ``_lstm_step``: the one bound where they agree, else (2, 1, 1),
    each direction its own (no clip: infinity)."""
    bounds = getattr(first, name), getattr(second, name)
    if bounds[0] == bounds[1]:
        return bounds[0]
    return torch.tensor([float("inf") if b is None else b for b in bounds], device=like.device).view(2, 1, 1)


def _run_directions_together(forward: LstmStack, backward: LstmStack, tokens: torch.Tensor,
                             reversed_tokens: torch.Tensor, mask: torch.Tensor,
                             initial: dict[str, list[LstmState]] | None
                             ) -> tuple[tuple[list[torch.Tensor], list[LstmState]],
                                        tuple[list[torch.Tensor], list[LstmState]]]:
    """Both stacks, layer by layer, through ``_paired_layer`` (inference and training): the results of
    ``forward(tokens, ...)`` and ``backward(reversed_tokens, ...)``, equal to running them in
    turn up to the summation order of the batched products (tests/test_devices.py)."""
    x = torch.stack([tokens, reversed_tokens])  # (2, B, T, P)
    outs: tuple[list, list] = ([], [])
    finals: tuple[list, list] = ([], [])
    for k, (first, second) in enumerate(zip(forward.layers, backward.layers)):
        state = None
        if initial is not None:
            (h_f, c_f), (h_b, c_b) = initial["forward"][k], initial["backward"][k]
            state = (torch.stack([h_f, h_b]), torch.stack([c_f, c_b]))
        out, (h, c) = _paired_layer(first, second, x, mask, state)
        if k > 0:
            out = _skip_connections(out, x, (forward.use_skip_connections, backward.use_skip_connections))
        for d in (0, 1):
            outs[d].append(out[d])
            finals[d].append((h[d], c[d]))
        x = _between_layers(out, forward.dropout, backward.dropout)
    return (outs[0], finals[0]), (outs[1], finals[1])


def _skip_connections(out: torch.Tensor, x: torch.Tensor, skips: tuple[bool, bool]) -> torch.Tensor:
    """out + x, both (2, B, T, P), in the directions whose stack has skip connections."""
    if all(skips) or not any(skips):
        return out + x if skips[0] else out
    return torch.stack([o + x_d if skip else o for o, x_d, skip in zip(out, x, skips)])


def _between_layers(out: torch.Tensor, first: nn.Module, second: nn.Module) -> torch.Tensor:
    """Each stack's own between-layer dropout (``LstmStack.dropout``: the trainer sets p) on its half
    of out (2, B, T, P); nothing to do where both are the identity (eval mode, or p = 0)."""
    if all(isinstance(d, nn.Dropout) and (not d.training or d.p == 0) for d in (first, second)):
        return out
    return torch.stack([first(out[0]), second(out[1])])


def reverse_padded(x: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
    """Reverse each row's first ``lengths[b]`` steps of x (B, T, ...), leaving padding in place.
    Its own inverse."""
    batch, steps = x.shape[:2]
    t = torch.arange(steps, device=x.device).unsqueeze(0)  # (1, T)
    idx = torch.where(t < lengths.unsqueeze(1), lengths.unsqueeze(1) - 1 - t, t)  # (B, T)
    return x[torch.arange(batch, device=x.device).unsqueeze(1), idx]


def add_sentence_boundaries(char_ids: torch.Tensor, mask: torch.Tensor, bos: torch.Tensor | None = None,
                            eos: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, T, C), (B, T) -> (B, T+2, C), (B, T+2): ``<S>`` first, ``</S>`` right after each row's
    last token (rows are left-aligned). ``bos`` / ``eos`` (C,): the boundary words' ids, bilm-tf's
    unless given (a model of another vocabulary gives its own)."""
    batch, steps, chars = char_ids.shape
    bos = torch.from_numpy(bos_char_ids(chars)) if bos is None else bos
    eos = torch.from_numpy(eos_char_ids(chars)) if eos is None else eos
    lengths = mask.sum(dim=1)
    out = char_ids.new_zeros(batch, steps + 2, chars)
    out[:, 1 : steps + 1] = char_ids
    out[:, 0] = bos.to(char_ids)
    out[torch.arange(batch, device=char_ids.device), lengths + 1] = eos.to(char_ids)
    new_mask = torch.arange(steps + 2, device=char_ids.device).unsqueeze(0) < (lengths + 2).unsqueeze(1)
    return out, new_mask


@dataclass
class BiLMOutput:
    """``layers``: L+1 tensors (B, T, 2P): layer 0 = [token; token], layer k = [forward_k; backward_k];
    ``mask``: (B, T) bool. With ``keep_boundaries`` T includes ``<S>``/``</S>``."""

    layers: list[torch.Tensor]
    mask: torch.Tensor


class BiLM(nn.Module):
    """The bidirectional language model's encoder (no softmax): character ids -> L+1 layers."""

    def __init__(self, config: ElmoConfig) -> None:
        super().__init__()
        self.config = config
        self.token_embedder = CharacterCNN(config)
        self.forward_lstm = LstmStack(config)
        self.backward_lstm = LstmStack(config)
        self.stateful = False
        self._states: dict[str, list[LstmState]] | None = None
        # inference on the CPU with 2+ intra-op threads on a model that is not tiny: the two
        # directions run side by side, one thread each (see _run_two_at_once); training, 1-thread
        # runs and GPUs stay in the calling thread
        self.parallel_directions = True
        # the two directions in one time loop of batched products, for inference and training
        # (_run_directions_together): None = off the CPU (a GPU, where it halves the kernel
        # launches), True/False = always/never
        self.directions_together: bool | None = None
        self.precision = "fp32"
        # inference on a GPU as replays of captured CUDA graphs (cuda_graphs; also
        # ELMO_WORKBENCH_CUDA_GRAPHS=0 for a whole process)
        self.cuda_graphs = True

    @property
    def device(self) -> torch.device:
        """Where the parameters are (and the model computes): ``cpu``, ``cuda:0``, ..."""
        return next(self.parameters()).device

    def set_precision(self, precision: str) -> "BiLM":
        """Run the matrix products in ``precision`` ("fp32", "bf16", or "bf16-emulated" for fidelity
        measurements); pass the result of ``elmo_model.bilm.precision.resolve_precision``. Weights stay
        fp32. Returns self."""
        for module in self.modules():
            if hasattr(module, "products"):
                module.products = ProductPrecision(precision)
        self.precision = precision
        return self

    @contextlib.contextmanager
    def computing_in(self, precision: str) -> Iterator["BiLM"]:
        """``with model.computing_in("bf16"):`` runs the block in ``precision`` and gives the
        model back in the precision it had (for code handed someone else's model, such as the
        app's cached one, whose precision the user chose)."""
        previous = self.precision
        self.set_precision(precision)
        try:
            yield self
        finally:
            if self.precision != previous:
                self.set_precision(previous)

    def reset_states(self) -> None:
        """Forget the carried-over LSTM state (stateful mode)."""
        self._states = None

    def encode(self, tokens: torch.Tensor, mask: torch.Tensor,
               initial: dict[str, list[LstmState]] | None = None
               ) -> tuple[list[torch.Tensor], list[torch.Tensor], dict[str, list[LstmState]]]:
        """Token vectors (B, T, P) with boundaries, mask (B, T) -> forward layer outputs,
        backward layer outputs (each (B, T, P), in text order) and final states. On a GPU, for
        inference, a replay of a captured CUDA graph where the shape has one (``cuda_graphs``)."""
        if self._replays_graphs(tokens, initial):
            cache = _GRAPHS.setdefault(self, cuda_graphs.GraphCache())
            return cache.encode(tokens, mask, self._encode_for_graph, self._graph_weights, self.precision)
        return self._encode_eager(tokens, mask, initial)

    def _replays_graphs(self, tokens: torch.Tensor, initial: dict | None) -> bool:
        together = self.directions_together is not False
        return (tokens.device.type == "cuda" and initial is None and not self.training and together
                and not torch.is_grad_enabled() and getattr(self, "cuda_graphs", True) and cuda_graphs.wanted()
                and cuda_graphs.worth_it(tokens.shape[0], self.config.lstm.dim)
                and not torch.cuda.is_current_stream_capturing())

    def _encode_for_graph(self, tokens: torch.Tensor, mask: torch.Tensor):
        if torch.cuda.is_current_stream_capturing():
            marker = _CAPTURING.set(True)
            try:
                return self._encode_eager(tokens, mask, None, together=True)
            finally:
                _CAPTURING.reset(marker)
        return self._encode_eager(tokens, mask, None, together=True)

    def _graph_weights(self) -> tuple:
        """What a graph of ``encode`` reads besides its inputs: the stacked weights of each layer
        pair, checked (and rebuilt if the weights changed) by ``_paired_weights``."""
        stacks = [_paired_weights(first, second) for first, second in zip(self.forward_lstm.layers,
                                                                           self.backward_lstm.layers)]
        return cuda_graphs.tensor_marks(t for stack in stacks for t in stack)

    def _encode_eager(self, tokens: torch.Tensor, mask: torch.Tensor, initial: dict[str, list[LstmState]] | None,
                      together: bool | None = None
                      ) -> tuple[list[torch.Tensor], list[torch.Tensor], dict[str, list[LstmState]]]:
        lengths = mask.sum(dim=1)
        reversed_tokens = reverse_padded(tokens, lengths)

        def forward_stack():
            return self.forward_lstm(tokens, mask, None if initial is None else initial["forward"])

        def backward_stack():
            return self.backward_lstm(reversed_tokens, mask, None if initial is None else initial["backward"])

        threads = torch.get_num_threads()
        lstm = self.config.lstm
        if together is None:
            together = self.directions_together
        if together is None:  # automatic: off the CPU (a GPU), for inference and training alike
            together = tokens.device.type != "cpu"
        if together:
            (fw, fw_final), (bw_rev, bw_final) = _run_directions_together(
                self.forward_lstm, self.backward_lstm, tokens, reversed_tokens, mask, initial)
        elif (self.parallel_directions and tokens.device.type == "cpu" and threads >= 2 and not torch.is_grad_enabled()
                and lstm.dim * lstm.projection_dim >= _PARALLEL_MIN_CELLS_X_PROJECTION
                and (self.precision != "bf16" or tokens.shape[0] >= _PARALLEL_MIN_BF16_BATCH)):
            (fw, fw_final), (bw_rev, bw_final) = _run_two_at_once(forward_stack, backward_stack, threads)
        else:
            (fw, fw_final), (bw_rev, bw_final) = forward_stack(), backward_stack()
        bw = [reverse_padded(out, lengths) for out in bw_rev]
        return fw, bw, {"forward": fw_final, "backward": bw_final}

    def _initial_states(self, batch: int, like: torch.Tensor) -> dict[str, list[LstmState]] | None:
        if not self.stateful or self._states is None:
            return None
        initial = {}
        for direction, stack in (("forward", self.forward_lstm), ("backward", self.backward_lstm)):
            per_layer = []
            for (h, c), layer in zip(self._states[direction], stack.layers):
                h0, c0 = layer.zero_state(batch, like)
                n = min(batch, h.shape[0])
                h0[:n], c0[:n] = h[:n], c[:n]
                per_layer.append((h0, c0))
            initial[direction] = per_layer
        return initial

    def _store_states(self, finals: dict[str, list[LstmState]]) -> None:
        if self._states is None:
            self._states = {k: [(h.detach(), c.detach()) for h, c in v] for k, v in finals.items()}
            return
        for direction, per_layer in finals.items():
            merged = []
            for (h_new, c_new), (h_old, c_old) in zip(per_layer, self._states[direction]):
                n_new, n_old = h_new.shape[0], h_old.shape[0]
                if n_new >= n_old:
                    merged.append((h_new.detach(), c_new.detach()))
                else:  # rows beyond this batch keep their state, as in AllenNLP
                    merged.append((torch.cat([h_new.detach(), h_old[n_new:]]), torch.cat([c_new.detach(), c_old[n_new:]])))
            self._states[direction] = merged

    def _check_char_ids(self, char_ids: torch.Tensor) -> None:
        """One line, before any work, for ids the network would misread: the wrong rank or width
        (another width ran and gave vectors off by up to 0.43), not integers, an empty batch, ids
        outside the character table (checked on the CPU: on a GPU it would wait for the queue)."""
        if not isinstance(char_ids, torch.Tensor):
            raise TypeError(f"char_ids must be a tensor from batch_to_char_ids, got {type(char_ids).__name__}")
        width = self.config.char_cnn.max_characters_per_token
        if char_ids.dim() != 3 or char_ids.shape[-1] != width:
            raise ValueError(f"char_ids must be (batch, tokens, {width}) as batch_to_char_ids makes them, got shape "
                             f"{tuple(char_ids.shape)}")
        if char_ids.dtype.is_floating_point or char_ids.dtype.is_complex or char_ids.dtype == torch.bool:
            raise ValueError(f"char_ids must be integer ids, got {char_ids.dtype}")
        if char_ids.shape[0] == 0:  # an empty sentence (no token) embeds as (L+1, 1, 0, 2P)
            raise ValueError(f"char_ids of shape {tuple(char_ids.shape)}: no sentence to embed")
        rows = self.token_embedder.char_embedding.num_embeddings
        on_cpu = char_ids.device.type == "cpu" and char_ids.numel() > 0
        if on_cpu and (int(char_ids.min()) < 0 or int(char_ids.max()) >= rows):
            raise ValueError(f"char_ids hold values {int(char_ids.min())}..{int(char_ids.max())}; character ids lie "
                             f"in 0..{rows - 1} (0 pads)")

    def add_boundaries(self, char_ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``add_sentence_boundaries`` with this model's ``<S>`` / ``</S>`` ids (bilm-tf's here; a
        model of another vocabulary overrides it)."""
        return add_sentence_boundaries(char_ids, mask)

    def forward(self, char_ids: torch.Tensor, keep_boundaries: bool = False) -> BiLMOutput:
        """char_ids (B, T, C) from ``batch_to_char_ids`` (no boundary words) -> ``BiLMOutput``."""
        self._check_char_ids(char_ids)
        mask = (char_ids > 0).any(dim=-1)
        ids, full_mask = self.add_boundaries(char_ids, mask)
        tokens = self.token_embedder(ids) * full_mask.unsqueeze(-1)
        fw, bw, finals = self.encode(tokens, full_mask, self._initial_states(ids.shape[0], tokens))
        if self.stateful:
            self._store_states(finals)
        layers = [torch.cat([tokens, tokens], dim=-1)] + [torch.cat([f, b], dim=-1) for f, b in zip(fw, bw)]
        if keep_boundaries:
            return BiLMOutput(layers, full_mask)
        steps = char_ids.shape[1]
        # drop <S> (position 0); </S> of each row lands on a masked position and is zeroed
        layers = [layer[:, 1 : steps + 1] * mask.unsqueeze(-1) for layer in layers]
        return BiLMOutput(layers, mask)


class ScalarMix(nn.Module):
    """``gamma * sum_j softmax(w)_j * h_j`` over N layers, optionally layer-normalising each h_j
    over its unmasked positions first (as AllenNLP's ScalarMix). Learned: ``scalar_parameters``
    (the pre-softmax w) and ``gamma``."""

    def __init__(self, n_layers: int, do_layer_norm: bool = False,
                 initial_scalar_parameters: list[float] | None = None, trainable: bool = True) -> None:
        super().__init__()
        if initial_scalar_parameters is None:
            initial_scalar_parameters = [0.0] * n_layers
        if len(initial_scalar_parameters) != n_layers:
            raise ValueError(f"ScalarMix: {len(initial_scalar_parameters)} initial parameters for {n_layers} layers")
        self.n_layers = n_layers
        self.do_layer_norm = do_layer_norm
        self.scalar_parameters = nn.Parameter(torch.tensor(initial_scalar_parameters, dtype=torch.float32),
                                              requires_grad=trainable)
        self.gamma = nn.Parameter(torch.tensor(1.0), requires_grad=trainable)

    @property
    def weights(self) -> torch.Tensor:
        """s_j = softmax(w), shape (N,)."""
        return torch.softmax(self.scalar_parameters, dim=0)

    def forward(self, layers: list[torch.Tensor] | torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        """layers: N tensors (..., D) of equal shape (or one tensor (N, ..., D)); mask (...) for
        layer norm -> (..., D)."""
        if len(layers) != self.n_layers:
            raise ValueError(f"ScalarMix expects {self.n_layers} layers, got {len(layers)}")
        shapes = {tuple(h.shape) for h in layers}
        if len(shapes) != 1:
            raise ValueError(f"ScalarMix: all layers must have the same shape, got {sorted(shapes)}")
        if self.do_layer_norm and mask is None:
            raise ValueError("ScalarMix with do_layer_norm=True needs a mask")
        weights = self.weights
        mixed = None
        for j, h in enumerate(layers):
            if self.do_layer_norm:
                h = _masked_layer_norm(h, mask)
            term = weights[j] * h
            mixed = term if mixed is None else mixed + term
        return self.gamma * mixed


def _masked_layer_norm(h: torch.Tensor, mask: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    m = mask.unsqueeze(-1).to(h.dtype)
    n = m.sum() * h.shape[-1]
    mean = (h * m).sum() / n
    var = (((h - mean) * m) ** 2).sum() / n
    return (h - mean) / torch.sqrt(var + eps)
