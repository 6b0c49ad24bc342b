"""The activation cache: every biLM layer of every token of a dataset split, computed once.

    >>> from elmo_model import load_bilm
    >>> from probing.engine.activations import extract_activations
    >>> cache = extract_activations(load_bilm("elmo-mini"), sentences, "ud_english_ewt", "train")
    >>> cache.layer(1).shape            # (n_tokens, dim) float32: biLM layer 1, every token
    >>> cache.sentence(0).shape         # (n_layers, T_0, dim)

One cache is one hdf5 file, keyed by the model's identity (``elmo_model.bilm.identity``: its
weights, the options that shape its computation, its precision and, outside fp32, its device
type) + dataset + split + mode (stateless/stateful) + the biLM's compute precision (fp32/bf16: a
bf16 cache never serves an fp32 request) + storage dtype + a digest of the sentences' tokens (so
a slice of a split gets a file of its own)::

    <cache_dir>/<model identity[:16]>/<dataset>-<split>-<mode>-<precision>-<dtype>-<key[:16]>.h5

File format (``FORMAT_VERSION`` 1)::

    activations  (n_layers, n_tokens, dim)  float32 | float16. Layer-major: chunks of
                 (1, rows, dim) with rows * dim * itemsize ~ 1 MiB, so reading one layer reads
                 one contiguous run of chunks. Fletcher-32 checksum per chunk (a flipped byte
                 fails the read instead of returning wrong numbers). Tokens of all sentences
                 concatenated in input order; layer 0 is the token layer [x; x], layer k >= 1
                 is [forward_k; backward_k] (see ``elmo_model.bilm.modules.BiLMOutput``).
    offsets      (n_sentences + 1,) int64: sentence i is tokens offsets[i]:offsets[i+1].
    done         (n_sentences,) bool: which sentences have been written (resume).
    state/...    stateful mode, unfinished files only: the LSTM state carried to the next batch.
    attrs        format_version, complete, model_identity, dataset, split, mode, precision,
                 dtype, tokens_digest, n_layers, dim, n_sentences, n_tokens, batch_size, versions.

Writing is atomic: work goes to ``<file>.partial``; after every window of ``32 * batch_size``
sentences the data is flushed and fsynced first, then the window's ``done`` flags, so a crash
never leaves a flag that vouches for data not on disk; only when every sentence is written is ``complete``
set and the file renamed into place. A rerun after an interruption reopens the ``.partial``
file and computes only the sentences not yet done. A complete file is checked when opened
(structure, attributes, every chunk's checksum); a damaged one is logged and rebuilt.

Before computing, a request asks the activation store (``probing.engine.store``): a complete
cache of the same model identity, precision and dataset that holds these sentences or begins
with them serves the request as a view, whatever split name or storage dtype it was made under
(float32 serves float16, rounded on read); one that holds the first of them is copied in, and
only the rest is computed. New files keep their sentences (``tokens``) for that check.

Stateless mode (each sentence from a zero LSTM state) sorts each window by length so batches
carry little padding; the batches are exactly those of ``ElmoEmbedder.embed_sentences`` with
the same ``batch_size``, so the cached vectors equal its output bit for bit. Stateful mode keeps
the input order and carries the LSTM state from batch to batch, as AllenNLP does; on resume it
restores the state saved with the last finished window, so the result is identical too.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
from pathlib import Path
from typing import Iterator, Sequence

import h5py
import numpy as np
import torch

from elmo_model.bilm.char_ids import batch_to_char_ids
from elmo_model.bilm.devices import model_device
from elmo_model.bilm.identity import legacy_checksum, model_identity, note_legacy_entry
from elmo_model.plumbing.io_safety import digest_tokens, ensure_room, flush_to_disk, fsync_path, output_lock
from elmo_model.plumbing.progress import CountCallback
from probing.engine import store
from elmo_model.plumbing.settings import folder_setting

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
ENV_VAR = "ELMO_WORKBENCH_CACHE"
MODES = ("stateless", "stateful")
DTYPES = ("float32", "float16")
DIRECTIONS = ("forward", "backward")
_TORCH_DTYPES = {"float16": torch.float16, "float32": torch.float32}  # the cache dtypes as torch names them
WINDOW_BATCHES = 32  # a window (the unit of sorting and of resume) is this many batches
_CHUNK_BYTES = 1 << 20



class ActivationCacheError(RuntimeError):
    """A cache file is damaged or does not match what was asked for."""


def default_cache_dir() -> Path:
    """Where activation caches live: ``$ELMO_WORKBENCH_CACHE`` if set, else
    ``${XDG_CACHE_HOME:-~/.cache}/elmo-workbench/activations``."""
    return folder_setting(ENV_VAR, "activations")


# --------------------------------------------------------------------------------------------
# Keys
# --------------------------------------------------------------------------------------------


def tokens_digest(sentences: Sequence[Sequence[str]]) -> str:
    """sha256 of the sentences' tokens (order, boundaries and every character count): the same
    digest the embedder's job manifests record (``elmo_model.plumbing.io_safety.digest_tokens``)."""
    return digest_tokens(sentences)


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.]+", "_", name).strip("_") or "x"


