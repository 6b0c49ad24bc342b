"""The SemCor sense index: every sense-tagged SemCor instance as the biLM sees it, per layer.

:func:`build_semcor_index` runs the biLM over SemCor once (through the activation cache,
``dataset="semcor"``), then per layer keeps one vector per sense-tagged instance (a multiword
instance is the mean of its words' vectors) and one centroid per sense key (the mean of its
instances); :class:`SemcorIndex` reads the file back. Built once per model and reused by 1-NN
WSD (``probing.senses.wsd``), nearest-neighbour retrieval (``probing.senses.retrieval``), projections
(``probing.senses.projections``) and learned word-sense mixes (``probing.senses.word_senses``).

Index file (one hdf5 file, ``INDEX_VERSION`` 1), next to the model's activation caches::

    <cache_dir>/<model checksum[:16]>/semcor-index-<key[:16]>.h5
    attrs       version, complete, model_identity, model_name, tokens_digest, n_layers, dim,
                n_sentences, n_instances, n_senses, dtype, build_id (random, one per build),
                manifest (JSON: what the index is for, see ``index_manifest``)
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

``vectors`` and ``centroids`` carry a Fletcher-32 checksum per chunk (a flipped byte fails the read).

Reliability (docs/reliability.md): the file is written to ``<file>.partial``; the data is flushed
and fsynced before the ``manifest``/``complete`` marks, then the file is renamed into place, so a
killed build leaves no index or a whole one. An existing index is reused only when its recorded
manifest equals the one asked for (model checksum, precision, SemCor slice and digests, dtype,
layer shape); otherwise it is rebuilt with a log line naming what differs. One builder per index
file (``io_safety.output_lock``): a second one waits, then opens what the first wrote. A
:class:`SemcorIndex` view refuses lazy reads once a rebuild has replaced its file.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import threading
import uuid
from bisect import bisect_left
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import h5py
import numpy as np

from elmo_model.bilm.identity import legacy_checksum, model_identity, note_legacy_entry
from elmo_model.plumbing.io_safety import (ensure_room, flush_to_disk, fsync_path, manifest_differences, manifest_json,
                                           output_lock)
from elmo_model.plumbing.progress import CountCallback, ProgressCallback
from probing.engine.activations import (
    ActivationCache,
    default_cache_dir,
    extract_activations,
    tokens_digest,
)
from probing.engine.renamed_keywords import renamed_keywords
from probing.senses.corpora import (
    WSD_POS,
    WsdSentence,
    corpus_paths,
    iter_instances,
    normalize_pos,
    read_wsd_corpus,
)
from probing.senses.instance_vectors import sense_centroids, span_vectors, unit_rows

log = logging.getLogger(__name__)

INDEX_VERSION = 1


# --------------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------------


def normalize_lemma(lemma: str) -> str:
    """'Take place' / 'take_place' -> 'take_place' (the index's and WordNet's spelling)."""
    return "_".join(lemma.strip().lower().replace("_", " ").split())


def as_count_callback(progress: ProgressCallback | None, label: str, unit: str = "sentences") -> CountCallback | None:
    """Adapt ``progress(label, done, total, unit)`` to the activation cache's ``(done, total)``."""
    if progress is None:
        return None
    return lambda done, total: progress(label, done, total, unit)


