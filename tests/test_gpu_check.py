"""bench/gpu_check.py, the one command a GPU run starts with, runs end to end on the CPU
(``--device cpu --quick``, the bilm-tf fixture): every section, every path's exit code, and the
log written to ``--out``, which is all a GPU machine sends back."""

import subprocess
import sys
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]


def test_gpu_check_runs_end_to_end_on_the_cpu(tmp_path, data_root):
    log = tmp_path / "out" / "gpu_check.log"
    done = subprocess.run([sys.executable, str(PROJECT / "bench" / "gpu_check.py"), "--device", "cpu", "--quick",
                           "--out", str(log), "--data-root", str(data_root)],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1",
                               "ELMO_WORKBENCH_CACHE": str(tmp_path / "c")})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    text = log.read_text(encoding="utf-8")
    for line in done.stdout.splitlines():  # everything printed is in the log, as it went
        if line.strip() and not line.startswith("USDT"):
            assert line in text
    for section in ("## 1. machine", "## 2. every path", "## 3. fidelity", "## 4. forward throughput",
                    "## 5. the trainer", "## 6. kernel launches", "## goals"):
        assert section in text
    paths = ["python -m elmo_model.corpus.embedder --cuda-device -1", "ElmoEmbedder(model, cuda_device=-1)",
             "Elmo(options, weights, 2).to(device)", "load_bilm(model, 'auto', device='cpu')",
             "torch.autocast('cpu', bfloat16) forward", "python -m probing.tagging.suite", "python -m probing.report"]
    for path in paths:
        line = next(row for row in text.splitlines() if row.startswith(path))
        assert " exit 0 " in line, line
    assert "FAILED" not in text and "NOT MET" not in text.split("trainer >=")[0]
    assert "mean cosine per layer" in text and "max |difference| / max |value| per layer 0.00e+00" in text
    assert any(row.startswith("bilm_tf shape") and " fp32 " in row for row in text.splitlines())
    assert "end to end: 2 steps" in text and "step alone: 1 steps" in text
    assert "batches made by a background thread (--batch-workers default" in text  # a CPU run: the thread
    assert "aten operator calls" in text


def test_the_pack_rounds_a_model_to_fp16_that_loads_and_keeps_its_vectors(tmp_path, data_root):
    """``--pack`` carries elmo-mini with its weights in fp16 (scripts/fp16_model.py, the packer
    scripts/gpu_job.py uses too), so the tree fits a GPU call: every float dataset of the copy is
    fp16 (half the bytes), the copy loads, and its vectors keep a mean cosine of at least 0.999 to
    the model's (what the pack prints). On the bilm-tf fixture."""
    import importlib.util

    import h5py

    from elmo_model.models.registry import resolve_model

    spec = importlib.util.spec_from_file_location("gpu_check", PROJECT / "bench" / "gpu_check.py")
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    files = resolve_model(data_root / "fixtures" / "bilm_tf")
    cosine = gpu_check.fp16_copy(files, tmp_path / "copy")
    assert 0.999 <= cosine <= 1.0 + 1e-6
    floats = {"original": 0, "copy": 0}
    for which, path in (("original", files.weights), ("copy", tmp_path / "copy" / "weights.hdf5")):
        with h5py.File(path, "r") as handle:
            def count(name, node, which=which):
                if isinstance(node, h5py.Dataset) and node.dtype.kind == "f":
                    assert which == "original" or node.dtype == "float16", name
                    floats[which] += node.size * node.dtype.itemsize
            handle.visititems(count)
    assert floats["copy"] * 2 == floats["original"]
    assert (tmp_path / "copy" / "options.json").read_bytes() == files.options.read_bytes()


def test_help_names_the_check_and_the_pack():
    done = subprocess.run([sys.executable, str(PROJECT / "bench" / "gpu_check.py"), "--help"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "--pack FOLDER" in done.stdout and "--quick" in done.stdout


def test_pack_carries_a_small_tree_and_its_model_in_fp16(tmp_path, data_root):
    """``--pack`` on a small data root (the fixture alone) with ``--model`` the fixture: what the
    root holds is copied, what it lacks is named as left out, nltk travels, the model is packed in
    fp16 under its own name and loads from there, and the command to run there names it."""
    import h5py

    from elmo_model.models.registry import load_bilm

    root = tmp_path / "root"
    (root / "fixtures").mkdir(parents=True)
    (root / "fixtures" / "bilm_tf").symlink_to(data_root / "fixtures" / "bilm_tf")
    folder = tmp_path / "pack"
    done = subprocess.run([sys.executable, str(PROJECT / "bench" / "gpu_check.py"), "--pack", str(folder),
                           "--data-root", str(root), "--model", str(data_root / "fixtures" / "bilm_tf")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"{root / 'ud_english_ewt'}: not there, left out" in done.stdout
    assert f"{root / 'lm_corpus' / 'wiki-train-00.txt.gz'}: not there, left out" in done.stdout
    fixture = folder / "data" / "fixtures" / "bilm_tf"
    assert (fixture / "options.json").read_bytes() == (data_root / "fixtures" / "bilm_tf" / "options.json").read_bytes()
    assert (folder / "site" / "nltk" / "__init__.py").is_file()
    assert not list((folder / "site" / "nltk").rglob("*.pyc"))
    with h5py.File(folder / "bilm_tf" / "weights.hdf5", "r") as handle:
        kinds = set()
        handle.visititems(lambda name, node: kinds.add(str(node.dtype)) if isinstance(node, h5py.Dataset)
                          and node.dtype.kind == "f" else None)
    assert kinds == {"float16"}
    assert load_bilm(folder / "bilm_tf").config == load_bilm(data_root / "fixtures" / "bilm_tf").config
    assert f"--data-root {folder}/data --model {folder}/bilm_tf" in done.stdout


def test_no_unmeasured_gpu_result_is_stated_as_a_fact():
    """Until a GPU run has measured it, what CPU and GPU agree to is said as expected, naming the
    script that measures it; the identity's docstring and the app's model choice stated "fp32 on a
    CPU and on a GPU agree within 1e-5" as a fact. Any "within 1e-5" (or "within the tolerance")
    near "GPU" or "CUDA" in the code or the app must name bench/gpu_check.py beside it."""
    import re

    claims = []
    for folder in ("elmo_model", "probing", "app_pages"):
        for path in sorted((PROJECT / folder).rglob("*.py")):
            text = path.read_text(encoding="utf-8")
            for match in re.finditer(r"within (the tolerance|1e-5)", text):
                window = text[max(0, match.start() - 300): match.end() + 200]
                if re.search(r"GPU|CUDA", window) and "gpu_check" not in window:
                    claims.append(f"{path.relative_to(PROJECT)}:{text[:match.start()].count(chr(10)) + 1}")
    assert not claims, f"a GPU result stated without its measurement: {claims}"
