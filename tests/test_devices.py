"""Where the biLM runs and in which precision, tested without a GPU: precision resolved per
device from what the device reports (never by timing, never oneDNN for a tensor off the CPU),
the device flags of the command lines, a GPU asked for where there is none, and bf16 autocast
around an inference forward with the two directions side by side."""

import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from test_precision import command_parsers, options_named
from test_precision import small_random_bilm  # the random biLM with skips both files test on

from elmo_model.bilm import devices, modules
from elmo_model.plumbing import flags
from elmo_model.bilm import precision as P
from elmo_model.bilm.char_ids import batch_to_char_ids
from elmo_model.bilm.config import ElmoConfig
from elmo_model.bilm.identity import model_identity
from elmo_model.bilm.modules import BiLM
from elmo_model.embedding import ElmoEmbedder
from elmo_model.models.registry import load_bilm

PROJECT = Path(__file__).resolve().parents[1]
SENTENCES = [["The", "bank", "was", "closed", "."], ["We", "pulled", "the", "canoe", "onto", "the", "muddy", "bank"],
             ["Rivers", "flow", "."]]


@pytest.fixture
def fresh_support():
    """bf16 support is decided once per process and device: forget it around a test."""
    P._support.cache_clear()
    P._warn_fallback.cache_clear()
    yield
    P._support.cache_clear()
    P._warn_fallback.cache_clear()


