"""Inference on a GPU as replays of captured CUDA graphs: the LSTM stacks' time loop launched once.

A biLM's time loop is a chain of small kernels (two products, the cell's elementwise work and a
clip a step, per layer): at ELMo's sizes a GPU spends more time waiting for the host to launch
them than running them (an H200, full-size shape, batch 32: about 800 launches a forward). A
CUDA graph records the launches of ``BiLM.encode`` once for a shape and replays them with one
call, so a forward costs its kernels' time.

How it is used (``BiLM.encode``; nothing to call by hand):

- Only for inference on a CUDA device (no gradients, the model in eval mode, no carried-over
  state) with both directions in one loop (``BiLM.directions_together``, the GPU's default).
- Shapes go in buckets (``bucket``): the batch up to a power of two (at most 8) or a multiple of
  8, the steps up to a multiple of 8; the extra rows and steps are masked padding, which the
  LSTM leaves out of every real position, so a bucket's graph serves every shape in it.
- A bucket's graph is captured the second time the bucket is met (a one-off shape runs eager:
  capturing costs about one forward), and kept while the weights stay where they were: before
  each replay the stacked weights the graph reads are checked (``modules._paired_weights``:
  pointer, version and sum; a rebuilt stack at another address means a new capture).
- Only where the launches are the time: up to ``MAX_BATCH_CELLS`` LSTM cells a step (the padded
  batch times the cell dim: batch 128 for the full-size ELMo, 512 for elmo-mini); larger
  batches run eager, where a replay measured no faster.
- At most ``MAX_GRAPHS`` graphs a model, and at most ``MEMORY_SHARE`` of the device's memory held
  by their pools; the least recently used goes first.
- A capture that fails (an operation a graph cannot hold, out of memory) says so once, as a
  warning, and the model runs eager from then on; the forward that failed returns eager results.

``ELMO_WORKBENCH_CUDA_GRAPHS=0`` turns it off for the process (``1``, the default, on). Replays
compute with the same kernels as the eager forward at the bucket's shape; against the eager
forward at the unpadded shape they differ by the products' summation order only (cuBLAS may
choose another algorithm for another shape): ``bench/gpu_check.py`` measures both.
"""

from __future__ import annotations

import os
import warnings
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable

import torch

ENV = "ELMO_WORKBENCH_CUDA_GRAPHS"
MAX_GRAPHS = 8
MEMORY_SHARE = 0.25  # of the device's memory, the most that every graph of a model may hold
CAPTURE_AT = 2  # a bucket's graph is captured at its second forward
# graphs up to this many LSTM cells a step (padded batch x cell dim): beyond it the products are
# the time, not the launches (an H200: 0.94-1.03x eager at full-size batch 512 fp32 and elmo-mini
# batch 512 fp32, 0.45-0.98x at full-size batch 512 bf16 in two runs; 1.4-2.0x at 524,288 cells)
MAX_BATCH_CELLS = 1 << 19

Encoded = tuple  # (forward layers, backward layers, final states), BiLM.encode's result


def wanted() -> bool:
    """Whether this process replays graphs: ``ELMO_WORKBENCH_CUDA_GRAPHS`` (default on)."""
    return os.environ.get(ENV, "1").strip() not in ("0", "false", "off", "no")


def worth_it(batch: int, cell_dim: int) -> bool:
    """Whether a forward of ``batch`` rows through cells of ``cell_dim`` is launch-bound enough
    for a graph (``MAX_BATCH_CELLS``)."""
    return bucket(batch, 1)[0] * cell_dim <= MAX_BATCH_CELLS


