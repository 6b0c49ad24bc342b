"""Safe writing and reading of everything the workbench keeps on disk.

One module for the rules every writer and reader follows (``docs/reliability.md``):

- **Atomic files**: :func:`atomic_write_text` / :func:`atomic_write_bytes` write a temporary file
  beside the target, fsync it and rename it into place, so a reader sees the old file or the new
  one, never half of one; :func:`atomic_output` does the same for libraries that write to a path.
- **Data before the mark that says it is done**: :func:`flush_to_disk` flushes an open hdf5 file
  and fsyncs it; writers call it after the data and again after the ``done`` marks, so a crash
  leaves either unmarked data (recomputed) or marked data that is on disk.
- **A full disk stops a writer before HDF5 fails**: :func:`ensure_room` refuses the next block,
  in one line, when free space or the file-size limit would not hold it; the marks written so far
  stay, so the same command resumes once there is room. :func:`atomic_write_bytes` asks for room
  for a large file and turns ENOSPC, EFBIG and EDQUOT into the same one line (:func:`disk_full`).
- **One writer per output**: :func:`output_lock` takes an exclusive lock beside the output; a
  second run either waits or stops with :class:`OutputBusy`, and never touches the other run's
  files.
- **A resume continues only the same job**: an unfinished file records a job manifest (a JSON
  dict: input digest, output format, model checksum, mode, options); :func:`manifest_differences`
  says which entries differ, and the writer starts over, saying why, when any does.
- **Checksummed JSON**: :func:`write_checked_json` stores a payload with the sha256 of its
  canonical form; :func:`read_checked_json` returns the payload only when the checksum matches, so
  an edited or damaged cache entry is recomputed, never reported.
- **Paths checked before the work**: :func:`check_output_path` refuses an output file that is a
  directory, lies in a missing directory or is one of the inputs; :func:`check_output_dir` an
  output folder that is a file, lies under a file or holds an input; both refuse a path inside an
  input folder; :func:`data_root_argument` refuses a ``--data-root`` that is a file at parse
  time. Every command calls them before it loads a model, with the model's folder and
  files as inputs (``elmo_model.models.names.model_files``: the folder the loader reads, which
  this module cannot know, since it imports nothing of the project's), and
  ``elmo_model.text.reader.check_text_file`` for a text input.
- **Ctrl-C is one line**: :func:`run_interruptible` wraps a command's work and turns a
  ``KeyboardInterrupt`` into ``interrupted; <what is kept>; rerun the same command to ...``,
  exit 130.

Imports nothing of the project's: the layers above pass it the paths (the dependency points one way).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import hashlib
import json
import logging
import os
import resource
import signal
import stat
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence


log = logging.getLogger(__name__)


class OutputBusy(ValueError):
    """Another process is writing the same output."""


# --------------------------------------------------------------------------------------------
# Atomic files
# --------------------------------------------------------------------------------------------


def _fsync_directory(directory: Path) -> None:
    with contextlib.suppress(OSError):  # not every file system lets a directory be opened
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write ``data`` to ``path`` through ``<path>.tmp`` + fsync + rename (the folder is created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    if len(data) > ROOM_RESERVE:  # a large file (a word2vec .npz, a figure): asked for before a byte is written
        ensure_room(tmp, len(data) - ROOM_RESERVE, f"{path} is as it was")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as err:
        if err.errno in DISK_FULL_ERRNOS:  # the room left went to another writer meanwhile
            raise disk_full(tmp, err, f"{path} is as it was") from None
        raise
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    _fsync_directory(path.parent)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    atomic_write_bytes(path, text.encode("utf-8"))


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike, suffix: str = "", tmp: str | os.PathLike | None = None) -> Iterator[Path]:
    """For writers that need a file name (h5py, ``np.savez``, zip): yields a temporary path beside
    ``path`` (ending in ``suffix``, for libraries that add or check an extension); when the block
    ends without an error the file is fsynced and renamed into place, otherwise it is removed.
    The folder is created. ``tmp``: a fixed temporary name instead (``OUTPUT.partial``), so that a
    rerun under the output's lock overwrites what a killed run left instead of adding a file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tmp) if tmp is not None else path.with_name(f"{path.name}.tmp{os.getpid()}{suffix}")
    try:
        yield tmp
        fsync_path(tmp)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    _fsync_directory(path.parent)


