"""CUDA graphs of the biLM's inference forward (elmo_model.bilm.cuda_graphs): what a CPU can check.

The capture and the replay need a GPU (``bench/gpu_check.py`` compares replays with the eager
forward there); here: the buckets, the rule that a bucket is captured at its second forward, and
the assumption the buckets rest on, that masked padding rows and steps leave every real
position's vectors and states as they were."""

from __future__ import annotations

import pytest
import torch
from test_precision import small_random_bilm

from elmo_model.bilm import cuda_graphs, modules
from elmo_model.bilm.char_ids import batch_to_char_ids
from elmo_model.bilm.modules import add_sentence_boundaries

SENTENCES = [["The", "bank", "of", "the", "river", "."], ["I", "paid", "the", "bank"], ["Yes"]]


@pytest.mark.parametrize(("shape", "expected"), [
    ((1, 1), (1, 8)), ((2, 8), (2, 8)), ((3, 9), (4, 16)), ((5, 22), (8, 24)), ((8, 16), (8, 16)),
    ((9, 3), (16, 8)), ((32, 22), (32, 24)), ((33, 40), (40, 40)), ((500, 57), (504, 64)),
])
def test_buckets(shape, expected):
    assert cuda_graphs.bucket(*shape) == expected


def inputs(model, sentences):
    mask = (batch_to_char_ids(sentences) > 0).any(dim=-1)
    ids, full_mask = add_sentence_boundaries(batch_to_char_ids(sentences), mask)
    return model.token_embedder(ids) * full_mask.unsqueeze(-1), full_mask


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_padding_rows_and_steps_leave_the_real_positions_as_they_were(precision):
    """What a bucket's graph computes (the one-loop path on zero-padded inputs with a False mask
    around them) against the unpadded batch: the same vectors at every real position and the same
    final states, to float rounding (the products' shapes differ, so may their summation order)."""
    model = small_random_bilm().set_precision(precision)
    with torch.inference_mode():
        tokens, mask = inputs(model, SENTENCES)
        batch, steps = mask.shape
        padded_tokens = torch.zeros(8, cuda_graphs.bucket(batch, steps)[1], tokens.shape[2])
        padded_mask = torch.zeros(padded_tokens.shape[:2], dtype=torch.bool)
        cuda_graphs._fill(padded_tokens, padded_mask, tokens, mask)
        plain = model._encode_eager(tokens, mask, None, together=True)
        padded = cuda_graphs._cut(model._encode_eager(padded_tokens, padded_mask, None, together=True),
                                  batch, steps, copy=True)
    tolerance = 1e-5 if precision == "fp32" else 2e-2
    for a, b in zip(plain[0] + plain[1], padded[0] + padded[1]):
        assert a.shape == b.shape
        assert float((a - b)[mask].abs().max()) <= tolerance * float(a.abs().max())
        assert float(b[~mask].abs().max()) == 0.0  # padding stays zero in the real rows
    for direction in ("forward", "backward"):
        for (h1, c1), (h2, c2) in zip(plain[2][direction], padded[2][direction]):
            for x, y in ((h1, h2), (c1, c2)):
                assert x.shape == y.shape
                assert float((x - y).abs().max()) <= tolerance * float(x.abs().max())


def test_a_bucket_is_captured_at_its_second_forward_and_replayed_after(monkeypatch):
    """The cache's rule with the capture and replay stubbed (they need a GPU): eager at a bucket's
    first forward, a capture at the second, replays after while the weights stay; weights that
    moved, a capture anew."""
    calls = []
    weights = {"marks": ("a",)}

    def fake_capture(self, key, shape, tokens, mask, eager, read_weights):
        calls.append(("capture", shape))
        self.graphs[key] = cuda_graphs._Graph(None, tokens, mask, None, read_weights(), 0)
        return "captured"

    monkeypatch.setattr(cuda_graphs.GraphCache, "_capture", fake_capture)
    monkeypatch.setattr(cuda_graphs, "_replay", lambda graph, tokens, mask: calls.append("replay") or "replayed")
    cache = cuda_graphs.GraphCache()

    def run(batch, steps):
        tokens, mask = torch.zeros(batch, steps, 4), torch.ones(batch, steps, dtype=torch.bool)
        return cache.encode(tokens, mask, lambda t, m: calls.append("eager") or "eager",
                            lambda: weights["marks"], "fp32")

    assert [run(3, 9), run(4, 10), run(3, 12), run(2, 5)] == ["eager", "captured", "replayed", "eager"]
    weights["marks"] = ("b",)
    assert run(4, 16) == "captured"  # the same bucket, weights elsewhere: captured anew
    assert calls == ["eager", ("capture", (4, 16)), "replay", "eager", ("capture", (4, 16))]
    cache.failed = "a capture failed"
    assert run(1, 1) == "eager" and run(1, 1) == "eager"  # after a failure: eager only


def test_graphs_are_for_launch_bound_batches():
    assert cuda_graphs.worth_it(128, 4096) and not cuda_graphs.worth_it(129, 4096)  # the full-size ELMo
    assert cuda_graphs.worth_it(512, 1024) and not cuda_graphs.worth_it(513, 1024)  # elmo-mini


def test_graphs_are_for_inference_on_a_gpu_only(monkeypatch):
    model = small_random_bilm()
    tokens = torch.zeros(2, 5, 32)
    with torch.inference_mode():
        assert not model._replays_graphs(tokens, None)  # a CPU tensor
    monkeypatch.setattr(torch.Tensor, "device", property(lambda self: torch.device("cuda", 0)))
    monkeypatch.setattr(torch.cuda, "is_current_stream_capturing", lambda: False)
    with torch.inference_mode():
        assert model._replays_graphs(tokens, None)
        assert not model._replays_graphs(torch.zeros(cuda_graphs.MAX_BATCH_CELLS // 128 + 1, 5, 32), None)  # large
        assert not model._replays_graphs(tokens, {"forward": []})  # carried-over state
        monkeypatch.setenv(cuda_graphs.ENV, "0")
        assert not model._replays_graphs(tokens, None)
        monkeypatch.delenv(cuda_graphs.ENV)
        model.directions_together = False
        assert not model._replays_graphs(tokens, None)
        model.directions_together = None
        model.cuda_graphs = False
        assert not model._replays_graphs(tokens, None)
        model.cuda_graphs = True
    assert not model._replays_graphs(tokens, None)  # gradients on
    model.train()
    with torch.inference_mode():
        assert not model._replays_graphs(tokens, None)


def test_a_captured_stack_is_read_without_a_check_only_while_capturing():
    model = small_random_bilm()
    first, second = model.forward_lstm.layers[0], model.backward_lstm.layers[0]
    with torch.inference_mode():
        stack = modules._paired_weights(first, second)
        with torch.no_grad():
            first.state_linear.weight.data.add_(1.0)  # an edit the version counter does not see
        marker = modules._CAPTURING.set(True)
        try:
            assert modules._paired_weights(first, second) is stack
        finally:
            modules._CAPTURING.reset(marker)
        assert modules._paired_weights(first, second) is not stack  # checked again: rebuilt