def bucket(batch: int, steps: int) -> tuple[int, int]:
    """The shape whose graph serves (batch, steps): the batch up to 1, 2, 4, 8 or a multiple of 8,
    the steps up to a multiple of 8."""
    if batch <= 8:
        padded_batch = 1 << max(0, batch - 1).bit_length()
    else:
        padded_batch = -(-batch // 8) * 8
    return padded_batch, -(-steps // 8) * 8


@dataclass
class _Graph:
    graph: object  # torch.cuda.CUDAGraph
    tokens: torch.Tensor  # the static input (B', T', P)
    mask: torch.Tensor  # (B', T')
    result: Encoded  # the static outputs
    weights: tuple  # what the graph reads besides its inputs: (pointer, shape, dtype) of each
    bytes: int  # the memory its pool took


@dataclass
class GraphCache:
    """One model's graphs by (bucket, dtype, precision, autocast), least recently used first."""

    graphs: OrderedDict = field(default_factory=OrderedDict)
    seen: dict = field(default_factory=dict)
    failed: str | None = None  # why capturing stopped for this model

    def held_bytes(self) -> int:
        return sum(g.bytes for g in self.graphs.values())

    def forget(self) -> None:
        self.graphs.clear()
        self.seen.clear()

    def encode(self, tokens: torch.Tensor, mask: torch.Tensor, eager: Callable[[torch.Tensor, torch.Tensor], Encoded],
               weights: Callable[[], tuple], precision: str) -> Encoded:
        """``eager(tokens, mask)``'s result, from a replay where the bucket has a graph.
        ``weights()`` checks and returns what the graph reads besides its inputs."""
        batch, steps = tokens.shape[:2]
        shape = bucket(batch, steps)
        key = (shape, tokens.dtype, precision, torch.is_autocast_enabled("cuda"),
               torch.get_autocast_dtype("cuda"), tokens.device)
        graph = self.graphs.get(key)
        if graph is not None:
            if graph.weights == weights():
                self.graphs.move_to_end(key)
                return _replay(graph, tokens, mask)
            del self.graphs[key]  # the weights moved: capture anew
        self.seen[key] = self.seen.get(key, 0) + 1
        if self.failed is not None or self.seen[key] < CAPTURE_AT:
            return eager(tokens, mask)
        return self._capture(key, shape, tokens, mask, eager, weights)

    def _capture(self, key: tuple, shape: tuple[int, int], tokens: torch.Tensor, mask: torch.Tensor,
                 eager: Callable, weights: Callable[[], tuple]) -> Encoded:
        static_tokens = tokens.new_zeros(shape[0], shape[1], tokens.shape[2])
        static_mask = mask.new_zeros(shape)
        _fill(static_tokens, static_mask, tokens, mask)
        # a warm-up at the bucket's shape (cuBLAS's workspace and algorithms, the stacked weights
        # checked): its result, cut to the real rows and steps, is this forward's answer
        answer = _cut(eager(static_tokens, static_mask), tokens.shape[0], tokens.shape[1], copy=False)
        torch.cuda.synchronize(tokens.device)
        self._make_room(tokens.device)
        before = torch.cuda.memory_reserved(tokens.device)
        graph = torch.cuda.CUDAGraph()
        try:
            # thread_local: another thread's forward (a shared app server) is neither refused nor
            # captured while this thread captures
            with torch.cuda.graph(graph, capture_error_mode="thread_local"):
                result = eager(static_tokens, static_mask)
        except Exception as error:  # noqa: BLE001 (any failure: say so once, run eager from now on)
            torch.cuda.synchronize(tokens.device)
            self.failed = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
            self.forget()
            warnings.warn(f"CUDA graphs off for this model ({self.failed}); it runs eager", RuntimeWarning,
                          stacklevel=4)
            return answer
        held = max(0, torch.cuda.memory_reserved(tokens.device) - before)
        self.graphs[key] = _Graph(graph, static_tokens, static_mask, result, weights(), held)
        return answer

    def _make_room(self, device: torch.device) -> None:
        """Drop the least recently used graphs until one more fits the count and the memory share."""
        total = torch.cuda.get_device_properties(device).total_memory
        while self.graphs and (len(self.graphs) >= MAX_GRAPHS or self.held_bytes() > MEMORY_SHARE * total):
            self.graphs.popitem(last=False)


def _fill(static_tokens: torch.Tensor, static_mask: torch.Tensor, tokens: torch.Tensor, mask: torch.Tensor) -> None:
    """The static inputs: the real rows and steps, zeros and a False mask around them."""
    batch, steps = tokens.shape[:2]
    static_tokens.zero_()
    static_mask.zero_()
    static_tokens[:batch, :steps].copy_(tokens)
    static_mask[:batch, :steps].copy_(mask)


def _cut(result: Encoded, batch: int, steps: int, copy: bool) -> Encoded:
    """A padded result cut to (batch, steps); ``copy``: tensors of their own (a graph's outputs are
    overwritten by its next replay)."""
    def rows(x: torch.Tensor) -> torch.Tensor:
        return x[:batch].clone() if copy else x[:batch]

    def steps_of(x: torch.Tensor) -> torch.Tensor:
        x = x[:batch, :steps]
        return x.clone() if copy else x

    forward, backward, finals = result
    return ([steps_of(x) for x in forward], [steps_of(x) for x in backward],
            {d: [(rows(h), rows(c)) for h, c in states] for d, states in finals.items()})


def _replay(graph: _Graph, tokens: torch.Tensor, mask: torch.Tensor) -> Encoded:
    _fill(graph.tokens, graph.mask, tokens, mask)
    graph.graph.replay()
    return _cut(graph.result, tokens.shape[0], tokens.shape[1], copy=True)


def tensor_marks(tensors) -> tuple:
    """What a graph reads of each tensor: its pointer, shape and dtype (a rebuilt tensor at the
    same address, shape and dtype is read as it now is, which is what a replay should do)."""
    return tuple((t.data_ptr(), tuple(t.shape), t.dtype) for t in tensors)
