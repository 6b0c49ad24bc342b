"""Universal Dependencies treebanks by language: fetched by the host, checked on every read.

``python -m probing.data download ud:french`` (or ``ud:fr``, ``ud:fr_gsd``) fetches the train, dev
and test files of the language's default treebank (``probing.data.registry.TREEBANKS``) from the
treebank's GitHub repository at the release tag ``UD_RELEASE``, into::

    <root>/ud/<code>/<code>-ud-{train,dev,test}.conllu
    <root>/ud/<code>/manifest.json     what was fetched: URLs, tag, licence, each file's bytes and sha256

No checksum of these files can be known before they are fetched, so the first fetch is trusted:
its sha256 goes into the manifest, and every later read checks the file against it (a file
changed, cut short or replaced is refused, with the command that fetches it again). The manifest
is written last, so a treebank is there only once all three files are. Downloads resume, take a
lock per treebank and check the server's length as every download does
(``probing.data.downloads``). UD English-EWT is the ``ud_english_ewt`` dataset, whose commit and
checksums are pinned: ``ud:english`` fetches that.
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
import shlex
import shutil
import urllib.request
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from elmo_model.plumbing.io_safety import OutputBusy, atomic_write_text, output_lock
from elmo_model.plumbing.progress import ProgressCallback
from probing.data import (
    DatasetMissing,
    data_command,
    data_root as _data_root,
    download_root,
    file_sha256,
    find_file,
    missing_files,
    require,
)
from probing.data.downloads import download
from probing.data.fetch import DOWNLOADS_DIR, NETWORK_TIMEOUT, DownloadError, _fetch_url
from probing.data.registry import TREEBANKS, UD_RAW, UD_RELEASE, Treebank, find_treebank, get_treebank
from probing.engine.renamed_keywords import renamed_keywords

log = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test")
MANIFEST = "manifest.json"
_LICENCE_LINE = re.compile(r"^License:\s*(.+?)\s*$", re.M)


class TreebankChanged(ValueError):
    """A fetched treebank file differs from what its first fetch recorded (bytes or sha256)."""


def read_manifest(treebank: Treebank | str, data_root: str | os.PathLike | None = None) -> dict | None:
    """The manifest of a fetched treebank (None: not fetched, or not readable as one)."""
    treebank = get_treebank(treebank) if isinstance(treebank, str) else treebank
    try:
        manifest = json.loads((_data_root(data_root) / treebank.folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and isinstance(manifest.get("files"), dict) else None


def fetch_name(treebank: Treebank) -> str:
    """The shortest name ``download`` takes for it: ``ud:french`` for a language's default."""
    return f"ud:{treebank.language.lower()}" if treebank.default else treebank.name


@renamed_keywords(root="data_root")
def fetch_command(treebank: Treebank | str, data_root: str | os.PathLike | None = None) -> str:
    """The shell command that fetches ``treebank`` into the data root."""
    treebank = get_treebank(treebank) if isinstance(treebank, str) else treebank
    return (f"{data_command()} download {fetch_name(treebank)} "
            f"--data-root {shlex.quote(str(download_root(data_root)))}")


@renamed_keywords(root="data_root")
def treebank_missing(treebank: Treebank | str, data_root: str | os.PathLike | None = None) -> list[str]:
    """The relative paths ``treebank`` lacks in the data root (empty: fetched and complete)."""
    treebank = get_treebank(treebank) if isinstance(treebank, str) else treebank
    if treebank.code == "en_ewt":
        return missing_files(treebank.dataset, data_root)
    base = _data_root(data_root)
    if read_manifest(treebank, base) is None:
        return [treebank.file(split) for split in SPLITS] + [f"{treebank.folder}/{MANIFEST}"]
    return [treebank.file(split) for split in SPLITS if not (base / treebank.file(split)).is_file()]