@pytest.fixture
def one_gpu(monkeypatch):
    """torch.cuda as on a machine with one H100 (compute capability 9.0), for the decisions only."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: (9, 0))


def test_auto_on_the_cpu_is_decided_by_its_bf16_instructions_without_timing(monkeypatch, fresh_support, tmp_path):
    """Fails on the code that raced a bf16 and an fp32 product for 40 ms (its perf_counter calls
    raise here)."""
    def no_clock():
        raise AssertionError("the precision was decided by timing")

    monkeypatch.setattr(time, "perf_counter", no_clock)
    monkeypatch.setattr(time, "monotonic", no_clock)
    expected = "bf16" if P.cpu_bf16_instructions() and P._onednn_bf16_kernels() else "fp32"
    assert P.resolve_precision("auto") == expected == P.resolve_precision(None, "cpu")
    # what the CPU reports, read from /proc/cpuinfo's flags line
    amx = tmp_path / "amx"
    amx.write_text("processor : 0\nflags\t\t: fpu sse avx512f avx512_bf16 amx_tile amx_bf16\n\n"
                   "processor : 1\nflags\t\t: fpu sse avx512f avx512_bf16 amx_tile amx_bf16\n")
    plain = tmp_path / "plain"
    plain.write_text("processor : 0\nflags\t\t: fpu sse avx2 avx512f avx512bw\n")
    assert P.cpu_bf16_instructions(amx) == ("avx512_bf16", "amx_bf16")
    assert P.cpu_bf16_instructions(plain) == ()
    monkeypatch.setattr(P, "cpu_bf16_instructions", lambda: ())
    P._support.cache_clear()
    assert P.resolve_precision("auto") == "fp32"
    assert "no bf16 instructions" in P.bf16_support().reason


def test_auto_is_the_same_in_two_processes():
    """Two processes on one machine resolve "auto" alike (the timing race gave fp32 in one and
    bf16 in the other); and the same as this one."""
    code = ("from elmo_model.bilm import precision as P; s = P.bf16_support(); "
            "print(P.resolve_precision('auto'), s.found, s.reason)")
    runs = [subprocess.run([sys.executable, "-c", code], cwd=PROJECT, capture_output=True, text=True, check=True,
                           env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}).stdout.strip() for _ in range(2)]
    assert runs[0] == runs[1]
    assert runs[0].split()[0] == P.resolve_precision("auto")


def test_on_cuda_bf16_means_cuda_products_and_auto_picks_it_on_bf16_gpus(one_gpu, fresh_support, monkeypatch, caplog):
    assert P.resolve_precision("auto", "cuda") == "bf16"
    assert P.resolve_precision("bf16", torch.device("cuda", 0)) == "bf16"
    assert P.resolve_precision("fp32", "cuda:0") == "fp32"
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda index=None: (7, 0))  # a V100
    P._support.cache_clear()
    assert P.resolve_precision("auto", "cuda") == "fp32"
    with caplog.at_level("WARNING", logger="elmo_model.bilm.precision"):
        assert P.resolve_precision("bf16", "cuda") == "fp32"
    assert "no bf16 tensor cores" in caplog.text
    # the CPU's answer is its own: a GPU decides nothing for it and the other way round
    monkeypatch.setattr(P, "cpu_bf16_instructions", lambda: ())
    assert P.resolve_precision("auto", "cpu") == "fp32"
    assert P.resolve_precision("auto", "meta") == "fp32"


def test_bf16_products_never_take_onednn_for_a_tensor_off_the_cpu(data_root):
    """A weight on another device (here ``meta``, which like CUDA has no oneDNN kernels) takes
    plain bf16 products: the packed oneDNN path for it raised "Could not run
    'mkldnn::_reorder_linear_weight' with arguments from the 'Meta' backend" (the CUDA crash),
    wherever the packed kernels pass their check (this machine's AMX CPU: checked below)."""
    products = P.ProductPrecision("bf16")
    weight = torch.empty(64, 16, device="meta")
    with torch.inference_mode():
        y = products.repeated_product(weight, 4)(torch.empty(4, 16, device="meta"))
    assert (y.shape, y.dtype, y.device.type) == ((4, 64), torch.float32, "meta")
    assert not any(isinstance(key, tuple) and key[0] == "packed" for key in products._cache)
    # a whole biLM on the meta device, in bf16, at inference: every product, no host sync
    config = ElmoConfig.from_json(data_root / "fixtures" / "bilm_tf" / "options.json")
    model = BiLM(config).to("meta").eval().set_precision("bf16")
    assert model.device.type == "meta"
    with torch.inference_mode():
        out = model(batch_to_char_ids(SENTENCES).to("meta"))
    assert [tuple(layer.shape) for layer in out.layers] == [(3, 8, config.output_dim)] * 3
    assert all(layer.device.type == "meta" and layer.dtype == torch.float32 for layer in out.layers)
    # on the CPU the packed kernels stay in use where they pass their check
    cpu_products, cpu_weight = P.ProductPrecision("bf16"), torch.randn(64, 16)
    with torch.inference_mode():
        cpu_products.repeated_product(cpu_weight, 4)(torch.randn(4, 16))
    packed = any(isinstance(key, tuple) and key[0] == "packed" for key in cpu_products._cache)
    assert packed == P.packed_bf16_products()


def test_bf16_autocast_around_an_inference_forward_works_with_the_directions_side_by_side(data_root, monkeypatch):
    """autocast state is per thread: the side-by-side directions (2+ threads) ran without it and
    failed with "mat1 and mat2 must have the same dtype" (fails so on the code before the
    workers took the caller's autocast state). With it they give the numbers of the directions
    in turn, bit for bit."""
    monkeypatch.setattr(modules, "_PARALLEL_MIN_CELLS_X_PROJECTION", 0)  # the fixture is tiny
    calls = []
    run_two = modules._run_two_at_once
    monkeypatch.setattr(modules, "_run_two_at_once", lambda *a: calls.append(1) or run_two(*a))
    model = load_bilm(data_root / "fixtures" / "bilm_tf")
    ids = batch_to_char_ids(SENTENCES)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        runs = {}
        for parallel in (True, False):
            model.parallel_directions = parallel
            with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
                runs[parallel] = model(ids).layers
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)
    assert calls == [1]  # side by side once, in turn once
    assert all(layer.dtype == torch.bfloat16 for layer in runs[True][1:])  # autocast reached the LSTMs
    for a, b in zip(runs[True], runs[False]):
        assert torch.equal(a, b)


