"""HTTP downloads that resume: one URL into one file, never half-written in its place.

``_fetch_url`` is what every download of the project uses (datasets, treebanks, published models,
other families' archives: ``probing.data.downloads``, ``probing.data.archive_downloads``, ...).
The bytes go to ``<downloads>/<file>.part`` beside a manifest (URL, expected size, sha256, the
server's validator); the file is renamed into place only once complete and, where a checksum is
given, verified; a later call resumes with an HTTP Range request where the server allows it.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import shutil
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path, PurePosixPath

from elmo_model.plumbing.io_safety import DISK_FULL_ERRNOS, DiskFull, atomic_write_text, disk_full, ensure_room
from elmo_model.plumbing.progress import ProgressCallback
from probing.data import file_sha256

log = logging.getLogger(__name__)

NETWORK_TIMEOUT = 60.0
"""Seconds a download may wait for the server before it is abandoned."""

_USER_AGENT = "elmo-workbench (python urllib)"
_CHUNK = 1 << 20  # bytes per read and write


class DownloadError(RuntimeError):
    """A download failed (network, HTTP status, truncated body or checksum mismatch)."""


def _offline_hint(what: str) -> str:
    return (f"Check the network connection (this machine may be offline), or put {what} in place "
            f"by hand, copied from a data root that has it.")


#: Unfinished downloads: ``<data root>/.downloads/<file>.part`` beside ``<file>.manifest.json``.
DOWNLOADS_DIR = ".downloads"


def _manifest_path(part: Path) -> Path:
    return part.with_name(part.name.removesuffix(".part") + ".manifest.json")


def _read_manifest(part: Path) -> dict | None:
    """The manifest of an unfinished download (None when missing or unreadable)."""
    try:
        manifest = json.loads(_manifest_path(part).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) else None


def _discard(part: Path) -> None:
    part.unlink(missing_ok=True)
    _manifest_path(part).unlink(missing_ok=True)


def _content_range(response) -> tuple[int, int | None] | None:
    """(first byte, total size or None) of a 206 answer's ``Content-Range: bytes a-b/total``."""
    value = str(response.headers.get("Content-Range") or "")
    unit, _, rest = value.partition(" ")
    span, _, total = rest.partition("/")
    first = span.partition("-")[0]
    if unit != "bytes" or not first.isdigit():
        return None
    return int(first), int(total) if total.isdigit() else None


def _validator(response) -> str | None:
    """What identifies this version of the file for ``If-Range``: a strong ``ETag``, else
    ``Last-Modified`` (None: the server gives neither, and a resume would risk a splice)."""
    etag = str(response.headers.get("ETag") or "").strip()
    if etag and not etag.startswith("W/"):
        return etag
    return str(response.headers.get("Last-Modified") or "").strip() or None


def _disk_full(url: str, part: Path, err: OSError | DiskFull) -> DownloadError:
    """A download that found no room: one line saying so (never "check the network"), with the
    bytes kept for the resume."""
    kept = part.stat().st_size if part.is_file() else 0
    what = str(err) if isinstance(err, DiskFull) else disk_full(part, err)
    again = f"; {kept:,} bytes are kept in {part}" if kept else ""
    return DownloadError(f"could not download {url}: {str(what).partition('; ')[0]}{again}; free some space, then "
                         f"run the download again{f' to resume from byte {kept:,}' if kept else ''}")


def _answer(url: str, have: int, manifest: dict | None, expected: int | None, label: str):
    """Open ``url``: ``(response, resume)``. With ``have`` bytes kept, a Range request (``If-Range``
    on the first answer's validator); ``resume`` only when the 206 answer continues the very file
    the kept bytes began (its first byte, total size and validator). A file changed on the server
    (a 206 of another file from a server that ignores ``If-Range``, or a 416 because it shrank) is
    asked for again whole in the same attempt, its tail never written as the whole file."""
    headers = {"User-Agent": _USER_AGENT}
    validator = manifest.get("validator") if manifest is not None else None
    if have and validator:
        # If-Range: the rest of the file only if it is still the file the first answer began;
        # a file changed on the server in between comes whole (200), never spliced
        headers["Range"], headers["If-Range"] = f"bytes={have}-", validator
    elif have:
        log.info("%s: the server gave no validator (ETag, Last-Modified) to resume against; starting over", label)
    try:
        response = urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=NETWORK_TIMEOUT)
    except urllib.error.HTTPError as err:
        if err.code != 416 or "Range" not in headers:
            raise
        log.info("%s: the server has no byte %d of the file any more (it changed); starting over", label, have)
        return _answer(url, 0, None, None, label)
    if "Range" not in headers or getattr(response, "status", None) != 206:
        return response, False
    answered = _content_range(response)
    now = _validator(response)
    if answered is not None and answered[0] == have and answered[1] in (None, expected) and now in (None, validator):
        return response, True
    response.close()
    log.info("%s: the file changed on the server since the first %d bytes were fetched; starting over", label, have)
    return _answer(url, 0, None, None, label)


