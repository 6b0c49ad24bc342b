"""Batches made in worker processes: the trainer's process only receives them, finished.

The thread of ``lm_data.prefetched`` shares the Python interpreter (the GIL) with the training
step. On a CPU that costs little, since torch's kernels release it; on a GPU the step is itself
Python launching thousands of small kernels, and any Python work beside it in the trainer's
process slows both (``bench/gpu_check.py``, section 5). ``made_in_workers`` therefore starts one
coordinator process, which owns N worker processes and does everything that decides the order:

- the coordinator reads the lines (``lm_data.interleaved_lines``) and cuts them into chunks;
- a worker tokenises a chunk (``lm_data.sentence_pieces``, line by line) and sends the sentences back;
- the coordinator puts the sentences back in order and groups them (``lm_data.sentence_groups``:
  the seeded shuffle and the length buckets);
- a worker makes a group into a batch (``lm_data.make_batch``) and sends its arrays back;
- the coordinator sends the batches, in order, to the trainer's process over one socket.

The trainer's process does almost nothing per token: a thread of it (``prefetched``) receives
each batch's arrays straight into numpy arrays (one ``recv`` an array, ``MSG_WAITALL``: the
interpreter is taken a few times a batch, not once every 64 KiB of a pipe), widens them to the
batch's dtypes and hands them on. Character ids travel as int16 (they go up to 261), word ids as
int32, the mask as bytes.

Every result comes back to its place in the order, so the batches are exactly those of the
single-thread stream (``StreamRecipe.batches_in_line``), in the same order: a resumed run skips to
its position as before. The batches a resume skips are not made at all (``skip``: only their
sentences are tokenised and grouped, so the order after them is right; a small message stands in
for each).

Each worker has one pipe to the coordinator and at most one task at a time: a worker waiting for
its next task always reads it, so neither side can block the other, and there are no locks shared
between processes. The coordinator and the workers ignore Ctrl-C and SIGTERM (the trainer decides
when to stop, after its step). Leaving the ``with`` block in any way (the end, ``break``, an
exception, Ctrl-C) closes the trainer's end of the socket: the coordinator then kills and reaps
its workers and exits, and is reaped (killed if it has not left within ``_CLOSE_SECONDS``). A
trainer's process that dies (even by SIGKILL) closes the socket too, and the coordinator also
watches its parent's pid; the workers watch the coordinator's pid and their pipe, so no process is
left behind. A worker's exception, a worker or the coordinator that dies, reaches the consumer as
one ``BatchWorkerError`` line where it reads the next batch; an error reading the text (a line that
is not UTF-8, a missing file) reaches it as the thread would raise it.

The coordinator and the workers start with ``spawn`` by default (``START_METHOD``): a fresh
interpreter, safe beside the trainer's threads (torch's thread pools, CUDA's, the fused step's
compiling thread), where ``fork`` would copy a process whose other threads may hold locks.
``fork`` works too (the tests use both). The coordinator is not a daemon process (those may not
have children); it is reaped by the block's end instead. Starting the processes costs their
imports (torch, nltk: about 2-3 s of CPU each), once an epoch.
"""

from __future__ import annotations

import contextlib
import logging
import multiprocessing
import os
import pickle
import signal
import socket
import struct
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait

import numpy as np
import torch

from ..text.reader import TextFileError
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

#: How the coordinator and worker processes start (see the module docstring for why not ``fork``).
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
    than a GPU step consumes them, ``docs/performance-log.md``)."""
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


_STARTED, _SKIPPED, _ERROR, _END = "started", "skipped", "error", "end"  # what the coordinator sends
_CLOSE_SECONDS = 10.0  # how long the block's end waits for the coordinator to reap its workers and leave
_HEADER = struct.Struct("!I")


class _Stopped(Exception):
    """The consumer left the block, or the trainer's process is gone: the waiting side stops."""


# ---- a worker process ---------------------------------------------------------------------------