def report_progress(progress: ProgressCallback | None, label: str, done: float, total: float | None,
                    unit: str = "steps") -> None:
    """``progress(label, done, total, unit)`` when a callback is given."""
    if progress is not None:
        progress(label, done, total, unit)


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
            self.model_identity = str(attrs.get("model_identity", attrs.get("model_checksum")))  # the earlier key
            self.model_name = str(attrs.get("model_name", ""))
            self.tokens_digest = str(attrs["tokens_digest"])
            self.n_layers = int(attrs["n_layers"])
            self.dim = int(attrs["dim"])
            self.n_sentences = int(attrs["n_sentences"])
            self.n_instances = int(attrs["n_instances"])
            self.dtype = str(attrs["dtype"])
            self.manifest_json: str | None = (str(attrs["manifest"]) if "manifest" in attrs else None)
            self.build_id = str(attrs.get("build_id", ""))
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

    @contextlib.contextmanager
    def _reopen(self) -> Iterator[h5py.File]:
        """The file again, for a lazy read. Refused when ``path`` no longer holds the build this
        view was opened on (a rebuild replaced it), so every table of one view comes from one
        build; a chunk that fails its checksum is named with the way out."""
        try:
            with h5py.File(self.path, "r") as f:
                if str(f.attrs.get("build_id", "")) != self.build_id:
                    raise ValueError(f"{self.path}: the SemCor index was rebuilt after this view of it "
                                     "was opened; open it again (build_semcor_index or SemcorIndex(path))")
                yield f
        except FileNotFoundError:
            raise ValueError(f"{self.path}: the SemCor index file is gone; build it again "
                             "(build_semcor_index)") from None
        except OSError as err:
            raise ValueError(f"{self.path}: damaged SemCor index ({err}); delete the file and run "
                             "again to rebuild it") from err

    @property
    def manifest(self) -> dict | None:
        """What the index was built for (see :func:`index_manifest`); None for a file written
        before indexes recorded it."""
        return None if self.manifest_json is None else json.loads(self.manifest_json)

    def __repr__(self) -> str:
        return (f"SemcorIndex({str(self.path)!r}, n_layers={self.n_layers}, dim={self.dim}, "
                f"n_sentences={self.n_sentences}, n_instances={self.n_instances}, n_senses={len(self.sense_keys)})")

    # -- lazily loaded tables ---------------------------------------------------------------
    def _load_strings(self) -> None:
        if self._sentences is None:
            with self._reopen() as f:
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
            rows = rows[self.inst_pos[rows] == WSD_POS.index(normalize_pos(pos))]
        return rows

    def vectors(self, layer: int, rows: np.ndarray | None = None) -> np.ndarray:
        """Instance vectors of ``layer`` for ``rows`` (all when None), (n, dim) float32."""
        layer = self._check_layer(layer)
        with self._reopen() as f:
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
            with self._reopen() as f:
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
            with self._reopen() as f:
                self._centroids[layer] = f["centroids"][layer].astype(np.float32)
        return self._centroids[layer]

    def _check_layer(self, layer: int) -> int:
        if not 0 <= layer < self.n_layers:
            raise IndexError(f"layer {layer} out of range: the index has layers 0..{self.n_layers - 1}")
        return int(layer)


def index_path(model_sha: str, digest: str, cache_dir: str | os.PathLike | None = None, dtype: str = "float16") -> Path:
    """Where the SemCor index for this model and these SemCor sentences lives."""
    key = hashlib.sha256(json.dumps([INDEX_VERSION, model_sha, digest, dtype]).encode()).hexdigest()
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return folder / model_sha[:16] / f"semcor-index-{key[:16]}.h5"


@renamed_keywords(root="data_root", limit_sentences="semcor_limit")
def semcor_sentences(data_root: str | os.PathLike | None = None, semcor_limit: int | None = None) -> list[WsdSentence]:
    """SemCor as read by ``read_wsd_corpus`` (the first ``semcor_limit`` sentences when given)."""
    if semcor_limit is not None and semcor_limit < 1:
        raise ValueError(f"semcor_limit {semcor_limit}: expected a positive number of sentences, or None for all")
    # read once per process and file version: a page about one word reads its sentences of the slice
    # on every new word, and the reader parses all of SemCor's gold keys each time (seconds)
    files = corpus_paths("semcor", data_root)
    key = (tuple((str(p), p.stat().st_mtime_ns, p.stat().st_size) for p in files), semcor_limit)
    with _read_lock:
        known = _read.get(key)
    if known is None:
        known = tuple(read_wsd_corpus("semcor", data_root, semcor_limit))
        with _read_lock:
            _read[key] = known
            while len(_read) > 4:
                _read.pop(next(iter(_read)))
    return list(known)


_read: dict[tuple, tuple[WsdSentence, ...]] = {}
_read_lock = threading.Lock()


def _ensure_index_room(partial: Path, sentences: Sequence, n: int, n_senses: int, n_layers: int, dim: int,
                       dtype: str) -> None:
    """Room for the whole index (vectors, centroids, text) before a byte is written: HDF5 does not
    recover from a failed write. ``DiskFull`` otherwise; the activations stay in their cache."""
    text_bytes = sum(len(" ".join(s.tokens)) + len(s.sentence_id) for s in sentences) + 64 * n
    ensure_room(partial, n_layers * (n * np.dtype(dtype).itemsize + n_senses * 4) * dim + 2 * text_bytes,
                "the activations it is built from stay in their cache")


