"""Word-sense disambiguation the way Peters et al. (2018, Table 5) did it, and the SemCor index.

Three parts, one concept: "which sense is this occurrence, as the biLM sees it":

1. **The SemCor index** (:func:`build_semcor_index` -> :class:`SemcorIndex`): one pass of the
   biLM over SemCor (through the activation cache, ``dataset="semcor"``), then per layer one
   vector per sense-tagged instance (a multiword instance is the mean of its words' vectors)
   and one centroid per sense key (the mean of its instances). Built once per model and
   reused by 1-NN WSD (here), nearest-neighbour retrieval (``probing.retrieval``),
   projections (``probing.projections``) and learned word-sense mixes
   (``probing.word_senses``).
2. **1-NN WSD** (:func:`evaluate_wsd`): a test instance gets, among its lemma's WordNet
   candidate senses that SemCor has a centroid for, the one whose centroid is nearest by
   cosine; lemmas (or lemma + POS) with no such sense back off to WordNet's first sense. F1
   per evaluation set, on the four test sets of Peters et al. together, and on ALL, per
   layer and on a scalar mix, beside the first-sense baseline and the paper's figures.
3. **The Senseval-2 lexical-sample probe** (:func:`lexical_sample_probe`): a linear probe per
   layer for hard / interest / line / serve (NLTK's ``senseval`` corpus), with majority and
   control-task baselines: a second, supervised view of where sense information sits.

Index file (one hdf5 file, ``INDEX_VERSION`` 1), next to the model's activation caches::

    <cache_dir>/<model checksum[:16]>/semcor-index-<key[:16]>.h5
    attrs       version, complete, model_checksum, model_name, tokens_digest, n_layers, dim,
                n_sentences, n_instances, n_senses, dtype
    sentences   (n_sentences,) str     the sentence's words joined by single spaces (a word
                                        never holds whitespace, so ``split(" ")`` gives them back)
    sentence_ids (n_sentences,) str    SemCor sentence ids (d000.s000, ...)
    lemmas      (n_lemmas,) str        sorted; instances are stored grouped by lemma
    lemma_offsets (n_lemmas + 1,) int64  lemma k owns instance rows lemma_offsets[k]:[k+1]
    inst_sentence, inst_start, inst_end  (n_instances,) int32: the words [start, end) of
                                        sentence inst_sentence
    inst_pos    (n_instances,) uint8   index into WSD_POS (NOUN, VERB, ADJ, ADV)
    inst_keys   (n_instances,) str     gold sense keys separated by spaces
    inst_ids    (n_instances,) str     SemCor instance ids
    vectors     (n_layers, n_instances, dim) float16 | float32   instance vectors, lemma-grouped
    senses      (n_senses,) str        sorted sense keys seen in SemCor
    sense_counts (n_senses,) int64     instances per sense key
    centroids   (n_layers, n_senses, dim) float32   mean instance vector per sense key

Written to ``<file>.partial`` and renamed when complete; a lock file keeps two processes from
building the same index at once.

Reference figures (Peters et al. 2018, Table 5, F1 on senseval2 + senseval3 + semeval2013 +
semeval2015): WordNet first sense 65.9, biLM layer 1 67.4, layer 2 69.0 (:data:`PAPER_2018`).

CLI::

    python -m probing.wsd --model elmo-mini [--layers 0 1 2] [--limit-semcor N] [--json OUT]
    python -m probing.wsd --model elmo-mini --lexical-sample [--max-instances 600]
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import logging
import os
import random
import sys
from bisect import bisect_left
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import h5py
import numpy as np

from elmo_model.progress import ProgressCallback, TerminalProgress
from probing.activations import (ActivationCache, default_cache_dir, extract_activations,
                                 model_checksum, tokens_digest)
from probing.data import require, use_nltk_data
from probing.wsd_data import (EVALUATION_SETS, PETERS_2018_TEST_SETS, WSD_POS, WsdScore,
                              WsdSentence, candidate_senses, first_sense, gold_keys,
                              iter_instances, read_wsd_corpus, wordnet, wsd_f1)

logger = logging.getLogger(__name__)

INDEX_VERSION = 1
RESULT_VERSION = 1

FOUR_SETS = "+".join(PETERS_2018_TEST_SETS)
"""Column name of the four test sets of Peters et al. (2018) scored together."""

PAPER_2018: dict[str, float] = {
    "WordNet first sense": 65.9,
    "Raganato et al. (2017)": 69.9,
    "Iacobacci et al. (2016)": 70.1,
    "CoVe layer 1": 59.4,
    "CoVe layer 2": 64.7,
    "biLM layer 1": 67.4,
    "biLM layer 2": 69.0,
}
"""Peters et al. (2018) Table 5: all-words WSD F1 (percent) on the four test sets together."""

SENSEVAL_WORDS = ("hard", "interest", "line", "serve")
"""The Senseval-2 lexical-sample words NLTK's ``senseval`` corpus holds."""


# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------


def normalize_lemma(lemma: str) -> str:
    """'Take place' / 'take_place' -> 'take_place' (the index's and WordNet's spelling)."""
    return "_".join(lemma.strip().lower().replace("_", " ").split())


def _stage(progress: ProgressCallback | None, label: str, unit: str = "sentences"):
    """Adapt ``progress(label, done, total, unit)`` to the activation cache's ``(done, total)``."""
    if progress is None:
        return None
    return lambda done, total: progress(label, done, total, unit)


def _report(progress: ProgressCallback | None, label: str, done: float, total: float | None,
            unit: str = "steps") -> None:
    if progress is not None:
        progress(label, done, total, unit)


def unit_rows(x: np.ndarray) -> np.ndarray:
    """Rows of ``x`` (N, D) scaled to unit Euclidean norm (float32); zero rows stay zero."""
    x = np.asarray(x, dtype=np.float32)
    norm = np.linalg.norm(x, axis=-1, keepdims=True)
    return np.divide(x, norm, out=np.zeros_like(x), where=norm > 0)


