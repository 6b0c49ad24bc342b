"""Fetching a published archive of another ELMo family (``elmo_model.models.published_archives``:
ELMoForManyLangs zips, TF Hub modules) into the models home.

The archive is fetched as every download is (``downloads._fetch_url``: resumed with HTTP ranges,
its announced size bounded by the entry's ``largest_bytes``, room asked for first) into the models
home's ``.downloads/<name>/``, under the name's download lock. It is then opened and read to its
last byte (a zip's CRCs, a tar's members) and must hold a model of its family's layout; only then
is it moved to ``<models home>/<name><suffix>`` beside ``<name>.download.json`` (URL, bytes,
sha256, the registry's facts). A damaged or foreign archive is one line and nothing is installed.
Loading unzips or converts it once (``elmo_model.models.names``).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import tarfile
import zipfile
from pathlib import Path, PurePosixPath

from elmo_model.models.published_archives import PublishedArchive
from elmo_model.plumbing.io_safety import atomic_write_text
from probing.data.fetch import DOWNLOADS_DIR, DownloadError, _fetch_url

log = logging.getLogger(__name__)

#: a file each family's archive must hold (at its top or in one folder)
_ZIP_MARKERS = {"config.json", "encoder.pkl"}  # ELMoForManyLangs (char.dic or word.dic beside them)
_TFHUB_MARKERS = ("saved_model.pb", "tfhub_module.pb")


def _zip_problem(path: Path, family: str) -> str | None:
    """What makes ``path`` no model archive of ``family`` (ELMoForManyLangs, or the NLPL layout:
    options.json with model.hdf5 or weights.hdf5); None: it is one. Reads every member."""
    try:
        with zipfile.ZipFile(path) as zipped:
            bad = zipped.testzip()
            names = {PurePosixPath(n).name for n in zipped.namelist()}
    except (zipfile.BadZipFile, OSError) as err:
        return f"not a readable zip file ({err})"
    if bad is not None:
        return f"its member {bad} is damaged (CRC mismatch)"
    if family == "NLPL":
        if "options.json" not in names or not names & {"model.hdf5", "weights.hdf5"}:
            return "it holds no NLPL ELMo model (options.json with model.hdf5)"
    elif not _ZIP_MARKERS <= names or not names & {"char.dic", "word.dic"}:
        return "it holds no ELMoForManyLangs model (config.json, encoder.pkl and char.dic or word.dic)"
    return None


def _tar_problem(path: Path) -> str | None:
    """What makes ``path`` no TF Hub module archive (None: it is one). Reads every member."""
    try:
        with tarfile.open(path, "r:*") as tar:
            members = tar.getmembers()  # reads the whole stream: a cut archive fails here
    except (tarfile.TarError, OSError, EOFError) as err:
        return f"not a readable .tar.gz ({err})"
    names = {PurePosixPath(m.name).name for m in members}
    if not names & set(_TFHUB_MARKERS) or "variables.index" not in names:
        return "it holds no TF Hub module (saved_model.pb or tfhub_module.pb, with variables/variables.index)"
    return None


def archive_problem(entry: PublishedArchive, path: Path) -> str | None:
    """What makes the fetched ``path`` unfit to install as ``entry`` (None: fit)."""
    return _zip_problem(path, entry.family) if entry.suffix == ".zip" else _tar_problem(path)


def download_archive(entry: PublishedArchive, home: Path, force: bool, progress=None) -> Path:
    """Fetch ``entry``'s archive into ``home`` (the models home), check it, put it in place with its
    record; return its path. Kept when present, unless ``force``."""
    dest = home / entry.file_name
    if not force and dest.is_file():
        log.info("%s: already present: %s", entry.name, dest)
        return dest
    downloads = home / DOWNLOADS_DIR
    staged = downloads / entry.name / entry.file_name
    log.info("%s: fetching %s", entry.name, entry.url)
    sha256 = _fetch_url(entry.url, staged, label=entry.name, downloads=downloads, progress=progress,
                        manual=str(dest), largest=entry.largest_bytes)
    problem = archive_problem(entry, staged)
    if problem:
        shutil.rmtree(staged.parent, ignore_errors=True)  # complete but wrong: fetching it again is the fix
        raise DownloadError(f"{entry.name}: {entry.url}: {problem}; nothing was installed")
    record = {"name": entry.name, "url": entry.url, "bytes": staged.stat().st_size, "sha256": sha256,
              "published": entry.card()}
    dest.unlink(missing_ok=True)  # --force: the old archive stops being the model first
    atomic_write_text(home / entry.record_name, json.dumps(record, indent=1, ensure_ascii=False) + "\n")
    os.replace(staged, dest)
    shutil.rmtree(staged.parent, ignore_errors=True)
    return dest