@renamed_keywords(root="data_root")
def treebank_for_language(language: str, data_root: str | os.PathLike | None = None) -> Treebank | None:
    """The treebank a model of ``language`` (a name or ISO code) is probed on: the language's
    default, or another of its treebanks when only that one is fetched; None when the table has
    none for it."""
    default = find_treebank(language)
    if default is None or default.code != find_treebank(default.language).code:  # a code, not a language
        return default
    if not treebank_missing(default, data_root):
        return default
    others = [t for t in TREEBANKS.values() if t.language == default.language and t is not default]
    return next((t for t in others if not treebank_missing(t, data_root)), default)


@renamed_keywords(root="data_root")
def language_treebank(language: str, requested: str | None = None,
                      data_root: str | os.PathLike | None = None) -> Treebank | None:
    """The treebank a model of ``language`` is probed on: ``requested`` when given (a code, a
    language or its ISO code), else None for English (UD English-EWT, as ever), else the
    language's treebank (:func:`treebank_for_language`; fetched or not: reading it names the
    command that fetches it). A ValueError, listing the table's languages, when it has none."""
    if requested is not None:
        return get_treebank(requested)
    if language.strip().casefold() in ("english", "en", "eng"):
        return None
    found = treebank_for_language(language, data_root)
    if found is None:
        raise ValueError(f"the model reads {language}, and no UD treebank of {language} is in the table; "
                         f"choose one with --treebank (languages: "
                         f"{', '.join(sorted({t.language.lower() for t in TREEBANKS.values()}))})")
    return found


@renamed_keywords(root="data_root")
def require_treebank(treebank: Treebank | str, data_root: str | os.PathLike | None = None) -> Path:
    """Check that ``treebank`` is fetched and complete; return the data root. DatasetMissing (a
    FileNotFoundError) names the treebank, the root, what is missing and the command that fetches it."""
    treebank = get_treebank(treebank) if isinstance(treebank, str) else treebank
    if treebank.code == "en_ewt":
        return require(treebank.dataset, data_root)
    base = _data_root(data_root)
    missing = treebank_missing(treebank, base)
    if missing:
        exc = DatasetMissing(f"the {treebank.language} treebank {treebank.title} ({treebank.code}) is not in the data "
                             f"root {base}; fetch it with: {fetch_command(treebank, base)}")
        exc.dataset, exc.root, exc.missing = treebank.dataset, base, tuple(missing)
        raise exc
    return base


@renamed_keywords(root="data_root")
def treebank_file(treebank: Treebank | str, split: str, data_root: str | os.PathLike | None = None) -> Path:
    """The CoNLL-U file of ``split`` ("train", "dev", "test"), checked: EWT against its pinned
    size (``find_file``), a fetched treebank against the bytes and sha256 its manifest recorded
    (hashed once per process and file version). Raises DatasetMissing when it is not fetched and
    TreebankChanged when the file differs from what was fetched."""
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose from {', '.join(SPLITS)}")
    treebank = get_treebank(treebank) if isinstance(treebank, str) else treebank
    base = require_treebank(treebank, data_root)
    if treebank.code == "en_ewt":
        found = find_file(treebank.file(split), base)
        assert found is not None  # require() checked it
        return found
    path = base / treebank.file(split)
    problem = _differs(str(path), *_stat(path), *_record(read_manifest(treebank, base), path.name))
    if problem:
        raise TreebankChanged(f"{path}: {problem} in {MANIFEST}: it was changed or replaced since; fetch it again "
                              f"with: {fetch_command(treebank, base)} --force")
    return path


@functools.lru_cache(maxsize=64)
def _differs(path: str, mtime_ns: int, size: int, recorded_bytes, recorded_sha256) -> str | None:
    """How a file differs from its manifest's record, in words (None: the same). mtime and size
    key the cache, so a replaced file is hashed again."""
    if recorded_bytes is None or recorded_sha256 is None:
        return "no bytes and sha256 of it are recorded"
    if size != recorded_bytes:
        return f"{size:,} bytes, where its first fetch recorded {recorded_bytes:,}"
    if file_sha256(path) != recorded_sha256:
        return f"its sha256 is not the {recorded_sha256[:12]}... its first fetch recorded"
    return None


