"""Trainer throughput with 1 and 2 processes (torchrun + DDP, gloo), and the FLOPs-per-token model.

    python bench/distributed_training.py                      # small config, 1 and 2 processes
    python bench/distributed_training.py --config tiny --steps 12 --log-every 4   # a quick check
    python bench/distributed_training.py --config tiny --flops-config tiny --steps 2 --log-every 1 --lines 300
    python bench/distributed_training.py --flops-only --gpu A100 --utilisation 0.1 --gpus 1 8 64

For each process count N it launches ``torchrun --standalone --nproc_per_node N -m
elmo_model.training.train`` on the same corpus, vocabulary and global batches (``--batch-tokens`` is the
*global* batch: N ranks each train about 1/N of it), gives each rank ``--threads-total / N`` torch
threads, and reports the trainer's own tokens/s (global tokens per second of wall time, from the
loss-curve windows after the first, which holds start-up). On a 2-core machine N = 2 cannot be
faster than N = 1: the figure is the overhead of DDP (gradient all-reduce, the per-step
agreement, every rank tokenising the stream), not a speed-up.

The FLOPs model (printed first, and the basis of the GPU prediction in docs/performance-log.md) counts the matrix
multiplies per processed position, 2 FLOPs per multiply-add: character CNN, highway, token
projection, LSTM gates and cell projection for both directions, and the adaptive softmax (head for
every prediction, each tail cluster for the share of targets it holds), forward and backward LM.
Training is about 3x the forward pass (backward costs twice the forward).
"""

from __future__ import annotations

import argparse
import gzip
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bilm_throughput import flops_per_position  # noqa: E402

from elmo_model.training.train import LanguageModel, TrainConfig, _default_tokenize, build_vocabulary  # noqa: E402

# Share of softmax targets in the head / first tail / second tail cluster for cutoffs [2000, 10000]
# over a 50k vocabulary: measured with elmo-mini's vocabulary on 1,500 paragraphs each of
# wiki-test and gutenberg-test (219,815 predictions, project tokenizer).
CLUSTER_SHARES = (0.796, 0.133, 0.071)
# dense bf16 tensor-core peak, TFLOP/s (vendor data sheets)
GPU_PEAK_TFLOPS = {"A100": 312.0, "H100-SXM": 989.0, "L4": 121.0}

CONFIGS = {
    "tiny": dict(vocab_size=800, vocab_max_tokens=100_000, vocab_min_count=1, char_embedding_dim=4,
                 filters=[[1, 8], [2, 8], [3, 16]], n_highway=1, lstm_dim=32, projection_dim=16,
                 softmax_cutoffs=[200], batch_tokens=600, max_sentence_tokens=30),
    "small": dict(vocab_size=20_000, vocab_max_tokens=300_000, lstm_dim=512, projection_dim=128,
                  batch_tokens=2_000, max_sentence_tokens=50),
    "mini": dict(vocab_size=50_000, vocab_max_tokens=1_000_000, lstm_dim=1024, projection_dim=256,
                 batch_tokens=4_000, max_sentence_tokens=50),  # elmo-mini's shape and batch
}


