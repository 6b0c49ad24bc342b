"""The training Function of the LSTM layer (elmo_model/bilm/lstm_gradient.py) against autograd
through the time loop (lstm._lstm_step with a graph, the reference): gradients of every
weight, the inputs and the initial state, in both forms (one direction (B, T, D), both at once
(2, B, T, D)), with ragged batches and both clips active; fp64 gradcheck; bf16; the trainer."""

import gc
import gzip

import numpy as np
import pytest
import torch

from elmo_model.bilm import lstm_gradient
from elmo_model.bilm.lstm import LstmWithProjection
from elmo_model.bilm.lstm_gradient import (
    _LstmSequence,
    _Settings,
    autograd_through_the_loop,
)
from elmo_model.bilm.modules import _paired_layer
from elmo_model.bilm.precision import ProductPrecision
from elmo_model.training.train import TrainConfig, Trainer

B, T, D, H, P = 5, 9, 6, 8, 4
LENGTHS = torch.tensor([9, 4, 7, 0, 9])  # ragged, one empty row, the longest twice
CELL_CLIP, PROJ_CLIP = 0.6, 0.25  # small enough that both clip at every step of some row (checked below)


def make_layers(paired: bool, precision: str = "fp32", dtype=torch.float32, seed: int = 0) -> list[LstmWithProjection]:
    torch.manual_seed(seed)
    layers = [LstmWithProjection(D, H, P, CELL_CLIP, PROJ_CLIP) for _ in range(2 if paired else 1)]
    if paired:
        layers[1].cell_clip, layers[1].proj_clip = None, 0.4  # each direction its own clips
    for layer in layers:
        layer.to(dtype)
        layer.products = ProductPrecision(precision)
    return layers


def make_inputs(paired: bool, dtype=torch.float32, seed: int = 1):
    generator = torch.Generator().manual_seed(seed)
    leading = (2,) if paired else ()
    x = torch.randn(*leading, B, T, D, generator=generator, dtype=dtype) * 2
    state = (torch.randn(*leading, B, P, generator=generator, dtype=dtype) * 0.2,
             torch.randn(*leading, B, H, generator=generator, dtype=dtype) * 0.5)
    mask = torch.arange(T).unsqueeze(0) < LENGTHS.unsqueeze(1)
    seeds = [torch.randn(*leading, B, T, P, generator=generator, dtype=dtype), torch.randn_like(state[0]),
             torch.randn_like(state[1])]  # the upstream gradients of outputs, final h, final c
    return x, mask, state, seeds


def gradients(layers, x, mask, state, seeds, reference: bool) -> dict[str, torch.Tensor]:
    """Outputs, final state and the gradients of the inputs, the initial state and every parameter."""
    for layer in layers:
        layer.zero_grad(set_to_none=True)
    x = x.detach().requires_grad_()
    h0, c0 = (s.detach().requires_grad_() for s in state)
    with autograd_through_the_loop() if reference else torch.enable_grad():
        if len(layers) == 2:
            out, (h, c) = _paired_layer(layers[0], layers[1], x, mask, (h0, c0))
        else:
            out, (h, c) = layers[0](x, mask, (h0, c0))
    ((out * seeds[0]).sum() + (h * seeds[1]).sum() + (c * seeds[2]).sum()).backward()
    found = {"out": out.detach(), "h": h.detach(), "c": c.detach(), "d x": x.grad, "d h0": h0.grad, "d c0": c0.grad}
    for k, layer in enumerate(layers):
        found.update({f"d {k}.{name}": p.grad for name, p in layer.named_parameters()})
    return found


def worst(a: dict, b: dict) -> dict[str, float]:
    """Per tensor, the largest difference relative to the largest magnitude of b's."""
    return {k: float((a[k].double() - b[k].double()).abs().max() / b[k].double().abs().max().clamp_min(1e-30))
            for k in b}


def test_the_function_dispatches_only_where_a_gradient_is_taken():
    (layer,) = make_layers(False)
    x, mask, _, _ = make_inputs(False)
    assert lstm_gradient.takes_gradient(x, list(layer.parameters()))
    with torch.no_grad():
        assert not lstm_gradient.takes_gradient(x, list(layer.parameters()))
    with autograd_through_the_loop():
        assert not lstm_gradient.takes_gradient(x, list(layer.parameters()))
    layer.requires_grad_(False)
    assert not lstm_gradient.takes_gradient(x, list(layer.parameters()))
    assert lstm_gradient.takes_gradient(x.requires_grad_(), list(layer.parameters()))
    out, _ = layer(x, mask)
    assert type(out.grad_fn.next_functions[0][0]).__name__ == "_LstmSequenceBackward"  # out[0] of (1, B, T, P)