def span_vectors(cache: ActivationCache, layer: int, starts: np.ndarray, ends: np.ndarray,
                 chunk_tokens: int = 65536) -> np.ndarray:
    """Mean over token rows ``[starts[i], ends[i])`` of layer ``layer`` of ``cache``.

    ``starts``/``ends``: (N,) global token rows (``cache.offsets[sentence] + word index``),
    each span non-empty. Returns (N, dim) float32. Streams the layer once in chunks (a
    multiword span crossing a chunk boundary is kept in a small carry-over buffer), so memory
    stays at one chunk plus the output.
    """
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    n = len(starts)
    out = np.zeros((n, cache.dim), dtype=np.float32)
    if n == 0:
        return out
    if np.any(ends <= starts) or starts.min() < 0 or ends.max() > cache.n_tokens:
        raise ValueError(f"span_vectors: spans must be non-empty and inside 0..{cache.n_tokens}")
    order = np.argsort(ends, kind="stable")
    s_sorted, e_sorted = starts[order], ends[order]
    # the carry-over buffer must keep every row an unfinished span still needs
    keep_from = np.minimum.accumulate(s_sorted[::-1])[::-1]
    buffer: np.ndarray | None = None
    buffer_start = 0
    done = 0
    for start, array in cache.iter_chunks(layer, chunk_tokens):
        if buffer is None or len(buffer) == 0:
            buffer, buffer_start = array, start
        else:
            buffer = np.concatenate([buffer, array])
        buffer_end = start + len(array)
        k = int(np.searchsorted(e_sorted, buffer_end, side="right"))
        if k > done:
            ss = s_sorted[done:k] - buffer_start
            lengths = e_sorted[done:k] - s_sorted[done:k]
            if np.all(lengths == 1):
                vectors = buffer[ss]
            else:
                first = np.concatenate([[0], np.cumsum(lengths)[:-1]])
                rows = np.repeat(ss - first, lengths) + np.arange(int(lengths.sum()))
                vectors = np.add.reduceat(buffer[rows].astype(np.float64), first, axis=0)
                vectors = (vectors / lengths[:, None]).astype(np.float32)
            out[order[done:k]] = vectors
            done = k
        if done == n:
            break
        drop = int(min(keep_from[done] - buffer_start, len(buffer)))
        if drop > 0:
            buffer = buffer[drop:]
            buffer_start += drop
    return out


# --------------------------------------------------------------------------------------------
# Sense centroids and 1-NN
# --------------------------------------------------------------------------------------------


