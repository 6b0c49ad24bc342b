"""Embed a large file of sentences on Ray: shards, one actor per worker, a rerun skips finished shards.

    python -m elmo_model.corpus.embedder sentences.txt out.hdf5 --all --ray        # local: ray.init()
    python -m elmo_model.corpus.embedder sentences.txt out.hdf5 --all --ray auto   # a cluster started
    RAY_ADDRESS=ray://head:10001 python -m elmo_model.corpus.embedder ... --ray    #   with `ray start`

What happens
------------
1. The driver reads and checks the whole input first (an empty or non-UTF-8 line stops the job
   with its line number before any work starts) and cuts it into shards of contiguous lines.
2. ``--workers`` Ray actors each load the model once (the driver puts the loaded biLM into Ray's
   object store, so cluster nodes need no copy of the model files) and embed whole shards with
   ``ElmoEmbedder.embed_sentences``: length-sorted batches. A shard is a whole number of the
   embedder's windows (``32 * batch_size`` sentences), so every batch is exactly the batch the
   single-process embedder makes, and the vectors are identical bit for bit.
3. Each shard is written as its own hdf5, ``OUTPUT.shards/shard-00000.hdf5`` ..., in the layout
   of the final file (one float32 dataset per line key), to ``.partial`` first: the data is
   flushed and fsynced, then the ``digest`` attribute (the mark that the shard is complete), then
   fsync and rename. The digest covers the model's weights, the output format and the shard's
   keys and tokens: a rerun after a crash or Ctrl-C skips every shard already finished for the
   same input and model, and redoes any other.
4. ``OUTPUT.shards/job.json`` is the job manifest (input digest, line count, output format,
   sentence keys or not, model identity, shard size), written before the first shard; a rerun
   whose job differs discards the shard directory, saying what differs, and starts over.
   ``OUTPUT.shards/index.json`` lists the shards (file, first and last line, digest).
5. The driver assembles ``OUTPUT``: the same datasets with the same names and the same
   ``sentence_to_index`` as ``ElmoEmbedder.embed_file`` writes, so every reader of the
   single-process file reads it unchanged. By default the datasets are copied into ``OUTPUT``
   and the shard directory is removed; ``link_shards=True`` (``--link-shards``) instead writes
   hdf5 external links to the shards (no copy; h5py follows them transparently, resolved relative
   to ``OUTPUT``'s directory, so keep ``OUTPUT.shards/`` beside it). ``OUTPUT`` is written to
   ``OUTPUT.partial``, fsynced and renamed.

One writer per output: the driver holds ``OUTPUT.lock`` (``io_safety.output_lock``, the lock of
``ElmoEmbedder.embed_file`` too) from before the model loads until ``OUTPUT`` is in place; a second
run on the same output stops at once with ``OutputBusy`` and touches nothing.

A worker that dies (a crashed or killed actor process, a lost node) is restarted by Ray
(``max_restarts``) and its shard retried (``max_task_retries``); a retried shard starts from an
empty ``.partial`` file, so no sentence is written twice. On a cluster the output directory must
be on a filesystem every node writes to (the shards are written by the actors).
"""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Sequence

import h5py
import numpy as np
import ray
import torch
from ray.util import ActorPool

from ..bilm.identity import LEGACY_NOTE, model_identity
from ..bilm.modules import BiLM
from ..embedding import (OUTPUT_FORMATS, ElmoEmbedder, loaded_model_inputs, read_sentence_file, reduce_layers,
                         sentence_keys)
from ..models.names import model_files
from ..models.registry import DEFAULT_MODEL, load_bilm
from ..plumbing.io_safety import (
    DiskFull,
    atomic_output,
    atomic_write_text,
    check_input_file,
    check_output_path,
    digest_tokens,
    ensure_room,
    flush_to_disk,
    manifest_differences,
    manifest_json,
    output_lock,
)
from ..plumbing.progress import CountCallback

log = logging.getLogger(__name__)

WINDOWS_PER_SHARD = 8  # default shard: 8 windows of 32 batches (16,384 sentences at batch size 64)
SHARD_FORMAT_VERSION = 1


@dataclass(frozen=True)
class ShardTask:
    """One shard: lines ``start`` (inclusive) to ``stop`` (exclusive) of the input, written to ``path``."""

    index: int
    start: int
    stop: int
    path: str
    digest: str
    output_format: str


def model_fingerprint(model: BiLM) -> str:
    """Which model a shard was computed with: its identity (``elmo_model.bilm.identity``: weights,
    options, precision and, outside fp32, device type)."""
    return model_identity(model)