@pytest.mark.parametrize("paired", [False, True], ids=["one direction", "both directions"])
def test_fp64_gradcheck_of_the_function_with_a_mask_clips_and_an_initial_state(paired):
    """The gold standard: finite differences in float64, every input of the Function at once."""
    layers = make_layers(paired, dtype=torch.float64)
    x, mask, (h0, c0), _ = make_inputs(paired, dtype=torch.float64)
    x, h0, c0 = (t if paired else t.unsqueeze(0) for t in (x, h0, c0))

    def stacked(name: str) -> torch.Tensor:
        return torch.stack([getattr(layer, name).weight.detach() for layer in layers])

    w_in, w_state, w_proj = stacked("input_linear"), stacked("state_linear"), stacked("projection")
    bias = torch.stack([layer.input_linear.bias.detach() + layer.forget_bias_offset for layer in layers])
    clip = lstm_gradient._clip
    settings = _Settings(layers[0].products, clip([lay.cell_clip for lay in layers], x),
                         clip([lay.proj_clip for lay in layers], x))
    valid = mask.t().unsqueeze(-1).contiguous()
    inputs = [t.detach().requires_grad_() for t in (x, w_in, bias, w_state, w_proj, h0, c0)]

    def run(*tensors):
        return _LstmSequence.apply(*tensors, valid, settings)

    # fast mode: the Jacobian against random directions, not entry by entry (minutes on 2 cores otherwise)
    assert torch.autograd.gradcheck(run, inputs, eps=1e-6, atol=1e-7, rtol=1e-5, fast_mode=True)


def test_both_clips_bind_in_these_tests():
    """Some c' and h' beyond the clips, some within, so the clips' gradients are exercised."""
    for paired in (False, True):
        layers = make_layers(paired)
        x, mask, state, _ = make_inputs(paired)
        layers[0].cell_clip = layers[0].proj_clip = None  # see the raw values
        with torch.no_grad(), autograd_through_the_loop():
            if paired:
                layers[1].cell_clip = layers[1].proj_clip = None
                out, (_, c) = _paired_layer(layers[0], layers[1], x, mask, state)
            else:
                out, (_, c) = layers[0](x, mask, state)
        assert (out.abs() > PROJ_CLIP).any() and (out[out != 0].abs() < PROJ_CLIP).any()
        assert (c.abs() > CELL_CLIP).any() and (c.abs() < CELL_CLIP).any()


@pytest.mark.parametrize("paired", [False, True], ids=["one direction", "both directions"])
def test_fp32_gradients_equal_autograd_through_the_loop(paired):
    """The Function's fp32 outputs and gradients against the reference's, each within the fp32
    floor measured against the same reference in float64: the Function's error from float64 at
    most 4x the reference's own (measured: the reference's largest relative error 2e-7, the
    Function's 3-4.5e-7, at most 2.5x the reference's on any one tensor; the two 2.6-3.7e-7 apart)."""
    x, mask, state, seeds = make_inputs(paired)
    new = gradients(make_layers(paired), x, mask, state, seeds, reference=False)
    ref = gradients(make_layers(paired), x, mask, state, seeds, reference=True)
    gold = gradients(make_layers(paired, dtype=torch.float64), x.double(), mask,
                     tuple(s.double() for s in state), [s.double() for s in seeds], reference=True)
    assert set(new) == set(ref) and len(new) == 6 + 4 * len(make_layers(paired))
    floor = worst(ref, gold)
    error = worst(new, gold)
    for name in gold:
        assert error[name] <= 4 * floor[name] + 1e-7, (name, error[name], floor[name])
    assert max(worst(new, ref).values()) < 1e-5, worst(new, ref)


@pytest.mark.parametrize("precision", ["bf16-emulated", "bf16"])
@pytest.mark.parametrize("paired", [False, True], ids=["one direction", "both directions"])
def test_bf16_gradients_are_as_close_to_float64_as_the_reference_bf16_path(paired, precision):
    """In bf16 any fp32 difference of one ulp may round an operand the other way, so the two
    paths agree only to bf16's resolution: measured, outputs within 4.9e-3 and gradients within
    7.2e-3 of each other relative to their largest magnitude (bounds 1.5e-2 and 2e-2, 3x). What
    matters is the distance to the exact (float64) gradient: the Function's summed over all
    tensors measured 0.96-1.03x the reference bf16 path's (bound 1.5x)."""
    x, mask, state, seeds = make_inputs(paired)
    new = gradients(make_layers(paired, precision), x, mask, state, seeds, reference=False)
    ref = gradients(make_layers(paired, precision), x, mask, state, seeds, reference=True)
    gold = gradients(make_layers(paired, dtype=torch.float64), x.double(), mask,
                     tuple(s.double() for s in state), [s.double() for s in seeds], reference=True)
    apart = worst(new, ref)
    assert max(apart[k] for k in ("out", "h", "c")) < 1.5e-2, apart
    assert max(apart.values()) < 2e-2, apart
    new_error, ref_error = worst(new, gold), worst(ref, gold)
    total_new, total_ref = sum(new_error.values()), sum(ref_error.values())
    assert total_new <= 1.5 * total_ref, (new_error, ref_error)


