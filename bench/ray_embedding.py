"""Corpus embedding throughput: the single-process embedder, then Ray with 1 and 2 workers.

    python bench/ray_embedding.py                               # elmo-mini, 4,096 sentences
    python bench/ray_embedding.py --model ../shared/fixtures/bilm_tf --sentences 2048   # quick check

Sentences are pieces of 5-30 tokens of the LM corpus's wiki validation text, one a line. Each run
embeds the same file with ``--all`` output (every layer), from a fresh output path, and reports
sentence tokens per second of wall time: for Ray this includes starting the actors and shipping
them the model (not starting Ray itself, which is done once beforehand with ``ray.init(num_cpus=
max workers)``), and assembling the shards into the output file. Each worker uses one torch thread;
the single-process run uses ``--threads`` (default 1, the same as one worker). On a 2-core machine
two workers can at best double one worker's rate.
"""

from __future__ import annotations

import argparse
import gzip
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from elmo_model.corpus.embedder import ElmoEmbedder  # noqa: E402
from elmo_model.models.registry import load_bilm  # noqa: E402


def write_sentences(data_root: Path, n: int, path: Path) -> int:
    """``n`` sentences (5-30 tokens) of the wiki validation text -> ``path``; returns their tokens."""
    lines, tokens = [], 0
    with gzip.open(data_root / "lm_corpus" / "wiki-valid.txt.gz", "rt", encoding="utf-8") as f:
        for paragraph in f:
            words = paragraph.split()
            start = 0
            while start < len(words) and len(lines) < n:
                piece = words[start : start + 5 + (len(lines) * 11) % 26]
                start += len(piece)
                lines.append(" ".join(piece))
                tokens += len(piece)
            if len(lines) >= n:
                break
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="elmo-mini", help="shipped model name or directory (default: %(default)s)")
    parser.add_argument("--data-root", type=Path, default=Path(os.environ.get("ELMO_WORKBENCH_DATA", PROJECT.parent / "shared")))
    parser.add_argument("--sentences", type=int, default=4096, help="sentences to embed (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per batch (default: %(default)s)")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="Ray worker counts (default: 1 2)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads of the single-process run (default: 1)")
    args = parser.parse_args()
    # lazy: Ray is optional (requirements-cluster.txt); imported after parsing so that --help works without it
    import ray

    # lazy, as above: ray_embed imports Ray at its top
    from elmo_model.corpus.ray_embed import embed_file_with_ray, runtime_env

    model = load_bilm(args.model)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "sentences.txt"
        tokens = write_sentences(args.data_root, args.sentences, text)
        window = 32 * args.batch_size
        shard_size = max(window, -(-args.sentences // (4 * max(args.workers)) // window) * window)
        print(f"{args.sentences} sentences, {tokens} tokens, model {args.model}, batch {args.batch_size}, "
              f"shards of {shard_size} sentences, {os.cpu_count()} cores")
        torch.set_num_threads(args.threads)
        started = time.perf_counter()
        ElmoEmbedder(model, batch_size=args.batch_size).embed_file(text, Path(tmp) / "single.hdf5", "all")
        rows.append((f"single process, {args.threads} thread(s)", tokens / (time.perf_counter() - started)))
        print(f"  {rows[-1][0]}: {rows[-1][1]:.0f} tokens/s")
        ray.init(num_cpus=max(args.workers), runtime_env=runtime_env(), include_dashboard=False, log_to_driver=False)
        try:
            for n in args.workers:
                started = time.perf_counter()
                embed_file_with_ray(text, Path(tmp) / f"ray-{n}.hdf5", model, "all", args.batch_size, workers=n,
                                    shard_size=shard_size)
                rows.append((f"Ray, {n} worker(s) x 1 thread", tokens / (time.perf_counter() - started)))
                print(f"  {rows[-1][0]}: {rows[-1][1]:.0f} tokens/s")
        finally:
            ray.shutdown()
    print(f"\n{'run':<34}{'tokens/s':>10}{'vs single':>11}")
    for name, rate in rows:
        print(f"{name:<34}{rate:>10.0f}{rate / rows[0][1]:>11.2f}")


if __name__ == "__main__":
    main()
