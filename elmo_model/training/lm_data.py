"""Training text for the biLM: files -> paragraphs -> sentences of tokens -> padded batches.

The stream is deterministic for a given seed, so a resumed run replays it and skips the batches
it already trained on: resuming is exact. Every training example is one sentence (long ones cut
into pieces of ``max_sentence_tokens``), with ``<S>`` and ``</S>`` around it and a zero LSTM state
at its start: the way the workbench embeds text afterwards. ``prefetched`` makes the batches
ahead in a background thread while the trainer's step runs; ``batch_workers.made_in_workers``
makes the same batches in worker processes.
"""

from __future__ import annotations

import contextlib
import glob
import os
import random
import stat
import threading
from dataclasses import dataclass
from pathlib import Path
from queue import Empty, Full, Queue
from typing import Callable, Iterable, Iterator, Sequence, TypeVar

import torch

from ..bilm.char_ids import batch_to_char_ids
from ..text.reader import read_text_lines
from .vocab import Vocabulary

Tokenize = Callable[[str], list[list[str]]]
T = TypeVar("T")


def expand_inputs(inputs: Sequence[str | Path]) -> list[Path]:
    """Files, directories (their *.txt and *.txt.gz) and globs -> a sorted list of files.
    Raises ``FileNotFoundError`` naming any input that matches nothing, and ``ValueError`` naming
    one that is not a regular file (a pipe such as /dev/stdin, a device): the trainer reads its
    text more than once (the vocabulary, each epoch, a resume), and a pipe gives it only once."""
    files: list[Path] = []
    for item in inputs:
        p = Path(item).expanduser()
        if p.is_dir():
            found = sorted(list(p.glob("*.txt")) + list(p.glob("*.txt.gz")))
        elif p.is_file():
            found = [p]
        else:
            found = sorted(Path(x) for x in glob.glob(str(p)))
        if not found:
            raise FileNotFoundError(f"no text files found for {item!r} (expected .txt / .txt.gz files, a directory or a glob)")
        for path in found:
            if (kind := _not_regular(path)) is not None:
                raise ValueError(f"{path}: {kind}, not a regular file; the trainer reads its text more than once "
                                 "(the vocabulary, each epoch, a resume), which only a regular file allows: save "
                                 "the text to a file and give that file")
        files.extend(found)
    return files