def shard_digest(fingerprint: str, output_format: str, keys: Sequence[str], sentences: Sequence[Sequence[str]]) -> str:
    """What a shard's content depends on: model, format, dataset names and tokens."""
    h = hashlib.sha256(json.dumps([SHARD_FORMAT_VERSION, fingerprint, output_format]).encode())
    for key, sentence in zip(keys, sentences):
        h.update(json.dumps([key, list(sentence)]).encode())
    return h.hexdigest()


def shard_is_finished(task: ShardTask) -> bool:
    """A shard file exists, was completed (renamed from ``.partial``) and holds this digest."""
    path = Path(task.path)
    if not path.is_file():
        return False
    try:
        with h5py.File(path, "r") as f:
            return f.attrs.get("digest") == task.digest
    except OSError:
        return False


class ShardWorker:
    """The body of a Ray actor: holds one ``ElmoEmbedder`` and embeds whole shards.

    Plain Python (``ray.remote`` is applied by ``embed_file_with_ray``), so it can be tested and
    subclassed without Ray."""

    def __init__(self, model: BiLM, batch_size: int, threads: int = 1) -> None:
        torch.set_num_threads(threads)  # the actor's CPU share, not the whole machine
        self.embedder = ElmoEmbedder(model, batch_size=batch_size)

    def embed_shard(self, task: ShardTask, keys: list[str], sentences: list[list[str]]) -> dict:
        """Embed one shard into ``task.path`` (via ``.partial``) -> a small summary."""
        started = time.monotonic()
        path = Path(task.path)

        # "w" on a fixed name: a retried shard starts empty, so no sentence is written twice
        with atomic_output(path, tmp=path.with_name(path.name + ".partial")) as partial, \
                h5py.File(partial, "w") as out:
            out.attrs.update(start=task.start, stop=task.stop, output_format=task.output_format,
                             format_version=SHARD_FORMAT_VERSION)
            for key, array in zip(keys, self.embedder.embed_sentences(sentences)):
                if key in out:  # a repeated sentence with use_sentence_keys: the first one stays
                    continue
                data = reduce_layers(array, task.output_format)
                # HDF5 does not recover from a failed write: room first, one line if there is none
                ensure_room(partial, data.nbytes + 1024, f"the finished shards are kept in {path.parent}")
                out.create_dataset(key, data=data)
            flush_to_disk(out)  # the data on disk before the mark that says it is complete
            out.attrs["digest"] = task.digest
            flush_to_disk(out)
        return {"index": task.index, "sentences": len(sentences), "tokens": sum(map(len, sentences)),
                "seconds": time.monotonic() - started, "pid": os.getpid()}

    def embed_window(self, tag: object, sentences: list[list[str]], dtype: str = "float32"
                     ) -> tuple[object, list[np.ndarray]]:
        """One embedder window (at most ``32 * batch_size`` sentences, length-sorted batches) ->
        ``(tag, [(L+1, T_i, 2P) arrays as dtype])`` in input order: the unit of work of the
        probing activation cache on Ray, which writes the arrays into its own file."""
        return tag, [array.astype(dtype) for array in self.embedder.embed_sentences(sentences)]


def plan_shards(keys: Sequence[str], sentences: Sequence[Sequence[str]], shard_dir: Path, output_format: str,
                fingerprint: str, shard_size: int) -> list[ShardTask]:
    """Cut the input into shards of ``shard_size`` lines (the last one shorter)."""
    tasks = []
    for index, start in enumerate(range(0, len(sentences), shard_size)):
        stop = min(start + shard_size, len(sentences))
        digest = shard_digest(fingerprint, output_format, keys[start:stop], sentences[start:stop])
        tasks.append(ShardTask(index, start, stop, str(shard_dir / f"shard-{index:05d}.hdf5"), digest, output_format))
    return tasks


def runtime_env() -> dict:
    """Ray's runtime environment for our actors: this package is shipped to the workers, so
    cluster nodes need only Ray and the requirements installed, not a checkout."""
    return {"py_modules": [str(Path(__file__).resolve().parents[1])]}  # elmo_model/, not corpus/


