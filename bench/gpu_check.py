"""Everything a GPU run has to show, in one command (at most 5 minutes on one H100):

    python bench/gpu_check.py --out gpu_check.log [--data-root DIR]        # on the GPU machine
    python bench/gpu_check.py --device cpu --quick --out /tmp/check.log     # every step in seconds (a test)
    python bench/gpu_check.py --only trainer --out trainer.log               # some sections (and the machine)

Prints, and appends to ``--out`` line by line as it goes (a run cut short keeps what it did):

1. the machine: torch, CUDA, the GPU, TF32 settings, what ``auto`` precision resolves to there;
2. every path that runs the biLM, on the device, with default settings and its exit code: the
   embedder command line (``--cuda-device N``), ``ElmoEmbedder``, ``Elmo``, ``load_bilm``, bf16
   autocast around an inference forward, ``probing.tagging.suite --limit``, ``probing.report`` (small);
3. fidelity on the device: bf16 vs fp32 mean cosine per layer (goal >= 0.999 at every layer) and
   device fp32 vs CPU fp32, the largest difference relative to the layer's largest value (goal 1e-5);
4. forward throughput, 20-token sentences, batch 1/32/128/512, fp32 and bf16, for the full-size
   ELMo shape (random weights) and elmo-mini, beside a cuDNN ``nn.LSTM(512, 4096, proj_size=512,
   num_layers=2)`` run once per direction (the LSTM part alone: a reference for speed, not the
   same model);
5. the trainer (elmo-mini's shape, the public ``Trainer``): tokens/s end to end and for the step
   alone on prebuilt batches; the end-to-end run makes its batches as the trainer does by default
   (on a GPU in worker processes, ``--batch-workers``; on a CPU in a thread), and says which;
6. kernel launches: one inference forward and one training step under ``torch.profiler``
   (CUDA kernel events, launch calls, GPU time vs wall time; on the CPU, the operator count).

The command lines run in this process (their ``main``), so a path's exit code is what the command
would return. Paths that need a package this Python lacks (nltk: the report and the trainer
import the tokenizer) are skipped with the reason. Datasets come from ``--data-root`` (default
``$ELMO_WORKBENCH_DATA``): ``ud_english_ewt`` for the suite and the report,
``lm_corpus/wiki-train-00.txt.gz`` for the trainer (else a synthetic corpus, said so),
``fixtures/bilm_tf`` for ``--quick``.

For a GPU machine that has neither the data root nor nltk, and takes a working tree of at most
64 MiB (the checkout's tracked files are about 60 MB, 50 of them elmo-mini's weights and softmax
and the static embedding)::

    python bench/gpu_check.py --pack .gpu_pack      # here: datasets, nltk, elmo-mini in fp16 (about 50 MB)
    echo /.gpu_pack/ >> .git/info/exclude           # a folder git ignores, carried to the machine
    # for the call only, park the large tracked files outside the checkout (put them back after):
    mkdir -p /tmp/parked && mv data/models/elmo-mini/weights.hdf5 data/models/elmo-mini/softmax.npz data/static/*.npz /tmp/parked/
    PYTHONPATH=.gpu_pack/site python bench/gpu_check.py --data-root .gpu_pack/data --model .gpu_pack/elmo-mini \
        --out $OUT/gpu_check.log

``.gpu_pack/elmo-mini`` is elmo-mini with every weight rounded to fp16 by ``scripts/fp16_model.py``,
the packer ``scripts/gpu_job.py pack`` uses too (``--model`` packs another model). It is the model
the check then measures (CUDA against the CPU and bf16 against fp32 on the same rounded weights;
the pack prints its mean cosine to elmo-mini itself).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import json
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))  # fp16_model, the packer gpu_job.py uses too

from elmo_model.bilm.char_ids import batch_to_char_ids  # noqa: E402
from elmo_model.bilm.config import ElmoConfig  # noqa: E402
from elmo_model.bilm.devices import check_device, default_device  # noqa: E402
from elmo_model.bilm import cuda_graphs, modules  # noqa: E402
from elmo_model.bilm.modules import BiLM  # noqa: E402
from elmo_model.bilm.precision import EMULATED_BF16, bf16_support, precision_line, resolve_precision  # noqa: E402
from elmo_model.models.registry import load_bilm, resolve_model  # noqa: E402
from fp16_model import write_fp16_model  # noqa: E402

PROJECT = Path(__file__).resolve().parents[1]
SECTIONS = ("paths", "fidelity", "throughput", "trainer", "launches")
SENTENCE_TOKENS = 20
FULL_SIZE = {
    "char_cnn": {"embedding": {"dim": 16},
                 "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
                 "n_highway": 2, "n_characters": 262, "max_characters_per_token": 50, "activation": "relu"},
    "lstm": {"dim": 4096, "projection_dim": 512, "n_layers": 2, "cell_clip": 3, "proj_clip": 3,
             "use_skip_connections": True},
}
GOALS = {"fp32_relative": 1e-5, "bf16_cosine": 0.999, "batch32_vs_cudnn": 0.5, "batch512_bf16": 500_000,
         "trainer_tokens_per_s": 300_000}


class Log:
    """Print a line and append it to the log file at once (the GPU machine returns only files)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.file = open(path, "a", encoding="utf-8", buffering=1)
        self.started = time.perf_counter()
        self.summary: list[str] = []

    def __call__(self, text: str = "") -> None:
        for line in str(text).splitlines() or [""]:
            print(line, flush=True)
            self.file.write(line + "\n")
        self.file.flush()

    def section(self, title: str) -> None:
        self(f"\n## {title}  (t = {time.perf_counter() - self.started:.0f} s)")

    def goal(self, text: str, met: bool | None) -> None:
        verdict = "not measured" if met is None else ("met" if met else "NOT MET")
        self.summary.append(f"{text}: {verdict}")


def sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def sentences(n: int, tokens: int | None = None, seed: int = 0) -> list[list[str]]:
    """Demo sentences (data/demo, whitespace-split; no tokenizer, no nltk), or ``n`` rows of
    exactly ``tokens`` words drawn from them."""
    words, texts = [], []
    for path in sorted((PROJECT / "data" / "demo").glob("*.json")):
        for item in json.loads(path.read_text(encoding="utf-8"))["sentences"]:
            texts.append(item["text"].split())
            words += item["text"].split()
    if tokens is None:
        return (texts * (n // max(1, len(texts)) + 1))[:n]
    rng = random.Random(seed)
    return [[rng.choice(words) for _ in range(tokens)] for _ in range(n)]


def random_bilm(options: dict, device: torch.device) -> BiLM:
    torch.manual_seed(0)
    return BiLM(ElmoConfig.from_options(options)).eval().to(device)


@contextlib.contextmanager
def captured():
    """stdout and stderr of a command run in this process."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        yield out, err


def run_path(log: Log, name: str, fn) -> int:
    """One path: its exit code (a command's return value; 0 for an API call that returned, 1 for
    one that raised), its time and its first and last lines."""
    started = time.perf_counter()
    try:
        with captured() as (out, err):
            code = fn()
        code = 0 if code is None else int(code)
        first = (out.getvalue().strip().splitlines() or [""])[0]
        last_err = (err.getvalue().strip().splitlines() or [""])[-1]
        detail = first if code == 0 else f"{first} | {last_err}"
    except SystemExit as stop:
        code, detail = (stop.code if isinstance(stop.code, int) else 2), "argparse exit"
    except Exception as err:  # noqa: BLE001  (every failure is a result here)
        code = 1
        detail = f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
        log.file.write(traceback.format_exc())
    log(f"{name:<44} exit {code}  {time.perf_counter() - started:6.1f} s  {detail[:160]}")
    return code


def environment(log: Log, device: torch.device) -> None:
    log.section("1. machine")
    log(f"python {platform.python_version()}, torch {torch.__version__}, numpy {np.__version__}, "
        f"CPU {platform.processor() or platform.machine()} ({os.cpu_count()} cores, "
        f"torch threads {torch.get_num_threads()})")
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        log(f"GPU {props.name}, {props.total_memory / 2**30:.0f} GiB, compute capability {props.major}.{props.minor}, "
            f"CUDA {torch.version.cuda}, cuDNN {torch.backends.cudnn.version()}")
        log(f"TF32: matmul {torch.backends.cuda.matmul.allow_tf32}, cuDNN {torch.backends.cudnn.allow_tf32} "
            "(fp32 is compared with the CPU's fp32 below)")
    for where in dict.fromkeys(["cpu", str(device)]):
        support = bf16_support(where)
        log(f"precision auto on {where}: {resolve_precision('auto', where)} ({support.reason})")


def paths(log: Log, device: torch.device, model: str, data_root: Path | None, quick: bool, tmp: Path) -> dict:
    log.section("2. every path that runs the biLM, on the device, default settings")
    codes = {}
    index = device.index if device.index is not None else (0 if device.type == "cuda" else -1)
    text = tmp / "sentences.txt"
    text.write_text("\n".join(" ".join(s) for s in sentences(40)) + "\n", encoding="utf-8")
    files = resolve_model(model)

    def embedder_cli():
        from elmo_model.corpus.embedder import main

        return main([str(text), str(tmp / "embedded.hdf5"), "--model", model, "--cuda-device", str(index)])

    def embedder_api():
        from elmo_model.embedding import ElmoEmbedder

        embedder = ElmoEmbedder(model, cuda_device=index)
        vectors = embedder.embed_sentence(["The", "bank", "was", "closed", "."])
        print(f"{precision_line(embedder.model)}; vectors {vectors.shape}")

    def elmo():
        from elmo_model.elmo import Elmo, batch_to_ids

        module = Elmo(str(files.options), str(files.weights), 2, dropout=0.0).to(device)
        out = module(batch_to_ids(sentences(8)).to(device))
        print(f"{precision_line(module.bilm)}; 2 representations {tuple(out['elmo_representations'][0].shape)}")

    def bilm():
        loaded = load_bilm(model, "auto", device=str(device))
        with torch.inference_mode():
            out = loaded(batch_to_char_ids(sentences(8)).to(device))
        print(f"{precision_line(loaded, 'auto')}; layers {[tuple(x.shape) for x in out.layers]}")

    def autocast():
        loaded = load_bilm(model, "fp32", device=str(device))
        threads = torch.get_num_threads()
        torch.set_num_threads(max(2, threads))  # the side-by-side directions' case on the CPU
        try:
            with torch.inference_mode(), torch.autocast(device.type, dtype=torch.bfloat16):
                out = loaded(batch_to_char_ids(sentences(8)).to(device))
        finally:
            torch.set_num_threads(threads)
        print(f"{precision_line(loaded)} under bf16 autocast; output {out.layers[-1].dtype}")

    codes["embedder CLI (--cuda-device)"] = run_path(log, "python -m elmo_model.corpus.embedder --cuda-device "
                                                     f"{index}", embedder_cli)
    codes["ElmoEmbedder"] = run_path(log, f"ElmoEmbedder(model, cuda_device={index})", embedder_api)
    codes["Elmo"] = run_path(log, "Elmo(options, weights, 2).to(device)", elmo)
    codes["load_bilm"] = run_path(log, f"load_bilm(model, 'auto', device='{device}')", bilm)
    codes["autocast"] = run_path(log, f"torch.autocast('{device.type}', bfloat16) forward", autocast)
    limit = "10" if quick else "100"
    common = ["--model", model, "--device", str(device), "--limit", limit, "--no-random-bilm", "--quiet",
              "--cache-dir", str(tmp / "cache")] + (["--data-root", str(data_root)] if data_root else [])
    if data_root is None or not (data_root / "ud_english_ewt").is_dir():
        log(f"{'probing.tagging.suite / probing.report':<44} skipped: no ud_english_ewt in the data root ({data_root})")
    else:
        def suite():
            from probing.tagging.suite import main

            return main(common + ["--tasks", "pos", "--mix-seeds", "0", "--out", str(tmp / "suite.json")])

        codes["probing.tagging.suite"] = run_path(log, f"python -m probing.tagging.suite --tasks pos --limit {limit}",
                                                  suite)
        missing = [name for name in ("nltk", "plotly", "umap") if importlib.util.find_spec(name) is None]
        if missing:
            log(f"{'python -m probing.report':<44} skipped: it needs {', '.join(missing)} (not installed; the "
                "report's tokenizer and its [report] extra)")
        else:
            def report():
                from probing.report.cli import main

                return main(common + ["--tasks", "pos", "--no-png", "--no-contextuality", "--out", str(tmp / "report")])

            codes["probing.report"] = run_path(log, f"python -m probing.report --tasks pos --limit {limit}", report)
    log.goal("every path runs on the device with its defaults", all(c == 0 for c in codes.values()))
    return codes


def layers_of(model: BiLM, batch: list[list[str]], precision: str) -> list[torch.Tensor]:
    with model.computing_in(precision), torch.inference_mode():
        out = model(batch_to_char_ids(batch).to(model.device))
    return [layer[out.mask].float().cpu() for layer in out.layers]


def fidelity(log: Log, device: torch.device, model: str) -> None:
    log.section("3. fidelity on the device")
    batch = sentences(48)
    on_device = load_bilm(model, "fp32", device=str(device))
    bf16 = "bf16" if bf16_support(device).usable else EMULATED_BF16
    reference = layers_of(on_device, batch, "fp32")
    rounded = layers_of(on_device, batch, bf16)
    cosines = [float(torch.nn.functional.cosine_similarity(a, b, dim=-1).mean()) for a, b in zip(reference, rounded)]
    log(f"{bf16} vs fp32 on {device}, {model}, {len(batch)} sentences: mean cosine per layer "
        + " / ".join(f"{c:.6f}" for c in cosines) + f" (goal >= {GOALS['bf16_cosine']})")
    log.goal(f"bf16 mean cosine >= {GOALS['bf16_cosine']} at every layer", min(cosines) >= GOALS["bf16_cosine"])
    cpu = load_bilm(model, "fp32", device="cpu")
    on_cpu = layers_of(cpu, batch, "fp32")
    relative = [float((a - b).abs().max() / b.abs().max()) for a, b in zip(reference, on_cpu)]
    log(f"fp32 on {device} vs fp32 on the CPU: max |difference| / max |value| per layer "
        + " / ".join(f"{r:.2e}" for r in relative) + f" (goal <= {GOALS['fp32_relative']:.0e})"
        + (" (the device is the CPU: the same computation)" if device.type == "cpu" else ""))
    log.goal(f"device fp32 = CPU fp32 within {GOALS['fp32_relative']:.0e}", max(relative) <= GOALS["fp32_relative"])
    if device.type == "cuda":
        graph_fidelity(log, on_device, batch)


def graph_fidelity(log: Log, model: BiLM, batch: list[list[str]]) -> None:
    """A replayed CUDA graph (the third forward of a shape: eager, capture, replay) against the
    eager forward, in fp32 and bf16, on the same ragged batch."""
    bf16 = ["bf16"] if bf16_support(model.device).usable else []
    for precision in ["fp32", *bf16]:
        model.cuda_graphs = False
        eager = layers_of(model, batch, precision)
        model.cuda_graphs = True
        for _ in range(3):
            replayed = layers_of(model, batch, precision)
        relative = [float((a - b).abs().max() / a.abs().max()) for a, b in zip(eager, replayed)]
        cache = modules._GRAPHS.get(model, cuda_graphs.GraphCache())
        graphs = len(cache.graphs)
        if cache.failed:
            log(f"CUDA graphs failed: {cache.failed}")
        log(f"CUDA graph replay vs eager, {precision}, {len(batch)} sentences ({graphs} graph(s) held): "
            "max |difference| / max |value| per layer " + " / ".join(f"{r:.2e}" for r in relative)
            + f" (goal <= {GOALS['fp32_relative']:.0e} in fp32)")
        if precision == "fp32":
            log.goal(f"CUDA graph replay = eager within {GOALS['fp32_relative']:.0e} (fp32)",
                     graphs > 0 and max(relative) <= GOALS["fp32_relative"])


def timed(fn, device: torch.device, seconds: float, min_runs: int = 3) -> float:
    """Seconds per call of ``fn`` after two warm-ups (on a GPU a shape's CUDA graph is captured at
    its second forward), over at least ``seconds`` and ``min_runs``."""
    fn()
    fn()
    sync(device)
    runs, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds or runs < min_runs:
        fn()
        runs += 1
        sync(device)
    return (time.perf_counter() - start) / runs


def throughput(log: Log, device: torch.device, model: str, quick: bool, seconds: float) -> dict:
    log.section("4. forward throughput (tokens/s, 20-token sentences) beside a cuDNN LSTM reference")
    batches = [1, 2] if quick else [1, 32, 128, 512]
    precisions = ["fp32"] + (["bf16"] if bf16_support(device).usable else [])
    if "bf16" not in precisions:
        log(f"bf16 rows left out: {bf16_support(device).reason}")
    shape = json.loads(resolve_model(model).options.read_text(encoding="utf-8")) if quick else FULL_SIZE
    models = [("full-size ELMo shape" if not quick else f"{Path(model).name} shape", random_bilm(shape, device))]
    if not quick:
        models.append((model, load_bilm(model, "fp32", device=str(device))))
    p, h, layers = shape["lstm"]["projection_dim"], shape["lstm"]["dim"], shape["lstm"]["n_layers"]
    results: dict = {}
    graphs = device.type == "cuda" and cuda_graphs.wanted()
    log(f"{'model':<24}{'prec':>6}{'batch':>7}{'tokens/s':>12}{'ms/batch':>10}{'cuDNN ref':>12}{'of ref':>8}"
        + (f"{'eager':>12}{'graphs/eager':>14}" if graphs else ""))
    for precision in precisions:
        torch.manual_seed(0)
        reference = torch.nn.LSTM(p, h, proj_size=p, num_layers=layers, batch_first=True).to(device).eval()
        if precision == "bf16":
            reference = reference.to(torch.bfloat16)
        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        for batch_size in batches:
            x = torch.randn(batch_size, SENTENCE_TOKENS + 2, p, device=device, dtype=dtype)

            def lstm_pair():
                with torch.inference_mode():
                    reference(x)
                    reference(x)  # once per direction

            ref_tps = batch_size * SENTENCE_TOKENS / timed(lstm_pair, device, seconds)
            ids = batch_to_char_ids(sentences(batch_size, SENTENCE_TOKENS, seed=batch_size)).to(device)
            for name, bilm in models:
                bilm.set_precision(precision)

                def forward():
                    with torch.inference_mode():
                        bilm(ids)

                try:
                    per_batch = timed(forward, device, seconds)
                    eager = ""
                    if graphs:  # the same forward without CUDA graphs, for the ratio
                        bilm.cuda_graphs = False
                        eager_tps = batch_size * SENTENCE_TOKENS / timed(forward, device, seconds)
                        bilm.cuda_graphs = True
                        eager = f"{eager_tps:>12,.0f}{batch_size * SENTENCE_TOKENS / per_batch / eager_tps:>13.2f}x"
                except torch.cuda.OutOfMemoryError as err:  # noqa: PERF203
                    log(f"{name:<24}{precision:>6}{batch_size:>7}  out of memory ({str(err).splitlines()[0][:60]})")
                    continue
                tps = batch_size * SENTENCE_TOKENS / per_batch
                results[(name, precision, batch_size)] = (tps, ref_tps)
                log(f"{name:<24}{precision:>6}{batch_size:>7}{tps:>12,.0f}{per_batch * 1e3:>10.1f}{ref_tps:>12,.0f}"
                    f"{tps / ref_tps:>7.2f}x{eager}")
    if not quick:
        full = "full-size ELMo shape"
        b32 = results.get((full, "fp32", 32))
        log.goal(f"full-size batch 32 >= {GOALS['batch32_vs_cudnn']}x the cuDNN reference",
                 None if b32 is None else b32[0] / b32[1] >= GOALS["batch32_vs_cudnn"])
        b512 = results.get((full, "bf16", 512))
        log.goal(f"full-size batch 512 bf16 >= {GOALS['batch512_bf16']:,} tokens/s",
                 None if b512 is None else b512[0] >= GOALS["batch512_bf16"])
    return results


def corpus(data_root: Path | None, tmp: Path, quick: bool) -> tuple[Path, str]:
    real = data_root / "lm_corpus" / "wiki-train-00.txt.gz" if data_root else None
    if real is not None and real.is_file() and not quick:
        return real, str(real)
    rng = random.Random(0)
    if quick:
        words = [w.strip(".,;:!?\"'()") or w for s in sentences(60) for w in s]
        weights = None
    else:  # Zipf-distributed made-up words: a vocabulary past the softmax's 10,000-word cutoff
        letters = "etaoinshrdlucmfwypvbgkqjxz"
        words = ["".join(rng.choice(letters) for _ in range(rng.randint(2, 10))) for _ in range(40_000)]
        weights = [1.0 / (rank + 10) for rank in range(len(words))]
    path = tmp / "synthetic.txt"
    lines = [" ".join(rng.choices(words, weights, k=rng.randint(8, 30))) for _ in range(300 if quick else 60_000)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path, ("synthetic (quick)" if quick else f"synthetic ({len(lines):,} sentences of Zipf-distributed "
                                                   "made-up words; no lm_corpus in the data root)")


def trainer(log: Log, device: torch.device, data_root: Path | None, quick: bool, tmp: Path, seconds: float) -> dict:
    """The trainer end to end and its step alone, at 32,000-token batches (the GPU job's) and at
    128,000 (a launch-bound step takes about as long for 4x the tokens)."""
    log.section("5. the trainer, elmo-mini's shape (tokens/s)")
    if importlib.util.find_spec("nltk") is None:
        log("skipped: the trainer imports the tokenizer, which needs nltk (not installed)")
        log.goal(f"trainer >= {GOALS['trainer_tokens_per_s']:,} tokens/s end to end", None)
        return {}
    from elmo_model.training.trainer import TrainConfig, Trainer

    text, what = corpus(data_root, tmp, quick)
    small = dict(char_embedding_dim=4, filters=[[1, 8], [2, 8]], n_highway=1, lstm_dim=32, projection_dim=16,
                 softmax_cutoffs=[200], vocab_size=500) if quick else {}
    log(f"corpus: {what}; device {device}")
    results: dict = {}
    best = 0.0
    for batch_tokens in ([400] if quick else [32_000, 128_000]):
        def config(out: str, steps: int, batch_tokens: int = batch_tokens) -> TrainConfig:
            return TrainConfig(train=[str(text)], out=str(tmp / f"{out}-{batch_tokens}"), batch_tokens=batch_tokens,
                               max_steps=steps, vocab_max_tokens=200_000 if not quick else 20_000, vocab_min_count=1,
                               checkpoint_every_minutes=1e9, validate_every_minutes=1e9, log_every=5,
                               device=device.type, max_hours=(10 if quick else 120) / 3600, **small)

        steps = 2 if quick else 4_000_000 // batch_tokens  # about 4M tokens a run
        best = max(best, end_to_end(log, Trainer(config("e2e", steps), progress=False), batch_tokens))
        try:  # the step alone: the trainer's own hooks, on batches built beforehand
            step_trainer, first = step_alone(log, device, Trainer(config("step", 10**9), progress=False),
                                             2 if quick else (12 if batch_tokens <= 32_000 else 5))
            results.setdefault("step_trainer", step_trainer)
            results.setdefault("batch", first)
        except (AttributeError, TypeError, IndexError) as err:
            log(f"step alone: not measured (the trainer's hooks changed: {type(err).__name__}: {err})")
    log.goal(f"trainer >= {GOALS['trainer_tokens_per_s']:,} tokens/s end to end", best >= GOALS["trainer_tokens_per_s"])
    results["end_to_end"] = best
    return results


def end_to_end(log: Log, run, batch_tokens: int) -> float:
    """``run.train()``'s tokens/s, with the pipeline that made its batches."""
    started = time.perf_counter()
    run.train()
    state = run.state
    e2e = state["tokens_seen"] / max(1e-9, state["train_seconds"])
    log(f"batches of {batch_tokens:,} tokens, end to end: {state['step']} steps, {state['tokens_seen']:,} tokens in "
        f"{state['train_seconds']:.1f} s = {e2e:,.0f} tokens/s ({time.perf_counter() - started:.1f} s with set-up)")
    # the logging windows after the first: the loop's steady rate, without the run's start (the
    # pipeline's processes, the first steps' kernels) and end
    curve = state.get("loss_curve", [])
    if curve:  # the run's start: what the end-to-end figure pays once
        first = curve[0]
        log(f"  first window: {first['step']} steps, {first['tokens_seen']:,} tokens in "
            f"{first['tokens_seen'] / max(1e-9, first['tokens_per_second']):.1f} s (from the run's start: its batch "
            "pipeline starting, the first steps' kernels)")
    windows = [point["tokens_per_second"] for point in curve[1:]]
    if windows:
        log(f"  steady: median {statistics.median(windows):,.0f} tokens/s over {len(windows)} logging windows of "
            f"{run.config.log_every} steps after the first (range {min(windows):,.0f}-{max(windows):,.0f})")
    # the trainer's default pipeline: worker processes on a GPU (min(4, cores - 1)), the thread on a CPU
    log(f"  batches made by {getattr(run, 'batch_pipeline', 'a background thread (a trainer without batch workers)')}"
        f" (--batch-workers {getattr(run.config, 'batch_workers', None) or 'default'}; {os.cpu_count()} cores)")
    return e2e


def step_alone(log: Log, device: torch.device, step_trainer, n_batches: int) -> tuple:
    """The trainer's step on ``n_batches`` batches built beforehand (the first warms up, untimed)."""
    if hasattr(step_trainer, "_setup"):
        step_trainer._setup()
    prebuilt = []
    for batch in step_trainer._epoch_batches(0):
        prebuilt.append(batch)
        if len(prebuilt) >= n_batches:
            break
    step_trainer.lm.train()
    step_trainer._step(prebuilt[0])
    sync(device)
    start = time.perf_counter()
    for batch in prebuilt[1:]:
        step_trainer._step(batch)
    sync(device)
    elapsed = time.perf_counter() - start
    tokens = sum(b.n_tokens for b in prebuilt[1:])
    log(f"  step alone: {len(prebuilt) - 1} steps on prebuilt batches, {elapsed / (len(prebuilt) - 1) * 1e3:.0f} ms "
        f"a step = {tokens / elapsed:,.0f} tokens/s")
    return step_trainer, prebuilt[0]


def count_launches(prof) -> tuple[int, int, float, int]:
    """(CUDA kernel events, kernel and graph launch calls, GPU kernel time in ms, CPU operator calls)."""
    kernels = launches = ops = 0
    gpu_us = 0.0
    for event in prof.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            kernels += 1
            gpu_us += event.time_range.elapsed_us()
        elif "LaunchKernel" in event.name or event.name == "cuLaunchKernel" or "GraphLaunch" in event.name:
            launches += 1
        elif event.name.startswith("aten::"):
            ops += 1
    return kernels, launches, gpu_us / 1e3, ops


def launches(log: Log, device: torch.device, quick: bool, trained: dict) -> None:
    log.section("6. kernel launches (torch.profiler)")
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    shape = json.loads(resolve_model("elmo-mini").options.read_text()) if quick else FULL_SIZE
    model = random_bilm(shape, device)
    ids = batch_to_char_ids(sentences(32 if not quick else 4, SENTENCE_TOKENS)).to(device)
    name = f"inference forward, {'full-size' if not quick else 'elmo-mini'} shape, batch {ids.shape[0]}, fp32"

    def forward(together: bool, graphs: bool = False):
        def run():
            model.directions_together, model.cuda_graphs = together, graphs
            model(ids)
        return run

    # the default off the CPU: both directions in one loop (BiLM.directions_together), replayed from
    # a CUDA graph; beside it, the same eager and the directions in turn
    cases = [(f"{name}, directions in one loop", forward(True), torch.inference_mode),
             (f"{name}, directions in turn", forward(False), torch.inference_mode)]
    if device.type == "cuda":
        cases.insert(0, (f"{name}, one loop replayed from a CUDA graph", forward(True, True), torch.inference_mode))
    if "step_trainer" in trained:
        cases.append(("training step, elmo-mini shape" + (" (quick: tiny)" if quick else ""),
                      lambda: trained["step_trainer"]._step(trained["batch"]), contextlib.nullcontext))
    for name, fn, context in cases:
        with context():
            fn()
            fn()  # a CUDA graph is captured at a shape's second forward
            sync(device)
            started = time.perf_counter()
            with profile(activities=activities) as prof:
                fn()
                sync(device)
            wall = (time.perf_counter() - started) * 1e3
        kernels, launch_calls, gpu_ms, ops = count_launches(prof)
        if device.type == "cuda":
            log(f"{name}: {kernels:,} CUDA kernel events, {launch_calls:,} launch calls, "
                f"{gpu_ms:.1f} ms of GPU kernels in {wall:.1f} ms wall (profiled)")
        else:
            log(f"{name}: {ops:,} aten operator calls in {wall:.1f} ms wall (the CPU: no kernel launches)")


def pack(folder: Path, data_root: Path | None, model: str = "elmo-mini") -> int:
    """Copy what the check reads on a machine without the data root or nltk into ``folder``:
    ``data/`` (EWT, the first wiki shard, the bilm-tf fixture: those of them the data root has),
    ``site/nltk`` and the model (``elmo-mini/``, or the folder named as ``model``'s: its options,
    card and weights rounded to fp16: half the bytes, so the tree fits a GPU call)."""
    if data_root is None or not data_root.is_dir():
        print(f"error: --pack needs the data root (--data-root or $ELMO_WORKBENCH_DATA); got {data_root}",
              file=sys.stderr)
        return 2
    for part in ("ud_english_ewt", "fixtures/bilm_tf", "lm_corpus/wiki-train-00.txt.gz"):
        source, target = data_root / part, folder / "data" / part
        if not source.exists():
            print(f"{source}: not there, left out")
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True)
        else:
            shutil.copy2(source, target)
    spec = importlib.util.find_spec("nltk")
    if spec is not None and spec.origin:
        shutil.copytree(Path(spec.origin).parent, folder / "site" / "nltk", dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    try:
        files = resolve_model(model)
        cosine = fp16_copy(files, folder / files.name)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
    print(f"packed {size / 2**20:.0f} MB into {folder} ({files.name} in fp16: mean cosine {cosine:.7f} to "
          f"{files.name} per vector, lowest layer); for the call, park data/models/elmo-mini/weights.hdf5, "
          "data/models/elmo-mini/softmax.npz and data/static/*.npz outside the checkout, then run there, in the "
          f"checkout's root:\nPYTHONPATH={folder}/site python bench/gpu_check.py --data-root {folder}/data "
          f"--model {folder}/{files.name} --out $OUT/gpu_check.log")
    return 0


def fp16_copy(files, target: Path) -> float:
    """``target``: the model's options.json and a weights.hdf5 with every dataset rounded to fp16
    (``scripts/fp16_model.py``, the packer ``scripts/gpu_job.py`` uses too; ``target`` is replaced).
    Returns the lowest per-layer mean cosine between the copy's vectors and the model's on a few
    sentences (so the log says what the rounding costs). Refuses a weight that fp16 cannot hold."""
    shutil.rmtree(target, ignore_errors=True)  # an earlier pack's copy
    write_fp16_model(files.options, files.weights, target, language_model=False)
    batch = sentences(8)
    original, rounded = load_bilm(files.options.parent), load_bilm(target)
    worst = 1.0
    for a, b in zip(layers_of(original, batch, "fp32"), layers_of(rounded, batch, "fp32")):
        worst = min(worst, float(torch.nn.functional.cosine_similarity(a, b, dim=-1).mean()))
    return worst


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=None, help="log file, appended to line by line (required)")
    parser.add_argument("--pack", type=Path, default=None, metavar="FOLDER",
                        help="instead of checking: copy the datasets and nltk the check needs into FOLDER (see above)")
    parser.add_argument("--device", default=None, help="cuda, cuda:N or cpu (default: cuda when there is one)")
    parser.add_argument("--quick", action="store_true",
                        help="tiny shapes and the bilm-tf fixture: every step in seconds")
    parser.add_argument("--data-root", type=Path, default=None, help="default: $ELMO_WORKBENCH_DATA")
    parser.add_argument("--model", default=None, help="default: elmo-mini (--quick: the data root's fixtures/bilm_tf); "
                        "with --pack, the model packed")
    parser.add_argument("--seconds", type=float, default=None,
                        help="time per throughput cell (default 1.5; quick 0.05)")
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=None, metavar="SECTION",
                        help=f"run these sections only (and the machine's): {', '.join(SECTIONS)}")
    args = parser.parse_args(argv)
    data_root = args.data_root or (Path(os.environ["ELMO_WORKBENCH_DATA"]) if os.environ.get("ELMO_WORKBENCH_DATA")
                                   else None)
    if args.pack is not None:
        return pack(args.pack, data_root, args.model or "elmo-mini")
    if args.out is None:
        parser.error("--out is required (the log file)")
    log = Log(args.out)
    try:
        device = check_device(args.device or default_device())
    except ValueError as err:
        log(f"error: {err}")
        return 2
    model = args.model or (str(data_root / "fixtures" / "bilm_tf") if args.quick and data_root else "elmo-mini")
    seconds = args.seconds if args.seconds is not None else (0.05 if args.quick else 1.5)
    log(f"# bench/gpu_check.py on {device}{' (quick)' if args.quick else ''}, model {model}, "
        f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        os.environ.setdefault("ELMO_WORKBENCH_CACHE", str(tmp / "cache"))
        trained: dict = {}
        steps = [("machine", lambda: environment(log, device)),
                 ("paths", lambda: paths(log, device, model, data_root, args.quick, tmp)),
                 ("fidelity", lambda: fidelity(log, device, model)),
                 ("throughput", lambda: throughput(log, device, model, args.quick, seconds)),
                 ("trainer", lambda: trained.update(trainer(log, device, data_root, args.quick, tmp, seconds))),
                 ("launches", lambda: launches(log, device, args.quick, trained))]
        failed = []
        for name, step in steps:
            if args.only and name not in args.only and name != "machine":
                continue
            try:
                step()
            except Exception as err:  # noqa: BLE001  (one failed section must not hide the others)
                failed.append(name)
                log(f"{name}: FAILED {type(err).__name__}: {err}")
                log.file.write(traceback.format_exc())
    log.section("goals")
    for line in log.summary:
        log(f"- {line}")
    log(f"done in {time.perf_counter() - log.started:.0f} s" + (f"; sections that failed: {', '.join(failed)}"
                                                              if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