def test_no_direction_threads_for_a_model_off_the_cpu(monkeypatch, data_root):
    monkeypatch.setattr(modules, "_PARALLEL_MIN_CELLS_X_PROJECTION", 0)
    monkeypatch.setattr(modules, "_run_two_at_once", lambda *a: pytest.fail("direction threads off the CPU"))
    config = ElmoConfig.from_json(data_root / "fixtures" / "bilm_tf" / "options.json")
    model = BiLM(config).to("meta").eval()
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with torch.inference_mode():
            model(batch_to_char_ids(SENTENCES).to("meta"))
    finally:
        torch.set_num_threads(threads)


def test_device_parsing_and_checks(one_gpu, monkeypatch):
    assert flags.parse_device(" CUDA:1 ") == "cuda:1" and flags.parse_device("cpu") == "cpu"
    for bad in ("gpu", "cuda:", "cuda:x", "tpu"):
        with pytest.raises(Exception, match="expected cpu, cuda or cuda:N"):
            flags.parse_device(bad)
    assert devices.default_device() == "cuda"
    assert devices.check_device(None) == torch.device("cuda")
    assert devices.check_device("cuda:0") == torch.device("cuda", 0)
    with pytest.raises(ValueError, match=r"^--device cuda:1: torch sees 1 GPU \(cuda:0\)$"):
        devices.check_device("cuda:1")
    assert [devices.cuda_device_to_device(i) for i in (-1, 0, 2)] == ["cpu", "cuda:0", "cuda:2"]
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert devices.default_device() == "cpu" and devices.check_device(None) == torch.device("cpu")
    with pytest.raises(ValueError, match="^--device cuda: torch sees no GPU here"):
        devices.check_device("cuda")


@pytest.mark.parametrize("module", ["probing.tagging.suite", "probing.report.cli"])
def test_suite_and_report_take_a_device(module, capsys):
    import importlib

    parser = importlib.import_module(module)._parser()
    base = ["--out", "x"] if module == "probing.report.cli" else []
    assert parser.parse_args(base).device is None  # resolved to the GPU when there is one
    assert parser.parse_args(base + ["--device", "cuda:0"]).device == "cuda:0"
    assert parser.parse_args(base + ["--device", "cpu"]).device == "cpu"
    with pytest.raises(SystemExit) as exit_info:
        parser.parse_args(base + ["--device", "gpu"])
    assert exit_info.value.code == 2
    assert "expected cpu, cuda or cuda:N, got 'gpu'" in capsys.readouterr().err


def test_every_command_with_device_has_the_one_flags_words(monkeypatch):
    """--device reads the same in every command; each keeps its own default and parsing: the
    suite and the report refuse a device at parse time and default to the GPU where there is one,
    the trainer defaults to the CPU and checks the value with its other inputs."""
    with_device = {name: options_named(parser, "--device") for name, parser in command_parsers(monkeypatch).items()}
    with_device = {name: actions for name, actions in with_device.items() if actions}
    assert {"elmo_model.training.train", "probing.report.cli", "probing.tagging.suite"} <= set(with_device)
    for name, actions in with_device.items():
        for action in actions:
            assert action.help.startswith(f"{flags.DEVICE_HELP} (default: "), name
    for name in ("probing.report.cli", "probing.tagging.suite"):
        (action,) = with_device[name]
        assert action.type is flags.parse_device and action.default is None
        assert flags.DEFAULT_DEVICE_HELP in action.help
    (trainer,) = with_device["elmo_model.training.train"]
    assert trainer.default == "cpu" and trainer.type is str