def fsync_path(path: str | os.PathLike) -> None:
    """fsync a file that was written by other means (e.g. before renaming it into place)."""
    with open(path, "rb") as handle:
        os.fsync(handle.fileno())


def flush_to_disk(h5file) -> None:
    """Flush an open, writable ``h5py.File`` and fsync it: everything written so far is on disk
    when this returns. Call it after writing data and before writing the marks that say the data
    is there."""
    h5file.flush()
    try:
        handle = h5file.id.get_vfd_handle()
    except (AttributeError, ValueError, RuntimeError):  # a driver without a file descriptor
        return
    if isinstance(handle, int):
        os.fsync(handle)


class DiskFull(ValueError):
    """The next write would not fit: the disk is full or the file-size limit is reached."""


#: the errors of a write that found no room: a full disk, a file-size limit, a full quota
DISK_FULL_ERRNOS = (errno.ENOSPC, errno.EFBIG, errno.EDQUOT)


def disk_full(path: str | os.PathLike, err: OSError, kept: str = "") -> DiskFull:
    """The one line for a write that failed with one of :data:`DISK_FULL_ERRNOS` (``err``):
    what ran out, what is kept (``kept``) and how to go on."""
    what = {errno.EFBIG: "the file-size limit (ulimit -f) stops the write",
            errno.EDQUOT: "the disk quota is used up"}.get(err.errno, "the disk is full")
    kept = f"{kept}; " if kept else ""
    return DiskFull(f"{path}: {what} ({err.strerror}); {kept}free some space, then rerun the same command to go on")


#: room kept free beyond a write's own bytes: the hdf5 metadata flushed with it and the marks
ROOM_RESERVE = 128 << 10


def ensure_room(path: str | os.PathLike, nbytes: int, kept: str = "") -> None:
    """Before writing about ``nbytes`` more bytes into ``path`` (an open hdf5 file): raise
    :class:`DiskFull`, one line, when the file system's free space or the file-size limit
    (``ulimit -f``, RLIMIT_FSIZE) would not hold them plus :data:`ROOM_RESERVE`. HDF5 does not
    recover from a failed write (a traceback, a file it cannot close, then a segfault at exit), so
    writers ask before each block and stop with their marks on disk. ``kept``: what is kept and
    how to go on ("64 of 300 sentences kept in OUT.partial"), put in the message."""
    path = Path(path)
    need = int(nbytes) + ROOM_RESERVE
    try:
        size = path.stat().st_size
    except OSError:
        size = 0
    kept = f"{kept}; " if kept else ""
    soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if soft != resource.RLIM_INFINITY and size + need > soft:
        raise DiskFull(f"{path}: the file-size limit (ulimit -f, {soft:,} bytes) stops the next write; {kept}"
                       "raise the limit or choose another output, then rerun the same command to go on")
    try:
        info = os.statvfs(_nearest_existing(path.parent))
    except OSError:
        return
    free = info.f_bavail * info.f_frsize
    if free < need:
        raise DiskFull(f"{path}: the disk is full ({free:,} bytes free, {need:,} needed for the next write); "
                       f"{kept}free some space, then rerun the same command to go on")


# --------------------------------------------------------------------------------------------
# One writer per output
# --------------------------------------------------------------------------------------------


def lock_path(output: str | os.PathLike) -> Path:
    """The lock file of ``output``: ``<output>.lock`` beside it."""
    output = Path(output)
    return output.with_name(output.name + ".lock")


