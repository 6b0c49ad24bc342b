"""The sweep's in-memory class: the model a process holds is not always the model on disk.

A model fine-tuned after loading (``Elmo(..., requires_grad=True)`` and an optimizer), edited
(under ``no_grad`` or through ``.data``) or cast (``.half()``) was identified by its weight file,
so it was served the activation cache of the file's weights, resumed an unfinished embedding made
with the old weights, or filled the fp32 cache with half-precision vectors. The identity now
follows the weights held (``elmo_model.bilm.identity.weights_digest``). docs/reliability.md gives
the counts.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from elmo_model import load_bilm
from elmo_model.bilm.identity import model_identity
from elmo_model.elmo import Elmo, batch_to_ids
from elmo_model.embedding import ElmoEmbedder
from probing.engine.activations import extract_activations

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SENTENCES = [["The", "bank", "was", "closed", "."], ["We", "sat", "on", "the", "river", "bank", "."]]


class Stop(Exception):
    """Raised by a progress callback to interrupt a run."""


@pytest.fixture()
def folder(data_root) -> Path:
    return data_root / "fixtures" / "bilm_tf"


def _first_weight(model: torch.nn.Module) -> torch.nn.Parameter:
    return next(p for p in model.parameters() if p.dim() == 2)


def _fine_tune(model) -> None:
    elmo = Elmo(None, None, 1, requires_grad=True, dropout=0.0, module=model)
    optimizer = torch.optim.SGD(elmo.parameters(), lr=0.5)
    out = elmo(batch_to_ids(SENTENCES))
    out["elmo_representations"][0].sum().backward()
    optimizer.step()


def _edit_no_grad(model) -> None:
    with torch.no_grad():
        _first_weight(model).mul_(1.5)


def _edit_data(model) -> None:
    _first_weight(model).data.mul_(1.5)


def _edit_one_value(model) -> None:
    _first_weight(model).data[0, 0] += 1e-3


CHANGES = {"fine-tuned": _fine_tune, "edited under no_grad": _edit_no_grad, "edited through .data": _edit_data,
           "one value nudged": _edit_one_value, "cast with .half()": lambda m: m.half()}


@pytest.mark.parametrize("change", list(CHANGES))
def test_a_model_changed_in_memory_is_another_identity(folder, change):
    """Each change gives an identity of its own, and stays it while nothing more changes; an
    unchanged model keeps its weight file's identity (the caches made from the file still serve it)."""
    model = load_bilm(folder)
    on_disk = model_identity(model)
    model(batch_to_ids(SENTENCES))  # running the model changes nothing
    assert model_identity(model) == on_disk == model_identity(load_bilm(folder))
    CHANGES[change](model)
    changed = model_identity(model)
    assert changed != on_disk
    assert model_identity(model) == changed


def test_an_edited_model_is_never_served_the_files_activation_cache(folder, tmp_path):
    """The activation cache of the file's weights was served to the edited model (off by up to 1.4)."""
    model = load_bilm(folder)
    before = extract_activations(model, SENTENCES, "demo", "test", cache_dir=tmp_path).sentence(0).copy()
    _edit_data(model)
    with torch.inference_mode():
        want = model(batch_to_ids(SENTENCES[:1])).layers
    got = extract_activations(model, SENTENCES, "demo", "test", cache_dir=tmp_path).sentence(0)
    assert not np.allclose(got, before)
    np.testing.assert_allclose(got, torch.stack(want, 0)[:, 0].numpy(), atol=1e-5)


def test_a_half_model_never_fills_the_fp32_cache(folder, tmp_path):
    """``.half()`` after loading: its vectors went into the fp32 model's cache entry, and the true
    fp32 model was then served them (6e-4 off against a stated 1e-5)."""
    half = load_bilm(folder).half().float()  # rounded through fp16, then back: other numbers
    extract_activations(half, SENTENCES, "demo", "test", cache_dir=tmp_path)
    exact = load_bilm(folder)
    with torch.inference_mode():
        want = torch.stack(exact(batch_to_ids(SENTENCES[:1])).layers, 0)[:, 0].numpy()
    got = extract_activations(exact, SENTENCES, "demo", "test", cache_dir=tmp_path).sentence(0)
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_an_unfinished_embedding_is_not_resumed_with_other_weights(folder, tmp_path):
    """An embedding interrupted, the model edited, the same command again: it resumed, and the
    file held old vectors for the first sentences (32 of 70 lines). Now it starts over."""
    text = tmp_path / "in.txt"
    text.write_text("".join(f"line {i} of the river bank .\n" for i in range(70)), encoding="utf-8")
    embedder = ElmoEmbedder(folder, batch_size=1, precision="fp32")

    def stop(done, total):
        if done >= 32:
            raise Stop

    with pytest.raises(Stop):
        embedder.embed_file(text, tmp_path / "o.hdf5", progress=stop)
    _edit_data(embedder.model)
    embedder.embed_file(text, tmp_path / "o.hdf5")
    want = embedder.embed_sentence(["line", "0", "of", "the", "river", "bank", "."])
    with h5py.File(tmp_path / "o.hdf5", "r") as handle:
        np.testing.assert_allclose(handle["0"][()], want, atol=1e-5)


def _conv_inputs(dtype: torch.dtype):
    from elmo_model.bilm.char_cnn import _MaxPooledConvolution
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(6, 9, 4, dtype=dtype, generator=generator, requires_grad=True)
    kernel = torch.randn(4 * 3, 5, dtype=dtype, generator=generator, requires_grad=True)
    return _MaxPooledConvolution, x, kernel


def test_the_char_cnn_refuses_a_second_derivative():
    """The blockwise convolution's backward is not itself differentiable: a second derivative was
    silently wrong (zero terms missing); now it raises."""
    function, x, kernel = _conv_inputs(torch.float64)
    (grad_x,) = torch.autograd.grad(function.apply(x, kernel, 3, 2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="differentiate twice|does not require grad"):
        torch.autograd.grad(grad_x.pow(2).sum(), kernel)


def test_the_char_cnn_kernel_gradient_keeps_float64():
    """A float64 model's kernel gradient was summed in fp32 (errors near 1e-7); now in float64,
    equal to autograd's through the plain blocks within 1e-12."""
    from elmo_model.bilm.char_cnn import _pooled_blocks
    function, x, kernel = _conv_inputs(torch.float64)
    ours = torch.autograd.grad(function.apply(x, kernel, 3, 2).sum(), kernel)[0]
    reference = torch.autograd.grad(_pooled_blocks(x, kernel, 3, 2).sum(), kernel)[0]
    assert ours.dtype == torch.float64
    torch.testing.assert_close(ours, reference, rtol=1e-12, atol=1e-12)


def test_a_copy_of_a_loaded_model_keeps_the_files_identity(folder):
    """A deep copy (as the Ray path sends a GPU model's CPU copy to its workers) holds the same
    weights: the file's identity, so the caches made from the file still serve it."""
    import copy
    model = load_bilm(folder)
    assert model_identity(copy.deepcopy(model)) == model_identity(model)
