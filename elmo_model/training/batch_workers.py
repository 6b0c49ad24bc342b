"""Batches made in worker processes: tokenising and character ids outside the trainer's interpreter.

The thread of ``lm_data.prefetched`` shares the Python interpreter (the GIL) with the training
step. On a CPU that costs little, since torch's kernels release it; on a GPU the step is itself
Python launching thousands of small kernels, and the thread tokenising beside it slows both
(``bench/gpu_check.py``, section 5). ``made_in_workers`` moves the two expensive parts into worker
processes and keeps only the cheap, order-deciding part in the trainer's process:

- the trainer's process reads the lines (``lm_data.interleaved_lines``) and cuts them into chunks;
- a worker tokenises a chunk (``lm_data.sentence_pieces``, line by line) and sends the sentences back;
- the trainer's process puts the sentences back in order and groups them (``lm_data.sentence_groups``:
  the seeded shuffle and the length buckets, under 1% of the work);
- a worker makes a group into a batch (``lm_data.make_batch``) and sends its tensors back.

Every result comes back to its place in the order, so the batches are exactly those of the
single-thread stream (``StreamRecipe.batches_in_line``), in the same order: a resumed run skips to
its position as before. The batches a resume skips are not made at all (``skip``: only their
sentences are tokenised and grouped, so the order after them is right).

Each worker has one pipe to the trainer's process and at most one task at a time: a worker waiting
for its next task always reads it, so neither side can block the other, there are no
locks shared between processes and no helper process. Workers ignore Ctrl-C and SIGTERM (the
trainer decides when to stop, after its step) and leave when the trainer's process is gone.
Leaving the ``with`` block in any way (the end, ``break``, an exception, Ctrl-C) kills and reaps
every worker; a worker's exception, or a worker that dies, reaches the consumer as one
``BatchWorkerError`` line where it reads the next batch.

Workers start with ``spawn`` by default (``START_METHOD``): a fresh interpreter, safe beside the
trainer's threads (torch's thread pools, CUDA's, the fused step's compiling thread), where ``fork``
would copy a process whose other threads may hold locks. ``fork`` works too (the tests use both).
Starting a worker costs its imports (torch, nltk: about 2-3 s of CPU), once an epoch.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import pickle
import signal
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait

import numpy as np
import torch

from .lm_data import (
    LmBatch,
    Tokenize,
    batches,
    interleaved_lines,
    make_batch,
    prefetched,
    sentence_groups,
    sentence_pieces,
    sentences_from_files,
)
from .vocab import Vocabulary

log = logging.getLogger(__name__)

#: How worker processes start (see the module docstring for why not ``fork``).
START_METHOD = "spawn"
#: Characters of text in one tokenising task: about 20k tokens, 0.1 s of one core.
CHUNK_CHARS = 100_000
_TOKENISE, _BATCH = "tokenise", "batch"
_POLL_SECONDS = 0.2  # how often a waiting side looks at the other's health and at a stop request


class BatchWorkerError(RuntimeError):
    """A batch worker raised an exception or died; the message is one line naming the worker and the work."""


@dataclass(frozen=True)
class StreamRecipe:
    """Everything that decides one epoch's batch stream (what a worker is given, pickled).
    ``tokenize`` must pickle: a module-level function such as the project's tokenizer."""

    files: tuple[str, ...]
    tokenize: Tokenize
    max_sentence_tokens: int
    batch_tokens: int
    seed: int
    vocab_words: tuple[str, ...]
    buffer_sentences: int = 4096

    def batches_in_line(self) -> Iterator[LmBatch]:
        """The same stream made in this thread: the single-process trainer's ``_epoch_batches``."""
        sentences = sentences_from_files(list(self.files), self.tokenize, self.max_sentence_tokens)
        return batches(sentences, Vocabulary(list(self.vocab_words)), self.batch_tokens, self.seed,
                       self.buffer_sentences)


def default_batch_workers(device_type: str, cpus: int | None = None) -> int:
    """Worker processes for a run on ``device_type`` when none are asked for: 0 on a CPU (its step
    releases the interpreter, so the thread overlaps it, and every core is the step's), else
    ``min(4, cpus - 1)`` (one core stays the trainer's; four make batches several times faster
    than a GPU step consumes them, ``docs/performance.md``)."""
    if device_type == "cpu":
        return 0
    if cpus is None:
        cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(0, min(4, cpus - 1))


def tokenizer_pickles(tokenize: Callable) -> bool:
    """Whether ``tokenize`` can be sent to a worker process (a lambda or a local function cannot)."""
    try:
        pickle.dumps(tokenize)
    except (pickle.PicklingError, AttributeError, TypeError):
        return False
    return True