def cache_path(model_sha: str, dataset: str, split: str, mode: str, dtype: str, digest: str,
               cache_dir: str | os.PathLike | None = None, precision: str = "fp32") -> Path:
    """The file a cache with this key lives in (it need not exist). ``precision``: the biLM's
    compute precision (``model.precision``)."""
    key = hashlib.sha256(json.dumps(
        [FORMAT_VERSION, model_sha, dataset, split, mode, precision, dtype, digest]).encode()).hexdigest()
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    name = f"{_safe(dataset)}-{_safe(split)}-{mode}-{_safe(precision)}-{dtype}-{key[:16]}.h5"
    return root / model_sha[:16] / name


def _versions() -> str:
    return json.dumps({"torch": torch.__version__, "numpy": np.__version__, "h5py": h5py.__version__})


# --------------------------------------------------------------------------------------------
# Reading
# --------------------------------------------------------------------------------------------


class ActivationCache:
    """Read-only view of one complete cache file (see the module docstring for the format).

    ``first``: only the file's first N sentences (a view: ``extract_activations(within=...)``);
    ``name``: what keys built from this cache call it (default: the file's name).

    Attributes: ``path``, ``name``, ``n_layers``, ``dim`` (2P), ``n_sentences``, ``n_tokens``,
    ``offsets`` ((n_sentences + 1,) int64), ``dtype`` (storage), ``mode``, ``precision``
    (the biLM's compute precision), ``dataset``,
    ``split``, ``model_identity``, ``tokens_digest``. Every accessor returns float32.
    The file is opened on first access and kept open; ``close()`` or ``with`` releases it.
    """

    def __init__(self, path: str | os.PathLike, first: int | None = None, name: str | None = None) -> None:
        self.path = Path(path)
        self.name = name or self.path.name
        self._file: h5py.File | None = None
        self._round: str | None = None  # a float32 file serving float16: rounded on read (``serve``)
        with h5py.File(self.path, "r") as f:
            problem = _structure_problem(f)
            if problem:
                raise ActivationCacheError(f"{self.path}: {problem}")
            attrs = f.attrs
            self.n_layers = int(attrs["n_layers"])
            self.dim = int(attrs["dim"])
            self.n_sentences = int(attrs["n_sentences"])
            self.n_tokens = int(attrs["n_tokens"])
            self.dtype = str(attrs["dtype"])
            self.mode = str(attrs["mode"])
            self.precision = str(attrs.get("precision", "fp32"))
            self.dataset = str(attrs["dataset"])
            self.split = str(attrs["split"])
            self.model_identity = str(attrs.get("model_identity", attrs.get("model_identity")))  # the earlier key
            self.tokens_digest = str(attrs["tokens_digest"])
            self.offsets = f["offsets"][...].astype(np.int64)
        if first is not None:
            if not 0 < first <= self.n_sentences:
                raise ValueError(f"{self.path}: cannot view its first {first} sentences: it holds {self.n_sentences}")
            self.offsets = self.offsets[:first + 1].copy()
            self.n_sentences, self.n_tokens = int(first), int(self.offsets[-1])
        self.offsets.setflags(write=False)

    # -- file handle --------------------------------------------------------------------------
    def _ds(self) -> h5py.Dataset:
        if self._file is None:
            self._file = h5py.File(self.path, "r")
        return self._file["activations"]

    def close(self) -> None:
        """Close the file handle (reopened on the next access)."""
        if self._file is not None:
            self._file.close()
            self._file = None

    def __enter__(self) -> "ActivationCache":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    def __repr__(self) -> str:
        return (f"ActivationCache({str(self.path)!r}, n_layers={self.n_layers}, dim={self.dim}, "
                f"n_sentences={self.n_sentences}, n_tokens={self.n_tokens}, dtype={self.dtype!r})")

    def _read(self, selection: tuple) -> np.ndarray:
        try:
            array = self._ds()[selection]
        except OSError as err:  # a chunk whose Fletcher-32 checksum fails
            raise ActivationCacheError(
                f"{self.path}: cannot read activations ({err}); the file is damaged: delete it "
                f"and extract again") from err
        if self._round is not None:
            array = array.astype(self._round)
        return array.astype(np.float32, copy=False)

    def _check_layer(self, j: int) -> int:
        if not -self.n_layers <= j < self.n_layers:
            raise IndexError(f"layer {j} out of range: this cache has layers 0..{self.n_layers - 1}")
        return j % self.n_layers

    # -- accessors ----------------------------------------------------------------------------
    @property
    def lengths(self) -> np.ndarray:
        """Tokens per sentence, (n_sentences,) int64."""
        return np.diff(self.offsets)

    def layer(self, j: int) -> np.ndarray:
        """Layer ``j`` of every token, (n_tokens, dim) float32 (one layer in memory)."""
        return self._read((self._check_layer(j), slice(0, self.n_tokens)))

    def layer_half(self, j: int, direction: str) -> np.ndarray:
        """The ``"forward"`` (first dim/2 columns) or ``"backward"`` half of layer ``j``,
        (n_tokens, dim // 2) float32. (Layer 0's halves are the same token vector.)"""
        if direction not in DIRECTIONS:
            raise ValueError(f"direction must be one of {DIRECTIONS}, got {direction!r}")
        half = self.dim // 2
        columns = slice(0, half) if direction == "forward" else slice(half, self.dim)
        return self._read((self._check_layer(j), slice(0, self.n_tokens), columns))

    def sentence(self, i: int) -> np.ndarray:
        """Every layer of sentence ``i``, (n_layers, T_i, dim) float32."""
        if not -self.n_sentences <= i < self.n_sentences:
            raise IndexError(f"sentence {i} out of range: this cache has {self.n_sentences}")
        i %= self.n_sentences
        return self._read((slice(None), slice(int(self.offsets[i]), int(self.offsets[i + 1]))))

    def iter_chunks(self, j: int, chunk_tokens: int = 65536) -> Iterator[tuple[int, np.ndarray]]:
        """Stream layer ``j``: yields ``(start, array)`` with array (<= chunk_tokens, dim)
        float32 holding tokens start:start+len(array)."""
        j = self._check_layer(j)
        if chunk_tokens < 1:
            raise ValueError(f"chunk_tokens must be positive, got {chunk_tokens}")
        for start in range(0, self.n_tokens, chunk_tokens):
            yield start, self._read((j, slice(start, min(start + chunk_tokens, self.n_tokens))))