def no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.mark.parametrize("command", ["embedder", "suite", "report"])
def test_a_gpu_asked_for_on_a_machine_without_one_is_one_line_and_exit_2(command, tmp_path, capsys, monkeypatch,
                                                                         data_root):
    """The embedder's --cuda-device 0 without CUDA raised an AssertionError from torch's lazy CUDA
    init after loading the model (fails so on that code)."""
    no_gpu(monkeypatch)
    fixture = str(data_root / "fixtures" / "bilm_tf")
    if command == "embedder":
        from elmo_model.corpus.embedder import main

        text = tmp_path / "in.txt"
        text.write_text("The bank .\n", encoding="utf-8")
        code = main([str(text), str(tmp_path / "out.hdf5"), "--model", fixture, "--cuda-device", "0"])
        flag = "--cuda-device 0"
    elif command == "suite":
        from probing.tagging.suite import main

        code = main(["--model", fixture, "--device", "cuda", "--quiet", "--data-root", str(data_root)])
        flag = "--device cuda"
    else:
        from probing.report.cli import main

        code = main(["--model", fixture, "--device", "cuda:0", "--quiet", "--out", str(tmp_path / "r"), "--no-png"])
        flag = "--device cuda:0"
    out, err = capsys.readouterr()
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and lines and lines[-1].startswith(f"error: {flag}: torch sees no GPU here")
    assert "Traceback" not in err and not out.strip()
    assert not (tmp_path / "out.hdf5").exists() and not (tmp_path / "r").exists()


def test_elmo_embedder_maps_allennlps_cuda_device_and_keeps_a_models_own_device(monkeypatch, data_root):
    no_gpu(monkeypatch)
    fixture = data_root / "fixtures" / "bilm_tf"
    with pytest.raises(ValueError, match="^cuda_device 0: torch sees no GPU here"):
        ElmoEmbedder(fixture, cuda_device=0)
    with pytest.raises(ValueError, match="^device cuda: torch sees no GPU here"):
        load_bilm(fixture, device="cuda")
    embedder = ElmoEmbedder(fixture, cuda_device=-1, precision="fp32")
    assert embedder.device == torch.device("cpu") == embedder.model.device
    config = ElmoConfig.from_json(fixture / "options.json")
    on_meta = BiLM(config).to("meta")
    assert ElmoEmbedder(on_meta).model.device.type == "meta"  # a loaded model is not moved


def test_the_first_line_names_the_model_its_device_and_precision(data_root, fresh_support, monkeypatch):
    monkeypatch.setattr(P, "cpu_bf16_instructions", lambda: ())
    model = load_bilm(data_root / "fixtures" / "bilm_tf", "auto")
    line = P.precision_line(model, "auto")
    identity = model_identity(model)[:12]
    assert line == f"biLM bilm_tf (identity {identity}) on cpu, precision fp32 (auto)"
    assert P.precision_line(model, "fp32") == f"biLM bilm_tf (identity {identity}) on cpu, precision fp32"


