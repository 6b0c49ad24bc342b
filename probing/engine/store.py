"""The activation store: which complete cache already holds the vectors a request asks for.

Every science asks ``probing.engine.activations.extract_activations`` for the layers of some
sentences under a name of its own (the syntax page's ``train-first-500``, the scalar-mix
explorer's ``train``, the suite's ``dev``) and a storage dtype of its own. The vectors depend on
none of that: they are fixed by the model's identity (weights, options, precision), the mode
(stateless/stateful) and the sentences. So before a request computes anything, the store looks
among the model's complete caches of the same dataset for one that

- holds the requested sentences, or begins with them (a slice of a larger extraction): the
  request is served as a view of its first sentences, nothing computed;
- begins with a prefix of the requested sentences (a smaller earlier slice): its vectors are
  copied into the new file and only the rest are computed.

A cache stored as float32 serves a float16 request (rounded on read, as the float16 file would
have stored them: the writer rounds the same float32 output); a float16 cache never serves a
float32 request. Stateful caches are left out: there a sentence's vectors depend on every
sentence before it and on the batch size that carried the state, which no file records apart.

Stateless vectors of a sentence do not depend on the other sentences of its batch beyond the
last bits of float rounding (batches are length-sorted windows), so a view or a copy may differ
from a fresh extraction of exactly these sentences in those bits, as ``within`` views always did.

What is known about each file (attributes, sentence lengths, whether its checksums were read
once) is kept in memory per process, keyed by the file's inode, size and times, so a lookup
costs a directory listing and reading a file's token list once.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from elmo_model.plumbing.io_safety import ensure_room, flush_to_disk

log = logging.getLogger(__name__)

TOKENS = "tokens"  # the dataset of a cache file holding its sentences (one JSON list a sentence)


@dataclass(frozen=True)
class Found:
    """A complete cache that serves (``n == the request's sentence count``) or starts
    (``n`` < it) a request: its first ``n`` sentences are the request's first ``n``."""

    path: Path
    n: int
    dtype: str  # the file's storage dtype
    held: int  # the sentences the file holds


@dataclass
class _Summary:
    attrs: dict
    offsets: np.ndarray
    has_tokens: bool
    tokens: list[str] | None = None  # read on first need
    verified: bool = False


_lock = threading.Lock()
_known: dict[tuple, _Summary | None] = {}


def sentence_lines(sentences: Sequence[Sequence[str]]) -> list[str]:
    """How a cache file stores its sentences: one JSON list of tokens each (the lines
    ``tokens_digest`` hashes)."""
    return [json.dumps(list(s), ensure_ascii=False) for s in sentences]


def write_tokens(f: h5py.File, sentences: Sequence[Sequence[str]]) -> None:
    """Record the sentences in a cache file being written (if it does not hold them yet)."""
    if TOKENS not in f:
        f.create_dataset(TOKENS, data=sentence_lines(sentences), dtype=h5py.string_dtype("utf-8"))


def _stamp(path: Path) -> tuple | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (str(path), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _summary(path: Path) -> _Summary | None:
    stamp = _stamp(path)
    if stamp is None:
        return None
    with _lock:
        if stamp in _known:
            return _known[stamp]
    try:
        with h5py.File(path, "r") as f:
            attrs = {k: (v.item() if hasattr(v, "item") else v) for k, v in f.attrs.items()}
            offsets = f["offsets"][...].astype(np.int64)
            summary = _Summary({k: str(v) if isinstance(v, bytes) else v for k, v in attrs.items()},
                               offsets, TOKENS in f)
    except (OSError, KeyError, ValueError):  # not an activation cache (a SemCor index), or unreadable
        summary = None
    with _lock:
        _known[stamp] = summary
    return summary


def _tokens(path: Path, summary: _Summary) -> list[str] | None:
    if summary.tokens is None and summary.has_tokens:
        try:
            with h5py.File(path, "r") as f:
                summary.tokens = [x.decode("utf-8") if isinstance(x, bytes) else str(x) for x in f[TOKENS][...]]
        except (OSError, KeyError):
            return None
    return summary.tokens


def verify_data(path: Path) -> str | None:
    """Read every chunk (Fletcher-32 checks each); the problem, or None."""
    try:
        with h5py.File(path, "r") as f:
            ds = f["activations"]
            rows = max(1, (64 << 20) // max(1, ds.shape[2] * ds.dtype.itemsize))
            for j in range(ds.shape[0]):
                for start in range(0, ds.shape[1], rows):
                    ds[j, start:start + rows]
    except OSError as err:
        return f"unreadable data ({err})"
    return None


def _verified(path: Path, summary: _Summary) -> bool:
    """Every chunk's checksum read once per process (:func:`verify_data`)."""
    if not summary.verified:
        problem = verify_data(path)
        if problem:
            log.warning("not serving from %s: %s", path, problem)
            return False
        summary.verified = True
    return True


def find(folder: Path, key: dict, sentences: Sequence[Sequence[str]], digest: str,
         exclude: Path | None = None) -> tuple[Found | None, Found | None]:
    """Among the complete caches in ``folder`` (one model's): the one that holds every requested
    sentence (``serving``) and the largest one whose sentences are a prefix of the request
    (``start``); either is None when there is none. ``key``: the request's ``model_identity``,
    ``dataset``, ``mode``, ``precision``, ``dtype``, ``n_layers``, ``dim``."""
    if key["mode"] != "stateless" or not folder.is_dir():
        return None, None
    n = len(sentences)
    lengths = np.array([len(s) for s in sentences], dtype=np.int64)
    lines: list[str] | None = None
    serving = start = None
    for path in sorted(folder.glob("*.h5")):
        if exclude is not None and path == exclude:
            continue
        summary = _summary(path)
        if summary is None or not _matches(summary.attrs, key):
            continue
        m = int(summary.attrs["n_sentences"])
        k = min(m, n)
        if k == 0 or not np.array_equal(np.diff(summary.offsets[:k + 1]), lengths[:k]):
            continue
        if m < n and start is not None and start.n >= m:
            continue
        if m >= n and serving is not None and serving.held <= m:
            continue
        if not (m == n and summary.attrs.get("tokens_digest") == digest):
            tokens = _tokens(path, summary)
            if tokens is None:
                continue
            lines = lines if lines is not None else sentence_lines(sentences)
            if tokens[:k] != lines[:k]:
                continue
        if not _verified(path, summary):
            continue
        found = Found(path, k, str(summary.attrs["dtype"]), m)
        if m >= n:
            serving = found
        else:
            start = found
    return serving, start


def _matches(attrs: dict, key: dict) -> bool:
    if not attrs.get("complete") or attrs.get("format_version") != key["format_version"]:
        return False
    if attrs.get("dtype") != key["dtype"] and not (attrs.get("dtype") == "float32" and key["dtype"] == "float16"):
        return False
    return all(attrs.get(name) == key[name] for name in ("model_identity", "dataset", "mode", "precision")) \
        and int(attrs.get("n_layers", -1)) == key["n_layers"] and int(attrs.get("dim", -1)) == key["dim"]


def copy_prefix(f: h5py.File, found: Found, offsets: np.ndarray) -> int:
    """Copy the first ``found.n`` sentences' vectors of ``found`` into the unfinished file ``f``
    (which has none done yet); returns how many. The caller marks them done."""
    n_tokens = int(offsets[found.n])
    ds = f["activations"]
    ensure_room(f.filename, ds.shape[0] * n_tokens * ds.shape[2] * ds.dtype.itemsize,
                "nothing copied yet")
    with h5py.File(found.path, "r") as source:
        src = source["activations"]
        step = max(1, (64 << 20) // max(1, src.shape[2] * 4))
        for j in range(src.shape[0]):
            for lo in range(0, n_tokens, step):
                hi = min(n_tokens, lo + step)
                ds[j, lo:hi] = src[j, lo:hi].astype(ds.dtype)
    return found.n


def start_from(f: h5py.File, key: dict, sentences: list[list[str]], digest: str, offsets: np.ndarray) -> None:
    """A fresh unfinished file whose first sentences a complete cache of the store holds: their
    vectors copied in and marked done, so only the rest is computed."""
    done = f["done"][...]
    if done.any():
        return
    _found, start = find(Path(f.filename).parent, key, sentences, digest)
    if start is None:
        return
    try:
        n = copy_prefix(f, start, offsets)
    except OSError as err:  # a chunk that fails its checksum: computed instead (nothing is marked done)
        log.warning("not copying from %s (%s); computing every sentence", start.path, err)
        return
    flush_to_disk(f)  # the data on disk before the flags that vouch for it
    done[:n] = True
    f["done"][...] = done
    flush_to_disk(f)
    log.info("%s: the first %d sentences copied from %s", f.filename, n, start.path)
