"""The char CNN's compiled kernels (elmo_model.bilm.gradient_kernels): compiled in the background,
the same numbers bit for bit as the eager ones, and in a training run every step waits for them, so
a run repeats exactly (its resume too)."""

import os
from pathlib import Path

import pytest
import torch

from elmo_model.bilm import char_cnn, compile_engine, gradient_kernels
from elmo_model.bilm.precision import ProductPrecision
from elmo_model.models.registry import load_bilm
from tests.test_char_cnn import char_ids

PROJECT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def compiled(monkeypatch):
    """Kernels of this test's own, compiling in the background as in a training run (the process's
    compile engine fresh: an earlier test may have left it without a compiler)."""
    assert compile_engine.wait_until_ready(timeout=600)
    monkeypatch.delenv(compile_engine.ENV, raising=False)
    monkeypatch.setattr(compile_engine, "ENGINE", compile_engine.fresh_engine())
    gradient_kernels.enable()
    kernels = {name: gradient_kernels.BackgroundCompiled(fn, char_cnn._small_products)
               for name, fn in (("_max_over_positions", char_cnn._maxima), ("_shares", char_cnn._gradient_shares))}
    for name, kernel in kernels.items():
        monkeypatch.setattr(char_cnn, name, kernel)
    return kernels


def _ready(kernel) -> bool:
    return bool(kernel.kinds) and all(kind.state == "ready" for kind in kernel.kinds.values())


def products_with_ties(dtype: torch.dtype, tokens: int = 9) -> torch.Tensor:
    """(tokens, 12, 6) products whose last 5 positions repeat (padding windows) and whose values
    are rounded to a coarse grid (ties between different windows too)."""
    generator = torch.Generator().manual_seed(0)
    products = (torch.randn(tokens, 12, 6, generator=generator) * 4).round() / 4
    products[:, 7:] = products[:, 7:8]
    return products.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_the_compiled_kernels_equal_the_eager_ones_bit_for_bit(compiled, dtype):
    products = products_with_ties(dtype)
    grad = torch.randn(products.shape[0], products.shape[2], generator=torch.Generator().manual_seed(1)).to(dtype)
    assert (products == products.amax(1, keepdim=True)).sum(1).max() > 1  # ties are there
    eager = (char_cnn._maxima(products), char_cnn._gradient_shares(products, grad))
    first = (compiled["_max_over_positions"](products), compiled["_shares"](products, grad))  # eager, queues
    assert gradient_kernels.wait_until_ready(timeout=600) and gradient_kernels.unavailable_reason() is None
    assert all(_ready(kernel) for kernel in compiled.values())  # compiled for this kind of call
    before = {name: sum(k.compiled for k in kernel.kinds.values()) for name, kernel in compiled.items()}
    later = (compiled["_max_over_positions"](products), compiled["_shares"](products[1:], grad[1:]))
    for name, kernel in compiled.items():  # the compiled code ran, not an eager fallback
        assert sum(k.compiled for k in kernel.kinds.values()) == before[name] + 1, name
        assert all(k.reason is None for k in kernel.kinds.values()), name  # no fallback after the compile
    later = (later[0], torch.cat([compiled["_shares"](products[:1], grad[:1]), later[1]]))
    one_token = compiled["_shares"](products[:1], grad[:1])  # a size of 1 takes the eager function by design
    for a, b, c in zip(eager, first, later):
        assert torch.equal(a, b) and torch.equal(a, c)
    assert torch.equal(one_token, eager[1][:1])
    # a gradient's share over tied maxima sums to it
    torch.testing.assert_close(later[1].float().sum(1), grad.float(), rtol=1e-2, atol=0)


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_the_char_cnn_gradients_do_not_depend_on_the_compiler(compiled, data_root, precision):
    """The bilm-tf fixture's char CNN: output and every gradient, eager and compiled, exactly equal."""
    if precision == "bf16" and not torch.ops.mkldnn._is_mkldnn_bf16_supported():
        precision = "bf16-emulated"
    cnn = load_bilm(data_root / "fixtures" / "bilm_tf").token_embedder
    for module in cnn.modules():
        if hasattr(module, "products"):
            module.products = ProductPrecision(precision)
    ids = char_ids(12)

    def run():
        cnn.zero_grad(set_to_none=True)
        out = cnn(ids)
        (out.float() * torch.randn(out.shape, generator=torch.Generator().manual_seed(1))).sum().backward()
        return out.detach(), {name: p.grad.clone() for name, p in cnn.named_parameters()}

    eager_out, eager_grads = run()
    assert gradient_kernels.wait_until_ready(timeout=600) and gradient_kernels.unavailable_reason() is None
    assert all(_ready(kernel) for kernel in compiled.values())
    out, grads = run()
    assert torch.equal(out, eager_out)
    for name in grads:
        assert torch.equal(grads[name], eager_grads[name]), name