# ---- the worker process -------------------------------------------------------------------------

def _to_wire(batch: LmBatch) -> tuple:
    """A batch as narrow numpy arrays (character ids fit int16, word ids int32): a quarter of the bytes."""
    return (batch.char_ids.numpy().astype(np.int16), batch.mask.numpy(), batch.word_ids.numpy().astype(np.int32),
            batch.n_tokens)


def _from_wire(message: tuple) -> LmBatch:
    """The batch ``make_batch`` made, with its own dtypes (int64 ids, bool mask)."""
    char_ids, mask, word_ids, n_tokens = message
    return LmBatch(torch.from_numpy(char_ids).long(), torch.from_numpy(mask), torch.from_numpy(word_ids).long(),
                   n_tokens)


def _serve(connection: Connection, tokenize: Tokenize, max_sentence_tokens: int, vocab_words: tuple[str, ...]) -> None:
    """A worker's loop: one task at a time from ``connection``, its result (or its error) sent back."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the trainer stops the run; it kills the workers
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    torch.set_num_threads(1)  # one core a worker; also what makes torch safe in a forked child
    parent = os.getppid()
    vocab = Vocabulary(list(vocab_words))
    while True:
        try:
            if not connection.poll(1.0):
                if os.getppid() != parent:  # the trainer's process is gone
                    return
                continue
            task = connection.recv()
        except (EOFError, OSError):
            return
        if task is None:
            return
        kind, payload = task
        try:
            if kind == _TOKENISE:
                result = [piece for line in payload for piece in sentence_pieces(line, tokenize, max_sentence_tokens)]
            else:
                result = _to_wire(make_batch(payload, vocab))
            message = (True, result)
        except Exception as error:  # noqa: BLE001 (sent to the trainer, which raises it as one line)
            detail = str(error).splitlines()[0][:300] if str(error) else "no detail"
            message = (False, f"{type(error).__name__}: {detail}")
        try:
            connection.send(message)
        except (OSError, ValueError):  # the trainer's process closed the pipe
            return


# ---- the trainer's side -------------------------------------------------------------------------

class _Stopped(Exception):
    """The consumer left the block: the coordinating thread stops waiting."""


class _Workers:
    """The worker processes, each with its pipe and at most one task; results kept by key until asked for."""

    def __init__(self, recipe: StreamRecipe, count: int, start_method: str) -> None:
        if not tokenizer_pickles(recipe.tokenize):
            raise ValueError(f"batch workers need a tokenizer that pickles (a module-level function); "
                             f"{recipe.tokenize!r} does not: make batches with 0 workers")
        context = multiprocessing.get_context(start_method)
        self.processes: list = []
        self.connections: list[Connection] = []
        self.task_of: list[tuple | None] = []  # (key, what) of each worker's task, None when idle
        self.done: dict = {}
        self.stopping = threading.Event()
        try:
            for index in range(count):
                ours, theirs = context.Pipe(duplex=True)
                process = context.Process(target=_serve, name=f"batch-worker-{index}", daemon=True,
                                          args=(theirs, recipe.tokenize, recipe.max_sentence_tokens,
                                                recipe.vocab_words))
                process.start()
                theirs.close()  # ours alone: the pipe ends when the worker does
                self.processes.append(process)
                self.connections.append(ours)
                self.task_of.append(None)
        except BaseException:
            self.close()
            raise

    def submit(self, key: object, kind: str, payload: object, what: str) -> None:
        """Give a task to the first idle worker (waiting for one to finish when all are busy)."""
        while None not in self.task_of:
            self._receive()
        index = self.task_of.index(None)
        self.task_of[index] = (key, what)
        try:
            self.connections[index].send((kind, payload))
        except OSError:  # the worker died since its last answer
            raise self._died(index) from None

    def result(self, key: object) -> object:
        """The result of task ``key`` (waiting for it); ``BatchWorkerError`` if its worker failed or any died."""
        while key not in self.done:
            self._receive()
        return self.done.pop(key)

    def _receive(self) -> None:
        """Wait until some worker answers (or dies, or the consumer leaves); keep the answers."""
        if self.stopping.is_set():
            raise _Stopped
        busy = [self.connections[i] for i, task in enumerate(self.task_of) if task is not None]
        wait(busy + [p.sentinel for p in self.processes], timeout=_POLL_SECONDS)
        for index, (connection, task) in enumerate(zip(self.connections, self.task_of)):
            if task is None or not connection.poll():
                continue
            try:
                ok, value = connection.recv()
            except (EOFError, OSError):
                raise self._died(index) from None
            key, what = task
            self.task_of[index] = None
            if not ok:
                raise BatchWorkerError(f"batch worker {index} failed while {what}: {value}")
            self.done[key] = value
        for index, process in enumerate(self.processes):
            if process.exitcode is not None:
                raise self._died(index)

    def _died(self, index: int) -> BatchWorkerError:
        process = self.processes[index]
        process.join(timeout=1.0)
        code = process.exitcode
        how = (f"was killed by {signal.Signals(-code).name}" if code is not None and code < 0
               else f"exited with code {code}")
        task = self.task_of[index]
        during = f" while {task[1]}" if task else ""
        return BatchWorkerError(f"batch worker {index} (pid {process.pid}) {how}{during}; the batches stopped")

    def close(self) -> None:
        """Kill and reap every worker (a worker holds nothing that needs a clean exit)."""
        self.stopping.set()
        for process in self.processes:
            if process.exitcode is None:
                process.kill()
        for process in self.processes:
            process.join()
            process.close()
        for connection in self.connections:
            connection.close()
        self.processes, self.connections = [], []


def _line_chunks(lines: Iterable[str], chunk_chars: int) -> Iterator[tuple[int, list[str]]]:
    """(index of the chunk's first line, lines) with about ``chunk_chars`` characters each."""
    chunk: list[str] = []
    first = size = 0
    for number, line in enumerate(lines):
        if not chunk:
            first = number
        chunk.append(line)
        size += len(line)
        if size >= chunk_chars:
            yield first, chunk
            chunk, size = [], 0
    if chunk:
        yield first, chunk


def _sentences(workers: _Workers, recipe: StreamRecipe, ahead: int, chunk_chars: int) -> Iterator[list[str]]:
    """The recipe's sentences in order, tokenised by the workers, ``ahead`` chunks given out beyond this one."""
    pending: deque = deque()
    for first, lines in _line_chunks(interleaved_lines(list(recipe.files)), chunk_chars):
        key = (_TOKENISE, first)
        workers.submit(key, _TOKENISE, lines, f"tokenising lines {first + 1:,}-{first + len(lines):,} of the text")
        pending.append(key)
        if len(pending) > ahead:
            yield from workers.result(pending.popleft())
    while pending:
        yield from workers.result(pending.popleft())


def _batch_stream(workers: _Workers, recipe: StreamRecipe, skip: int, chunk_chars: int) -> Iterator[LmBatch | None]:
    """The recipe's batches in order (None for each of the first ``skip``, which are not made)."""
    ahead = len(workers.processes)
    groups = sentence_groups(_sentences(workers, recipe, ahead, chunk_chars), recipe.batch_tokens, recipe.seed,
                             recipe.buffer_sentences)
    pending: deque = deque()
    for number, group in enumerate(groups):
        if number < skip:
            yield None
            continue
        key = (_BATCH, number)
        workers.submit(key, _BATCH, group, f"making batch {number + 1:,} ({len(group)} sentences)")
        pending.append(key)
        while pending and (len(pending) > ahead or pending[0] in workers.done):
            yield _from_wire(workers.result(pending.popleft()))
    while pending:
        yield _from_wire(workers.result(pending.popleft()))


@contextlib.contextmanager
def made_in_workers(recipe: StreamRecipe, workers: int, depth: int = 4, skip: int = 0,
                    transform: Callable[[Iterator], Iterator] | None = None, start_method: str = START_METHOD,
                    chunk_chars: int = CHUNK_CHARS) -> Iterator[Iterator[LmBatch | None]]:
    """``with made_in_workers(recipe, 4) as stream: for batch in stream: ...``: the batches of
    ``recipe.batches_in_line()``, equal and in the same order, made by ``workers`` processes and
    gathered by a thread of this process up to ``depth`` ahead of the consumer (``transform``, e.g.
    pinning, applied in that thread). The first ``skip`` batches are not made: None stands in
    for each. Leaving the block in any way stops the thread and kills and reaps the workers."""
    if workers < 1:
        raise ValueError(f"made_in_workers needs at least one worker, got {workers}")
    pool = _Workers(recipe, workers, start_method)
    try:
        stream: Iterator = _batch_stream(pool, recipe, skip, chunk_chars)
        with prefetched(transform(stream) if transform else stream, max(1, depth), name="batch-workers") as ahead:
            try:
                yield ahead
            finally:
                pool.stopping.set()  # the gathering thread stops waiting on the workers, then is joined
    finally:
        pool.close()