def _structure_problem(f: h5py.File) -> str | None:
    """What is wrong with an opened cache file's structure, or None."""
    attrs = f.attrs
    if attrs.get("format_version") != FORMAT_VERSION:
        return f"format version {attrs.get('format_version')!r}, expected {FORMAT_VERSION}"
    if not bool(attrs.get("complete", False)):
        return "not marked complete"
    for name in ("activations", "offsets", "done"):
        if name not in f:
            return f"dataset {name!r} missing"
    try:
        n_layers, n_tokens, dim = (int(attrs[k]) for k in ("n_layers", "n_tokens", "dim"))
        n_sentences = int(attrs["n_sentences"])
    except KeyError as err:
        return f"attribute {err} missing"
    shape = f["activations"].shape
    if shape != (n_layers, n_tokens, dim):
        return f"activations have shape {shape}, attributes say {(n_layers, n_tokens, dim)}"
    offsets = f["offsets"][...]
    if offsets.shape != (n_sentences + 1,) or offsets[0] != 0 or offsets[-1] != n_tokens \
            or np.any(np.diff(offsets) < 0):
        return "offsets do not match the token count"
    if f["done"].shape != (n_sentences,) or not bool(np.all(f["done"][...])):
        return "not every sentence is done"
    return None


def open_cache(path: str | os.PathLike, verify: bool = True) -> ActivationCache:
    """Open a complete cache file; with ``verify``, read every chunk once to check its
    checksum. Raises ``ActivationCacheError`` (damaged) or ``FileNotFoundError``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no activation cache at {path}")
    try:
        cache = ActivationCache(path)
    except (OSError, KeyError, ValueError) as err:
        raise ActivationCacheError(f"{path}: not a readable activation cache ({err})") from err
    if verify:
        problem = store.verify_data(path)
        if problem:
            raise ActivationCacheError(f"{path}: {problem}")
    return cache


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


def _complete(path: Path, key: tuple, first: int, name: str) -> ActivationCache | None:
    """A view of the first ``first`` sentences of the complete, verified cache at ``path`` whose
    (model checksum, tokens digest, mode, precision, dtype, layers, dim) is ``key``; else None
    (missing, another extraction, damaged: the caller extracts its own)."""
    if not path.is_file():
        return None
    try:
        open_cache(path, verify=True).close()
        view = ActivationCache(path, first=first, name=name)
    except (ActivationCacheError, OSError, ValueError) as err:
        log.warning("not using %s: %s", path, err)
        return None
    if (view.model_identity, view.tokens_digest, view.mode, view.precision, view.dtype, view.n_layers,
            view.dim) != key:
        return None
    return view


def _served(path: Path, key: dict, sentences: list[list[str]], digest: str, split: str) -> ActivationCache | None:
    """A view of a complete cache of the store that holds ``sentences`` (``probing.engine.store``),
    named as the file ``path`` this request would have written; None when there is none."""
    found, _start = store.find(path.parent, key, sentences, digest, exclude=path)
    if found is None:
        return None
    view = ActivationCache(found.path, first=found.n, name=path.name)
    view.split, view.tokens_digest = split, digest
    if found.dtype != key["dtype"]:
        view._round, view.dtype = key["dtype"], key["dtype"]
    log.info("%s/%s: %d sentences served by %s", key["dataset"], split, found.n, found.path)
    return view


def _locked(path: Path) -> contextlib.AbstractContextManager:
    """An exclusive lock on ``path`` (+ ".lock"), so two processes never write one cache: the
    second waits, then finds the cache the first one wrote."""
    return output_lock(path, wait=True, what="activation cache")


def _ensure_room(f: h5py.File, done: np.ndarray, nbytes: int) -> None:
    """Room for a window's ``nbytes`` (and the chunks they touch) in the unfinished file, else
    ``DiskFull`` saying how many sentences are kept (``io_safety.ensure_room``)."""
    layers, rows, dim = f["activations"].chunks
    chunk = layers * rows * dim * f["activations"].dtype.itemsize
    ensure_room(f.filename, nbytes + f["activations"].shape[0] * chunk,  # at most a new chunk per layer
                f"{int(done.sum())} of {len(done)} sentences kept in {f.filename}")


def _open_partial(partial: Path, attrs: dict, offsets: np.ndarray, n_layers: int, dim: int,
                  dtype: str) -> h5py.File:
    """Open the unfinished file for this key, creating (or recreating) it as needed."""
    if partial.exists():
        try:
            f = h5py.File(partial, "a")
            same = all(f.attrs.get(k) == v for k, v in attrs.items()) and "done" in f \
                and "activations" in f and np.array_equal(f["offsets"][...], offsets)
            if same:
                return f
            f.close()
            log.warning("%s belongs to another extraction; starting over", partial)
        except (OSError, KeyError) as err:
            log.warning("%s is damaged (%s); starting over", partial, err)
        partial.unlink()
    n_tokens = int(offsets[-1])
    f = h5py.File(partial, "w")
    for key, value in attrs.items():
        f.attrs[key] = value
    f.attrs["complete"] = False
    f.attrs["versions"] = _versions()
    rows = max(1, min(max(n_tokens, 1), _CHUNK_BYTES // (dim * np.dtype(dtype).itemsize)))
    f.create_dataset("activations", shape=(n_layers, n_tokens, dim), dtype=dtype,
                     chunks=(1, rows, dim), fletcher32=True)
    f.create_dataset("offsets", data=offsets)
    f.create_dataset("done", data=np.zeros(len(offsets) - 1, dtype=bool))
    f.flush()
    return f


def _save_state(f: h5py.File, model, n_done: int) -> None:
    if "state" in f:
        del f["state"]
    group = f.create_group("state")
    group.attrs["n_done"] = n_done
    if model._states is None:
        return
    for direction, per_layer in model._states.items():
        for k, (h, c) in enumerate(per_layer):
            group.create_dataset(f"{direction}/{k}/h", data=h.cpu().numpy())
            group.create_dataset(f"{direction}/{k}/c", data=c.cpu().numpy())


def _load_state(f: h5py.File, model, n_layers: int) -> int:
    """Restore the carried LSTM state; returns the number of sentences it follows (0: none)."""
    if "state" not in f:
        return 0
    group = f["state"]
    n_done = int(group.attrs["n_done"])
    if n_done == 0 or "forward" not in group:
        model.reset_states()
        return 0
    device = model_device(model)
    model._states = {
        direction: [(torch.from_numpy(group[f"{direction}/{k}/h"][...]).to(device),
                     torch.from_numpy(group[f"{direction}/{k}/c"][...]).to(device)) for k in range(n_layers)]
        for direction in DIRECTIONS
    }
    return n_done


def extract_activations(
    model,
    sentences: Sequence[Sequence[str]],
    dataset: str,
    split: str,
    cache_dir: str | os.PathLike | None = None,
    stateful: bool = False,
    dtype: str = "float32",
    batch_size: int = 32,
    progress: CountCallback | None = None,
    ray: str | None = None,
    ray_workers: int | None = None,
    within: tuple[str, Sequence[Sequence[str]]] | None = None,
) -> ActivationCache:
    """Every layer of ``model`` (a ``BiLM``) for every token of ``sentences``, cached in hdf5.

    Returns at once when a complete cache with this key exists (it is verified; a damaged one
    is logged and rebuilt). Otherwise computes what is missing: batches of ``batch_size``
    sentences, length-sorted within windows of ``32 * batch_size`` (stateless) or in order
    (stateful), stored as ``dtype`` ("float32" or "float16"). ``progress(done, total)`` is
    called with sentence counts after every batch; an exception it raises stops the run, and
    the next call resumes from the last finished window. ``dataset``/``split`` are names for
    the key and the file name (e.g. "ud_english_ewt", "train").

    ``ray``: compute on Ray (stateless only): "local" starts Ray on this machine (or joins
    ``$RAY_ADDRESS``), an address ("auto", "ray://head:10001") joins a cluster, and an already
    initialised Ray is used as it is. Each window is a task for one of ``ray_workers`` actors
    that hold the model (``elmo_model.corpus.ray_embed``); they return the arrays and this process
    writes them into the same file, marking the window done, so the cache, its format and its
    resume (finished windows are skipped) are exactly those of the local run, bit for bit.

    ``within``: ``(split, its sentences)`` of a larger extraction whose first sentences are
    ``sentences`` (a training slice of a whole split): when that one's complete cache exists, the
    result is a view of its first ``len(sentences)`` sentences and nothing is computed. The view's
    ``name`` is the file name this extraction would have had, so keys built from it do not depend
    on where the vectors came from.
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    if ray is not None and stateful:
        raise ValueError("stateful extraction carries the LSTM state through every sentence in order, "
                         "so it cannot be split over Ray workers; use ray=None")
    for i, sentence in enumerate(sentences):
        if isinstance(sentence, str) or not all(isinstance(t, str) for t in sentence):
            raise TypeError(f"sentence {i} must be a list of token strings, got {sentence!r:.80}")
    sentences = [list(s) for s in sentences]
    if not sentences:
        raise ValueError(f"no sentences to extract for {dataset}/{split}")
    mode = "stateful" if stateful else "stateless"
    config = model.config
    n_layers, dim = config.n_output_layers, config.output_dim
    model_sha = model_identity(model)
    precision = getattr(model, "precision", "fp32")
    digest = tokens_digest(sentences)
    path = cache_path(model_sha, dataset, split, mode, dtype, digest, cache_dir, precision)
    key = {"format_version": FORMAT_VERSION, "model_identity": model_sha, "dataset": dataset, "mode": mode,
           "precision": precision, "dtype": dtype, "n_layers": n_layers, "dim": dim}
    if not path.exists():
        view = _served(path, key, sentences, digest, split)
        if view is not None:
            if progress:
                progress(len(sentences), len(sentences))
            return view
    if within is not None and not path.exists():
        whole = [list(s) for s in within[1]]
        if len(whole) >= len(sentences) and whole[:len(sentences)] == sentences:
            whole_path = cache_path(model_sha, dataset, within[0], mode, dtype, tokens_digest(whole), cache_dir,
                                    precision)
            view = _complete(whole_path, (model_sha, tokens_digest(whole), mode, precision, dtype, n_layers, dim),
                             len(sentences), path.name)
            if view is not None:
                view.split, view.tokens_digest = split, digest
                log.info("%s/%s: the first %d sentences of %s", dataset, split, len(sentences), whole_path)
                if progress:
                    progress(len(sentences), len(sentences))
                return view
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        legacy = cache_path(legacy_checksum(model), dataset, split, mode, dtype, digest, cache_dir, precision)
        if legacy.exists() or legacy.with_name(legacy.name + ".partial").exists():
            note_legacy_entry(f"activation cache {legacy}")

    with _locked(path):
        if path.exists():
            try:
                cache = open_cache(path, verify=True)
                if (cache.model_identity, cache.tokens_digest, cache.mode, cache.precision, cache.dtype,
                        cache.n_layers, cache.dim) == (model_sha, digest, mode, precision, dtype, n_layers, dim):
                    if progress:
                        progress(len(sentences), len(sentences))
                    return cache
                cache.close()
                log.warning("%s holds another extraction than its name says; rebuilding it", path)
            except ActivationCacheError as err:
                log.warning("damaged activation cache, rebuilding it: %s", err)
            path.unlink()

        offsets = np.zeros(len(sentences) + 1, dtype=np.int64)
        offsets[1:] = np.cumsum([len(s) for s in sentences])
        attrs = {"format_version": FORMAT_VERSION, "model_identity": model_sha, "dataset": dataset,
                 "split": split, "mode": mode, "precision": precision, "dtype": dtype, "tokens_digest": digest,
                 "n_layers": n_layers, "dim": dim, "n_sentences": len(sentences),
                 "n_tokens": int(offsets[-1])}
        partial = path.with_name(path.name + ".partial")
        f = _open_partial(partial, attrs, offsets, n_layers, dim, dtype)
        try:
            f.attrs["batch_size"] = batch_size
            store.write_tokens(f, sentences)
            store.start_from(f, key, sentences, digest, offsets)
            if ray is not None:
                _fill_with_ray(f, model, sentences, offsets, dtype, batch_size, progress, ray, ray_workers)
            else:
                _fill(f, model, sentences, offsets, stateful, dtype, batch_size, progress)
            f.attrs["complete"] = True
            if "state" in f:
                del f["state"]
            f.flush()
        finally:
            f.close()
        if not partial.exists():  # the folder went away under the open file (rm -r of the cache mid-run)
            raise ValueError(f"{partial.parent}: the activation cache folder was removed while this run wrote "
                             "into it, and this extraction with it; rerun the same command to compute it again")
        fsync_path(partial)  # on disk before the rename makes it visible
        os.replace(partial, path)
        log.info("cached %d sentences (%d tokens) of %s/%s in %s", len(sentences), offsets[-1],
                 dataset, split, path)
        return ActivationCache(path)