def test_an_empty_sequence_and_a_batch_without_padding():
    (layer,) = make_layers(False)
    x = torch.randn(3, 0, D, requires_grad=True)
    out, (h, c) = layer(x, torch.ones(3, 0, dtype=torch.bool))
    assert out.shape == (3, 0, P) and h.shape == (3, P) and c.shape == (3, H)
    x, _, state, seeds = make_inputs(False)
    full = torch.ones(B, T, dtype=torch.bool)
    new = gradients(make_layers(False), x, full, state, seeds, reference=False)
    ref = gradients(make_layers(False), x, full, state, seeds, reference=True)
    assert max(worst(new, ref).values()) < 1e-5


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, data_root):
    path = tmp_path_factory.mktemp("corpus") / "text.txt"
    with gzip.open(data_root / "lm_corpus" / "wiki-valid.txt.gz", "rt", encoding="utf-8") as f:
        path.write_text("".join(next(f) for _ in range(200)), encoding="utf-8")
    return path


@pytest.mark.parametrize("precision", ["fp32", "bf16-emulated"])
def test_the_trainers_loss_curve_is_todays(corpus, tmp_path, precision):
    """Twelve steps of the trainer (tiny shape, dropout on) with the Function and with autograd
    through the loop: the same losses (fp32: to 1e-5 nats, measured 4.8e-7; bf16: 0.01 nats, the
    goal's bound for a 300-step run, measured 6.9e-4 emulated and 5.9e-4 on avx512_bf16)."""
    curves = {}
    for reference in (False, True):
        config = TrainConfig(train=[str(corpus)], out=str(tmp_path / str(reference)), vocab_size=500,
                             vocab_max_tokens=50_000, vocab_min_count=1, char_embedding_dim=4,
                             filters=[[1, 8], [2, 8], [3, 16]], n_highway=1, lstm_dim=32, projection_dim=16,
                             softmax_cutoffs=[200], batch_tokens=300, max_sentence_tokens=30, learning_rate=5e-3,
                             log_every=1, max_steps=12, checkpoint_every_minutes=1e9, validate_every_minutes=1e9,
                             threads=1, precision=precision)
        trainer = Trainer(config, progress=False)
        with autograd_through_the_loop() if reference else torch.enable_grad():
            trainer.train()
        curves[reference] = np.array([point["loss"] for point in trainer.state["loss_curve"]])
    assert len(curves[False]) == 12
    gap = np.abs(curves[False] - curves[True]).max()
    assert gap < (1e-5 if precision == "fp32" else 1e-2), (gap, curves)


def test_the_kept_buffers_go_back_when_asked():
    """The time loops keep their stacked buffers between training steps (warm pages); the trainer
    gives them back when its run ends, and the next step makes them again."""
    from elmo_model.bilm import lstm_gradient

    workspace = lstm_gradient._WORKSPACE
    like = torch.zeros(1)
    workspace.give([workspace.take(like, 64, 32)])
    assert workspace.kept_bytes()
    lstm_gradient.release_workspace()
    assert not workspace.kept_bytes()
    assert workspace.take(like, 8, 4).shape == (8, 4)


@pytest.mark.parametrize("precision", ["fp32", "bf16" if torch.ops.mkldnn._is_mkldnn_bf16_supported()
                                       else "bf16-emulated"])
def test_the_kept_buffers_are_bounded_by_the_longest_steps_bytes_and_all_come_back(precision):
    """Steps of varying length: the pool keeps at most what the longest step had lent at once (it
    grew past it before), fp32 and bf16 buffers in pools of their own, and after each backward
    every buffer lent has come back (bf16's d_h_raw never did)."""
    from elmo_model.bilm import lstm_gradient

    gc.collect()  # graphs an earlier test left (a module fixture's outputs) may still hold a buffer
    lstm_gradient.release_workspace()
    workspace = lstm_gradient._WORKSPACE
    held = dict(workspace._lent)  # lent before this test: not this test's to see come back
    gc.freeze()  # what is alive now is not this test's garbage: each collection below scans only what it made
    try:
        _steps_of_varying_length(workspace, held, precision)
    finally:
        gc.unfreeze()
    lstm_gradient.release_workspace()


def _steps_of_varying_length(workspace, held: dict, precision: str) -> None:
    def all_back() -> bool:
        gc.collect()  # the graphs (and the buffers they hold) are freed
        return all(lent == held.get(pool, 0) for pool, lent in workspace._lent.items())

    layers = make_layers(paired=True, precision=precision)
    x, mask, state, seeds = make_inputs(paired=True)
    gradients(layers, x, mask, state, seeds, reference=False)  # the longest step first: its peak
    assert all_back(), (workspace._lent, held)
    peak = dict(workspace._peak)
    for steps in (3, 8, 2, 6, 9, 1, 5, 7, 4) * 3:  # shorter steps, in an order that fragments
        cut = (x[:, :, :steps], mask[:, :steps], state, [seeds[0][:, :, :steps], seeds[1], seeds[2]])
        gradients(layers, *cut, reference=False)
        assert all_back(), (workspace._lent, held)
    kept = {(b.dtype, b.device): sum(t.numel() * t.element_size() for t in free)
            for free in workspace._free.values() for b in free[:1]}
    assert kept and all(kept[pool] <= peak[pool] for pool in kept), (kept, peak)
    if precision == "bf16":  # the bf16 operands kept apart from the fp32 buffers (emulated bf16 is fp32 tensors)
        assert {dtype for dtype, _ in kept} == {torch.float32, torch.bfloat16}
