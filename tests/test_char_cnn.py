"""The character CNN's blockwise max-pooled convolution: the same numbers, forward and gradient,
as the algorithm it replaced (``old_max_pooled_convolution``, kept once, in bench/char_cnn.py), and
a backward whose work grows linearly with the batch's tokens."""

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from bench.char_cnn import old_max_pooled_convolution  # the one copy of the algorithm the new one replaced
from elmo_model.bilm import char_cnn, modules
from elmo_model.bilm.char_ids import batch_to_char_ids
from elmo_model.bilm.precision import ProductPrecision
from elmo_model.models.registry import load_bilm

pytestmark = pytest.mark.usefixtures("one_torch_thread")

WORDS = ("the bank was closed on Sunday , so we walked along the river bank instead . Rivers flow into "
         "seas ; antidisestablishmentarianism is long and a is short").split()


def char_ids(n_sentences: int, seed: int = 0) -> torch.Tensor:
    """(B, T, 50) ids of real words (short words leave many equal padding windows: ties of the max)."""
    rng = np.random.default_rng(seed)
    sentences = [["<S>", *rng.choice(WORDS, size=int(rng.integers(3, 12))).tolist(), "</S>"]
                 for _ in range(n_sentences)]
    return batch_to_char_ids(sentences, 50)


@pytest.fixture(scope="module")
def cnn(data_root):
    """The bilm-tf fixture's character CNN (5 filter widths, 2 highways)."""
    return load_bilm(data_root / "fixtures" / "bilm_tf").token_embedder


def run(cnn, ids, precision, old_block_floats=None, autocast=False):
    """-> (output, {parameter name: gradient}) of a fixed random projection of the CNN's output."""
    for module in cnn.modules():
        if hasattr(module, "products"):
            module.products = ProductPrecision(precision)
    cnn.zero_grad(set_to_none=True)
    with pytest.MonkeyPatch.context() as patch:
        if old_block_floats is not None:
            patch.setattr(modules.CharacterCNN, "_max_pooled_convolution",
                          lambda self, x, conv: old_max_pooled_convolution(self, x, conv, old_block_floats))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = cnn(ids)
        weights = torch.randn(out.shape, generator=torch.Generator().manual_seed(1))
        (out.float() * weights).sum().backward()
    for module in cnn.modules():
        if hasattr(module, "products"):
            module.products = ProductPrecision("fp32")
    return out.detach().float(), {name: p.grad.clone() for name, p in cnn.named_parameters()}


def assert_close(a, b, tolerance=1e-6):
    """max |a - b| <= tolerance x max |b| (fp32 sums in another order differ by ~1e-7 of the scale)."""
    assert (a - b).abs().max() <= tolerance * b.abs().max(), ((a - b).abs().max(), b.abs().max())


# native bf16 wherever the kernels exist (their speed, which bf16_support also weighs, is no matter here)
PRECISIONS = ["fp32", "bf16-emulated"] + (["bf16"] if torch.ops.mkldnn._is_mkldnn_bf16_supported() else [])


@pytest.mark.parametrize("precision", PRECISIONS)
@pytest.mark.parametrize("block_floats", [1 << 20, 1 << 11])  # one block; ~10 blocks of tokens a width
def test_the_new_convolution_equals_the_old_forward_and_gradient(cnn, monkeypatch, precision, block_floats):
    ids = char_ids(24)
    monkeypatch.setattr(char_cnn, "_CONV_BLOCK_FLOATS", block_floats)
    new_out, new_grads = run(cnn, ids, precision)
    old_out, old_grads = run(cnn, ids, precision, old_block_floats=block_floats)
    assert_close(new_out, old_out)
    if precision == "bf16" and block_floats < 1 << 20:
        # the old backward summed a kernel's gradient over the blocks in bf16, the new one sums in
        # fp32 (precision.py's rule): measured against the emulated run (fp32 sums of the same bf16
        # operands), the new kernel gradients are the closer ones; everything else is compared as is
        _, emulated = run(cnn, ids, "bf16-emulated")
        for name in [name for name in new_grads if name.startswith("convolutions.") and name.endswith("weight")]:
            new, old, reference = new_grads.pop(name), old_grads.pop(name), emulated[name]
            assert (new - reference).norm() < (old - reference).norm(), name
    assert new_grads.keys() == old_grads.keys()
    for name in new_grads:
        assert_close(new_grads[name], old_grads[name]), name


def test_the_new_convolution_equals_the_old_under_autocast(cnn, monkeypatch):
    """bf16 autocast (how the trainer runs on a GPU) recomputes the backward's products in bf16 too."""
    ids = char_ids(16)
    monkeypatch.setattr(char_cnn, "_CONV_BLOCK_FLOATS", 1 << 20)
    new_out, new_grads = run(cnn, ids, "fp32", autocast=True)
    old_out, old_grads = run(cnn, ids, "fp32", old_block_floats=1 << 20, autocast=True)
    assert_close(new_out, old_out)
    for name in new_grads:
        assert_close(new_grads[name], old_grads[name]), name


class WrittenFloats(TorchDispatchMode):
    """Counts the elements of every tensor the dispatched ops return."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor):
                self.count += t.numel()
        return out


def backward_floats(cnn, ids):
    cnn.zero_grad(set_to_none=True)
    out = cnn(ids)
    with WrittenFloats() as written:
        out.sum().backward()
    return written.count


def test_the_backward_grows_linearly_with_the_batch(cnn, monkeypatch):
    """Run against the old algorithm (``old_max_pooled_convolution`` patched in, 4x the tokens
    gave 12x the floats written: the zero fill of the whole window tensor per block), it fails."""
    monkeypatch.setattr(char_cnn, "_CONV_BLOCK_FLOATS", 1 << 12)
    small, large = backward_floats(cnn, char_ids(16, seed=2)), backward_floats(cnn, char_ids(64, seed=2))
    small_tokens, large_tokens = char_ids(16, seed=2).shape[:2].numel(), char_ids(64, seed=2).shape[:2].numel()
    assert large / small < 1.5 * large_tokens / small_tokens


def test_no_tokens_give_an_empty_result(cnn):
    for conv in cnn.convolutions:
        x = torch.zeros(0, 50, conv.in_channels, requires_grad=True)
        assert cnn._max_pooled_convolution(x, conv).shape == (0, conv.out_channels)