# --------------------------------------------------------------------------------------------
# Status
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TreebankStatus:
    """A treebank fetched into the data root: its code, the tag or source it came from, the
    licence its README gave, and with ``verify`` the files whose bytes or sha256 differ from the
    manifest (``changed``)."""

    code: str
    language: str
    ref: str
    licence: str
    missing: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    verified: bool = False


@renamed_keywords(root="data_root")
def treebank_status(data_root: str | os.PathLike | None = None, verify: bool = False) -> list[TreebankStatus]:
    """The treebanks of the table fetched into the root (``ud/<code>/manifest.json``), in code order."""
    base = _data_root(data_root)
    rows = []
    for code in sorted(p.parent.name for p in (base / "ud").glob(f"*/{MANIFEST}")):
        treebank = TREEBANKS.get(code)
        manifest = read_manifest(treebank, base) if treebank is not None else None
        if manifest is None:
            continue
        missing = tuple(treebank.file(s) for s in SPLITS if not (base / treebank.file(s)).is_file())
        changed = ()
        if verify:
            changed = tuple(treebank.file(s) for s in SPLITS if treebank.file(s) not in missing and _differs(
                str(base / treebank.file(s)), *_stat(base / treebank.file(s)),
                *_record(manifest, f"{code}-ud-{s}.conllu")))
        rows.append(TreebankStatus(code, treebank.language, str(manifest.get("ref", "?")),
                                   str(manifest.get("licence", treebank.licence)), missing, changed, verify))
    return rows


