"""The activation cache's files: where each lives, what it holds, and reading one back.

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

``probing.engine.activations`` writes them (``extract_activations``); this module reads them.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from pathlib import Path
from typing import Iterator

import h5py
import numpy as np
import torch

from elmo_model.plumbing.io_safety import digest_tokens
from elmo_model.plumbing.settings import folder_setting
from probing.engine import store

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


class NonFiniteActivations(ActivationCacheError, ValueError):
    """A cache file holds NaN or infinite vectors (a ``ValueError`` too: a command's one line)."""


def default_cache_dir() -> Path:
    """Where activation caches live: ``$ELMO_WORKBENCH_CACHE`` if set, else
    ``${XDG_CACHE_HOME:-~/.cache}/elmo-workbench/activations``."""
    return folder_setting(ENV_VAR, "activations")


# --------------------------------------------------------------------------------------------
# Keys
# --------------------------------------------------------------------------------------------


#: sha256 of the sentences' tokens (order, boundaries and every character count): the digest the
#: embedder's job manifests record
tokens_digest = digest_tokens


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
            self.model_identity = str(attrs.get("model_identity", attrs.get("model_checksum")))  # the earlier key
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
        if array.size and not (np.isfinite(array.min()) and np.isfinite(array.max())):  # two passes, no copy
            bad = int(array.size - np.count_nonzero(np.isfinite(array)))
            raise NonFiniteActivations(
                f"{self.path}: {bad:,} of the {array.size:,} values read are NaN or infinite; the file is damaged "
                "or the model gave them: delete it and rerun to extract it again (if the new file holds them "
                "too, the model's weights or its precision do)")
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