@renamed_keywords(root="data_root", limit_sentences="semcor_limit")
def build_semcor_index(model, data_root: str | os.PathLike | None = None, *, semcor_limit: int | None = None,
                       sentences: Sequence[WsdSentence] | None = None, cache_dir: str | os.PathLike | None = None,
                       dtype: str = "float16", batch_size: int = 32,
                       progress: ProgressCallback | None = None) -> SemcorIndex:
    """The SemCor index of ``model`` (a ``BiLM``): built on the first call, then opened.

    Runs the biLM over SemCor through the activation cache (``dataset="semcor"``, stored as
    ``dtype``; resumable), then per layer computes every instance's vector and every sense's
    centroid. ``semcor_limit`` uses only the first N sentences (a smaller, faster index);
    ``sentences`` replaces SemCor altogether (tests). ``progress(label, done, total, unit)``.

    Cost: the biLM pass dominates (SemCor is 37,176 sentences, 820,410 words); the rest is
    a few seconds per layer. Disk: the activation cache (n_layers x 820k x dim x 2 bytes in
    float16) plus the index (n_layers x 226k x dim x 2 bytes).
    """
    if sentences is None:
        sentences = semcor_sentences(data_root, semcor_limit)
    sentences = list(sentences)
    if not sentences:
        raise ValueError("no SemCor sentences to index")
    tokens = [list(s.tokens) for s in sentences]
    if dtype not in ("float16", "float32"):
        raise ValueError(f"dtype must be 'float16' or 'float32', got {dtype!r}")
    manifest = index_manifest(model, sentences, dtype)
    path = index_path(manifest["model_identity"], manifest["tokens_digest"], cache_dir, dtype)
    path.parent.mkdir(parents=True, exist_ok=True)
    legacy = index_path(legacy_checksum(model), manifest["tokens_digest"], cache_dir, dtype)
    if not path.exists() and legacy.exists():
        note_legacy_entry(f"SemCor index {legacy}")
    # one builder per index file: a second one waits here, then finds the index the first wrote
    with output_lock(path, wait=True, what="SemCor index"):
        if path.exists():
            try:
                index = SemcorIndex(path)
                differ = manifest_differences(index.manifest_json, manifest)
                if not differ:
                    return index
                log.warning("%s was built for another job (%s differ); rebuilding it", path, ", ".join(differ))
            except (OSError, KeyError, ValueError) as err:
                log.warning("damaged SemCor index %s (%s); rebuilding it", path, err)
            path.unlink()
        split = "train" if semcor_limit is None else f"train-first{len(sentences)}"
        cache = extract_activations(model, tokens, "semcor", split, cache_dir=cache_dir,
                                    dtype=dtype, batch_size=batch_size,
                                    progress=as_count_callback(progress, "embedding SemCor"))
        try:
            _write_index(path, cache, sentences, manifest, str(getattr(model, "name", "") or ""), progress)
        finally:
            cache.close()
        return SemcorIndex(path)


def build_lemma_index(model, lemmas: Sequence[str], data_root: str | os.PathLike | None = None, *,
                      semcor_limit: int | None = None, cache_dir: str | os.PathLike | None = None,
                      dtype: str = "float16", batch_size: int = 32,
                      progress: ProgressCallback | None = None) -> SemcorIndex | None:
    """What the SemCor slice's index knows of ``lemmas``, at the cost of their sentences only.

    When the slice's whole index is built (:func:`build_semcor_index`, on disk), that one. Else an
    index over only the slice's sentences that hold an instance of one of ``lemmas``: for those
    lemmas it holds the whole index's instances, in its order (lemma, part of speech, corpus
    order), with the same sentences, senses and vectors (to float rounding: other batches), so a
    lemma's projection or neighbours are drawn in seconds, not after the whole slice is embedded.
    None when the slice holds no instance of them. ``progress(label, done, total, unit)``."""
    sentences = semcor_sentences(data_root, semcor_limit)
    whole = index_path(model_identity(model), tokens_digest([list(s.tokens) for s in sentences]), cache_dir, dtype)
    if whole.exists():
        try:
            index = SemcorIndex(whole)
            if not manifest_differences(index.manifest_json, index_manifest(model, sentences, dtype)):
                return index
        except (OSError, KeyError, ValueError) as err:
            log.warning("not using the SemCor index %s (%s)", whole, err)
    wanted = {normalize_lemma(x) for x in lemmas}
    subset = [s for s in sentences if any(normalize_lemma(i.lemma) in wanted for i in s.instances)]
    if not subset:
        return None
    return build_semcor_index(model, sentences=subset, cache_dir=cache_dir, dtype=dtype, batch_size=batch_size,
                              progress=progress)


