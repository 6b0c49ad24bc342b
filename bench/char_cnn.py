"""The character CNN's convolutions: ``nn.Conv1d`` against the blocked unfold + matmul that
``CharacterCNN`` uses, on the full-size ELMo filters (widths 1-7, 2048 filters, 16 channels).

    python bench/char_cnn.py [--tokens 704] [--seconds 3] [--threads 2]

704 tokens = a batch of 32 sentences of 20 words plus boundaries. Prints ms per call for each,
interleaved over rounds, and the ratio measured in this run.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from elmo_model.modules import CharacterCNN  # noqa: E402

FULL_SIZE_FILTERS = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]


def conv1d_path(x: torch.Tensor, convs: list[torch.nn.Conv1d]) -> torch.Tensor:
    xt = x.transpose(1, 2)  # (N, E, C)
    return torch.cat([conv(xt).amax(dim=-1) for conv in convs], dim=-1)


def blocked_matmul_path(x: torch.Tensor, convs: list[torch.nn.Conv1d]) -> torch.Tensor:
    return torch.cat([CharacterCNN._max_pooled_convolution(x, conv) for conv in convs], dim=-1)


def ms_per_call(fn, seconds: float) -> float:
    fn()
    n, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        fn()
        n += 1
    return (time.perf_counter() - start) / n * 1000


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=704)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    convs = [torch.nn.Conv1d(16, n, width) for width, n in FULL_SIZE_FILTERS]
    x = torch.randn(args.tokens, 50, 16)
    with torch.inference_mode():
        diff = (conv1d_path(x, convs) - blocked_matmul_path(x, convs)).abs().max().item()
        print(f"max |difference| {diff:.2e}")
        times: dict[str, list[float]] = {"nn.Conv1d": [], "blocked unfold+matmul": []}
        for _ in range(args.rounds):
            times["nn.Conv1d"].append(ms_per_call(lambda: conv1d_path(x, convs), args.seconds))
            times["blocked unfold+matmul"].append(ms_per_call(lambda: blocked_matmul_path(x, convs), args.seconds))
    for name, values in times.items():
        print(f"{name:>22}: " + " ".join(f"{v:.1f}" for v in values) + " ms per call")
    print(f"speed-up (sum over rounds): {sum(times['nn.Conv1d']) / sum(times['blocked unfold+matmul']):.2f}x")


if __name__ == "__main__":
    main()
