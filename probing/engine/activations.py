"""The activation cache: every biLM layer of every token of a dataset split, computed once.

    >>> from elmo_model import load_bilm
    >>> from probing.engine.activations import extract_activations
    >>> cache = extract_activations(load_bilm("elmo-mini"), sentences, "ud_english_ewt", "train")
    >>> cache.layer(1).shape            # (n_tokens, dim) float32: biLM layer 1, every token
    >>> cache.sentence(0).shape         # (n_layers, T_0, dim)

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
import logging
import os
from pathlib import Path
from typing import Iterator, Sequence

import h5py
import numpy as np
import torch

from elmo_model.bilm.char_ids import model_token_ids
from elmo_model.bilm.devices import model_device
from elmo_model.bilm.identity import legacy_checksum, model_identity, note_legacy_entry
from elmo_model.plumbing.io_safety import ensure_room, flush_to_disk, fsync_path, output_lock
from elmo_model.plumbing.progress import CountCallback
from probing.engine import store

from probing.engine.cache_file import (  # noqa: F401  (re-exported: what an extraction returns and where it lives)
    DIRECTIONS, DTYPES, FORMAT_VERSION, MODES, WINDOW_BATCHES, _CHUNK_BYTES, _TORCH_DTYPES, ActivationCache, ActivationCacheError,
    _versions, cache_path, default_cache_dir, open_cache, tokens_digest)

log = logging.getLogger(__name__)

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


def _open_partial(partial: Path, attrs: dict, offsets: np.ndarray, n_layers: int, dim: int, dtype: str) -> h5py.File:
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


def _save_state(f: h5py.File, model, n_done: int, batch_size: int) -> None:
    """The LSTM state carried past the first ``n_done`` sentences, for a stateful resume."""
    if "state" in f:
        del f["state"]
    group = f.create_group("state")
    group.attrs["n_done"] = n_done
    group.attrs["batch_size"] = batch_size
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


def extract_activations(model, sentences: Sequence[Sequence[str]], dataset: str, split: str,
                        cache_dir: str | os.PathLike | None = None, stateful: bool = False, dtype: str = "float32",
                        batch_size: int = 32, progress: CountCallback | None = None, ray: str | None = None,
                        ray_workers: int | None = None,
                        within: tuple[str, Sequence[Sequence[str]]] | None = None) -> ActivationCache:
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
    sentences = _checked_request(sentences, dataset, split, dtype, batch_size, ray, stateful)
    mode = "stateful" if stateful else "stateless"
    model_sha, precision, digest = model_identity(model), getattr(model, "precision", "fp32"), tokens_digest(sentences)
    n_layers, dim = model.config.n_output_layers, model.config.output_dim
    path = cache_path(model_sha, dataset, split, mode, dtype, digest, cache_dir, precision)
    key = {"format_version": FORMAT_VERSION, "model_identity": model_sha, "dataset": dataset, "mode": mode,
           "precision": precision, "dtype": dtype, "n_layers": n_layers, "dim": dim}
    view = None if path.exists() else _reused(path, key, sentences, digest, split, within, cache_dir)
    if view is None:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists():
            legacy = cache_path(legacy_checksum(model), dataset, split, mode, dtype, digest, cache_dir, precision)
            if legacy.exists() or legacy.with_name(legacy.name + ".partial").exists():
                note_legacy_entry(f"activation cache {legacy}")
        with _locked(path):
            view = _cached(path, (model_sha, digest, mode, precision, dtype, n_layers, dim))
            if view is None:
                _write(path, model, sentences, {**key, "split": split, "tokens_digest": digest}, stateful,
                       batch_size, progress, ray, ray_workers)
                return ActivationCache(path)
    if progress:
        progress(len(sentences), len(sentences))
    return view


def _checked_request(sentences: Sequence[Sequence[str]], dataset: str, split: str, dtype: str, batch_size: int,
                     ray: str | None, stateful: bool) -> list[list[str]]:
    """The sentences as lists, once the request is one ``extract_activations`` can serve (else a
    ``ValueError`` or ``TypeError`` saying what is wrong)."""
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
    if not sentences:
        raise ValueError(f"no sentences to extract for {dataset}/{split}")
    return [list(s) for s in sentences]


def _reused(path: Path, key: dict, sentences: list[list[str]], digest: str, split: str,
            within: tuple[str, Sequence[Sequence[str]]] | None, cache_dir) -> ActivationCache | None:
    """A view of a complete cache that already holds ``sentences``: one the store finds, or the
    larger extraction ``within`` names; None when there is none."""
    view = _served(path, key, sentences, digest, split)
    if view is not None or within is None:
        return view
    whole = [list(s) for s in within[1]]
    if len(whole) < len(sentences) or whole[:len(sentences)] != sentences:
        return None
    whole_digest = tokens_digest(whole)
    whole_path = cache_path(key["model_identity"], key["dataset"], within[0], key["mode"], key["dtype"], whole_digest,
                            cache_dir, key["precision"])
    view = _complete(whole_path, (key["model_identity"], whole_digest, key["mode"], key["precision"], key["dtype"],
                                  key["n_layers"], key["dim"]), len(sentences), path.name)
    if view is not None:
        view.split, view.tokens_digest = split, digest
        log.info("%s/%s: the first %d sentences of %s", key["dataset"], split, len(sentences), whole_path)
    return view


def _cached(path: Path, key: tuple) -> ActivationCache | None:
    """The complete cache at ``path`` when it holds this extraction (model identity, tokens digest,
    mode, precision, dtype, layers, dim); a damaged one, or one holding another extraction, is
    deleted (with a warning) and None returned."""
    if not path.exists():
        return None
    try:
        cache = open_cache(path, verify=True)
        if (cache.model_identity, cache.tokens_digest, cache.mode, cache.precision, cache.dtype,
                cache.n_layers, cache.dim) == key:
            return cache
        cache.close()
        log.warning("%s holds another extraction than its name says; rebuilding it", path)
    except ActivationCacheError as err:
        log.warning("damaged activation cache, rebuilding it: %s", err)
    path.unlink()
    return None


def _write(path: Path, model, sentences: list[list[str]], key: dict, stateful: bool, batch_size: int,
           progress: CountCallback | None, ray: str | None, ray_workers: int | None) -> None:
    """Compute every sentence not yet in ``path``'s unfinished file, then mark it complete and move
    it into place (the caller holds the lock)."""
    offsets = np.zeros(len(sentences) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(s) for s in sentences])
    attrs = {**{k: key[k] for k in ("format_version", "model_identity", "dataset", "split", "mode", "precision",
                                    "dtype", "tokens_digest", "n_layers", "dim")},
             "n_sentences": len(sentences), "n_tokens": int(offsets[-1])}
    store_key = {k: key[k] for k in ("format_version", "model_identity", "dataset", "mode", "precision", "dtype",
                                     "n_layers", "dim")}
    partial = path.with_name(path.name + ".partial")
    f = _open_partial(partial, attrs, offsets, key["n_layers"], key["dim"], key["dtype"])
    try:
        f.attrs["batch_size"] = batch_size
        store.write_tokens(f, sentences)
        store.start_from(f, store_key, sentences, key["tokens_digest"], offsets)
        if ray is not None:
            _fill_with_ray(f, model, sentences, offsets, key["dtype"], batch_size, progress, ray, ray_workers)
        else:
            _fill(f, model, sentences, offsets, stateful, key["dtype"], batch_size, progress)
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
             key["dataset"], key["split"], path)


def _fill(f: h5py.File, model, sentences: list[list[str]], offsets: np.ndarray, stateful: bool,
          dtype: str, batch_size: int, progress: CountCallback | None) -> None:
    """Compute and write every sentence not yet marked done, one window at a time."""
    n = len(sentences)
    done = f["done"][...]
    window = batch_size * WINDOW_BATCHES
    was_training, was_stateful = model.training, model.stateful
    device = model_device(model)
    model.eval()
    model.stateful = stateful
    model.reset_states()
    try:
        first = _stateful_start(f, model, done, batch_size) if stateful else 0
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
                    out = model(model_token_ids(model, batch).to(device))
                    # (B, L+1, T, 2P) in the cache's dtype: one conversion a batch (torch's rounding to
                    # float16 is numpy's, bit for bit), not one numpy copy a sentence
                    layers = torch.stack(out.layers, dim=1).to(_TORCH_DTYPES[dtype]).cpu().numpy()
                for row, i in enumerate(index):
                    results[i] = layers[row, :, : len(sentences[i])]
                n_done += len(index)
                if progress:
                    progress(n_done, n)
            _write_window(f, done, offsets, w_start, w_end, todo, results,
                          (lambda: _save_state(f, model, w_end, batch_size)) if stateful else None)
    finally:
        model.stateful = was_stateful
        model.reset_states()
        model.train(was_training)


def _stateful_start(f: h5py.File, model, done: np.ndarray, batch_size: int) -> int:
    """The first sentence a stateful fill computes: the one its saved state follows, when that
    state follows every sentence done before it and was carried in batches of ``batch_size``;
    else 0, every done flag cleared (a warning says why)."""
    n = len(done)
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
    return n_state


def _write_window(f: h5py.File, done: np.ndarray, offsets: np.ndarray, w_start: int, w_end: int,
                  todo: list[int], results: dict[int, np.ndarray], carried=None) -> None:
    """Write a window's computed sentences (``results``: sentence -> (layers, T, dim)) as runs of
    consecutive ones, then ``carried()`` (a stateful fill saves its state), and only once those are
    on disk the done flags that vouch for them: unwritten hdf5 chunks read as zeros, which no
    checksum would catch."""
    _ensure_room(f, done, sum(results[i].nbytes for i in todo))
    for run_start, run_end in _runs(todo):
        block = np.concatenate([results[i] for i in range(run_start, run_end)], axis=1)
        f["activations"][:, offsets[run_start]:offsets[run_end]] = block
    if carried is not None:
        carried()
    flush_to_disk(f)
    done[todo] = True
    f["done"][w_start:w_end] = done[w_start:w_end]
    flush_to_disk(f)


def _fill_with_ray(f: h5py.File, model, sentences: list[list[str]], offsets: np.ndarray, dtype: str, batch_size: int,
                   progress: CountCallback | None, address: str, workers: int | None) -> None:
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
            _write_window(f, done, offsets, w_start, min(n, w_start + window), todo, dict(zip(todo, arrays)))
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