def sense_centroids(instance_keys: Sequence[Iterable[str]], vectors: np.ndarray
                    ) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Mean vector per sense key.

    ``instance_keys[i]``: the gold keys of instance i (an instance with two gold keys counts
    towards both); ``vectors``: (N, D) or (L, N, D). Returns (sorted keys (S,), centroids
    (S, D) or (L, S, D) float32, counts (S,) int64).
    """
    from scipy import sparse

    keys = sorted({k for ks in instance_keys for k in ks})
    position = {k: i for i, k in enumerate(keys)}
    rows, cols = [], []
    for i, ks in enumerate(instance_keys):
        for k in ks:
            rows.append(position[k])
            cols.append(i)
    counts = np.bincount(np.asarray(rows, dtype=np.int64), minlength=len(keys)).astype(np.int64)
    weights = 1.0 / counts[rows] if rows else np.zeros(0)
    n = len(instance_keys)
    mean = sparse.csr_matrix((weights.astype(np.float64), (rows, cols)), shape=(len(keys), n))
    vectors = np.asarray(vectors)
    if vectors.ndim == 2:
        centroids = np.asarray(mean @ vectors.astype(np.float64), dtype=np.float32)
    else:
        centroids = np.stack([np.asarray(mean @ v.astype(np.float64), dtype=np.float32)
                              for v in vectors])
    return keys, centroids, counts


@dataclass
class NearestSensePredictions:
    """What :func:`nearest_sense_predict` decided. ``predictions``: {instance id: sense key or
    None}; ``backoff``: ids that got WordNet's first sense because none of their lemma's
    senses has a centroid; ``unanswered``: ids WordNet has no sense for at all."""

    predictions: dict[str, str | None]
    backoff: set[str]
    unanswered: set[str]


def nearest_sense_predict(
    instances: Sequence[tuple[str, str, str]],
    vectors: np.ndarray,
    sense_keys: Sequence[str],
    centroids: np.ndarray,
    candidates: Callable[[str, str], Sequence[str]] = candidate_senses,
    backoff: Callable[[str, str], str | None] = first_sense,
) -> NearestSensePredictions:
    """1-NN WSD: each instance gets the nearest (cosine) centroid among its candidate senses.

    ``instances``: (instance id, lemma, pos) per row of ``vectors`` (N, D); ``sense_keys``
    (S,) name the rows of ``centroids`` (S, D). ``candidates(lemma, pos)`` gives the lemma's
    senses (WordNet's by default); only those with a centroid compete. When none has one, the
    instance backs off to ``backoff(lemma, pos)`` (WordNet's first sense). Ties go to the
    candidate listed first (WordNet order: the more frequent sense).
    """
    vectors = unit_rows(vectors)
    centroids = unit_rows(centroids)
    if len(instances) != len(vectors):
        raise ValueError(f"{len(instances)} instances but {len(vectors)} vectors")
    if len(sense_keys) != len(centroids):
        raise ValueError(f"{len(sense_keys)} sense keys but {len(centroids)} centroids")
    row_of = {k: i for i, k in enumerate(sense_keys)}
    out = NearestSensePredictions({}, set(), set())
    for (instance_id, lemma, pos), vector in zip(instances, vectors):
        seen = [k for k in candidates(lemma, pos) if k in row_of]
        if not seen:
            key = backoff(lemma, pos)
            out.predictions[instance_id] = key
            (out.backoff if key is not None else out.unanswered).add(instance_id)
            continue
        sims = centroids[[row_of[k] for k in seen]] @ vector
        out.predictions[instance_id] = seen[int(np.argmax(sims))]
    return out


# --------------------------------------------------------------------------------------------
# The SemCor index
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class IndexedInstance:
    """One sense-tagged SemCor instance of the index: row, sentence, words [start, end)."""

    row: int
    instance_id: str
    lemma: str
    pos: str
    sentence: int
    start: int
    end: int
    sense_keys: tuple[str, ...]


def _decode(array) -> list[str]:
    return [x.decode("utf-8") if isinstance(x, bytes) else str(x) for x in array]


class SemcorIndex:
    """Read-only view of one SemCor index file (format in the module docstring).

    Instance rows are grouped by lemma (then POS, then corpus order), so one lemma's vectors
    are one contiguous read. Per-layer arrays are loaded on first use and kept.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        with h5py.File(self.path, "r") as f:
            attrs = f.attrs
            if attrs.get("version") != INDEX_VERSION or not bool(attrs.get("complete", False)):
                raise ValueError(f"{self.path}: not a complete SemCor index of version {INDEX_VERSION}")
            self.model_checksum = str(attrs["model_checksum"])
            self.model_name = str(attrs.get("model_name", ""))
            self.tokens_digest = str(attrs["tokens_digest"])
            self.n_layers = int(attrs["n_layers"])
            self.dim = int(attrs["dim"])
            self.n_sentences = int(attrs["n_sentences"])
            self.n_instances = int(attrs["n_instances"])
            self.dtype = str(attrs["dtype"])
            self.lemmas: list[str] = _decode(f["lemmas"][...])
            self.lemma_offsets = f["lemma_offsets"][...].astype(np.int64)
            self.inst_sentence = f["inst_sentence"][...].astype(np.int64)
            self.inst_start = f["inst_start"][...].astype(np.int64)
            self.inst_end = f["inst_end"][...].astype(np.int64)
            self.inst_pos = f["inst_pos"][...].astype(np.int64)
            self.sense_keys: list[str] = _decode(f["senses"][...])
            self.sense_counts = f["sense_counts"][...].astype(np.int64)
        self._sentences: list[str] | None = None
        self._sentence_ids: list[str] | None = None
        self._inst_keys: list[str] | None = None
        self._inst_ids: list[str] | None = None
        self._centroids: dict[int, np.ndarray] = {}
        self._unit_layers: dict[int, np.ndarray] = {}
        self.sense_row = {k: i for i, k in enumerate(self.sense_keys)}

    def __repr__(self) -> str:
        return (f"SemcorIndex({str(self.path)!r}, n_layers={self.n_layers}, dim={self.dim}, "
                f"n_sentences={self.n_sentences}, n_instances={self.n_instances}, "
                f"n_senses={len(self.sense_keys)})")

    # -- lazily loaded tables ---------------------------------------------------------------
    def _load_strings(self) -> None:
        if self._sentences is None:
            with h5py.File(self.path, "r") as f:
                self._sentences = _decode(f["sentences"][...])
                self._sentence_ids = _decode(f["sentence_ids"][...])
                self._inst_keys = _decode(f["inst_keys"][...])
                self._inst_ids = _decode(f["inst_ids"][...])

    def sentence_text(self, i: int) -> str:
        """Sentence ``i``'s words joined by spaces."""
        self._load_strings()
        return self._sentences[i]

    def sentence_tokens(self, i: int) -> tuple[str, ...]:
        """Sentence ``i``'s words as the biLM saw them."""
        return tuple(self.sentence_text(i).split(" "))

    def sentence_id(self, i: int) -> str:
        """Sentence ``i``'s SemCor id (d000.s000, ...)."""
        self._load_strings()
        return self._sentence_ids[i]

    def lemma_of_row(self, row: int) -> str:
        """The lemma that owns instance ``row``."""
        return self.lemmas[int(np.searchsorted(self.lemma_offsets, row, side="right")) - 1]

    def instance(self, row: int) -> IndexedInstance:
        """Instance ``row`` with its sentence position and gold keys."""
        self._load_strings()
        return IndexedInstance(
            row=int(row), instance_id=self._inst_ids[row], lemma=self.lemma_of_row(row),
            pos=WSD_POS[self.inst_pos[row]], sentence=int(self.inst_sentence[row]),
            start=int(self.inst_start[row]), end=int(self.inst_end[row]),
            sense_keys=tuple(self._inst_keys[row].split(" ")))

    def instance_keys(self, row: int) -> tuple[str, ...]:
        """The gold sense keys of instance ``row`` (sorted)."""
        self._load_strings()
        return tuple(self._inst_keys[row].split(" "))

    def lemma_rows(self, lemma: str, pos: str | None = None) -> np.ndarray:
        """Instance rows of ``lemma`` (any spelling of it: 'Take place', 'take_place'),
        optionally only as ``pos`` (NOUN/VERB/ADJ/ADV or n/v/a/r); empty if unseen."""
        name = normalize_lemma(lemma)
        k = bisect_left(self.lemmas, name)
        if k == len(self.lemmas) or self.lemmas[k] != name:
            return np.zeros(0, dtype=np.int64)
        rows = np.arange(self.lemma_offsets[k], self.lemma_offsets[k + 1], dtype=np.int64)
        if pos is not None:
            from probing.wsd_data import normalize_pos

            rows = rows[self.inst_pos[rows] == WSD_POS.index(normalize_pos(pos))]
        return rows

    def vectors(self, layer: int, rows: np.ndarray | None = None) -> np.ndarray:
        """Instance vectors of ``layer`` for ``rows`` (all when None), (n, dim) float32."""
        layer = self._check_layer(layer)
        with h5py.File(self.path, "r") as f:
            ds = f["vectors"]
            if rows is None:
                return ds[layer].astype(np.float32)
            rows = np.asarray(rows, dtype=np.int64)
            if len(rows) == 0:
                return np.zeros((0, self.dim), dtype=np.float32)
            lo, hi = int(rows.min()), int(rows.max()) + 1
            block = ds[layer, lo:hi].astype(np.float32)  # lemma rows are one contiguous run
            return block[rows - lo]

    def unit_layer(self, layer: int) -> np.ndarray:
        """Every instance vector of ``layer`` at unit length, (n_instances, dim), kept in
        memory after the first call (float16 when the index stores float16)."""
        layer = self._check_layer(layer)
        if layer not in self._unit_layers:
            with h5py.File(self.path, "r") as f:
                ds = f["vectors"]
                parts = []
                for lo in range(0, self.n_instances, 65536):
                    parts.append(unit_rows(ds[layer, lo:lo + 65536]).astype(ds.dtype))
                self._unit_layers[layer] = (np.concatenate(parts) if parts
                                            else np.zeros((0, self.dim), dtype=ds.dtype))
        return self._unit_layers[layer]

    def centroids(self, layer: int) -> np.ndarray:
        """Sense centroids of ``layer``, (n_senses, dim) float32, rows named by ``sense_keys``."""
        layer = self._check_layer(layer)
        if layer not in self._centroids:
            with h5py.File(self.path, "r") as f:
                self._centroids[layer] = f["centroids"][layer].astype(np.float32)
        return self._centroids[layer]

    def _check_layer(self, layer: int) -> int:
        if not 0 <= layer < self.n_layers:
            raise IndexError(f"layer {layer} out of range: the index has layers 0..{self.n_layers - 1}")
        return int(layer)


def index_path(model_sha: str, digest: str, cache_dir: str | os.PathLike | None = None,
               dtype: str = "float16") -> Path:
    """Where the SemCor index for this model and these SemCor sentences lives."""
    key = hashlib.sha256(json.dumps([INDEX_VERSION, model_sha, digest, dtype]).encode()).hexdigest()
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return root / model_sha[:16] / f"semcor-index-{key[:16]}.h5"


@contextlib.contextmanager
def _locked(path: Path):
    lock = path.with_name(path.name + ".lock")
    with open(lock, "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def semcor_sentences(root: str | os.PathLike | None = None,
                     limit_sentences: int | None = None) -> list[WsdSentence]:
    """SemCor as read by ``read_wsd_corpus`` (the first ``limit_sentences`` when given)."""
    return read_wsd_corpus("semcor", root, limit_sentences)


def build_semcor_index(
    model,
    root: str | os.PathLike | None = None,
    *,
    limit_sentences: int | None = None,
    sentences: Sequence[WsdSentence] | None = None,
    cache_dir: str | os.PathLike | None = None,
    dtype: str = "float16",
    batch_size: int = 32,
    progress: ProgressCallback | None = None,
) -> SemcorIndex:
    """The SemCor index of ``model`` (a ``BiLM``): built on the first call, then opened.

    Runs the biLM over SemCor through the activation cache (``dataset="semcor"``, stored as
    ``dtype``; resumable), then per layer computes every instance's vector and every sense's
    centroid. ``limit_sentences`` uses only the first N sentences (a smaller, faster index);
    ``sentences`` replaces SemCor altogether (tests). ``progress(label, done, total, unit)``.

    Cost: the biLM pass dominates (SemCor is 37,176 sentences, 820,410 words); the rest is
    a few seconds per layer. Disk: the activation cache (n_layers x 820k x dim x 2 bytes in
    float16) plus the index (n_layers x 226k x dim x 2 bytes).
    """
    if sentences is None:
        sentences = semcor_sentences(root, limit_sentences)
    sentences = list(sentences)
    if not sentences:
        raise ValueError("no SemCor sentences to index")
    tokens = [list(s.tokens) for s in sentences]
    model_sha = model_checksum(model)
    digest = tokens_digest(tokens)
    path = index_path(model_sha, digest, cache_dir, dtype)
    path.parent.mkdir(parents=True, exist_ok=True)
    with _locked(path):
        if path.exists():
            try:
                index = SemcorIndex(path)
                if (index.model_checksum, index.tokens_digest) == (model_sha, digest):
                    return index
                logger.warning("%s belongs to another model or corpus; rebuilding it", path)
            except (OSError, KeyError, ValueError) as err:
                logger.warning("damaged SemCor index %s (%s); rebuilding it", path, err)
            path.unlink()
        split = "train" if limit_sentences is None else f"train-first{len(sentences)}"
        cache = extract_activations(model, tokens, "semcor", split, cache_dir=cache_dir,
                                    dtype=dtype, batch_size=batch_size,
                                    progress=_stage(progress, "embedding SemCor"))
        try:
            _write_index(path, cache, sentences, model_sha, digest, dtype,
                         str(getattr(model, "name", "") or ""), progress)
        finally:
            cache.close()
    return SemcorIndex(path)


def _write_index(path: Path, cache: ActivationCache, sentences: Sequence[WsdSentence],
                 model_sha: str, digest: str, dtype: str, model_name: str,
                 progress: ProgressCallback | None) -> None:
    pairs = list(iter_instances(sentences))
    sentence_number = {id(s): i for i, s in enumerate(sentences)}
    n = len(pairs)
    if n == 0:
        raise ValueError("the SemCor sentences hold no sense-tagged instance")
    lemma = [inst.lemma for _s, inst in pairs]
    pos = np.array([WSD_POS.index(inst.pos) if inst.pos in WSD_POS else 0 for _s, inst in pairs])
    sent = np.array([sentence_number[id(s)] for s, _i in pairs], dtype=np.int64)
    start = np.array([inst.start for _s, inst in pairs], dtype=np.int64)
    end = np.array([inst.end for _s, inst in pairs], dtype=np.int64)
    keys = [tuple(sorted(inst.sense_keys)) for _s, inst in pairs]
    untagged = sum(1 for k in keys if not k)
    if untagged:
        logger.warning("%d SemCor instances have no gold key; they get no sense", untagged)
    # rows grouped by lemma, then POS, then corpus order
    order = np.array(sorted(range(n), key=lambda i: (lemma[i], pos[i], i)), dtype=np.int64)
    lemmas = sorted(set(lemma))
    lemma_sorted = [lemma[i] for i in order]
    offsets = np.array([bisect_left(lemma_sorted, name) for name in lemmas] + [n], dtype=np.int64)
    token_start = cache.offsets[sent] + start
    token_end = cache.offsets[sent] + end
    sense_list = sorted({k for ks in keys for k in ks})
    n_layers, dim = cache.n_layers, cache.dim

    partial = path.with_name(path.name + ".partial")
    if partial.exists():
        partial.unlink()
    string = h5py.string_dtype("utf-8")
    with h5py.File(partial, "w") as f:
        f.attrs.update({"version": INDEX_VERSION, "complete": False, "model_checksum": model_sha,
                        "model_name": model_name, "tokens_digest": digest, "n_layers": n_layers,
                        "dim": dim, "n_sentences": len(sentences), "n_instances": n,
                        "n_senses": len(sense_list), "dtype": dtype})
        f.create_dataset("sentences", data=[" ".join(s.tokens) for s in sentences], dtype=string)
        f.create_dataset("sentence_ids", data=[s.sentence_id for s in sentences], dtype=string)
        f.create_dataset("lemmas", data=lemmas, dtype=string)
        f.create_dataset("lemma_offsets", data=offsets)
        f.create_dataset("inst_sentence", data=sent[order].astype(np.int32))
        f.create_dataset("inst_start", data=start[order].astype(np.int32))
        f.create_dataset("inst_end", data=end[order].astype(np.int32))
        f.create_dataset("inst_pos", data=pos[order].astype(np.uint8))
        f.create_dataset("inst_keys", data=[" ".join(keys[i]) for i in order], dtype=string)
        f.create_dataset("inst_ids", data=[pairs[i][1].instance_id for i in order], dtype=string)
        rows = max(1, (1 << 20) // (dim * np.dtype(dtype).itemsize))
        vectors = f.create_dataset("vectors", shape=(n_layers, n, dim), dtype=dtype,
                                   chunks=(1, min(rows, n), dim))
        centroids = f.create_dataset("centroids", shape=(n_layers, len(sense_list), dim),
                                     dtype="float32")
        counts = None
        for j in range(n_layers):
            _report(progress, "indexing SemCor instances", j, n_layers, "layers")
            layer = span_vectors(cache, j, token_start, token_end)  # (n, dim), corpus order
            vectors[j] = layer[order].astype(dtype)
            names, means, counts = sense_centroids(keys, layer)
            centroids[j] = means
            del layer
        _report(progress, "indexing SemCor instances", n_layers, n_layers, "layers")
        f.create_dataset("senses", data=sense_list, dtype=string)
        f.create_dataset("sense_counts", data=counts if counts is not None else np.zeros(0, np.int64))
        f.attrs["complete"] = True
    with open(partial, "rb") as handle:
        os.fsync(handle.fileno())
    os.replace(partial, path)
    logger.info("SemCor index: %d sentences, %d instances, %d senses, %d layers -> %s",
                len(sentences), n, len(sense_list), n_layers, path)


# --------------------------------------------------------------------------------------------
# All-words WSD evaluation
# --------------------------------------------------------------------------------------------


@dataclass
class WsdRow:
    """One representation's F1 per column. ``scores``: {column: WsdScore} where a column is an
    evaluation set name, :data:`FOUR_SETS` or ``ALL``. ``n_backoff``: ALL instances that got
    the first sense because their lemma has no SemCor centroid among its senses;
    ``n_unanswered``: instances WordNet has no sense for. ``weights``: the s_j of a mix row."""

    representation: str
    scores: dict[str, WsdScore]
    n_backoff: int = 0
    n_unanswered: int = 0
    weights: list[float] | None = None

    def f1(self, column: str) -> float:
        """F1 in percent for ``column``."""
        return 100.0 * self.scores[column].f1

    def to_dict(self) -> dict:
        return {"representation": self.representation, "n_backoff": self.n_backoff,
                "n_unanswered": self.n_unanswered, "weights": self.weights,
                "scores": {k: v.to_dict() for k, v in self.scores.items()}}

    @classmethod
    def from_dict(cls, d: Mapping) -> "WsdRow":
        return cls(d["representation"], {k: WsdScore.from_dict(v) for k, v in d["scores"].items()},
                   int(d["n_backoff"]), int(d["n_unanswered"]),
                   None if d.get("weights") is None else [float(w) for w in d["weights"]])


@dataclass
class WsdResult:
    """All-words 1-NN WSD of one model (see :func:`evaluate_wsd`).

    ``columns``: the evaluation sets, then :data:`FOUR_SETS`, then ``ALL``; ``rows``: one per
    layer evaluated and one for the scalar mix; ``first_sense``: the WordNet first-sense
    baseline in the same columns; ``paper``: :data:`PAPER_2018` (percent, four sets).
    ``semcor``: counts of the SemCor index used (sentences, instances, senses).
    """

    model_name: str
    model_checksum: str
    columns: list[str]
    rows: list[WsdRow]
    first_sense: WsdRow
    semcor: dict[str, int]
    paper: dict[str, float] = field(default_factory=lambda: dict(PAPER_2018))
    notes: list[str] = field(default_factory=list)

    def row(self, representation: str) -> WsdRow:
        for r in self.rows:
            if r.representation == representation:
                return r
        raise KeyError(f"no row {representation!r}; rows: {[r.representation for r in self.rows]}")

    def best_layer(self, column: str = FOUR_SETS) -> WsdRow:
        """The single-layer row with the highest F1 on ``column``."""
        layers = [r for r in self.rows if r.representation.startswith("layer ")]
        return max(layers, key=lambda r: r.scores[column].f1)

    def table(self) -> list[dict]:
        """Rows for display: representation, F1 (percent) per column, backoffs."""
        out = []
        for r in [self.first_sense, *self.rows]:
            row = {"representation": r.representation}
            row.update({c: round(r.f1(c), 1) for c in self.columns})
            row["backoff"] = r.n_backoff
            out.append(row)
        return out

    def to_json(self) -> str:
        return json.dumps({
            "kind": "wsd", "version": RESULT_VERSION, "model_name": self.model_name,
            "model_checksum": self.model_checksum, "columns": self.columns,
            "rows": [r.to_dict() for r in self.rows], "first_sense": self.first_sense.to_dict(),
            "semcor": self.semcor, "paper": self.paper, "notes": self.notes})

    @classmethod
    def from_json(cls, text: str) -> "WsdResult":
        d = json.loads(text)
        if d.get("kind") != "wsd" or d.get("version") != RESULT_VERSION:
            raise ValueError(f"not a WSD result (kind {d.get('kind')!r}, version {d.get('version')!r})")
        return cls(d["model_name"], d["model_checksum"], list(d["columns"]),
                   [WsdRow.from_dict(r) for r in d["rows"]], WsdRow.from_dict(d["first_sense"]),
                   {k: int(v) for k, v in d["semcor"].items()},
                   {k: float(v) for k, v in d["paper"].items()}, list(d["notes"]))


def _set_of(instance_id: str) -> str:
    return instance_id.split(".", 1)[0]


def score_columns(gold: Mapping[str, Iterable[str]], pred: Mapping[str, str | None],
                  sets: Sequence[str]) -> dict[str, WsdScore]:
    """F1 per evaluation set (instances whose id starts with ``SET.``, as in ALL's files), on
    the four sets of Peters et al. together (:data:`FOUR_SETS`) and on every id (``ALL``)."""
    out: dict[str, WsdScore] = {}
    groups = {name: {name} for name in sets}
    groups[FOUR_SETS] = set(PETERS_2018_TEST_SETS)
    for column, members in groups.items():
        g = {i: k for i, k in gold.items() if _set_of(i) in members}
        out[column] = wsd_f1(g, {i: p for i, p in pred.items() if i in g})
    out["ALL"] = wsd_f1(gold, pred)
    return out


def _mix_label(weights: Sequence[float]) -> str:
    return "mix (s_j = " + ", ".join(f"{w:.2f}" for w in weights) + ")"


def evaluate_wsd(
    model,
    root: str | os.PathLike | None = None,
    *,
    layers: Sequence[int] | None = None,
    mix_weights: Sequence[float] | str | None = "uniform",
    index: SemcorIndex | None = None,
    limit_semcor: int | None = None,
    cache_dir: str | os.PathLike | None = None,
    batch_size: int = 32,
    progress: ProgressCallback | None = None,
) -> WsdResult:
    """All-words WSD by 1-NN on SemCor sense centroids, per layer and on a scalar mix.

    - ``layers``: which layers get a row (default: all, 0..L).
    - ``mix_weights``: s_j over all L+1 layers for the mix row ("uniform": 1/(L+1) each, the
      average of the layers; None: no mix row). The mix of the centroids is the centroid of
      the mixes, so the mix needs no second pass; gamma does not change a cosine.
    - ``index``: a SemCor index of this model (built with :func:`build_semcor_index` when
      None, with ``limit_semcor`` sentences).

    Evaluates on ALL (senseval2, senseval3, semeval2007, semeval2013, semeval2015 with ids
    prefixed by the set name) embedded once through the activation cache; each set's F1 is
    ALL restricted to its ids. ``progress(label, done, total, unit)``.
    """
    wordnet(root)
    if index is None:
        index = build_semcor_index(model, root, limit_sentences=limit_semcor, cache_dir=cache_dir,
                                   batch_size=batch_size, progress=progress)
    if index.model_checksum != model_checksum(model):
        raise ValueError(f"the SemCor index {index.path} was built with another model "
                         f"({index.model_checksum[:12]}, this one is {model_checksum(model)[:12]})")
    n_layers = index.n_layers
    layers = list(range(n_layers)) if layers is None else [int(j) for j in layers]
    for j in layers:
        index._check_layer(j)
    if isinstance(mix_weights, str):
        if mix_weights != "uniform":
            raise ValueError(f"mix_weights must be 'uniform', None or {n_layers} numbers")
        weights = [1.0 / n_layers] * n_layers
    elif mix_weights is None:
        weights = None
    else:
        weights = [float(w) for w in mix_weights]
        if len(weights) != n_layers or any(w < 0 for w in weights) or sum(weights) <= 0:
            raise ValueError(f"mix_weights: expected {n_layers} non-negative weights, got {weights}")
        total = sum(weights)
        weights = [w / total for w in weights]

    sentences = read_wsd_corpus("ALL", root)
    tokens = [list(s.tokens) for s in sentences]
    cache = extract_activations(model, tokens, "wsd_framework", "ALL", cache_dir=cache_dir,
                                batch_size=batch_size, progress=_stage(progress, "embedding ALL"))
    number = {id(s): i for i, s in enumerate(sentences)}
    pairs = list(iter_instances(sentences))
    token_start = np.array([cache.offsets[number[id(s)]] + i.start for s, i in pairs])
    token_end = np.array([cache.offsets[number[id(s)]] + i.end for s, i in pairs])
    instances = [(i.instance_id, i.lemma, i.pos) for _s, i in pairs]
    gold = gold_keys(sentences)
    sets = [name for name in EVALUATION_SETS if name != "ALL"]
    columns = [*sets, FOUR_SETS, "ALL"]

    needed = sorted(set(layers) | (set(range(n_layers)) if weights else set()))
    test_vectors = {}
    for k, j in enumerate(needed):
        _report(progress, "WSD instance vectors", k, len(needed), "layers")
        test_vectors[j] = span_vectors(cache, j, token_start, token_end)
    cache.close()

    rows: list[WsdRow] = []
    plans = [(f"layer {j}", {j: 1.0}) for j in layers]
    if weights:
        plans.append((_mix_label(weights), dict(enumerate(weights))))
    for k, (name, mix) in enumerate(plans):
        _report(progress, "1-NN WSD", k, len(plans), "representations")
        vectors = sum(w * test_vectors[j] for j, w in mix.items() if w)
        centroids = sum(w * index.centroids(j) for j, w in mix.items() if w)
        decided = nearest_sense_predict(instances, vectors, index.sense_keys, centroids)
        rows.append(WsdRow(name, score_columns(gold, decided.predictions, sets),
                           len(decided.backoff), len(decided.unanswered),
                           [float(w) for w in weights] if name.startswith("mix") else None))
    _report(progress, "1-NN WSD", len(plans), len(plans), "representations")
    baseline = {}
    for instance_id, lemma, pos in instances:
        baseline[instance_id] = first_sense(lemma, pos)
    first = WsdRow("WordNet first sense", score_columns(gold, baseline, sets), 0,
                   sum(1 for v in baseline.values() if v is None))

    notes = []
    n_backoff = rows[0].n_backoff if rows else 0
    notes.append(f"{n_backoff:,} of {len(instances):,} ALL instances have no SemCor centroid "
                 f"among their lemma's senses and back off to WordNet's first sense.")
    if index.n_sentences < 37176:
        notes.append(f"Centroids from the first {index.n_sentences:,} SemCor sentences only "
                     f"(of 37,176): expect more backoff and lower F1 than with all of SemCor.")
    if weights:
        notes.append("The mix row averages the layers' vectors with the s_j shown (unnormalised "
                     "layers, as ELMo's scalar mix without layer norm); gamma does not change a cosine.")
    return WsdResult(
        model_name=str(getattr(model, "name", "") or index.model_name or "biLM"),
        model_checksum=index.model_checksum, columns=columns, rows=rows, first_sense=first,
        semcor={"sentences": index.n_sentences, "instances": index.n_instances,
                "senses": len(index.sense_keys)},
        notes=notes)


def format_wsd_table(result: WsdResult) -> str:
    """The F1 table as text (percent): one line per representation, one column per set."""
    short = {FOUR_SETS: "4 sets"}
    headers = ["representation"] + [short.get(c, c) for c in result.columns] + ["backoff"]
    lines = []
    body = []
    for r in [result.first_sense, *result.rows]:
        body.append([r.representation] + [f"{r.f1(c):.1f}" for c in result.columns]
                    + [str(r.n_backoff)])
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(headers)]
    fmt = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)  # noqa: E731
                                  for i, (c, w) in enumerate(zip(cells, widths)))
    lines.append(fmt(headers))
    lines.append("  ".join("-" * w for w in widths))
    lines.extend(fmt(b) for b in body)
    paper = result.paper
    lines.append("")
    lines.append(f"Peters et al. (2018), 4 sets: WordNet first sense {paper['WordNet first sense']:.1f}, "
                 f"biLM layer 1 {paper['biLM layer 1']:.1f}, layer 2 {paper['biLM layer 2']:.1f} "
                 f"(their 2x4096-512 biLM on the 1B Word Benchmark)")
    best = result.best_layer() if any(r.representation.startswith("layer ") for r in result.rows) else None
    if best is not None:
        margin = best.f1(FOUR_SETS) - result.first_sense.f1(FOUR_SETS)
        lines.append(f"best layer on the 4 sets: {best.representation} {best.f1(FOUR_SETS):.1f} "
                     f"({margin:+.1f} vs first sense)")
    lines.extend(f"note: {n}" for n in result.notes)
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Senseval-2 lexical sample: a linear probe per layer
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LexicalSampleInstance:
    """One Senseval-2 lexical-sample context: words (windowed), the target's index, its sense."""

    tokens: tuple[str, ...]
    position: int
    sense: str


