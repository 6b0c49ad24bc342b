"""The character CNN: its max-pooled convolution before and after the blockwise backward, in one run.

    python bench/char_cnn.py [--tokens 4000 16000] [--precisions fp32 bf16] [--threads 2] [--clock wall]

elmo-mini's shape (16-dim character embeddings, filters [[1,32],[2,32],[3,64],[4,128],[5,256]],
2 highways, projection 256; the trainer's defaults). For each batch size (tokens = B x T, real
sentences of the LM corpus's wiki validation shard, padded as the trainer pads) and precision, it
times, with the old algorithm (autograd through slices of the unfolded windows, kept here as
``old_max_pooled_convolution``) and the new one (``CharacterCNN._max_pooled_convolution``):

- forward + backward of the character CNN alone;
- one whole training step (forward and backward LMs, adaptive softmax over 50,000 words, Adam);
- the character CNN's forward without a gradient (embedding), median of ``--repeats``.

The old and new runs alternate (``--rounds`` times); each figure is the median of ``--repeats``
calls after a warm-up (above ``--old-repeats-above`` tokens the old algorithm's backward, about a minute on 2 cores
at 16,000 tokens, runs once, right after the new one warmed the shapes).
bf16 runs wherever oneDNN's bf16 kernels exist (fast only with bf16 units: AMX, avx512_bf16);
elsewhere it is skipped with a line saying so.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from elmo_model.bilm import char_cnn, modules  # noqa: E402
from elmo_model.bilm.precision import bf16_support  # noqa: E402
from elmo_model.text.tokenizer import tokenize  # noqa: E402
from elmo_model.training.lm_data import make_batch, sentence_groups, sentences_from_files  # noqa: E402
from elmo_model.training.trainer import LanguageModel, TrainConfig  # noqa: E402
from elmo_model.training.vocab import Vocabulary  # noqa: E402
from probing.data import data_root  # noqa: E402


def old_max_pooled_convolution(self, x: torch.Tensor, conv: torch.nn.Conv1d,
                               block_floats: int | None = None) -> torch.Tensor:
    """The algorithm before the blockwise backward, verbatim but for the block size (a parameter
    here; None: ``char_cnn._CONV_BLOCK_FLOATS``, as it was): autograd through slices of the unfolded
    windows of a tensor that requires grad. ``x``: (tokens, characters, embedding dim) ->
    (tokens, filters), the max over positions plus the bias. The reference that
    tests/test_char_cnn.py checks the blockwise backward against, and the "old" column here."""
    if block_floats is None:
        block_floats = char_cnn._CONV_BLOCK_FLOATS
    width, n_filters = conv.kernel_size[0], conv.out_channels
    windows = x.unfold(1, width, 1)
    n_tokens, positions = windows.shape[:2]
    windows = windows.reshape(n_tokens, positions, -1)
    p = self.products
    kernel = p.weight(conv.weight).reshape(n_filters, -1).t()
    rows = max(1, block_floats // max(1, positions * n_filters))
    pooled = [torch.matmul(windows[i : i + rows], kernel).amax(dim=1) for i in range(0, n_tokens, rows)]
    if not pooled:
        return x.new_zeros(0, n_filters, dtype=torch.float32)
    return p.result(torch.cat(pooled)) + conv.bias


NEW = modules.CharacterCNN._max_pooled_convolution
ALGORITHMS = {"old": old_max_pooled_convolution, "new": NEW}


def timed(fn, repeats: int, warm_up: bool = True, clock=time.perf_counter) -> float:
    """Median seconds of ``repeats`` calls after one warm-up call."""
    if warm_up:
        fn()
    times = []
    for _ in range(repeats):
        start = clock()
        fn()
        times.append(clock() - start)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, nargs="+", default=[4000, 16000])
    parser.add_argument("--precisions", nargs="+", default=["fp32", "bf16"], choices=["fp32", "bf16"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--old-repeats-above", type=int, default=8000,
                        help="batches above this many tokens time the old algorithm once (it is slow)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--data-root", type=Path, default=None)
    parser.add_argument("--inference-only", action="store_true",
                        help="only the forward without a gradient (alternating old/new --rounds times)")
    parser.add_argument("--rounds", type=int, default=1, help="old/new alternations of each measure")
    parser.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                        help="cpu: this thread's CPU time (with --threads 1: a fair A/B on a machine shared "
                             "with other work; the backward runs on the calling thread on a CPU)")
    args = parser.parse_args(argv)
    if args.clock == "cpu" and args.threads != 1:
        parser.error("--clock cpu measures one thread: use it with --threads 1")
    clock = time.thread_time if args.clock == "cpu" else time.perf_counter
    torch.set_num_threads(args.threads)
    support = bf16_support()
    # the bf16 kernels, wherever they exist (a loaded machine may time them below bf16_support's bar)
    precisions = [p for p in args.precisions if p == "fp32" or torch.ops.mkldnn._is_mkldnn_bf16_supported()]
    if len(precisions) < len(args.precisions):
        print(f"bf16 skipped: {support.reason}")

    root = data_root(args.data_root)
    sentences = []
    for s in sentences_from_files([root / "lm_corpus" / "wiki-valid.txt.gz"], tokenize, 50):
        sentences.append(s)
        if sum(map(len, sentences)) > 3 * max(args.tokens):
            break
    vocab = Vocabulary.build(Counter(w for s in sentences for w in s), 50_000)
    config = TrainConfig(train=[])
    torch.manual_seed(0)
    lm = LanguageModel(config.elmo_config(), 50_000, config.softmax_cutoffs, config.softmax_div_value, config.dropout)
    optimizer = torch.optim.Adam(lm.parameters(), lr=1e-6)  # a tiny rate: the weights barely move between calls
    cnn = lm.bilm.token_embedder
    print(f"torch {torch.__version__}, {args.threads} threads, {args.clock} clock; bf16 here: {support.reason}")
    print(f"{'tokens':>7} {'precision':>9} {'measure':>26} {'old ms':>10} {'new ms':>10} {'old/new':>8}")
    for tokens in args.tokens:
        group = next(g for g in sentence_groups(sentences, tokens, seed=0) if sum(map(len, g)) > tokens // 2)
        batch = make_batch(group, vocab)
        padded = batch.char_ids.shape[0] * batch.char_ids.shape[1]
        for precision in precisions:
            lm.bilm.set_precision(precision)

            def cnn_train_step():
                cnn.zero_grad(set_to_none=True)
                cnn(batch.char_ids).sum().backward()

            def train_step():
                fw, bw, n = lm(batch)
                optimizer.zero_grad(set_to_none=True)
                ((fw + bw) / (2 * n)).backward()
                optimizer.step()

            def embed():
                with torch.inference_mode():
                    cnn(batch.char_ids)

            lm.train()
            measures = [("char CNN forward+backward", cnn_train_step), ("training step", train_step),
                        ("char CNN forward (no grad)", embed)]
            for name, fn in measures[2:] if args.inference_only else measures:
                runs: dict[str, list[float]] = {"new": [], "old": []}
                for _ in range(args.rounds):
                    for algorithm in ("new", "old"):  # the old one after: its shapes are warm then
                        modules.CharacterCNN._max_pooled_convolution = ALGORITHMS[algorithm]
                        slow = algorithm == "old" and padded > args.old_repeats_above and "no grad" not in name
                        runs[algorithm].append(timed(fn, 1 if slow else args.repeats, warm_up=not slow,
                                                     clock=clock) * 1000)
                result = {algorithm: statistics.median(values) for algorithm, values in runs.items()}
                modules.CharacterCNN._max_pooled_convolution = NEW
                print(f"{padded:>7} {precision:>9} {name:>26} {result['old']:>10.1f} {result['new']:>10.1f} "
                      f"{result['old'] / result['new']:>7.2f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
