"""One vector per word type (:class:`StaticEmbedding`): nearest words, probe features, and the
checked file both static baselines are saved in (:mod:`probing.context.static` makes them).

File format (``.npz``, read with ``allow_pickle=False``; nothing is unpickled, gensim's own
pickle-based ``.model`` files are never written or read)::

    words     (V,) unicode   the vocabulary, most frequent first
    vectors   (V, D) float16 | float32
    meta      () unicode      JSON: name, kind, lowercase, the training config, the corpus it
                              was trained on (shard files and sizes, token and sentence counts),
                              and content_sha256 (below)

``content_sha256`` is the sha256 of the words, the stored vectors (dtype, shape, bytes) and the
rest of ``meta``: :meth:`StaticEmbedding.load` recomputes it, so vectors that no longer belong to
the config and corpus recorded beside them are refused, not used. The file is written to a
temporary file, fsynced and renamed into place; a file that is not such an embedding (truncated,
damaged, another format) gets one line naming it and the command that makes a new one.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import zipfile
import zlib
from pathlib import Path
from typing import Sequence

import numpy as np

from elmo_model.plumbing.io_safety import atomic_write_bytes

log = logging.getLogger(__name__)

TRAIN_COMMAND = "python -m probing.context.static train-word2vec"
"""The command that makes a new word2vec file (a damaged one's error names it)."""


class StaticEmbedding:
    """One vector per word type. ``words`` (V,), ``vectors`` (V, D) float32.

    ``lowercase``: look words up lower-cased (the word2vec model is trained lower-cased).
    ``name``: how tables and plots label it; ``meta``: JSON-ready facts (config, counts).
    """

    def __init__(self, words: Sequence[str], vectors: np.ndarray, *, name: str,
                 lowercase: bool = False, meta: dict | None = None) -> None:
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(words):
            raise ValueError(f"{name}: {len(words)} words but vectors of shape {vectors.shape}")
        self.words = [str(w) for w in words]
        self.vectors = vectors
        self.name = name
        self.lowercase = lowercase
        self.meta = dict(meta or {})
        self.index = {}
        for i, w in enumerate(self.words):
            self.index.setdefault(w, i)  # first (most frequent) wins on a repeated word
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        self._unit = np.divide(vectors, norms, out=np.zeros_like(vectors), where=norms > 0)

    def __len__(self) -> int:
        return len(self.words)

    def __repr__(self) -> str:
        return f"StaticEmbedding({self.name!r}, {len(self.words)} words x {self.dim})"

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])

    def key(self, word: str) -> str:
        return word.lower() if self.lowercase else word

    def __contains__(self, word: str) -> bool:
        return self.key(word) in self.index

    def vector(self, word: str) -> np.ndarray:
        """The word's vector (D,); KeyError naming the embedding if it has none."""
        try:
            return self.vectors[self.index[self.key(word)]]
        except KeyError:
            raise KeyError(f"{word!r} is not in the {self.name} vocabulary ({len(self)} words)") from None

    def embed_tokens(self, tokens: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Probe features: (T, D) float32 vectors (zeros for unknown words) and a (T,) bool
        mask of the known ones."""
        known = np.array([self.key(t) in self.index for t in tokens], dtype=bool)
        out = np.zeros((len(tokens), self.dim), dtype=np.float32)
        rows = [self.index[self.key(t)] for t, k in zip(tokens, known) if k]
        out[known] = self.vectors[rows]
        return out, known

    def nearest(self, word: str, k: int = 10, vector: np.ndarray | None = None) -> list[tuple[str, float]]:
        """The ``k`` word types with the highest cosine similarity to ``word`` (itself left
        out), as (word, similarity) pairs, best first. ``vector`` replaces the lookup (for a
        word the vocabulary lacks, e.g. a layer-0 vector computed on the fly). Returns [] if
        the word is unknown and no vector is given."""
        if vector is None:
            if word not in self:
                return []
            vector = self.vector(word)
        query = np.asarray(vector, dtype=np.float32)
        norm = float(np.linalg.norm(query))
        if norm == 0:
            return []
        sims = self._unit @ (query / norm)
        self_row = self.index.get(self.key(word), -1)
        if self_row >= 0:
            sims[self_row] = -np.inf
        k = min(k, len(self.words) - (1 if self_row >= 0 else 0))
        if k <= 0:
            return []
        top = np.argpartition(-sims, k - 1)[:k]
        top = top[np.argsort(-sims[top], kind="stable")]
        return [(self.words[i], float(sims[i])) for i in top]

    def save(self, path: str | os.PathLike, dtype: str = "float16") -> Path:
        """Write the ``.npz`` format of the module docstring atomically (temporary file, fsync,
        rename), with the content checksum in ``meta``; returns the path."""
        if dtype not in ("float16", "float32"):
            raise ValueError(f"dtype must be 'float16' or 'float32', got {dtype!r}")
        path = Path(path)
        words = np.array(self.words, dtype=str)
        vectors = self.vectors.astype(dtype)
        meta = {k: v for k, v in self.meta.items() if k != "content_sha256"}
        meta.update(name=self.name, lowercase=self.lowercase)
        meta["content_sha256"] = content_sha256(words, vectors, meta)
        buffer = io.BytesIO()
        np.savez_compressed(buffer, words=words, vectors=vectors, meta=np.array(json.dumps(meta)))
        atomic_write_bytes(path, buffer.getvalue())
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> "StaticEmbedding":
        """Read a file written by :meth:`save` (no pickle). ValueError, one line naming the file
        and the fix, when it is not one, is damaged, or its content does not match its checksum."""
        path = Path(path)
        fix = f"make a new one with `{TRAIN_COMMAND}`"
        try:
            with np.load(path, allow_pickle=False) as data:
                missing = [k for k in ("words", "vectors", "meta") if k not in data.files]
                if missing:
                    raise ValueError(f"no {', '.join(missing)} array in it")
                words, vectors = data["words"], data["vectors"]
                meta = json.loads(str(data["meta"]))
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, zlib.error) as err:
            reason = ("not an .npz of plain arrays; it would need unpickling, which is never done"
                      if "pickle" in str(err) else f"unreadable: {err}")
            raise ValueError(f"{path}: not a static-embedding file ({reason}); {fix}") from None
        problem = _format_problem(words, vectors, meta)
        if problem:
            raise ValueError(f"{path}: not a static-embedding file ({problem}); {fix}")
        recorded = meta.pop("content_sha256", None)
        if recorded is None:
            log.warning("%s records no content checksum (written by an older version); its vectors "
                        "are used unchecked", path)
        elif content_sha256(words, vectors, meta) != recorded:
            raise ValueError(f"{path}: the words and vectors do not match the content_sha256 recorded "
                             f"in the file: it is damaged or was edited; {fix}")
        if not np.all(np.isfinite(vectors)):
            raise ValueError(f"{path}: vectors hold NaN or infinite values; {fix}")
        return cls([str(w) for w in words], vectors, name=str(meta.get("name", path.stem)),
                   lowercase=bool(meta.get("lowercase", False)), meta=meta)


def content_sha256(words: np.ndarray, vectors: np.ndarray, meta: dict) -> str:
    """sha256 of an embedding file's content: the words, the vectors as stored (dtype, shape,
    bytes) and ``meta`` (canonical JSON, without ``content_sha256`` itself)."""
    digest = hashlib.sha256(b"static-embedding:")
    digest.update(json.dumps([str(w) for w in words], ensure_ascii=False).encode("utf-8"))
    digest.update(f"{vectors.dtype.str}:{vectors.shape}".encode())
    digest.update(np.ascontiguousarray(vectors).tobytes())
    rest = {k: v for k, v in meta.items() if k != "content_sha256"}
    digest.update(json.dumps(rest, sort_keys=True, ensure_ascii=False).encode("utf-8"))
    return digest.hexdigest()


def _format_problem(words: np.ndarray, vectors: np.ndarray, meta) -> str | None:
    """What is wrong with the arrays of an embedding file, or None."""
    if not isinstance(meta, dict):
        return "meta is not a JSON object"
    if words.ndim != 1 or words.dtype.kind != "U":
        return f"words must be a 1-d array of strings, got {words.dtype} of shape {words.shape}"
    if vectors.ndim != 2 or vectors.dtype not in (np.float16, np.float32):
        return f"vectors must be a 2-d float16 or float32 array, got {vectors.dtype} of shape {vectors.shape}"
    if len(words) != len(vectors):
        return f"{len(words)} words but {len(vectors)} vectors"
    return None