def _fill(f: h5py.File, model, sentences: list[list[str]], offsets: np.ndarray, stateful: bool,
          dtype: str, batch_size: int, progress: CountCallback | None) -> None:
    """Compute and write every sentence not yet marked done, one window at a time."""
    n = len(sentences)
    done = f["done"][...]
    ds = f["activations"]
    window = batch_size * WINDOW_BATCHES
    was_training, was_stateful = model.training, model.stateful
    device = model_device(model)
    model.eval()
    model.stateful = stateful
    model.reset_states()
    try:
        first = 0
        if stateful:
            # the carried state must follow every sentence before the first one to compute
            n_state = _load_state(f, model, model.config.lstm.n_layers)
            n_prefix = int(np.argmin(done)) if not done.all() else n
            saved_batch = f["state"].attrs.get("batch_size", batch_size) if "state" in f else batch_size
            if n_state != n_prefix or done[n_prefix:].any() or saved_batch != batch_size:
                if done.any():
                    log.warning("%s: stateful resume not possible (state follows %d sentences, %d "
                                "done, batch size %s -> %d); starting over", f.filename, n_state,
                                int(done.sum()), saved_batch, batch_size)
                done[:] = False
                f["done"][...] = done
                model.reset_states()
                n_state = 0
            first = n_state
        n_done = int(done.sum())
        if progress:
            progress(n_done, n)
        if n_done:
            log.info("resuming %s: %d of %d sentences already done", f.filename, n_done, n)
        for w_start in range(first - first % window, n, window):
            w_end = min(n, w_start + window)
            todo = [i for i in range(w_start, w_end) if not done[i]]
            if not todo:
                continue
            # a window is written whole, as runs of consecutive undone sentences
            order = todo if stateful else sorted(todo, key=lambda i: len(sentences[i]))
            results: dict[int, np.ndarray] = {}
            for b in range(0, len(order), batch_size):
                index = order[b:b + batch_size]
                batch = [sentences[i] for i in index]
                with torch.inference_mode():  # on the model's device; the cache is filled from the CPU
                    out = model(batch_to_char_ids(batch).to(device))
                    # (B, L+1, T, 2P) in the cache's dtype: one conversion a batch (torch's rounding to
                    # float16 is numpy's, bit for bit), not one numpy copy a sentence
                    layers = torch.stack(out.layers, dim=1).to(_TORCH_DTYPES[dtype]).cpu().numpy()
                for row, i in enumerate(index):
                    results[i] = layers[row, :, : len(sentences[i])]
                n_done += len(index)
                if progress:
                    progress(n_done, n)
            _ensure_room(f, done, sum(results[i].nbytes for i in todo))
            for run_start, run_end in _runs(todo):
                block = np.concatenate([results[i] for i in range(run_start, run_end)], axis=1)
                ds[:, offsets[run_start]:offsets[run_end]] = block
            if stateful:
                _save_state(f, model, w_end)
                f["state"].attrs["batch_size"] = batch_size
            # the data (and the state) on disk before the done flags that vouch for it: unwritten
            # hdf5 chunks read as zeros, which no checksum would catch
            flush_to_disk(f)
            done[todo] = True
            f["done"][w_start:w_end] = done[w_start:w_end]
            flush_to_disk(f)
    finally:
        model.stateful = was_stateful
        model.reset_states()
        model.train(was_training)