def _fetch_url(url: str, dest: Path, *, label: str, downloads: Path, sha256: str | None = None,
               progress: ProgressCallback | None = None, manual: str | None = None, largest: int | None = None) -> str:
    """Download ``url`` to ``dest`` and return its sha256, resuming an earlier attempt.

    The bytes go to ``downloads/<name>.part`` (``name``: the last part of the URL) beside a
    manifest ``<name>.manifest.json`` holding the URL, the expected size, the expected sha256 and
    the server's validator. A later call resumes with an HTTP ``Range`` request when the manifest
    matches (same URL and checksum) and the server answers 206 from the right byte of the same
    file (:func:`_answer`); otherwise (no manifest, another URL or checksum, a server or
    ``file://`` URL that sends the whole file, a file changed on the server) it starts over in the
    same call. ``dest`` only ever receives the complete file, and only once it has the size the
    server announced and (when ``sha256`` is given) that checksum. Room for the rest of the file
    is asked for before it is fetched (``io_safety.ensure_room``).

    Raises DownloadError on a network or HTTP failure or a truncated body (the part is kept
    for the next attempt), on a full disk or file-size limit (said so; the part kept), or on a
    checksum mismatch (the part is discarded). ``manual`` names what a user could put in place by
    hand instead (default: ``dest``). ``largest``: the most bytes the file can hold; a server
    announcing more is refused before anything is written (it serves something else).
    """
    downloads.mkdir(parents=True, exist_ok=True)
    name = PurePosixPath(urllib.parse.urlsplit(url).path).name or dest.name
    part = downloads / f"{name}.part"
    manifest, have, expected = _earlier_part(part, url, sha256)
    try:
        if not (expected is not None and have == expected):  # else: complete already, only verify
            response, resume = _answer(url, have, manifest, expected, label)
            with response:
                if resume:
                    log.info("%s: resuming at byte %d of %s", label, have, expected)
                else:
                    if have:
                        log.info("%s: the server sent the whole file; starting over", label)
                    have = 0
                    length = response.headers.get("Content-Length")
                    expected = int(length) if length and str(length).isdigit() else None
                    if largest is not None and expected is not None and expected > largest:
                        raise DownloadError(
                            f"could not download {url}: the server announces {expected:,} bytes, where {label} "
                            f"holds at most {largest:,}: it is not serving that file; check the address")
                    part.unlink(missing_ok=True)
                    atomic_write_text(_manifest_path(part), json.dumps(
                        {"url": url, "size": expected, "sha256": sha256,
                         "validator": _validator(response)}, indent=1) + "\n")
                if expected is not None:
                    ensure_room(part, expected - have)
                done = _receive(response, part, "ab" if resume else "wb", have, expected, label, progress)
            if expected is not None and done != expected:
                raise DownloadError(f"download of {url} was cut short: {done:,} of {expected:,} bytes. Run the "
                                    f"download again to resume from byte {done:,}.")
    except DiskFull as err:
        raise _disk_full(url, part, err) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException, ValueError) as exc:
        if isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS:
            raise _disk_full(url, part, exc) from None
        raise _failed(url, part, exc, manual or str(dest)) from exc
    actual = file_sha256(part)
    if sha256 is not None and actual != sha256:
        _discard(part)
        raise DownloadError(f"checksum mismatch for {url}: expected sha256 {sha256}, got {actual}. "
                            f"The file was not saved; the server may have changed it or the transfer was "
                            f"corrupted. Try again, or report it if it persists.")
    _move_into_place(part, dest)
    _manifest_path(part).unlink(missing_ok=True)
    return actual


def _earlier_part(part: Path, url: str, sha256: str | None) -> tuple[dict | None, int, int | None]:
    """What an earlier attempt left of this download: its manifest, the bytes it has and the size
    it expects; (None, 0, None) once a part of another URL, checksum or file is discarded."""
    manifest = _read_manifest(part)
    if manifest is None or manifest.get("url") != url or manifest.get("sha256") != sha256 or not part.is_file():
        _discard(part)
        manifest = None
    have = part.stat().st_size if manifest is not None else 0
    expected = manifest.get("size") if manifest is not None else None
    if expected is not None and have > expected:  # not a prefix of the file the manifest describes
        _discard(part)
        have, expected = 0, None
    return manifest, have, expected


def _failed(url: str, part: Path, exc: Exception, manual: str) -> DownloadError:
    """The one line a network, HTTP or read failure becomes: the reason, where a rerun resumes,
    and what to put in place by hand."""
    # HTTPError's str has the status code; URLError's reason has the socket error
    reason = exc if isinstance(exc, urllib.error.HTTPError) else getattr(exc, "reason", None) or exc
    kept = part.stat().st_size if part.is_file() else 0
    again = f" Run it again to resume from byte {kept:,}." if kept else ""
    return DownloadError(f"could not download {url}: {reason}.{again} {_offline_hint(manual)}")


def _move_into_place(part: Path, dest: Path) -> None:
    """The complete ``part`` renamed to ``dest``, readable by all (copied beside ``dest`` first
    when it is on another file system)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(part, 0o644)  # a data root is read by others too
    try:
        os.replace(part, dest)
    except OSError:  # another file system: copy beside dest, then rename
        fd, tmp_name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
        os.close(fd)
        try:
            shutil.copyfile(part, tmp_name)
            os.chmod(tmp_name, 0o644)
            os.replace(tmp_name, dest)
        finally:
            Path(tmp_name).unlink(missing_ok=True)
        part.unlink(missing_ok=True)


def _receive(response, part: Path, mode: str, done: int, expected: int | None, label: str,
             progress: ProgressCallback | None) -> int:
    """Append (``mode`` "ab") or write ("wb") the answer's body to ``part``; the bytes it holds after."""
    if progress:
        progress(label, done, expected, "B")
    with open(part, mode) as out:
        for block in iter(lambda: response.read(_CHUNK), b""):
            out.write(block)
            done += len(block)
            if progress:
                progress(label, done, expected, "B")
    return done