def start_ray(address: str | None, workers: int | None, cpus_per_worker: int = 1) -> tuple[bool, int]:
    """Connect to (or start) Ray, unless the caller already did -> (whether we started it, how
    many workers fit)."""
    started = False
    if not ray.is_initialized():
        address = address if address not in (None, "local") else os.environ.get("RAY_ADDRESS") or None
        if address is None:
            cpus = (workers or max(1, (os.cpu_count() or 1) // cpus_per_worker)) * cpus_per_worker
            ray.init(num_cpus=cpus, runtime_env=runtime_env(), include_dashboard=False, log_to_driver=False)
        else:
            ray.init(address=address, runtime_env=runtime_env(), log_to_driver=False)
        started = True
    available = int(ray.cluster_resources().get("CPU", 1) // cpus_per_worker)
    return started, max(1, workers or available)


def embed_file_with_ray(input_file: str | Path, output_file_path: str | Path, model: str | Path | BiLM = DEFAULT_MODEL,
                        output_format: str = "all", batch_size: int = 64, use_sentence_keys: bool = False,
                        tokenize: Callable[[str], list[str]] | None = None, address: str | None = None,
                        workers: int | None = None, cpus_per_worker: int = 1, shard_size: int | None = None,
                        link_shards: bool = False, keep_shards: bool = False, max_restarts: int = 3,
                        progress: CountCallback | None = None, worker_class: type = ShardWorker) -> Path:
    """``ElmoEmbedder.embed_file`` on Ray (see the module docstring): the same ``OUTPUT``.

    ``address``: None or "local" starts Ray here (``RAY_ADDRESS`` if set is used instead);
    "auto" or "ray://host:10001" joins a cluster. ``workers``: actors (default: every CPU of the
    cluster, ``cpus_per_worker`` each). ``shard_size``: lines per shard, rounded up to a multiple
    of ``32 * batch_size``. ``progress(done, total)`` counts sentences. ``worker_class``: the
    actor body (tests use a subclass that crashes).

    Paths, sizes and every input line are checked, and ``OUTPUT.lock`` taken, before the model
    loads; shards of another job in ``OUTPUT.shards/`` are discarded (logged, with what differs)."""
    if output_format not in OUTPUT_FORMATS:
        raise ValueError(f"output_format must be one of {OUTPUT_FORMATS}, got {output_format!r}")
    if batch_size < 1 or cpus_per_worker < 1 or (workers is not None and workers < 1):
        raise ValueError("batch_size, workers and cpus_per_worker must be at least 1")
    input_file = check_input_file(input_file, "input file (one sentence per line)")
    model_inputs = loaded_model_inputs(model) if isinstance(model, BiLM) else model_files(model)
    output = check_output_path(output_file_path, [input_file, *model_inputs])
    sentences = read_sentence_file(input_file, tokenize)  # bad lines stop us here, with their number
    if not sentences:
        raise ValueError(f"{input_file}: holds no sentences; write one sentence per line")
    keys = sentence_keys(sentences, use_sentence_keys)
    window = 32 * batch_size  # ElmoEmbedder.embed_sentences' sorting window
    shard_size = -(-(shard_size or WINDOWS_PER_SHARD * window) // window) * window
    shard_dir = output.with_name(output.name + ".shards")
    with output_lock(output, what="output file"):
        bilm = model if isinstance(model, BiLM) else load_bilm(model)
        fingerprint = model_fingerprint(bilm)
        # what the shard directory is for: a rerun continues only this very job
        manifest = {"format_version": SHARD_FORMAT_VERSION, "input_digest": digest_tokens(sentences),
                    "n_sentences": len(sentences), "output_format": output_format,
                    "use_sentence_keys": bool(use_sentence_keys), "model_identity": fingerprint,
                    "shard_size": shard_size}
        _open_shard_dir(shard_dir, manifest)
        tasks = plan_shards(keys, sentences, shard_dir, output_format, fingerprint, shard_size)
        todo = [t for t in tasks if not shard_is_finished(t)]
        done = sum(t.stop - t.start for t in tasks if t not in todo)
        if done:
            log.info("%s: %d of %d shards already finished; embedding the other %d", shard_dir,
                     len(tasks) - len(todo), len(tasks), len(todo))
        if progress:
            progress(done, len(sentences))
        if todo:
            _run_shards(todo, keys, sentences, bilm, batch_size, address, workers, cpus_per_worker, max_restarts,
                        worker_class, done, progress)
        _write_index(shard_dir, tasks, input_file, output_format)
        _assemble(output, tasks, keys, sentences, link_shards)
        if not link_shards and not keep_shards:
            shutil.rmtree(shard_dir)
    return output


def _open_shard_dir(shard_dir: Path, manifest: dict) -> None:
    """``shard_dir`` ready for this job: kept when its ``job.json`` records the same job, else
    (another job, no manifest, an unreadable one) emptied with a log line saying why. The caller
    holds the output's lock, so no other run is writing these shards."""
    job = shard_dir / "job.json"
    if shard_dir.is_dir():
        try:
            saved = job.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            saved = None
        differences = manifest_differences(saved, manifest)
        if not differences:
            return
        if "model_checksum" in differences:  # the key before the identity covered the options
            log.warning("%s was %s; starting over", shard_dir, LEGACY_NOTE)
        else:
            log.warning("%s was written for another job (%s differ); starting over", shard_dir, ", ".join(differences))
        shutil.rmtree(shard_dir)
    shard_dir.mkdir()
    atomic_write_text(job, manifest_json(manifest))


def _run_shards(todo: list[ShardTask], keys: list[str], sentences: list[list[str]], bilm: BiLM, batch_size: int,
                address: str | None, workers: int | None, cpus_per_worker: int, max_restarts: int,
                worker_class: type, done: int, progress: CountCallback | None) -> None:
    started, n_workers = start_ray(address, workers, cpus_per_worker)
    try:
        n_workers = min(n_workers, len(todo))
        workers = start_workers(bilm, batch_size, n_workers, cpus_per_worker, max_restarts, worker_class)
        log.info("embedding %d shards with %d Ray workers", len(todo), n_workers)
        pool = ActorPool(workers.actors)
        arguments = [(t, keys[t.start : t.stop], ray.put(sentences[t.start : t.stop])) for t in todo]
        results = _disk_full_said_once(pool.map_unordered(lambda actor, a: actor.embed_shard.remote(*a), arguments))
        total = len(sentences)
        for summary in results:
            done += summary["sentences"]
            log.debug("shard %d: %d sentences in %.1f s (pid %d)", summary["index"], summary["sentences"],
                      summary["seconds"], summary["pid"])
            if progress:
                progress(done, total)
        workers.kill()
    finally:
        if started:
            ray.shutdown()


def _disk_full_said_once(results: Iterator[dict]) -> Iterator[dict]:
    """The workers' summaries; a worker that found no room (``DiskFull``, wrapped by Ray in a
    ``RayTaskError`` with the worker's traceback) is raised here as the one line it is."""
    try:
        yield from results
    except Exception as err:
        cause = getattr(err, "cause", err)
        if isinstance(cause, DiskFull):
            raise DiskFull(str(cause)) from None
        raise


@dataclass
class Workers:
    """Restartable actors and the object-store reference of their model. Hold this object while
    they work: a restarted actor rebuilds itself from ``model_ref``, which Ray frees once nobody
    holds it (the restart would then fail)."""

    actors: list
    model_ref: object

    def kill(self) -> None:
        for actor in self.actors:
            ray.kill(actor)


def start_workers(bilm: BiLM, batch_size: int, n_workers: int, cpus_per_worker: int = 1, max_restarts: int = 3,
                  worker_class: type = ShardWorker) -> Workers:
    """``n_workers`` restartable actors (``worker_class``), each holding the model, shipped once
    through the object store."""
    remote = ray.remote(worker_class).options(num_cpus=cpus_per_worker, max_restarts=max_restarts,
                                              max_task_retries=max_restarts)
    on_cpu = all(p.device.type == "cpu" for p in bilm.parameters())
    # ray.put serialises now; the actors' ElmoEmbedder puts their copy in eval mode. The caller's
    # model is left where it is (a copy goes to the CPU if it lives on a GPU)
    model_ref = ray.put(bilm if on_cpu else copy.deepcopy(bilm).cpu())
    return Workers([remote.remote(model_ref, batch_size, cpus_per_worker) for _ in range(n_workers)], model_ref)


def _write_index(shard_dir: Path, tasks: list[ShardTask], input_file: Path, output_format: str) -> None:
    index = {"format_version": SHARD_FORMAT_VERSION, "input": str(input_file), "output_format": output_format,
             "shards": [{"file": Path(t.path).name, "start": t.start, "stop": t.stop, "digest": t.digest}
                        for t in tasks]}
    atomic_write_text(shard_dir / "index.json", json.dumps(index, indent=1) + "\n")


def _assemble(output: Path, tasks: list[ShardTask], keys: list[str], sentences: list[list[str]],
              link_shards: bool) -> None:
    """The single-process layout from the shards: datasets copied (or linked) in line order,
    then ``sentence_to_index``; written to ``OUTPUT.partial``, fsynced and renamed."""
    if not link_shards:  # the datasets are copied: room for all of them before the first
        ensure_room(output.with_name(output.name + ".partial"), sum(Path(t.path).stat().st_size for t in tasks),
                    f"the finished shards are kept in {Path(tasks[0].path).parent}")
    with atomic_output(output, tmp=output.with_name(output.name + ".partial")) as partial, \
            h5py.File(partial, "w") as out:
        for task in tasks:
            relative = os.path.relpath(task.path, output.parent)
            with h5py.File(task.path, "r") as shard:
                for key in keys[task.start : task.stop]:
                    if key in out or key not in shard:  # a repeated sentence key: the first one stays
                        continue
                    if link_shards:
                        out[key] = h5py.ExternalLink(relative, key)
                    else:
                        shard.copy(shard[key], out, name=key)
        index = {" ".join(s): keys[i] for i, s in enumerate(sentences)}
        out.create_dataset("sentence_to_index", data=json.dumps(index))
        flush_to_disk(out)