def _fill_with_ray(f: h5py.File, model, sentences: list[list[str]], offsets: np.ndarray, dtype: str,
                   batch_size: int, progress: CountCallback | None, address: str,
                   workers: int | None) -> None:
    """``_fill`` (stateless) with each unfinished window computed by a Ray actor. The actors get
    exactly the window's unfinished sentences, which ``ElmoEmbedder.embed_sentences`` sorts and
    batches as ``_fill`` does, so the vectors are identical; windows are written as they come."""
    # Ray is optional (requirements-cluster.txt): imported only when extraction runs on it
    import ray as ray_module
    from ray.util import ActorPool

    # lazy, as above: ray_embed imports Ray at its top
    from elmo_model.corpus.ray_embed import start_ray, start_workers

    n = len(sentences)
    done = f["done"][...]
    ds = f["activations"]
    window = batch_size * WINDOW_BATCHES
    todo_windows = []
    for w_start in range(0, n, window):
        todo = [i for i in range(w_start, min(n, w_start + window)) if not done[i]]
        if todo:
            todo_windows.append((w_start, todo))
    n_done = int(done.sum())
    if progress:
        progress(n_done, n)
    if n_done:
        log.info("resuming %s: %d of %d sentences already done", f.filename, n_done, n)
    if not todo_windows:
        return
    was_training = model.training
    started, n_workers = start_ray(address, workers)
    try:
        workers = start_workers(model, batch_size, min(n_workers, len(todo_windows)))
        pool = ActorPool(workers.actors)
        work = [((w_start, todo), [sentences[i] for i in todo]) for w_start, todo in todo_windows]
        for (w_start, todo), arrays in pool.map_unordered(
                lambda actor, item: actor.embed_window.remote(item[0], item[1], dtype), work):
            results = dict(zip(todo, arrays))
            _ensure_room(f, done, sum(results[i].nbytes for i in todo))
            for run_start, run_end in _runs(todo):
                block = np.concatenate([results[i] for i in range(run_start, run_end)], axis=1)
                ds[:, offsets[run_start]:offsets[run_end]] = block
            flush_to_disk(f)  # data before the flags (see _fill)
            done[todo] = True
            w_end = min(n, w_start + window)
            f["done"][w_start:w_end] = done[w_start:w_end]
            flush_to_disk(f)
            n_done += len(todo)
            if progress:
                progress(n_done, n)
        workers.kill()
    finally:
        model.train(was_training)
        if started:
            ray_module.shutdown()


def _runs(indices: list[int]) -> Iterator[tuple[int, int]]:
    """Sorted indices -> maximal runs ``(start, end)`` (end exclusive) of consecutive ones."""
    start = prev = None
    for i in indices:
        if start is None:
            start = prev = i
        elif i == prev + 1:
            prev = i
        else:
            yield start, prev + 1
            start = prev = i
    if start is not None:
        yield start, prev + 1


__all__ = ["ActivationCache", "ActivationCacheError", "DIRECTIONS", "DTYPES", "MODES",
           "cache_path", "default_cache_dir", "extract_activations",
           "open_cache", "tokens_digest"]