def training_flops_per_position(config: TrainConfig, cluster_shares=CLUSTER_SHARES) -> dict[str, float]:
    """Forward FLOPs per position by part (encoder parts from bench/bilm_throughput.py, plus the
    adaptive softmax of both LMs) and the training total (3x forward)."""
    parts = flops_per_position(config.elmo_config())
    parts.pop("total")
    p = config.projection_dim
    bounds = [0, *config.softmax_cutoffs, config.vocab_size]
    head = 2 * p * (bounds[1] + len(config.softmax_cutoffs))  # shortlist + one logit per tail cluster
    softmax = head
    for k in range(1, len(bounds) - 1):
        hidden = int(p // (config.softmax_div_value ** k))
        softmax += cluster_shares[k] * 2 * (p * hidden + hidden * (bounds[k + 1] - bounds[k]))
    parts["softmax (fw + bw LM)"] = 2 * softmax
    forward = sum(parts.values())
    return {**parts, "forward": forward, "training (3x forward)": 3 * forward}


def print_flops_model(config: TrainConfig, gpu: str, utilisation: float, gpus: list[int],
                      tokens_per_gpu: int = 32_768) -> None:
    flops = training_flops_per_position(config)
    print(f"FLOPs per position (lstm {config.lstm_dim}, projection {config.projection_dim}, filters "
          f"{config.filters}, {config.n_highway} highway, vocab {config.vocab_size}, cutoffs "
          f"{config.softmax_cutoffs} div {config.softmax_div_value:g}):")
    for name, value in flops.items():
        print(f"  {name:<24}{value / 1e6:8.2f} MFLOP")
    peak = GPU_PEAK_TFLOPS[gpu] * 1e12
    per_gpu = utilisation * peak / flops["training (3x forward)"]
    print(f"PREDICTION for {gpu} (bf16 peak {GPU_PEAK_TFLOPS[gpu]:.0f} TFLOP/s) at an assumed {utilisation:.0%} "
          f"utilisation: {per_gpu:,.0f} tokens/s per GPU")

    lm = LanguageModel(config.elmo_config(), config.vocab_size, config.softmax_cutoffs, config.softmax_div_value)
    gradient_bytes = 4 * sum(p.numel() for p in lm.parameters())  # fp32 gradients, one all-reduce per step
    step = tokens_per_gpu / per_gpu
    print(f"  per step: {tokens_per_gpu:,} tokens per GPU -> {step * 1e3:.0f} ms of compute; "
          f"{gradient_bytes / 1e6:.1f} MB of gradients to all-reduce")
    for n in gpus:
        if n == 1:
            comm = "no all-reduce"
        else:
            # ring all-reduce moves 2 (N-1)/N of the buffer; bus bandwidths assumed: 200 GB/s in a node
            # (NVLink), 25 GB/s between nodes (2 x 100 Gb/s), nodes of 8 GPUs
            bandwidth = 200e9 if n <= 8 else 25e9
            seconds = 2 * (n - 1) / n * gradient_bytes / bandwidth
            comm = f"all-reduce {seconds * 1e3:.1f} ms ({seconds / step:.0%} of the step, overlapped with backward by DDP)"
        print(f"  {n:>4} GPUs: {n * per_gpu:>14,.0f} tokens/s if DDP scales linearly (1B tokens in "
              f"{1e9 / (n * per_gpu) / 3600:.2f} h); {comm}")


def measure(config: TrainConfig, nproc: int, threads_total: int, workdir: Path, vocab_file: Path) -> float:
    """One torchrun job -> median tokens/s over the loss-curve windows after the first."""
    out = workdir / f"run-{nproc}"
    out.mkdir(parents=True, exist_ok=True)
    (out / "vocab.txt").write_bytes(vocab_file.read_bytes())
    threads = max(1, threads_total // nproc)
    flags = []
    for name, value in vars(config).items():
        if value is None or name in ("out", "valid", "test"):
            continue
        flag = "--" + name.replace("_", "-")
        if name in ("train", "softmax_cutoffs"):
            flags += [flag, *map(str, value)]
        elif isinstance(value, bool):
            flags.append(flag if value else "--no-" + name.replace("_", "-"))
        else:
            flags += [flag, str(value)]
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
               "-m", "elmo_model.training.train", *flags, "--out", str(out), "--threads", str(threads), "--no-export"]
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONPATH=str(PROJECT))
    started = time.monotonic()
    done = subprocess.run(command, cwd=PROJECT, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"torchrun with {nproc} processes failed:\n{done.stderr[-3000:]}")
    run = torch.load(out / "checkpoint.pt", map_location="cpu", weights_only=True)
    curve = run["progress"]["loss_curve"]
    rates = [p["tokens_per_second"] for p in curve[1:]] or [p["tokens_per_second"] for p in curve]
    print(f"  {nproc} process(es), {threads} thread(s) each: {run['progress']['tokens_seen']:,} tokens in "
          f"{run['progress']['step']} steps, wall {time.monotonic() - started:.0f} s incl. start-up; "
          f"windows: {', '.join(f'{r:.0f}' for r in rates)} tokens/s")
    return float(np.median(rates))