def semcor_digest(sentences: Sequence[WsdSentence]) -> str:
    """sha256 of the sentences' ids and sense annotations (instance ids, lemmas, parts of speech,
    word spans, gold keys): with the tokens' digest, everything of SemCor an index is built from."""
    digest = hashlib.sha256(b"semcor-annotations:")
    for s in sentences:
        record = [s.sentence_id, [[i.instance_id, i.lemma, i.pos, i.start, i.end, sorted(i.sense_keys)]
                                  for i in s.instances]]
        digest.update(json.dumps(record, ensure_ascii=False).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def index_manifest(model, sentences: Sequence[WsdSentence], dtype: str) -> dict:
    """What an index is for: the model (its identity, ``elmo_model.bilm.identity``, and its precision),
    the SemCor slice (sentence count, tokens' digest, annotations' digest), the storage dtype, the layer shape and
    the way the activations were taken. An index file is reused only when its recorded manifest
    equals this one."""
    config = model.config
    return {"index_version": INDEX_VERSION, "model_identity": model_identity(model),
            "precision": str(getattr(model, "precision", "fp32")), "dtype": dtype,
            "n_sentences": len(sentences), "tokens_digest": tokens_digest([list(s.tokens) for s in sentences]),
            "semcor_digest": semcor_digest(sentences), "activations": "stateless",
            "n_layers": int(config.n_output_layers), "dim": int(config.output_dim)}


def _write_index(path: Path, cache: ActivationCache, sentences: Sequence[WsdSentence], manifest: dict,
                 model_name: str, progress: ProgressCallback | None) -> None:
    """Write the index to ``<path>.partial``, then rename it into place. The data is flushed and
    fsynced before the attributes that say the file is complete, and the rename comes last, so
    ``path`` only ever holds a whole index."""
    dtype = manifest["dtype"]
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
        log.warning("%d SemCor instances have no gold key; they get no sense", untagged)
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
    _ensure_index_room(partial, sentences, n, len(sense_list), n_layers, dim, dtype)
    with h5py.File(partial, "w") as f:
        f.attrs.update({"version": INDEX_VERSION, "complete": False,
                        "model_identity": manifest["model_identity"], "model_name": model_name,
                        "tokens_digest": manifest["tokens_digest"], "n_layers": n_layers,
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
        # ~1 MiB chunks, each with a Fletcher-32 checksum: a flipped byte fails the read
        rows = max(1, (1 << 20) // (dim * np.dtype(dtype).itemsize))
        vectors = f.create_dataset("vectors", shape=(n_layers, n, dim), dtype=dtype,
                                   chunks=(1, min(rows, n), dim), fletcher32=True)
        rows = max(1, (1 << 20) // (dim * 4))
        centroids = f.create_dataset("centroids", shape=(n_layers, len(sense_list), dim),
                                     dtype="float32", chunks=(1, max(1, min(rows, len(sense_list))), dim),
                                     fletcher32=True)
        counts = None
        for j in range(n_layers):
            report_progress(progress, "indexing SemCor instances", j, n_layers, "layers")
            layer = span_vectors(cache, j, token_start, token_end)  # (n, dim), corpus order
            vectors[j] = layer[order].astype(dtype)
            names, means, counts = sense_centroids(keys, layer)
            centroids[j] = means
            del layer
        report_progress(progress, "indexing SemCor instances", n_layers, n_layers, "layers")
        f.create_dataset("senses", data=sense_list, dtype=string)
        f.create_dataset("sense_counts", data=counts if counts is not None else np.zeros(0, np.int64))
        flush_to_disk(f)  # the data is on disk before the marks that vouch for it
        f.attrs["manifest"] = manifest_json(manifest)
        f.attrs["build_id"] = uuid.uuid4().hex
        f.attrs["complete"] = True
        flush_to_disk(f)
    fsync_path(partial)
    os.replace(partial, path)
    log.info("SemCor index: %d sentences, %d instances, %d senses, %d layers -> %s",
             len(sentences), n, len(sense_list), n_layers, path)