def read_lexical_sample(word: str, root: str | os.PathLike | None = None, *,
                        max_instances: int | None = None, window: int = 30,
                        seed: int = 0) -> list[LexicalSampleInstance]:
    """The Senseval-2 lexical sample of ``word`` (hard, interest, line or serve) from NLTK's
    ``senseval`` corpus in the data root.

    NLTK's contexts are lower-cased, POS-tagged words (the tags are dropped here, and so are
    the few bare-string markers such as ``FRASL``); every instance has one sense label.
    ``window``: words kept on each side of the target (the contexts run to several
    sentences). ``max_instances``: a seeded random sample of that many (None: all). Reading
    one word takes ~10 s (NLTK parses the whole file).
    """
    if word not in SENSEVAL_WORDS:
        raise ValueError(f"no Senseval-2 lexical sample for {word!r}; NLTK has {', '.join(SENSEVAL_WORDS)}")
    require("senseval", root)
    use_nltk_data(root)
    from nltk.corpus import senseval

    out = []
    for inst in senseval.instances(f"{word}.pos"):
        words, position = [], None
        for k, item in enumerate(inst.context):
            if not isinstance(item, tuple):
                continue
            if k == inst.position:
                position = len(words)
            words.append(str(item[0]))
        if position is None or not inst.senses:
            continue
        lo = max(0, position - window)
        out.append(LexicalSampleInstance(tuple(words[lo:position + window + 1]), position - lo,
                                         str(inst.senses[0])))
    if max_instances is not None and len(out) > max_instances:
        chosen = sorted(random.Random(seed).sample(range(len(out)), max_instances))
        out = [out[i] for i in chosen]
    return out