def first_lines(corpus: Path, n: int, target: Path) -> Path:
    """The first ``n`` lines of the gzipped ``corpus`` -> ``target`` (plain text)."""
    with gzip.open(corpus, "rt", encoding="utf-8") as f:
        target.write_text("".join(line for _, line in zip(range(n), f)), encoding="utf-8")
    return target


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", choices=sorted(CONFIGS), default="small", help="model size (default: %(default)s)")
    parser.add_argument("--data-root", type=Path, default=Path(os.environ.get("ELMO_WORKBENCH_DATA", PROJECT.parent / "shared")))
    parser.add_argument("--steps", type=int, default=60, help="training steps per run (default: %(default)s)")
    parser.add_argument("--log-every", type=int, default=10, help="steps per measured window (default: %(default)s)")
    parser.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--threads-total", type=int, default=os.cpu_count() or 1,
                        help="torch threads shared among the processes (default: all cores, %(default)s)")
    parser.add_argument("--lines", type=int, default=None,
                        help="train on the shard's first N lines only (default: the whole shard; a quick check)")
    parser.add_argument("--flops-only", action="store_true", help="print the FLOPs model and the GPU prediction only")
    parser.add_argument("--flops-config", choices=sorted(CONFIGS), default="mini",
                        help="config of the FLOPs model (default: %(default)s, elmo-mini's shape)")
    parser.add_argument("--gpu", choices=sorted(GPU_PEAK_TFLOPS), default="A100")
    parser.add_argument("--utilisation", type=float, default=0.10,
                        help="assumed share of the bf16 peak the trainer reaches (default: %(default)s)")
    parser.add_argument("--gpus", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--tokens-per-gpu", type=int, default=32_768,
                        help="batch per GPU and step in the prediction (default: %(default)s)")
    args = parser.parse_args(argv)
    print_flops_model(TrainConfig(train=[], **CONFIGS[args.flops_config]), args.gpu, args.utilisation, args.gpus,
                      args.tokens_per_gpu)
    if args.flops_only:
        return
    corpus = args.data_root / "lm_corpus" / "wiki-train-00.txt.gz"
    if not corpus.is_file():
        raise SystemExit(f"{corpus} not found: point --data-root (or ELMO_WORKBENCH_DATA) at a data root")
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        if args.lines is not None:
            corpus = first_lines(corpus, args.lines, Path(tmp) / f"{corpus.name.split('.')[0]}-{args.lines}.txt")
        config = TrainConfig(train=[str(corpus)], max_steps=args.steps, log_every=args.log_every, dropout=0.0,
                             checkpoint_every_minutes=1e9, validate_every_minutes=1e9, **CONFIGS[args.config])
        print(f"\nmeasuring config {args.config!r} on {corpus.name}: {args.steps} steps, global batch "
              f"{config.batch_tokens} padded tokens, {os.cpu_count()} cores")
        vocab_file = Path(tmp) / "vocab.txt"
        build_vocabulary(config, _default_tokenize(), progress=False).save(vocab_file)
        for n in args.processes:
            results[n] = measure(config, n, args.threads_total, Path(tmp), vocab_file)
    print(f"\n{'processes':>10}{'tokens/s':>12}{'vs 1':>8}")
    for n, rate in results.items():
        base = results.get(args.processes[0], rate)
        print(f"{n:>10}{rate:>12.0f}{rate / base:>8.2f}")


if __name__ == "__main__":
    main()