def _to_wire(batch: LmBatch) -> tuple:
    """A batch as narrow numpy arrays (character ids up to 261 fit int16, word ids int32, the mask
    bool): about a quarter of the bytes of its int64 tensors."""
    return (batch.char_ids.numpy().astype(np.int16), batch.mask.numpy(), batch.word_ids.numpy().astype(np.int32),
            batch.n_tokens)


def _from_wire(message: tuple) -> LmBatch:
    """The batch ``make_batch`` made, with its own dtypes (int64 ids, bool mask)."""
    char_ids, mask, word_ids, n_tokens = message
    return LmBatch(torch.from_numpy(char_ids).long(), torch.from_numpy(mask), torch.from_numpy(word_ids).long(),
                   n_tokens)


def _serve(connection: Connection, tokenize: Tokenize, max_sentence_tokens: int, vocab_words: tuple[str, ...]) -> None:
    """A worker's loop: one task at a time from ``connection``, its result (or its error) sent back.
    It leaves when the coordinator closes the pipe or is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the trainer stops the run; the coordinator kills the workers
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    torch.set_num_threads(1)  # one core a worker; also what makes torch safe in a forked child
    parent = os.getppid()
    vocab = Vocabulary(list(vocab_words))
    while True:
        try:
            if not connection.poll(1.0):
                if os.getppid() != parent:  # the coordinator is gone
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
        except Exception as error:  # noqa: BLE001 (sent on, and raised in the trainer as one line)
            message = (False, _one_line(error))
        try:
            connection.send(message)
        except (OSError, ValueError):  # the coordinator closed the pipe
            return


def _one_line(error: BaseException) -> str:
    detail = str(error).splitlines()[0][:300] if str(error) else "no detail"
    return f"{type(error).__name__}: {detail}"


# ---- the coordinator's workers ------------------------------------------------------------------

class _Workers:
    """The worker processes, each with its pipe and at most one task; results kept by key until
    asked for. ``stop_asked`` is looked at while waiting (the trainer gone, or done with the batches)."""

    def __init__(self, recipe: StreamRecipe, count: int, start_method: str,
                 stop_asked: Callable[[], bool] = lambda: False) -> None:
        context = multiprocessing.get_context(start_method)
        self.stop_asked = stop_asked
        self.processes: list = []
        self.connections: list[Connection] = []
        self.task_of: list[tuple | None] = []  # (key, what) of each worker's task, None when idle
        self.done: dict = {}
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
        """Wait until some worker answers (or dies, or a stop is asked); keep the answers."""
        busy = [self.connections[i] for i, task in enumerate(self.task_of) if task is not None]
        wait(busy + [p.sentinel for p in self.processes], timeout=_POLL_SECONDS)
        if self.stop_asked():
            raise _Stopped
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
        task = self.task_of[index]
        during = f" while {task[1]}" if task else ""
        return BatchWorkerError(f"batch worker {index} (pid {process.pid}) {_how(process.exitcode)}{during}; "
                                "the batches stopped")

    def close(self) -> None:
        """Kill and reap every worker (a worker holds nothing that needs a clean exit)."""
        for process in self.processes:
            if process.exitcode is None:
                process.kill()
        for process in self.processes:
            process.join()
            process.close()
        for connection in self.connections:
            connection.close()
        self.processes, self.connections = [], []


def _how(code: int | None) -> str:
    """How a process ended, from its exit code, in words."""
    return f"was killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exited with code {code}"


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


def _batch_stream(workers: _Workers, recipe: StreamRecipe, skip: int, chunk_chars: int) -> Iterator[tuple | None]:
    """The recipe's batches in order, as ``_to_wire`` makes them (None for each of the first
    ``skip``, which are not made)."""
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
            yield workers.result(pending.popleft())
    while pending:
        yield workers.result(pending.popleft())


# ---- the socket between the coordinator and the trainer's process -------------------------------

def _send(sock: socket.socket, kind: str, value: object = None, arrays: tuple = ()) -> None:
    """One message: a pickled header (kind, value, each array's dtype and shape), then the arrays' bytes.
    ``_Stopped`` when the trainer's end is closed."""
    header = pickle.dumps((kind, value, [(a.dtype.str, a.shape) for a in arrays]))
    try:
        sock.sendall(_HEADER.pack(len(header)) + header)
        for array in arrays:
            sock.sendall(memoryview(np.ascontiguousarray(array).reshape(-1).view(np.uint8)))
    except (BrokenPipeError, ConnectionResetError):
        raise _Stopped from None


def _receive_into(sock: socket.socket, view: memoryview) -> None:
    """Fill ``view`` from ``sock``: one ``recv`` unless a signal cuts it short (``EOFError`` at the end)."""
    while view.nbytes:
        got = sock.recv_into(view, view.nbytes, socket.MSG_WAITALL)
        if not got:
            raise EOFError
        view = view[got:]


def _receive(sock: socket.socket) -> tuple[str, object, list[np.ndarray]]:
    """One message of ``_send``: (kind, value, arrays), the arrays received in place."""
    size = bytearray(_HEADER.size)
    _receive_into(sock, memoryview(size))
    header = bytearray(_HEADER.unpack(size)[0])
    _receive_into(sock, memoryview(header))
    kind, value, layout = pickle.loads(header)
    arrays = [np.empty(shape, dtype) for dtype, shape in layout]
    for array in arrays:
        _receive_into(sock, memoryview(array.reshape(-1).view(np.uint8)))
    return kind, value, arrays


# ---- the coordinator process --------------------------------------------------------------------

def _carried(error: Exception) -> Exception:
    """What reaches the trainer for an error in the coordinator: a reading error as the thread
    raises it (a line that is not UTF-8, a missing file), a worker's as it is, anything else one line."""
    if isinstance(error, (BatchWorkerError, TextFileError, OSError)):
        with contextlib.suppress(Exception):
            pickle.loads(pickle.dumps(error))
            return error
    return BatchWorkerError(f"the batch coordinator failed: {_one_line(error)}")


def _coordinate(sock: socket.socket, recipe: StreamRecipe, count: int, start_method: str, skip: int,
                chunk_chars: int, inherited: socket.socket | None) -> None:
    """The coordinator's life: start the workers, send the batches in order, kill and reap the
    workers however it ends. ``inherited``: the trainer's end, copied by ``fork``, closed here so
    that the trainer's death closes the socket."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the trainer stops the run; it closes the socket
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    torch.set_num_threads(1)
    if inherited is not None:
        inherited.close()
    parent = os.getppid()

    def stop_asked() -> bool:  # the trainer never writes: its end readable means closed
        return os.getppid() != parent or bool(wait([sock], timeout=0))

    pool = None
    try:
        pool = _Workers(recipe, count, start_method, stop_asked)
        _send(sock, _STARTED, [p.pid for p in pool.processes])
        for wire in _batch_stream(pool, recipe, skip, chunk_chars):
            if wire is None:
                _send(sock, _SKIPPED)
            else:
                _send(sock, _BATCH, wire[-1], wire[:-1])
        _send(sock, _END)
    except _Stopped:
        pass
    except Exception as error:  # noqa: BLE001 (sent to the trainer, which raises it)
        with contextlib.suppress(_Stopped, OSError):
            _send(sock, _ERROR, _carried(error))
    finally:
        if pool is not None:
            pool.close()
        sock.close()


# ---- the trainer's side -------------------------------------------------------------------------

class _Coordinator:
    """The coordinator process and the trainer's end of its socket."""

    def __init__(self, recipe: StreamRecipe, count: int, skip: int, start_method: str, chunk_chars: int) -> None:
        if not tokenizer_pickles(recipe.tokenize):
            raise ValueError(f"batch workers need a tokenizer that pickles (a module-level function); "
                             f"{recipe.tokenize!r} does not: make batches with 0 workers")
        context = multiprocessing.get_context(start_method)
        self.socket, theirs = socket.socketpair()
        self.stopping = threading.Event()
        self.worker_pids: list[int] = []
        self.process = context.Process(target=_coordinate, name="batch-coordinator", daemon=False,
                                       args=(theirs, recipe, count, start_method, skip, chunk_chars,
                                             self.socket if start_method == "fork" else None))
        try:
            self.process.start()
        except BaseException:
            self.socket.close()
            raise
        finally:
            theirs.close()  # ours alone: the socket ends when the coordinator does

    def batches(self) -> Iterator[LmBatch | None]:
        """The batches as the coordinator sends them (None for a skipped one), until its end."""
        while True:
            kind, value, arrays = self._next()
            if kind == _STARTED:
                self.worker_pids = value
            elif kind == _SKIPPED:
                yield None
            elif kind == _BATCH:
                yield _from_wire((*arrays, value))
            elif kind == _ERROR:
                raise value
            else:
                return

    def _next(self) -> tuple[str, object, list[np.ndarray]]:
        """The next message, waiting for it while looking at a stop request and the coordinator's health."""
        while not wait([self.socket, self.process.sentinel], timeout=_POLL_SECONDS) or not self._readable():
            if self.stopping.is_set():
                raise _Stopped
            if self.process.exitcode is not None and not self._readable():
                raise self._died()
        try:
            return _receive(self.socket)
        except (EOFError, ConnectionResetError):
            raise self._died() from None

    def _readable(self) -> bool:
        return bool(wait([self.socket], timeout=0))

    def _died(self) -> BatchWorkerError:
        self.process.join(timeout=1.0)
        return BatchWorkerError(f"the batch coordinator (pid {self.process.pid}) {_how(self.process.exitcode)}; "
                                "the batches stopped")

    def close(self) -> None:
        """Close our end (the coordinator then kills and reaps its workers and leaves) and reap it;
        kill it if it has not left within ``_CLOSE_SECONDS``."""
        self.stopping.set()
        with contextlib.suppress(OSError):
            self.socket.shutdown(socket.SHUT_RDWR)
        self.socket.close()
        self.process.join(timeout=_CLOSE_SECONDS)
        if self.process.exitcode is None:
            log.warning("the batch coordinator (pid %d) did not leave within %g s: killed", self.process.pid,
                        _CLOSE_SECONDS)
            self.process.kill()
            self.process.join()
        self.process.close()


@contextlib.contextmanager
def made_in_workers(recipe: StreamRecipe, workers: int, depth: int = 4, skip: int = 0,
                    transform: Callable[[Iterator], Iterator] | None = None, start_method: str = START_METHOD,
                    chunk_chars: int = CHUNK_CHARS) -> Iterator[Iterator[LmBatch | None]]:
    """``with made_in_workers(recipe, 4) as stream: for batch in stream: ...``: the batches of
    ``recipe.batches_in_line()``, equal and in the same order, made by a coordinator process and
    its ``workers`` worker processes and received by a thread of this process up to ``depth`` ahead
    of the consumer (``transform``, e.g. pinning, applied in that thread). The first ``skip``
    batches are not made: None stands in for each. Leaving the block in any way stops the thread,
    and the coordinator and its workers are killed and reaped."""
    if workers < 1:
        raise ValueError(f"made_in_workers needs at least one worker, got {workers}")
    coordinator = _Coordinator(recipe, workers, skip, start_method, chunk_chars)
    try:
        stream: Iterator = coordinator.batches()
        with prefetched(transform(stream) if transform else stream, max(1, depth), name="batch-workers") as ahead:
            try:
                yield ahead
            finally:
                coordinator.stopping.set()  # the receiving thread stops waiting, then is joined
    finally:
        coordinator.close()