def _open_lock_file(path: Path, output: str | os.PathLike):
    """The lock file, opened for reading and writing without following a link: a lock file that is
    a symbolic link, a hard link or not a regular file could be any other file (an input), and the
    lock writes its holder into it. ``ValueError`` naming it, also when it cannot be made at all."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as err:
        if err.errno == errno.ENAMETOOLONG:
            raise ValueError(f"{output}: the name is too long for its lock file ({len(path.name)} characters); "
                             "choose a shorter output name") from None
        if err.errno == errno.ELOOP or os.path.islink(path):
            raise ValueError(f"{path}: the lock file of {output} is a symbolic link; remove it (the file it "
                             "points to is not touched) and rerun") from None
        if err.errno in (errno.EACCES, errno.EPERM):
            raise ValueError(f"{path}: the lock file of {output} cannot be opened (permission denied: another "
                             "user's?); remove it if no run of theirs is writing, or choose another output") from None
        if err.errno in (errno.EROFS, errno.ENOSPC, errno.EDQUOT):
            raise ValueError(f"{path}: cannot create the lock file of {output} ({os.strerror(err.errno)}); "
                             "choose an output on a writable disk with free space") from None
        raise ValueError(f"{path}: cannot open the lock file of {output} ({err.strerror})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
        os.close(fd)
        raise ValueError(f"{path}: the lock file of {output} is not a plain file of its own (a hard link or a "
                         "device); remove it and rerun")
    return os.fdopen(fd, "r+")


#: lock files held with ``reentrant=True``, by the thread that holds each (see :func:`output_lock`)
_reentrant_holders: dict[str, int] = {}


@contextlib.contextmanager
def output_lock(output: str | os.PathLike, wait: bool = False, what: str = "output",
                reentrant: bool = False) -> Iterator[None]:
    """Hold an exclusive lock for writing ``output`` (lock file ``<output>.lock``, removed on
    release). ``wait=False``: raise :class:`OutputBusy` at once, naming the other process, when
    another run holds it; ``wait=True``: block until it is released. Works between processes
    (``flock``); the lock dies with its process, so a killed run never leaves a stale lock.
    ``reentrant``: taken again, at once, by the thread that holds it with ``reentrant=True`` too
    (an export inside the command's claim of ``--export-to``); to any other holder, this
    process's other threads included, it is as busy as ever."""
    path = lock_path(output)
    key = os.path.join(os.path.realpath(path.parent), path.name)
    if reentrant and _reentrant_holders.get(key) == threading.get_ident():
        yield  # the claim this thread holds for the same output: released by its holder
        return
    while True:
        handle = _open_lock_file(path, output)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except OSError as err:
            handle.seek(0)
            holder = handle.read().strip() or "another process"
            handle.close()
            if err.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise OutputBusy(f"{output}: another run ({holder}) is writing this {what}; wait for it "
                                 f"to finish or choose another output") from None
            raise
        # the previous holder may have removed the lock file between our open and our lock
        try:
            same = os.path.samestat(os.fstat(handle.fileno()), os.stat(path))
        except FileNotFoundError:
            same = False
        if same:
            break
        handle.close()
    try:
        handle.seek(0)
        handle.truncate()
        handle.write(f"pid {os.getpid()}")
        handle.flush()
        if reentrant:
            _reentrant_holders[key] = threading.get_ident()
        yield
    finally:
        if reentrant:
            _reentrant_holders.pop(key, None)
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


# --------------------------------------------------------------------------------------------
# Job manifests
# --------------------------------------------------------------------------------------------


def digest_tokens(sentences: Iterable[Sequence[str]]) -> str:
    """sha256 of tokenised sentences (order, boundaries and every character count)."""
    digest = hashlib.sha256(b"tokens:")
    for sentence in sentences:
        digest.update(json.dumps(list(sentence), ensure_ascii=False).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def manifest_json(manifest: dict[str, Any]) -> str:
    """The manifest as stored (canonical JSON)."""
    return json.dumps(manifest, sort_keys=True)


def manifest_differences(saved: str | bytes | None, current: dict[str, Any]) -> list[str]:
    """Names of the manifest entries that differ between a stored manifest (JSON text, or None
    when the unfinished file has none) and the current job; empty: the same job."""
    if saved is None:
        return ["job manifest (missing)"]
    if isinstance(saved, bytes):
        saved = saved.decode("utf-8", "replace")
    try:
        old = json.loads(saved)
    except ValueError:
        return ["job manifest (unreadable)"]
    if not isinstance(old, dict):
        return ["job manifest (unreadable)"]
    keys = sorted(set(old) | set(current))
    return [k for k in keys if old.get(k) != json.loads(json.dumps(current.get(k)))]


# --------------------------------------------------------------------------------------------
# Checksummed JSON
# --------------------------------------------------------------------------------------------


def _payload_digest(payload: Any) -> str:
    return hashlib.sha256(json.dumps(payload, sort_keys=True, ensure_ascii=False,
                                     separators=(",", ":")).encode("utf-8")).hexdigest()


def write_checked_json(path: str | os.PathLike, payload: Any) -> None:
    """Write ``{"sha256": ..., "payload": payload}`` atomically (the checksum covers the payload's
    canonical JSON)."""
    text = json.dumps({"sha256": _payload_digest(payload), "payload": payload}, ensure_ascii=False)
    atomic_write_text(path, text)


def read_checked_json(path: str | os.PathLike) -> Any | None:
    """The payload written by :func:`write_checked_json`, or None (logged) when the file is
    missing its checksum, unreadable, or its content does not match the checksum."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:
        log.warning("ignoring an unreadable cache entry %s (%s)", path, err)
        return None
    if not isinstance(data, dict) or "sha256" not in data or "payload" not in data:
        log.warning("ignoring a cache entry without a checksum: %s", path)
        return None
    if _payload_digest(data["payload"]) != data["sha256"]:
        log.warning("ignoring a cache entry whose content does not match its checksum: %s", path)
        return None
    return data["payload"]


# --------------------------------------------------------------------------------------------
# Paths, checked before any work
# --------------------------------------------------------------------------------------------


def positive_int(text: str) -> int:
    """An argparse ``type``: an integer of at least 1 (sizes and counts), refused in one line."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def check_input_file(path: str | os.PathLike, what: str = "input file") -> Path:
    """``path`` as a readable regular file, else ``ValueError`` naming it and the fix."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: is a directory; give the {what} itself")
    if not path.exists():
        raise ValueError(f"{path}: no such {what}")
    return path


def check_input_dir(path: str | os.PathLike, flag: str, what: str) -> Path:
    """``path`` unless it (or a folder above it) is a file: ``ValueError`` naming ``flag``, the
    path and ``what`` belongs there. A folder that does not exist yet passes (a download makes it)."""
    path = Path(path).expanduser()
    name = f"{flag} {path}" if flag else str(path)
    if path.exists() and not path.is_dir():
        raise ValueError(f"{name}: is a file, not a folder; give {what}")
    existing = _nearest_existing(path)
    if not existing.is_dir():
        raise ValueError(f"{name}: {existing} is a file, not a folder; give {what}")
    return path


#: what ``--data-root`` names, for its messages
DATA_ROOT_FOLDER = ("the data root folder (the one that holds ud_english_ewt/, nltk_data/, wsd/, ...; "
                    "python -m probing.data download makes one)")


def data_root_argument(text: str) -> Path:
    """An argparse ``type`` for ``--data-root``: a folder (it need not exist yet); a file, or a
    path under a file, is refused at parse time in argparse's one line."""
    try:
        return check_input_dir(text, "", DATA_ROOT_FOLDER)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist
        return False


def _nearest_existing(path: Path) -> Path:
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _inside(path: Path, folder: Path) -> bool:
    """Whether ``path`` (existing or not) lies in ``folder`` or below it, links followed."""
    try:
        resolved = _nearest_existing(path).resolve()
        rest = Path(os.path.abspath(path)).relative_to(_nearest_existing(path))
        return (resolved / rest).is_relative_to(folder.resolve())
    except (OSError, ValueError):
        return False


#: bytes a writer may add to an output's name for the files it keeps beside it (``.lock``,
#: ``.partial``, ``.shards``, ``.tmp<pid>.npz``)
NAME_ROOM = 16


def _check_name_room(output: Path, name: str) -> None:
    """``ValueError`` when a part of ``output``'s path is longer than its file system allows
    (NAME_MAX, 255 bytes on most), or its name leaves no room for :data:`NAME_ROOM` bytes more:
    the lock or the unfinished file beside it could not be made, after the work."""
    try:
        limit = os.pathconf(_nearest_existing(output.parent), "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    for part in output.parts[:-1]:
        if len(os.fsencode(part)) > limit:
            raise ValueError(f"{name}: the folder name {part[:40]}... is longer than this file system's "
                             f"{limit} bytes; choose a shorter path")
    size = len(os.fsencode(output.name))
    if size + NAME_ROOM > limit:
        raise ValueError(f"{name}: the name is too long ({size} bytes; the files written beside it add up to "
                         f"{NAME_ROOM} more, and this file system allows {limit}); choose a name of at most "
                         f"{limit - NAME_ROOM} bytes")


def check_output_path(output: str | os.PathLike, inputs: Iterable[str | os.PathLike] = (), *,
                      create_parents: bool = False, flag: str = "") -> Path:
    """``output`` if a file can be written there, else ``ValueError``: it is a directory, its
    directory does not exist (``create_parents``: the nearest existing one is a file instead), or
    it is one of ``inputs`` or lies inside an input folder (never write over an input: a model's
    folder is an input, so no new ``weights.hdf5`` appears beside its ``lm_weights.hdf5``). ``flag``: the option that named it, put
    before the path in the message."""
    output = Path(output)
    name = f"{flag} {output}" if flag else str(output)
    _check_name_room(output, name)
    if output.is_dir():
        raise ValueError(f"{name}: is a directory; give the path of a file to write")
    parent = output.parent if str(output.parent) else Path(".")
    if create_parents:
        existing = _nearest_existing(parent)
        if not existing.is_dir():
            raise ValueError(f"{name}: {existing} is a file, not a directory; choose another output")
    elif not parent.is_dir():
        raise ValueError(f"{name}: the directory {parent} does not exist; create it or choose another output")
    writable = _nearest_existing(parent)
    if not os.access(writable, os.W_OK | os.X_OK):
        raise ValueError(f"{name}: {writable} is not writable; choose an output in a folder you may write to")
    inputs = [Path(source) for source in inputs]
    for source in inputs:
        if _same_file(source, output):
            raise ValueError(f"{name}: is also an input; choose another output so the input is kept")
    for source in inputs:
        if source.is_dir() and _inside(output, source):
            raise ValueError(f"{name}: lies inside an input folder ({source}); choose an output elsewhere so "
                             "the input is kept")
    return output


def check_output_dir(output: str | os.PathLike, inputs: Iterable[str | os.PathLike] = (), *,
                     flag: str = "", what: str = "folder to write into") -> Path:
    """``output`` if a folder can be created or written there, else ``ValueError``: it is a file, it
    lies under a file, or it holds one of ``inputs`` (an input folder itself, or the folder an input
    file lies in: writing there would replace that input's files). Nothing is created."""
    output = Path(output)
    name = f"{flag} {output}" if flag else str(output)
    _check_name_room(output, name)
    if output.exists() and not output.is_dir():
        raise ValueError(f"{name}: is a file; give a {what}")
    existing = _nearest_existing(output)
    if not existing.is_dir():
        raise ValueError(f"{name}: {existing} is a file, not a directory; give a {what}")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ValueError(f"{name}: {existing} is not writable; give a {what} you may write to")
    for source in inputs:
        source = Path(source)
        folder = source if source.is_dir() else source.parent
        if _same_file(folder, output):
            raise ValueError(f"{name}: holds an input ({source}); choose another output folder so the input is kept")
        if source.is_dir() and _inside(output, source):
            raise ValueError(f"{name}: lies inside an input folder ({source}); choose an output folder elsewhere "
                             "so the input is kept")
    return output




# --------------------------------------------------------------------------------------------
# Commands: Ctrl-C as one line
# --------------------------------------------------------------------------------------------


_interrupt_requested = threading.Event()


def _on_interrupt(signum, frame) -> None:
    _interrupt_requested.set()
    raise KeyboardInterrupt


def _quiet_dropped_interrupt(unraisable) -> None:
    """``sys.unraisablehook`` under :func:`run_interruptible`: a Ctrl-C that lands in a weakref or
    ``__del__`` callback cannot propagate, and Python would print "Exception ignored ... Traceback"
    for it. It is already remembered (``_on_interrupt``) and raised at the next safe point, so it is
    not printed; anything else goes to the hook that was there."""
    if issubclass(unraisable.exc_type, KeyboardInterrupt):
        _interrupt_requested.set()
        return
    _previous_unraisable_hook(unraisable)


_previous_unraisable_hook = sys.__unraisablehook__


def raise_if_interrupted() -> None:
    """A safe point for a long loop under :func:`run_interruptible`: raise the Ctrl-C that Python
    dropped. SIGINT raises KeyboardInterrupt in whatever code runs at that instant; inside a
    weakref or ``__del__`` callback Python prints "Exception ignored" and goes on, so without
    this a Ctrl-C now and then did nothing (seen on an embed: it ran to the end, exit 0)."""
    if _interrupt_requested.is_set():
        raise KeyboardInterrupt


def run_interruptible(work: Callable[[], int], kept: Callable[[], str]) -> int:
    """Run a command's ``work()`` (its exit status); on Ctrl-C print one line, ``interrupted;``
    and ``kept()`` (what is on disk and how to go on, e.g. "12 of 40 sentences kept in OUT.partial;
    rerun the same command to resume"), and return 130 instead of a traceback. ``kept`` is called
    after the interrupt, so it can count what the work finished. Ctrl-C is remembered as well as
    raised, so a loop that calls :func:`raise_if_interrupted` stops at its next safe point even
    when the KeyboardInterrupt itself was dropped."""
    global _previous_unraisable_hook
    previous = None
    if threading.current_thread() is threading.main_thread():
        _interrupt_requested.clear()
        previous = signal.signal(signal.SIGINT, _on_interrupt)
        _previous_unraisable_hook, sys.unraisablehook = sys.unraisablehook, _quiet_dropped_interrupt
    try:
        return work()
    except KeyboardInterrupt:
        try:
            what = kept()
        except Exception as err:  # noqa: BLE001 -- the one line must come out whatever the state
            what = f"rerun the same command to go on ({err})"
        print(f"interrupted; {what}", file=sys.stderr)
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
            sys.unraisablehook = _previous_unraisable_hook
        _interrupt_requested.clear()


__all__ = ["DiskFull", "NAME_ROOM", "OutputBusy", "ROOM_RESERVE", "atomic_write_bytes", "atomic_write_text",
           "check_input_file", "check_output_dir", "check_output_path", "digest_tokens", "ensure_room", "flush_to_disk",
           "fsync_path", "lock_path", "manifest_differences", "manifest_json", "output_lock", "raise_if_interrupted",
           "read_checked_json", "run_interruptible", "write_checked_json"]