def control_labels(keys: Sequence[str], labels: Sequence[str], seed: int = 0) -> list[str]:
    """Hewitt & Liang (2019) control task: each distinct ``key`` (a word type) gets a random
    label drawn from the empirical distribution of ``labels``; every occurrence of the key
    carries it. Deterministic for a seed."""
    rng = np.random.default_rng(seed)
    counts = Counter(labels)
    names = sorted(counts)
    p = np.array([counts[n] for n in names], dtype=np.float64)
    p /= p.sum()
    mapping: dict[str, str] = {}
    for key in sorted(set(keys)):
        mapping[key] = names[int(rng.choice(len(names), p=p))]
    return [mapping[k] for k in keys]


def probe_accuracy(x_train: np.ndarray, y_train: Sequence, x_test: np.ndarray, y_test: Sequence,
                   seed: int = 0, c: float = 1.0) -> float:
    """Accuracy of a multinomial logistic-regression probe (standardised features, L2 with
    inverse strength ``c``) trained on the train split, on the test split."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if len(set(y_train)) < 2:
        label = next(iter(y_train))
        return float(np.mean([y == label for y in y_test]))
    probe = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=2000, random_state=seed))
    probe.fit(x_train, list(y_train))
    return float(probe.score(x_test, list(y_test)))


@dataclass
class LexicalSampleWord:
    """Probe figures for one word: accuracies in [0, 1] per layer (index = layer)."""

    word: str
    sense_counts: dict[str, int]
    n_train: int
    n_test: int
    majority_accuracy: float
    layer_accuracy: list[float]
    control_accuracy: list[float]

    @property
    def selectivity(self) -> list[float]:
        """Task accuracy minus control accuracy, per layer."""
        return [a - c for a, c in zip(self.layer_accuracy, self.control_accuracy)]


@dataclass
class LexicalSampleResult:
    """The Senseval-2 lexical-sample probe (see :func:`lexical_sample_probe`)."""

    model_name: str
    model_checksum: str
    words: list[LexicalSampleWord]
    settings: dict
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps({"kind": "wsd_lexical_sample", "version": RESULT_VERSION,
                           "model_name": self.model_name, "model_checksum": self.model_checksum,
                           "words": [asdict(w) for w in self.words], "settings": self.settings,
                           "notes": self.notes})

    @classmethod
    def from_json(cls, text: str) -> "LexicalSampleResult":
        d = json.loads(text)
        if d.get("kind") != "wsd_lexical_sample" or d.get("version") != RESULT_VERSION:
            raise ValueError(f"not a lexical-sample result (kind {d.get('kind')!r})")
        return cls(d["model_name"], d["model_checksum"], [LexicalSampleWord(**w) for w in d["words"]],
                   dict(d["settings"]), list(d["notes"]))


def lexical_sample_features(model, instances: Sequence[LexicalSampleInstance], word: str, *,
                            cache_dir: str | os.PathLike | None = None, batch_size: int = 32,
                            progress: ProgressCallback | None = None) -> np.ndarray:
    """The target word's vector in every layer, (n_layers, N, dim) float32, through the
    activation cache (``dataset="senseval2_lexical_sample"``, ``split=word``)."""
    tokens = [list(i.tokens) for i in instances]
    cache = extract_activations(model, tokens, "senseval2_lexical_sample", word, cache_dir=cache_dir,
                                batch_size=batch_size, progress=_stage(progress, f"embedding {word!r}"))
    rows = cache.offsets[:-1] + np.array([i.position for i in instances])
    out = np.stack([span_vectors(cache, j, rows, rows + 1) for j in range(cache.n_layers)])
    cache.close()
    return out


def lexical_sample_probe(
    model,
    root: str | os.PathLike | None = None,
    *,
    words: Sequence[str] = SENSEVAL_WORDS,
    max_instances: int | None = 600,
    window: int = 30,
    test_fraction: float = 0.25,
    seed: int = 0,
    cache_dir: str | os.PathLike | None = None,
    batch_size: int = 32,
    progress: ProgressCallback | None = None,
) -> LexicalSampleResult:
    """A linear sense probe per layer for each Senseval-2 lexical-sample word.

    Per word: a seeded sample of ``max_instances`` contexts (None: all; there are 2,368 to
    4,378 a word), ``window`` words each side of the target, a stratified train/test split
    (``test_fraction``), a logistic-regression probe per layer on the target's vector, the
    majority-sense baseline, and a control task (Hewitt & Liang 2019). The target word type
    is the same in every context, so the control label is keyed by the word type *after* the
    target (its surface form + the next word): a random sense per such type, from the sense
    distribution, which a probe can only memorise. Selectivity = accuracy - control accuracy.
    """
    from sklearn.model_selection import train_test_split

    results = []
    notes = []
    checksum = model_checksum(model)
    for k, word in enumerate(words):
        _report(progress, "lexical-sample probe", k, len(words), "words")
        instances = read_lexical_sample(word, root, max_instances=max_instances, window=window, seed=seed)
        x = lexical_sample_features(model, instances, word, cache_dir=cache_dir,
                                    batch_size=batch_size, progress=progress)
        y = [i.sense for i in instances]
        counts = Counter(y)
        stratify = y if min(counts.values()) >= 2 else None
        if stratify is None:
            notes.append(f"{word}: a sense with a single sampled context; the split is not stratified.")
        idx_train, idx_test = train_test_split(np.arange(len(y)), test_size=test_fraction,
                                               random_state=seed, stratify=stratify)
        keys = [f"{i.tokens[i.position]} {i.tokens[i.position + 1] if i.position + 1 < len(i.tokens) else '</s>'}"
                for i in instances]
        control = control_labels(keys, y, seed=seed)
        y_train, y_test = [y[i] for i in idx_train], [y[i] for i in idx_test]
        c_train, c_test = [control[i] for i in idx_train], [control[i] for i in idx_test]
        majority = Counter(y_train).most_common(1)[0][0]
        accuracy, control_accuracy = [], []
        for j in range(x.shape[0]):
            accuracy.append(probe_accuracy(x[j, idx_train], y_train, x[j, idx_test], y_test, seed))
            control_accuracy.append(probe_accuracy(x[j, idx_train], c_train, x[j, idx_test], c_test, seed))
        results.append(LexicalSampleWord(
            word=word, sense_counts=dict(sorted(counts.items())), n_train=len(idx_train),
            n_test=len(idx_test), majority_accuracy=float(np.mean([t == majority for t in y_test])),
            layer_accuracy=accuracy, control_accuracy=control_accuracy))
    _report(progress, "lexical-sample probe", len(words), len(words), "words")
    return LexicalSampleResult(
        model_name=str(getattr(model, "name", "") or "biLM"), model_checksum=checksum, words=results,
        settings={"max_instances": max_instances, "window": window, "test_fraction": test_fraction,
                  "seed": seed, "probe": "logistic regression, standardised features, C=1"},
        notes=notes)


def format_lexical_sample_table(result: LexicalSampleResult) -> str:
    """Accuracy (percent) per word and layer, with majority and control baselines."""
    n_layers = len(result.words[0].layer_accuracy) if result.words else 0
    head = f"{'word':<10}{'n':>6}{'majority':>10}" + "".join(f"{'layer ' + str(j):>10}" for j in range(n_layers))
    lines = [head, "-" * len(head)]
    for w in result.words:
        lines.append(f"{w.word:<10}{w.n_train + w.n_test:>6}{100 * w.majority_accuracy:>10.1f}"
                     + "".join(f"{100 * a:>10.1f}" for a in w.layer_accuracy))
        lines.append(f"{'  control':<10}{'':>6}{'':>10}"
                     + "".join(f"{100 * a:>10.1f}" for a in w.control_accuracy))
    lines.extend(f"note: {n}" for n in result.notes)
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m probing.wsd``: the all-words WSD table (and optionally the lexical sample)."""
    parser = argparse.ArgumentParser(
        prog="python -m probing.wsd",
        description="All-words WSD the way Peters et al. (2018) did it: 1-NN on SemCor sense "
                    "centroids per biLM layer and on a scalar mix, first-sense backoff; F1 per "
                    "Raganato evaluation set, on the paper's four test sets together and on ALL, "
                    "beside the WordNet first-sense baseline and the paper's numbers. The SemCor "
                    "pass is cached (activation cache + SemCor index) and resumes if interrupted.")
    parser.add_argument("--model", default="elmo-mini",
                        help="shipped model name or a directory with options.json + weights (default: %(default)s)")
    parser.add_argument("--layers", type=int, nargs="+", default=None, metavar="J",
                        help="layers to score (default: all, 0..L)")
    parser.add_argument("--mix", type=float, nargs="+", default=None, metavar="S",
                        help="s_j of the scalar-mix row, one per layer (default: uniform)")
    parser.add_argument("--no-mix", action="store_true", help="leave out the scalar-mix row")
    parser.add_argument("--limit-semcor", type=int, default=None, metavar="N",
                        help="build centroids from the first N SemCor sentences only (faster, weaker)")
    parser.add_argument("--lexical-sample", action="store_true",
                        help="also run the Senseval-2 lexical-sample probe (hard, interest, line, serve)")
    parser.add_argument("--max-instances", type=int, default=600,
                        help="lexical sample: contexts sampled per word (default: %(default)s)")
    parser.add_argument("--data-root", default=None, help="the data root (default: $ELMO_WORKBENCH_DATA or the user cache)")
    parser.add_argument("--cache-dir", default=None, help="activation cache directory (default: $ELMO_WORKBENCH_CACHE or the user cache)")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per biLM batch (default: %(default)s)")
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="also write the result as JSON")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from elmo_model import load_bilm

    try:
        model = load_bilm(args.model)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    progress = TerminalProgress()
    mix: Sequence[float] | str | None = None if args.no_mix else (args.mix or "uniform")
    try:
        result = evaluate_wsd(model, args.data_root, layers=args.layers, mix_weights=mix,
                              limit_semcor=args.limit_semcor, cache_dir=args.cache_dir,
                              batch_size=args.batch_size, progress=progress)
    except (ValueError, FileNotFoundError, IndexError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"\nAll-words WSD, F1 (%), model {result.model_name} "
          f"(SemCor: {result.semcor['sentences']:,} sentences, {result.semcor['instances']:,} instances)")
    print(format_wsd_table(result))
    outputs = {"wsd": json.loads(result.to_json())}
    if args.lexical_sample:
        lexical = lexical_sample_probe(model, args.data_root, max_instances=args.max_instances,
                                       cache_dir=args.cache_dir, batch_size=args.batch_size,
                                       progress=progress)
        print("\nSenseval-2 lexical sample, probe accuracy (%) per layer")
        print(format_lexical_sample_table(lexical))
        outputs["lexical_sample"] = json.loads(lexical.to_json())
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.json.with_name(args.json.name + ".partial")
        tmp.write_text(json.dumps(outputs, indent=1), encoding="utf-8")
        os.replace(tmp, args.json)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