def test_the_embedder_prints_the_first_line(tmp_path, capsys, data_root):
    from elmo_model.corpus.embedder import main

    text = tmp_path / "in.txt"
    text.write_text("The bank .\nRivers flow .\n", encoding="utf-8")
    assert main([str(text), str(tmp_path / "out.hdf5"), "--model", str(data_root / "fixtures" / "bilm_tf"),
                 "--precision", "fp32"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("biLM bilm_tf (identity ") and lines[0].endswith(" on cpu, precision fp32")


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_directions_in_one_loop_equal_the_directions_in_turn(precision):
    """The GPU's inference path (both directions in one time loop of batched products, half the
    launches) forced on the CPU: the vectors and the carried states of the directions in turn,
    on ragged batches carried over statefully, with skip connections; fp32 within 1e-5 of the
    largest value, the tolerance between devices (the batched products sum in another order:
    1.2e-6 measured on this random biLM, whose untrained recurrences amplify any change), bf16
    within its own rounding."""
    batches = [SENTENCES, [["Money", "in", "the", "bank", "grows", "slowly", "."], ["Yes"]]]
    runs = {}
    for together in (False, True):
        model = small_random_bilm().set_precision(precision)
        model.stateful, model.directions_together, model.parallel_directions = True, together, False
        with torch.inference_mode():
            runs[together] = ([model(batch_to_char_ids(b)) for b in batches], model._states)
    for a, b in zip(runs[False][0], runs[True][0]):
        assert torch.equal(a.mask, b.mask)
        for x, y in zip(a.layers, b.layers):
            x, y = x[a.mask], y[a.mask]
            if precision == "fp32":
                assert float((x - y).abs().max()) <= 1e-5 * float(x.abs().max())
            else:
                assert float(torch.nn.functional.cosine_similarity(x, y, dim=-1).min()) >= 0.9999
    for direction in ("forward", "backward"):
        for (h1, c1), (h2, c2) in zip(runs[False][1][direction], runs[True][1][direction]):
            for x, y in ((h1, h2), (c1, c2)):  # within 1e-5 (fp32) or 1e-2 (bf16) of the largest value
                assert float((x - y).abs().max()) <= (1e-5 if precision == "fp32" else 1e-2) * float(x.abs().max())


def test_off_the_cpu_the_directions_run_in_one_loop_for_inference_and_training(monkeypatch, data_root):
    calls = []
    together = modules._run_directions_together
    monkeypatch.setattr(modules, "_run_directions_together", lambda *a: calls.append(1) or together(*a))
    config = ElmoConfig.from_json(data_root / "fixtures" / "bilm_tf" / "options.json")
    on_meta = BiLM(config).to("meta").eval()
    with torch.inference_mode():
        on_meta(batch_to_char_ids(SENTENCES).to("meta"))
    assert calls == [1]
    with torch.inference_mode():
        small_random_bilm()(batch_to_char_ids(SENTENCES))  # the CPU: its own paths
    assert calls == [1]
    on_meta.train()(batch_to_char_ids(SENTENCES).to("meta")).layers[-1].sum().backward()  # training off the CPU
    assert calls == [1, 1]
    # bf16 autocast around the one-loop path, as on a GPU
    model = small_random_bilm()
    model.directions_together = True
    with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert model(batch_to_char_ids(SENTENCES)).layers[-1].dtype == torch.bfloat16
    assert calls == [1, 1, 1]


def test_training_in_one_loop_gives_the_gradients_of_the_directions_in_turn():
    """The trainer's path off the CPU, forced on it: in train mode with between-layer dropout at 0,
    the loss and every parameter's gradient equal those of the directions in turn within 1e-5 of
    the largest value (the tolerance between devices; only the batched products' summation order
    differs). Run against a ``_paired_weights`` that stacked the weights under no_grad (the
    inference-only version): the LSTM weights got no gradient and it failed."""
    char_ids = batch_to_char_ids(SENTENCES)
    grads, losses = {}, {}
    for together in (False, True):
        model = small_random_bilm().train()
        model.directions_together, model.parallel_directions = together, False
        out = model(char_ids)
        loss = sum((layer[out.mask] ** 2).mean() for layer in out.layers[1:])
        loss.backward()
        losses[together] = loss.item()
        grads[together] = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
    assert abs(losses[True] - losses[False]) <= 1e-5 * abs(losses[False])
    assert grads[True].keys() == grads[False].keys()
    assert any("lstm" in name for name in grads[True])
    for name, g in grads[False].items():
        assert float((grads[True][name] - g).abs().max()) <= 1e-5 * float(g.abs().max()), name


def test_between_layer_dropout_applies_in_the_one_loop_path():
    """Training's between-layer dropout reaches the layer above in the one-loop path, as in
    ``LstmStack.forward``; in eval mode it is the identity. Run against the inference-only version
    (``x = out`` between layers): the two train-mode outputs were equal and it failed."""
    char_ids = batch_to_char_ids(SENTENCES)
    model = small_random_bilm()
    model.directions_together, model.parallel_directions = True, False
    for stack in (model.forward_lstm, model.backward_lstm):
        stack.dropout.p = 0.5
    with torch.no_grad():
        model.eval()
        eval_layers = model(char_ids).layers
        eval_a, eval_b = eval_layers[2], model(char_ids).layers[2]
        model.train()
        torch.manual_seed(0)
        train_out = model(char_ids)
    assert torch.equal(eval_a, eval_b)
    mask = train_out.mask
    assert torch.equal(train_out.layers[1][mask], eval_layers[1][mask])  # below the dropout: untouched
    assert not torch.allclose(train_out.layers[2][mask], eval_a[mask])


@pytest.mark.parametrize("dropped", ["forward", "backward"])
def test_each_direction_takes_its_own_dropout_in_the_one_loop_path(dropped):
    """Between-layer dropout in the one-loop path is each stack's own, as in ``LstmStack.forward``:
    with p = 0.5 in one stack and 0 in the other, in train mode only that direction's half of the
    top layer leaves its eval-mode value, in one loop as in turn. Run against the path that took
    the forward stack's dropout for both directions: the backward half stayed (dropped = backward)
    or moved (dropped = forward), and it failed."""
    char_ids = batch_to_char_ids(SENTENCES)
    kept = "backward" if dropped == "forward" else "forward"
    for together in (True, False):
        model = small_random_bilm()
        model.directions_together, model.parallel_directions = together, False
        getattr(model, f"{dropped}_lstm").dropout.p = 0.5
        with torch.no_grad():
            expected = model.eval()(char_ids)
            model.train()
            torch.manual_seed(0)
            out = model(char_ids)
        half = model.config.lstm.projection_dim
        halves = {"forward": slice(0, half), "backward": slice(half, None)}
        top, eval_top = out.layers[2][out.mask], expected.layers[2][out.mask]
        assert torch.equal(top[:, halves[kept]], eval_top[:, halves[kept]]), together
        assert not torch.allclose(top[:, halves[dropped]], eval_top[:, halves[dropped]]), together


def test_the_one_loop_path_takes_each_directions_own_clips_and_skip_connections():
    """The directions set apart (the backward stack without skip connections, its cells clipped at
    0.1 and its projections not at all): in one loop as in turn, within 1e-5 of the largest value,
    and the backward half far from that of the model whose directions agree. Run against the path
    that took the forward stack's settings for both directions: it failed."""
    runs = {}
    for together, apart in ((False, True), (True, True), (True, False)):
        model = small_random_bilm()
        model.directions_together, model.parallel_directions = together, False
        if apart:
            model.backward_lstm.use_skip_connections = False
            for layer in model.backward_lstm.layers:
                layer.cell_clip, layer.proj_clip = 0.1, None
        with torch.inference_mode():
            out = model(batch_to_char_ids(SENTENCES))
        runs[together, apart] = [layer[out.mask] for layer in out.layers]
    for x, y in zip(runs[False, True], runs[True, True]):
        assert float((x - y).abs().max()) <= 1e-5 * float(x.abs().max())
    half = small_random_bilm().config.lstm.projection_dim
    for x, y in zip(runs[True, True][1:], runs[True, False][1:]):
        assert torch.equal(x[:, :half], y[:, :half])  # the forward direction: its settings did not change
        assert float((x[:, half:] - y[:, half:]).abs().max()) > 0.1 * float(y[:, half:].abs().max())


@pytest.mark.parametrize("gpu", [False, True])
def test_the_sidebar_offers_the_gpu_first_where_there_is_one(gpu, monkeypatch, data_root, tmp_path):
    """Without a GPU the device widget is there, disabled, saying so; with one (stubbed) it offers
    the GPU first, as the default."""
    from streamlit.testing.v1 import AppTest

    from app_pages import model_choice

    monkeypatch.setenv("ELMO_WORKBENCH_MODEL", str(data_root / "fixtures" / "bilm_tf"))
    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(data_root))
    monkeypatch.setenv("ELMO_WORKBENCH_CACHE", str(tmp_path))
    monkeypatch.setattr(model_choice, "gpu_present", lambda: gpu)
    at = AppTest.from_file(str(PROJECT / "app.py"), default_timeout=120).run()
    box = at.selectbox(key=model_choice.DEVICE_KEY)
    if gpu:
        assert box.options == ["GPU (cuda)", "CPU"] and box.value == "cuda" and not box.disabled
    else:
        assert box.options == ["CPU (no GPU found)"] and box.value == "cpu" and box.disabled
        assert not at.exception and not at.error


def test_the_sidebar_looks_for_a_gpu_without_importing_torch():
    code = ("import sys, app_pages.model_choice as m; found = m.gpu_present(); "
            "print(found, 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=PROJECT, capture_output=True, text=True, check=True).stdout
    assert out.split() == [str(torch.cuda.is_available()), "False"]


def test_the_sidebar_asks_no_torch_that_another_session_is_still_importing(monkeypatch):
    """Eight visitors at once: one session's first model load imports torch while another draws its
    sidebar; the half-made module (in sys.modules, no ``torch.cuda`` yet) raised AttributeError on that
    page (seen in bench/class_load.py). A module still initialising is not asked."""
    import types
    from importlib.machinery import ModuleSpec

    from app_pages import model_choice

    half_made = types.ModuleType("torch")
    half_made.__spec__ = ModuleSpec("torch", None)
    half_made.__spec__._initializing = True
    monkeypatch.setitem(sys.modules, "torch", half_made)
    assert model_choice.gpu_present() in (True, False)  # the installed files answer, no AttributeError


def _one_loop(model):
    model.directions_together, model.parallel_directions = True, False
    return model


def test_the_one_loops_stacked_weights_follow_an_edit_through_data():
    """An edit through ``.data`` (which the version counter does not see) after a forward: the next
    forward uses the edited weights, as a model built with them does. Against a cache keyed on
    pointer and version alone the stale stack was served (off by several units) and it failed."""
    char_ids = batch_to_char_ids(SENTENCES)
    model = _one_loop(small_random_bilm())
    with torch.inference_mode():
        model(char_ids)
        for layer in model.forward_lstm.layers:
            layer.state_linear.weight.data.mul_(3.0)
        edited = model(char_ids).layers
    fresh = _one_loop(small_random_bilm())
    fresh.load_state_dict(model.state_dict())
    with torch.inference_mode():
        expected = fresh(char_ids).layers
    for got, want in zip(edited, expected):
        assert torch.equal(got, want)


def test_a_forward_with_gradients_after_an_inference_mode_one_does_not_meet_inference_tensors():
    """Frozen weights, gradients wanted for the input (an attribution, say) after an inference-mode
    forward: the stacked weights kept from that forward are ordinary tensors. With a stack made in
    inference mode this raised 'Inference tensors cannot be saved for backward'."""
    char_ids = batch_to_char_ids(SENTENCES)
    model = _one_loop(small_random_bilm())
    for p in model.parameters():
        p.requires_grad_(False)
    with torch.inference_mode():
        reference = model(char_ids).layers[-1]
    mask = (char_ids > 0).any(-1)
    from elmo_model.bilm.modules import add_sentence_boundaries
    ids, full_mask = add_sentence_boundaries(char_ids, mask)
    tokens = model.token_embedder(ids).detach().requires_grad_(True)
    fw, bw, _ = model.encode(tokens, full_mask)
    (fw[-1].sum() + bw[-1].sum()).backward()
    assert tokens.grad is not None and float(tokens.grad.abs().sum()) > 0
    with torch.inference_mode():
        assert torch.equal(model(char_ids).layers[-1], reference)


def test_the_one_loop_in_bf16_keeps_one_bf16_copy_of_the_lstm_weights():
    """In bf16 the stacked weights are the only bf16 copy of the LSTM's weights: the layers' own
    per-weight caches stay empty (they held a second copy, ~150 MB for the full-size model)."""
    from elmo_model.bilm.modules import _PAIRED_WEIGHTS
    char_ids = batch_to_char_ids(SENTENCES)
    model = _one_loop(small_random_bilm()).set_precision("bf16-emulated")
    with torch.inference_mode():
        model(char_ids)
    layers = [*model.forward_lstm.layers, *model.backward_lstm.layers]
    assert all(not layer.products._cache for layer in layers)
    stacks = [_PAIRED_WEIGHTS[layer][1] for layer in model.forward_lstm.layers]
    assert all(w.dtype == torch.float32 for stack in stacks for w in stack)  # emulated: rounded fp32
    model.set_precision("bf16")
    if model.token_embedder.products.precision == "bf16":
        with torch.inference_mode():
            model(char_ids)
        assert all(not layer.products._cache for layer in layers)
        assert all(_PAIRED_WEIGHTS[layer][1][1].dtype == torch.bfloat16 for layer in model.forward_lstm.layers)