def _stat(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_mtime_ns, stat.st_size


def _record(manifest: dict, name: str) -> tuple:
    record = manifest["files"].get(name) or {}
    return record.get("bytes"), record.get("sha256")


# --------------------------------------------------------------------------------------------
# Fetching
# --------------------------------------------------------------------------------------------


def _sources(treebank: Treebank, source: str | None) -> tuple[dict[str, str], str, str]:
    """(file name -> URL, the ref recorded, the README's URL) for ``source``: None, UD's GitHub at
    the release tag; a base URL laid out as GitHub's raw files (``<base>/<repository>/<tag>/``); a
    folder holding the files themselves (a clone of the repository)."""
    names = [f"{treebank.code}-ud-{split}.conllu" for split in SPLITS]
    if source is not None and "://" not in source:
        folder = Path(source).expanduser().resolve()
        if not folder.is_dir():
            raise DownloadError(f"--from {source}: no such folder (give a folder holding {', '.join(names)}, or a "
                                "base URL laid out as GitHub's raw files)")
        return {n: (folder / n).as_uri() for n in names}, f"folder {folder}", (folder / "README.md").as_uri()
    base = UD_RAW if source is None else source
    urls = {n: treebank.url(split, base) for n, split in zip(names, SPLITS)}
    return urls, UD_RELEASE, urls[names[0]].rsplit("/", 1)[0] + "/README.md"


def _readme_licence(url: str) -> str | None:
    """The ``License:`` line of a UD README (its machine-readable metadata), or None. ``url`` names
    README.md; some treebanks have README.txt instead (Dutch-Alpino, Finnish-TDT, Hebrew-HTB at r2.14)."""
    for candidate in (url, url.removesuffix(".md") + ".txt"):
        try:
            with urllib.request.urlopen(candidate, timeout=NETWORK_TIMEOUT) as response:
                text = response.read(1 << 20).decode("utf-8", "replace")
        except (OSError, ValueError) as err:
            log.info("no README at %s (%s)", candidate, err)
            continue
        found = _LICENCE_LINE.search(text)
        return found.group(1) if found else None
    log.info("no README beside %s: the table's licence is recorded", url)
    return None


def _check_conllu_head(path: Path, url: str) -> None:
    """Refuse a fetched file that does not begin as CoNLL-U (an error page served as the file): its
    first word line must have the 10 tab-separated columns (the readers check every line later)."""
    try:
        with open(path, encoding="utf-8") as fh:
            first = next((line for _, line in zip(range(1000), fh) if line.strip() and not line.startswith("#")), "")
    except UnicodeDecodeError as err:
        raise DownloadError(f"{url} is not a CoNLL-U file (not UTF-8: {err}); nothing was installed") from None
    if len(first.rstrip("\r\n").split("\t")) != 10:
        raise DownloadError(f"{url} is not a CoNLL-U file (its first word line has no 10 tab-separated columns); "
                            "nothing was installed")


@renamed_keywords(root="data_root")
def download_treebank(name: str, data_root: str | os.PathLike | None = None, *, force: bool = False,
                      progress: ProgressCallback | None = None, source: str | None = None) -> Path:
    """Fetch treebank ``name`` (a language, its ISO code or a treebank code; ``ud:`` allowed) into
    the data root; return the root. ``source``: a base URL laid out as GitHub's raw files, or a
    folder holding the three files (default: UD's GitHub at ``UD_RELEASE``). Kept unless ``force``
    when already fetched. Raises DownloadError (network, a file that is not CoNLL-U, another
    download of it running) or ValueError (no such treebank)."""
    treebank = get_treebank(name)
    if treebank.code == "en_ewt":
        if source is not None:
            raise DownloadError("UD English-EWT comes from its pinned commit, checked against pinned checksums; "
                                "--from is for the other treebanks and for models")
        return download(treebank.dataset, data_root, force=force, progress=progress)
    base = download_root(data_root)
    (base / DOWNLOADS_DIR).mkdir(parents=True, exist_ok=True)
    try:
        with output_lock(base / DOWNLOADS_DIR / treebank.dataset, what="download"):
            if force or treebank_missing(treebank, base):
                _fetch_treebank(treebank, base, progress, source)
            else:
                log.info("%s: already fetched in %s", treebank.code, base / treebank.folder)
    except OutputBusy:
        raise DownloadError(f"{treebank.code}: another download of it into {base} is running; wait for it to "
                            "finish, then run this again if it failed") from None
    return base


def _fetch_treebank(treebank: Treebank, base: Path, progress, source: str | None) -> None:
    """The work of :func:`download_treebank`, under its lock: the files into a staging folder,
    checked, moved into place, the manifest written last."""
    urls, ref, readme = _sources(treebank, source)
    staging = base / DOWNLOADS_DIR / treebank.dataset
    files = {}
    for file_name, url in urls.items():
        log.info("%s: fetching %s", treebank.code, url)
        staged = staging / file_name
        sha256 = _fetch_url(url, staged, label=file_name, downloads=base / DOWNLOADS_DIR, progress=progress,
                            manual=str(base / treebank.folder / file_name))
        try:
            _check_conllu_head(staged, url)
        except DownloadError:
            staged.unlink()  # complete but not a treebank: fetching it again is the fix
            raise
        files[file_name] = {"url": url, "bytes": staged.stat().st_size, "sha256": sha256}
    licence = _readme_licence(readme)
    dest = base / treebank.folder
    dest.mkdir(parents=True, exist_ok=True)
    (dest / MANIFEST).unlink(missing_ok=True)  # --force: the old files stop being a treebank first
    for file_name in files:
        os.replace(staging / file_name, dest / file_name)
    manifest = {"treebank": treebank.code, "language": treebank.language, "repository": treebank.repository,
                "ref": ref, "licence": licence or treebank.licence, "licence_from": "README" if licence else "table",
                "fetched": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "trust": "first fetch: these sha256 are what was fetched, not checked against a published sum",
                "files": files}
    atomic_write_text(dest / MANIFEST, json.dumps(manifest, indent=1) + "\n")
    shutil.rmtree(staging, ignore_errors=True)


__all__ = ["MANIFEST", "SPLITS", "TreebankChanged", "TreebankStatus", "download_treebank", "fetch_command",
           "fetch_name", "language_treebank", "read_manifest", "require_treebank", "treebank_file",
           "treebank_for_language",
           "treebank_missing", "treebank_status"]
