"""The trainer's batch pipeline alone (no training): the background thread against worker processes.

    python bench/batch_pipeline.py [--workers 0 1 2] [--batches 40] [--batch-tokens 32000] \
        [--corpus FILE] [--python-step-ms 0]

The batches of one epoch of ``--corpus`` (default: the data root's ``lm_corpus/wiki-train-00.txt.gz``),
exactly as the trainer makes them (the project's tokenizer, ``sentence_groups`` with seed 0,
``make_batch``; a 50,000-word vocabulary from the first ``--vocab-tokens`` tokens), consumed as
fast as they come: ``0`` in ``--workers`` is the trainer's thread (``lm_data.prefetched``, 4
ahead), ``N`` is ``batch_workers.made_in_workers``: a coordinator process and its N worker
processes (``--start-method``, spawn as the trainer starts them). For each it prints the time to the first batch (start-up: the workers'
imports, the first buffer of sentences), the tokens/s over the next ``--batches`` batches, and the
CPU time a batch costs the consuming process outside its own thread ("trainer CPU ms/batch": what
the pipeline takes from the trainer's interpreter, which a launch-bound GPU step needs).

``--python-step-ms MS`` makes the consumer hold the interpreter for MS ms a batch (a Python loop),
as a GPU step launching thousands of kernels from Python does: the thread then gets the
interpreter only between steps, the workers do not need it. The figures, their machine and
command are in docs/performance-log.md ("The batch pipeline").
"""

from __future__ import annotations

import argparse
import itertools
import os
import platform
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from elmo_model.text.tokenizer import tokenize  # noqa: E402
from elmo_model.training.batch_workers import (  # noqa: E402
    START_METHOD,
    StreamRecipe,
    made_in_workers,
)
from elmo_model.training.lm_data import prefetched, sentences_from_files  # noqa: E402
from elmo_model.training.vocab import Vocabulary  # noqa: E402
from probing.data import data_root  # noqa: E402


def cpu_name() -> str:
    """The CPU's model name from /proc/cpuinfo (the platform's processor elsewhere)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def hold_the_interpreter(ms: float) -> None:
    """A Python loop for ``ms`` milliseconds: the GIL stays with this thread, as in a launch-bound step."""
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        pass


def measure(stream, batches: int, step_ms: float, started: float) -> tuple[float, int, float, float]:
    """(seconds to the first batch, tokens after it, seconds for them, CPU seconds this process's
    other threads spent meanwhile) over ``batches`` batches after the first. The last is the
    pipeline's share of the trainer's interpreter: all of the work with the thread, receiving the
    finished batches with workers (the coordinator's and the workers' CPU time is not this process's)."""
    first = next(stream)
    startup = time.perf_counter() - started
    assert first.n_tokens > 0
    hold_the_interpreter(step_ms)
    tokens, begin, cpu, mine = 0, time.perf_counter(), time.process_time(), time.thread_time()
    for batch in itertools.islice(stream, batches):
        tokens += batch.n_tokens
        hold_the_interpreter(step_ms)
    others = (time.process_time() - cpu) - (time.thread_time() - mine)
    return startup, tokens, time.perf_counter() - begin, others


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2],
                        help="pipelines to time: 0 = the trainer's background thread, N = N worker processes")
    parser.add_argument("--batches", type=int, default=40, help="batches timed after the first")
    parser.add_argument("--batch-tokens", type=int, default=32_000, help="padded tokens a batch (the trainer's --batch-tokens)")
    parser.add_argument("--corpus", type=Path, help="a .txt/.txt.gz file (default: <data root>/lm_corpus/wiki-train-00.txt.gz)")
    parser.add_argument("--vocab-tokens", type=int, default=200_000, help="tokens counted for the 50,000-word vocabulary")
    parser.add_argument("--python-step-ms", type=float, default=0.0,
                        help="the consumer holds the interpreter this long a batch (a launch-bound GPU step); 0: none")
    parser.add_argument("--start-method", default=START_METHOD, choices=["spawn", "fork", "forkserver"],
                        help="how the worker processes start")
    args = parser.parse_args(argv)
    corpus = args.corpus or data_root() / "lm_corpus" / "wiki-train-00.txt.gz"
    counts = Counter(w for s in itertools.islice(sentences_from_files([corpus], tokenize, 50), args.vocab_tokens // 20)
                     for w in s)
    recipe = StreamRecipe((str(corpus),), tokenize, 50, args.batch_tokens, seed=0,
                          vocab_words=tuple(Vocabulary.build(counts, 50_000, 1).words))
    print(f"machine: {cpu_name()}, {os.cpu_count()} cores; Python {platform.python_version()}")
    print(f"corpus {corpus.name}; batches of {args.batch_tokens:,} tokens; {args.batches} batches timed after the "
          f"first; consumer holds the interpreter {args.python_step_ms:g} ms a batch; workers start by {args.start_method}")
    print(f"{'pipeline':<22}{'first batch s':>14}{'tokens':>12}{'seconds':>9}{'tokens/s':>11}{'x thread':>10}"
          f"{'trainer CPU ms/batch':>22}")
    thread_rate = None
    for workers in args.workers:
        started = time.perf_counter()
        if workers == 0:
            name, block = "thread (prefetch 4)", prefetched(recipe.batches_in_line(), 4)
        else:
            name = f"{workers} worker process{'es' * (workers > 1)}"
            block = made_in_workers(recipe, workers, start_method=args.start_method)
        with block as stream:
            startup, tokens, seconds, cpu = measure(stream, args.batches, args.python_step_ms, started)
        rate = tokens / seconds
        thread_rate = rate if workers == 0 else thread_rate
        ratio = f"{rate / thread_rate:.2f}x" if thread_rate else "-"
        print(f"{name:<22}{startup:>14.2f}{tokens:>12,}{seconds:>9.2f}{rate:>11,.0f}{ratio:>10}"
              f"{cpu / args.batches * 1e3:>22.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