def test_the_switch_turns_them_off(compiled, monkeypatch):
    monkeypatch.setenv(compile_engine.ENV, "0")
    products = products_with_ties(torch.float32)
    compiled["_max_over_positions"](products)
    assert not compiled["_max_over_positions"].kinds


def test_without_a_compiler_the_eager_kernels_run_said_once(compiled, monkeypatch, caplog):
    monkeypatch.setattr(compile_engine, "compiler_missing", lambda: "no C++ compiler (none-here) on PATH")
    products = products_with_ties(torch.float32)
    grad = torch.ones(products.shape[0], products.shape[2])
    with caplog.at_level("WARNING"):
        for _ in range(2):
            shares = compiled["_shares"](products, grad)
            assert gradient_kernels.wait_until_ready(timeout=60)
    assert "none-here" in (gradient_kernels.unavailable_reason() or "")
    assert torch.equal(shares, char_cnn._gradient_shares(products, grad))
    assert len([r for r in caplog.records if "compiled code is unavailable" in r.getMessage()]) == 1


TRAIN_TWICE = """
import hashlib, json, os, sys
from elmo_model.training import train
from elmo_model.bilm import compile_engine
out = sys.argv[1]
code = train.main(["--train", sys.argv[2], "--out", out, "--export-to", out + "-export", "--vocab-size", "60",
                   "--vocab-min-count", "1", "--char-embedding-dim", "4", "--filters", "[[1, 8], [2, 8]]",
                   "--n-highway", "1", "--lstm-dim", "16", "--projection-dim", "8", "--softmax-cutoffs", "30",
                   "--batch-tokens", "100", "--max-sentence-tokens", "20", "--threads", "1", "--precision", "fp32",
                   "--max-steps", "30", "--log-every", "100", "--dropout", "0.1", "--quiet"])
kinds = [k for name, by_kind in compile_engine.counts().items() if name.startswith("training") for k in by_kind.values()]
weights = open(out + "-export/weights.hdf5", "rb").read()
print(json.dumps({"code": code, "kinds": kinds, "sha256": hashlib.sha256(weights).hexdigest()}))
"""


def test_a_training_run_with_the_compiled_kernels_runs_every_step_compiled_and_repeats_exactly(tmp_path):
    """The kernels compile in a background thread, and tracing saves and restores torch's RNG: a step
    that drew its dropout masks meanwhile drew them again, so two runs of one command (or a run and
    its resume) ended with other weights, depending on timing. Every step now waits for its kernels:
    none runs eager, and two runs give the same weights, byte for byte."""
    import json
    import subprocess
    import sys

    text = tmp_path / "text.txt"
    text.write_text("The bank was closed on Sunday .\nWe sat on the river bank .\nA fox jumps over the dog .\n" * 60)
    env = dict(os.environ, ELMO_WORKBENCH_FUSED_STEP="1", OMP_NUM_THREADS="1", PYTHONPATH=str(PROJECT))
    runs = []
    for name in ("a", "b"):
        done = subprocess.run([sys.executable, "-c", TRAIN_TWICE, str(tmp_path / name), str(text)], cwd=PROJECT,
                              env=env, capture_output=True, text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-2000:]
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    for run in runs:
        assert run["code"] == 0 and run["kinds"], run
        assert all(k["state"] == "ready" and k["eager"] == 0 and k["compiled"] > 0 for k in run["kinds"]), run
    assert runs[0]["sha256"] == runs[1]["sha256"]