def _not_regular(path: Path) -> str | None:
    """What ``path`` is when it is a stream or device (links followed), else None (a regular file;
    a folder, a missing or unreadable file: the text reader names those)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    return ("a pipe" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "a special file")


def interleaved_lines(files: Sequence[Path]) -> Iterator[str]:
    """Non-empty lines of several files, round-robin (one line from each in turn), so that a
    short run sees every source. Deterministic. Read strictly (``elmo_model.text.reader``): bytes
    that are not UTF-8 stop the run with a ``ValueError`` naming the file and line, rather than
    training on replacement characters."""
    readers = [read_text_lines(f) for f in files]
    try:
        live = list(readers)
        while live:
            still = []
            for reader in live:
                line = next(reader, None)
                if line is not None:
                    still.append(reader)
                    if line.strip():
                        yield line.strip()
            live = still
    finally:
        for reader in readers:
            reader.close()


def sentence_pieces(line: str, tokenize: Tokenize, max_sentence_tokens: int) -> Iterator[list[str]]:
    """The tokenised sentences of one line, long ones cut into pieces of ``max_sentence_tokens``."""
    for sentence in tokenize(line):
        for start in range(0, len(sentence), max_sentence_tokens):
            piece = sentence[start : start + max_sentence_tokens]
            if piece:
                yield piece


def sentences_from_files(files: Sequence[Path], tokenize: Tokenize, max_sentence_tokens: int) -> Iterator[list[str]]:
    """Tokenised sentences of the files (interleaved), long ones cut into pieces."""
    for line in interleaved_lines(files):
        yield from sentence_pieces(line, tokenize, max_sentence_tokens)


def read_sentences(files: Sequence[str | Path], tokenize: Callable, max_sentence_tokens: int,
                   max_sentences: int | None = None) -> list[list[str]]:
    """Held-out sentences exactly as training cuts them."""
    out = []
    for s in sentences_from_files(expand_inputs(files), tokenize, max_sentence_tokens):
        out.append(s)
        if max_sentences is not None and len(out) >= max_sentences:
            break
    return out


@dataclass
class LmBatch:
    """A batch for both language models. ``char_ids`` (B, T+2, C) with ``<S>``/``</S>``; ``mask``
    (B, T+2); ``word_ids`` (B, T+2) softmax ids of the same positions (``<S>`` ... ``</S>``);
    ``n_tokens``: sentence tokens (without boundaries)."""

    char_ids: torch.Tensor
    mask: torch.Tensor
    word_ids: torch.Tensor
    n_tokens: int

    def to(self, device: str | torch.device) -> "LmBatch":
        """The same batch on ``device`` (a GPU run moves each batch just before its step)."""
        return LmBatch(self.char_ids.to(device, non_blocking=True), self.mask.to(device, non_blocking=True),
                       self.word_ids.to(device, non_blocking=True), self.n_tokens)

    def pin_memory(self) -> "LmBatch":
        """The same batch in page-locked memory (needs a GPU): its copy to the GPU is then asynchronous."""
        return LmBatch(self.char_ids.pin_memory(), self.mask.pin_memory(), self.word_ids.pin_memory(), self.n_tokens)


def make_batch(sentences: Sequence[Sequence[str]], vocab: Vocabulary, max_chars: int = 50) -> LmBatch:
    """Sentences -> an ``LmBatch`` (boundaries added explicitly here)."""
    with_boundaries = [["<S>", *s, "</S>"] for s in sentences]
    char_ids = batch_to_char_ids(with_boundaries, max_chars)
    steps = char_ids.shape[1]
    word_ids = torch.zeros(len(sentences), steps, dtype=torch.long)
    mask = torch.zeros(len(sentences), steps, dtype=torch.bool)
    for i, s in enumerate(with_boundaries):
        word_ids[i, : len(s)] = torch.tensor(vocab.ids(s))
        mask[i, : len(s)] = True
    return LmBatch(char_ids, mask, word_ids, sum(len(s) for s in sentences))


def sentence_groups(sentences: Iterable[list[str]], batch_tokens: int, seed: int,
                    buffer_sentences: int = 4096) -> Iterator[list[list[str]]]:
    """Bucketed batches as lists of sentences: fill a buffer, shuffle it (seeded), sort by length,
    cut into groups of about ``batch_tokens`` padded tokens, and yield them in a shuffled order.
    Each group is sorted by length (shortest first), which is what lets the distributed trainer
    deal it out to ranks round-robin with balanced shares."""
    rng = random.Random(seed)
    buffer: list[list[str]] = []

    def flush() -> Iterator[list[list[str]]]:
        rng.shuffle(buffer)
        buffer.sort(key=len)
        groups, group, longest = [], [], 0
        for s in buffer:
            longest_if = max(longest, len(s) + 2)
            if group and longest_if * (len(group) + 1) > batch_tokens:
                groups.append(group)
                group, longest_if = [], len(s) + 2
            group.append(s)
            longest = longest_if
        if group:
            groups.append(group)
        rng.shuffle(groups)
        yield from groups

    for sentence in sentences:
        buffer.append(sentence)
        if len(buffer) >= buffer_sentences:
            yield from flush()
            buffer = []
    if buffer:
        yield from flush()


def batches(sentences: Iterable[list[str]], vocab: Vocabulary, batch_tokens: int, seed: int,
            buffer_sentences: int = 4096) -> Iterator[LmBatch]:
    """``sentence_groups`` made into ``LmBatch``es (the single-process trainer's stream)."""
    for group in sentence_groups(sentences, batch_tokens, seed, buffer_sentences):
        yield make_batch(group, vocab)


_DONE = object()  # the end of a prefetched stream


class _Failure:
    """An exception raised by the source of a prefetched stream, carried over to the consumer."""

    def __init__(self, error: BaseException) -> None:
        self.error = error


@contextlib.contextmanager
def prefetched(items: Iterable[T], depth: int, name: str = "batches") -> Iterator[Iterator[T]]:
    """``with prefetched(stream, depth) as ahead: for item in ahead: ...``: the same items in the
    same order, made up to ``depth`` ahead by a background thread while the consumer works on
    the current one (``depth`` 0: no thread, the stream itself).

    The thread takes the Python interpreter only while it tokenises and builds tensors; the
    consumer's torch work (a training step) releases it, so the two overlap. Leaving the block in
    any way (the end, ``break``, an exception, Ctrl-C) stops and joins the thread; an exception in
    the stream reaches the consumer where it reads the next item."""
    if depth <= 0:
        yield iter(items)
        return
    queue: Queue = Queue(maxsize=depth)
    stop = threading.Event()

    def put(item: object) -> bool:
        while not stop.is_set():
            try:
                queue.put(item, timeout=0.1)
                return True
            except Full:
                continue
        return False

    def produce() -> None:
        source = iter(items)
        try:
            for item in source:
                if not put(item):
                    break
            else:
                put(_DONE)
        except BaseException as error:  # noqa: BLE001 (handed to the consumer, which raises it)
            put(_Failure(error))
        finally:
            close = getattr(source, "close", None)
            if close is not None:
                close()  # the stream's open files, in the thread that ran it

    def consume() -> Iterator[T]:
        while True:
            item = queue.get()
            if item is _DONE:
                return
            if isinstance(item, _Failure):
                raise item.error
            yield item

    worker = threading.Thread(target=produce, name=f"prefetch-{name}", daemon=True)
    worker.start()
    try:
        yield consume()
    finally:
        stop.set()
        while worker.is_alive():  # unblock a producer waiting on a full queue, then wait for it
            with contextlib.suppress(Empty):
                queue.get(timeout=0.1)
        worker.join()
