"""Fetching datasets and published models into the data root: files (through ``probing.data.fetch``,
HTTP downloads that resume), NLTK packages, zip archives, ELMo weight files checked against their options.

``download(name)`` fetches one dataset of the registry (``probing.data.DATASETS``) from its
official source, one published ELMo model (``probing.data.MODELS``: elmo-small, elmo-medium,
elmo-original, elmo-original-5.5b, elmo-pubmed) from AllenNLP into ``<root>/models/<name>/``, or
another family's published archive (``elmo_model.models.published_archives``) into the models home
(``probing.data.archive_downloads``). Downloads go to
``<root>/.downloads/<file>.part`` (with a manifest: URL, expected size, sha256) and are renamed
into place only once complete and, where a checksum is pinned, verified: an interrupted download
leaves nothing half-written in a dataset's place, and running it again resumes with an HTTP Range
request where the server allows it. A model's weight file is moved into place only once every
dataset in it reads back with the shape its ``options.json`` implies. One download of a name
runs at a time: a second one, in another process or thread, is refused while the first runs.
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
import zipfile
from pathlib import Path, PurePosixPath

from elmo_model.bilm.config import ElmoConfig
from elmo_model.models.published import OPTIONS_FILE, WEIGHTS_FILE, PublishedModel
from elmo_model.models.published import models_home as published_models_home
from elmo_model.models.published_archives import PublishedArchive, archive_named
from elmo_model.plumbing.io_safety import (
    DISK_FULL_ERRNOS,
    OutputBusy,
    atomic_write_text,
    disk_full,
    lock_path,
    output_lock,
)
from elmo_model.plumbing.progress import ProgressCallback
from probing.data import (
    MODELS,
    Dataset,
    download_root,
    file_sha256,
    get_dataset,
    is_present,
    missing_files,
    model_home,
)
from probing.data.archive_downloads import download_archive
from probing.data.fetch import _CHUNK, DOWNLOADS_DIR, DownloadError, _fetch_url, _offline_hint  # noqa: F401 (theirs too)
from probing.engine.renamed_keywords import renamed_keywords

log = logging.getLogger(__name__)

def _download_files(dataset: Dataset, base: Path, force: bool, progress) -> None:
    for spec in dataset.files:
        dest = base / spec.path
        if not force and dest.is_file() and (spec.sha256 is None or file_sha256(dest) == spec.sha256):
            log.info("%s: %s already present", dataset.name, spec.path)
            continue
        assert spec.url, f"{dataset.name}: {spec.path} has no url"
        log.info("%s: fetching %s", dataset.name, spec.url)
        _fetch_url(spec.url, dest, label=PurePosixPath(spec.path).name, downloads=base / DOWNLOADS_DIR,
                   sha256=spec.sha256 if spec.strict else None, progress=progress)


def _download_nltk(dataset: Dataset, base: Path, force: bool, progress) -> None:
    # NLTK's own downloader: it reads NLTK's index, fetches the package to a temporary file,
    # verifies the index checksum and renames it into place. extract=False keeps the zip
    # layout of the reference root (NLTK still unpacks packages its index marks as unzip).
    # lazy: nltk takes seconds to import and only the NLTK datasets need it
    from nltk.downloader import Downloader, ErrorMessage, ProgressMessage

    folder = base / "nltk_data"
    folder.mkdir(parents=True, exist_ok=True)
    package = dataset.nltk_package
    failure = None
    try:
        for message in Downloader().incr_download(package, str(folder), force=force, extract=False):
            if isinstance(message, ErrorMessage):
                failure = message.message
                break
            if isinstance(message, ProgressMessage) and progress:
                progress(f"{package}.zip", float(message.progress), 100.0, "%")
    except (OSError, ValueError, http.client.HTTPException) as exc:
        failure = str(exc)
    if failure is not None:
        raise DownloadError(f"could not download the NLTK package {package!r} into {folder}: {failure}. "
                            f"{_offline_hint(str(folder / 'corpora' / f'{package}.zip'))}")
    for spec in dataset.files:
        found = base / spec.path
        if found.is_file() and spec.sha256 and file_sha256(found) != spec.sha256:
            log.info("%s: %s differs from the reference copy (NLTK's package may be newer%s)", dataset.name,
                     spec.path, "; the reference WordNet zip was assembled by hand" if package == "wordnet" else "")


def _safe_member(name: str, prefix: str) -> PurePosixPath | None:
    """The member's path below ``prefix`` if it is a plain relative file path there, else None."""
    if not name.startswith(prefix) or name.endswith("/"):
        return None
    rel = PurePosixPath(name[len(prefix):])
    if rel.is_absolute() or any(part in ("", "..", ".") for part in rel.parts) or "\\" in name:
        return None
    return rel


def _download_zip(dataset: Dataset, base: Path, force: bool, progress) -> None:
    assert dataset.archive_url and dataset.archive_prefix and dataset.archive_dest
    dest_root = base / dataset.archive_dest / dataset.archive_prefix.rstrip("/")
    if not force and is_present(dataset.name, base):
        log.info("%s: already present", dataset.name)
        return
    (base / dataset.archive_dest).mkdir(parents=True, exist_ok=True)
    # Everything is staged in a temporary folder beside the destination (same file system, so
    # the final renames are atomic) and moved into place only once verified.
    with tempfile.TemporaryDirectory(prefix=".download-", dir=base / dataset.archive_dest) as tmp:
        tmp_dir = Path(tmp)
        archive = tmp_dir / PurePosixPath(dataset.archive_url).name
        log.info("%s: fetching %s", dataset.name, dataset.archive_url)
        _fetch_url(dataset.archive_url, archive, label=archive.name, downloads=base / DOWNLOADS_DIR, progress=progress,
                   manual=f"{dest_root} (the archive's {dataset.archive_prefix} folder)")
        staged = tmp_dir / "extracted"
        try:
            with zipfile.ZipFile(archive) as zf:
                members = [(m, _safe_member(m.filename, dataset.archive_prefix)) for m in zf.infolist()]
                members = [(m, rel) for m, rel in members if rel is not None]
                if not members:
                    raise DownloadError(f"{dataset.archive_url} holds no folder {dataset.archive_prefix!r}; "
                                        f"the archive's layout has changed")
                for member, rel in members:
                    target = staged.joinpath(*rel.parts)
                    target.parent.mkdir(parents=True, exist_ok=True)
                    with zf.open(member) as src, open(target, "wb") as out:
                        shutil.copyfileobj(src, out, _CHUNK)
        except zipfile.BadZipFile as exc:
            raise DownloadError(f"{dataset.archive_url} is not a valid zip archive: {exc}") from exc
        prefix_len = len(f"{dataset.archive_dest}/{dataset.archive_prefix}")
        missing = []
        for spec in dataset.files:
            found = next(
                (staged / option[prefix_len:] for option in spec.candidates()
                 if (staged / option[prefix_len:]).is_file()),
                None,
            )
            if found is None:
                missing.append(spec.path)
            elif spec.strict and spec.sha256 and found.name == PurePosixPath(spec.path).name:
                actual = file_sha256(found)
                if actual != spec.sha256:
                    raise DownloadError(f"checksum mismatch for {spec.path} in {dataset.archive_url}: expected "
                                        f"sha256 {spec.sha256}, got {actual}. Nothing was installed.")
        if missing:
            raise DownloadError(f"{dataset.archive_url} lacks {', '.join(missing)}; nothing was installed")
        for path in sorted(p for p in staged.rglob("*") if p.is_file()):
            target = dest_root / path.relative_to(staged)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(path, target)


# --------------------------------------------------------------------------------------------
# Published models
# --------------------------------------------------------------------------------------------


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split())


def check_model_files(options: Path, weights: Path, model: PublishedModel | None = None,
                      progress: ProgressCallback | None = None, label: str = "checking weights",
                      names: tuple[str, str] | None = None) -> None:
    """Refuse a weight file that is incomplete or does not match its options: ``options`` must read
    as an ``options.json`` (describing ``model``'s architecture, when given) and ``weights`` must
    pass ``elmo_model.bilm.weights.check_weight_shapes`` reading every value: hdf5 with every
    dataset of the bilm-tf layout present, of the shape the options imply, readable to its last
    byte and finite. Raises DownloadError, one line naming the file and the first dataset that
    fails, ending "nothing was installed". Reads the whole file, one dataset at a time.
    ``names``: what the message calls the two files (default: their file names; a download names
    the published files)."""
    # imported here: elmo_model.bilm.weights brings torch, and this module is imported by the app's first
    # paint and by `python -m probing.data status`; the check only matters once a weight file is here.
    from elmo_model.bilm.weights import check_weight_shapes

    options_name, weights_name = names or (options.name, weights.name)
    try:
        config = ElmoConfig.from_json(options)
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise DownloadError(f"{options_name}: not a readable ELMo options file ({_one_line(err)}); "
                            "nothing was installed") from None
    if model is not None:
        problem = model.architecture_problem(json.loads(options.read_text(encoding="utf-8")))
        if problem:
            raise DownloadError(f"{options_name}: {problem}; these are another model's options. Nothing was "
                                "installed")
    try:
        check_weight_shapes(config, weights, read_values=True, progress=progress, label=label, name=weights_name)
    except ValueError as err:
        raise DownloadError(f"{err}; nothing was installed") from None


def _local_copy(model: PublishedModel, folder: Path, kind: str) -> Path:
    """``kind``'s file of ``model`` in a folder a user gives (``--from DIR``): AllenNLP's file name
    (``elmo_<allennlp_name>_<kind>``), in the folder or in its ``<allennlp_name>/`` (a copy of the
    server's layout), or the plain name (``options.json``, ``weights.hdf5``). DownloadError, naming
    the names looked for, when none is there."""
    allennlp = model.file_name(kind)
    candidates = [folder / allennlp, folder / model.allennlp_name / allennlp, folder / kind, folder / model.name / kind]
    found = next((path for path in candidates if path.is_file()), None)
    if found is None:
        raise DownloadError(f"{folder}: no {kind} of {model.name} (looked for {allennlp} and {kind}, also under "
                            f"{model.allennlp_name}/ and {model.name}/)")
    return found


def _stage_copy(source: Path, dest: Path) -> str:
    """Copy ``source`` to ``dest`` (the staging folder); return its sha256."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source, dest)
    return file_sha256(dest)


def _download_model(model: PublishedModel, home: Path, force: bool, progress, source: str | None = None) -> None:
    """Fetch ``model``'s two files into ``<home>/.downloads/<name>/``, check them (every dataset of
    the weights read, the options against the name's architecture), then move them to
    ``<home>/<name>/`` (the weight file first: ``options.json`` arriving last marks the model as
    there) beside a ``model_card.json`` recording where they came from and the weights' sha256,
    which loading and ``status --verify`` then check. ``source``: a mirror's base URL or a local
    folder (``--from``); None: ``$ELMO_WORKBENCH_MODELS_URL``, else AllenNLP's server."""
    dest = home / model.name
    if not force and all((dest / kind).is_file() for kind in (OPTIONS_FILE, WEIGHTS_FILE)):
        log.info("%s: already present in %s", model.name, dest)
        return
    downloads = home / DOWNLOADS_DIR
    staging = downloads / model.name
    staged = {kind: staging / kind for kind in (OPTIONS_FILE, WEIGHTS_FILE)}
    local = Path(source).expanduser() if source is not None and "://" not in source else None
    if local is not None and not local.is_dir():
        host = source.split("/")[0]
        url_hint = (f"; a URL needs its scheme: http://{source} or https://{source}"
                    if host and ("." in host.strip(".") or ":" in host) else "")
        raise DownloadError(f"--from {source}: no such folder (give a folder holding the model's files, or a "
                            f"URL){url_hint}")
    try:
        urls = {kind: model.url(kind, source) for kind in staged} if local is None else {}
    except ValueError as err:
        raise DownloadError(str(err)) from None
    origins, sha256 = {}, {}
    for kind, path in staged.items():
        if local is not None:
            origin = _local_copy(model, local, kind)
            log.info("%s: copying %s", model.name, origin)
            origins[kind], sha256[kind] = str(origin.resolve()), _stage_copy(origin, path)
        else:
            origins[kind] = urls[kind]
            log.info("%s: fetching %s", model.name, origins[kind])
            sha256[kind] = _fetch_url(origins[kind], path, label=f"{model.name} {kind}", downloads=downloads,
                                      progress=progress, manual=str(dest / kind), largest=model.largest_file(kind))
    try:
        check_model_files(staged[OPTIONS_FILE], staged[WEIGHTS_FILE], model, progress,
                          label=f"{model.name}: checking {WEIGHTS_FILE}",
                          names=tuple(PurePosixPath(urllib.parse.urlsplit(origins[k]).path).name
                                      for k in (OPTIONS_FILE, WEIGHTS_FILE)))
    except DownloadError:
        shutil.rmtree(staging, ignore_errors=True)  # complete but wrong: fetching it again is the fix
        raise
    card = {"name": model.name, "title": model.title, "allennlp_name": model.allennlp_name,
            "options_url": origins[OPTIONS_FILE], "weights_url": origins[WEIGHTS_FILE],
            "weights_bytes": staged[WEIGHTS_FILE].stat().st_size, "weights_sha256": sha256[WEIGHTS_FILE],
            "published": model.card()}
    dest.mkdir(parents=True, exist_ok=True)
    (dest / OPTIONS_FILE).unlink(missing_ok=True)  # --force: the old pair stops being a model first
    os.replace(staged[WEIGHTS_FILE], dest / WEIGHTS_FILE)
    atomic_write_text(dest / "model_card.json", json.dumps(card, indent=1) + "\n")
    os.replace(staged[OPTIONS_FILE], dest / OPTIONS_FILE)
    shutil.rmtree(staging, ignore_errors=True)


@renamed_keywords(root="data_root")
def download(name: str, data_root: str | os.PathLike | None = None, *, force: bool = False,
             progress: ProgressCallback | None = None, models_dir: str | os.PathLike | None = None,
             source: str | None = None) -> Path:
    """Fetch dataset or published model ``name`` from its official source into the data root
    (a model: into :func:`probing.data.model_home`, ``models_dir`` or the models home unless a
    data root is given; from ``source``, a mirror's base URL or a local folder, when given);
    return the root (a model: the folder holding its ``<name>/``).

    Files already present (with the pinned checksum, where there is one) are kept unless
    ``force``. Raises DownloadError when the network or the checksum fails, when a model's weight
    file is incomplete or does not match its options, or when another download of ``name`` into
    the same root is running; ValueError for a dataset with no automatic download.
    """
    model = MODELS.get(name)
    archive = archive_named(name) if model is None else None
    if archive is not None:  # another family's published archive: always into the models home
        return _download_archive_locked(archive, published_models_home(models_dir), force, progress, source)
    dataset = get_dataset(name) if model is None else None
    base = model_home(data_root, models_dir) if model is not None else download_root(data_root)
    if dataset is not None and not dataset.downloadable:
        raise ValueError(f"dataset {name!r} has no automatic download: {dataset.source}")
    (base / DOWNLOADS_DIR).mkdir(parents=True, exist_ok=True)
    try:
        with output_lock(base / DOWNLOADS_DIR / name, what="download"):
            _download(name, model, dataset, base, force, progress, source)
    except OSError as err:  # unpacking an archive, copying a model from --from: the disk ran out
        if err.errno not in DISK_FULL_ERRNOS:
            raise
        raise DownloadError(f"{name}: {disk_full(err.filename or base, err, 'nothing was installed')}") from None
    except OutputBusy:
        try:
            holder = lock_path(base / DOWNLOADS_DIR / name).read_text().strip() or "another process"
        except OSError:
            holder = "another process"
        raise DownloadError(f"{name}: another download of it into {base} is running ({holder}); wait for it to "
                            "finish, then run this again if it failed") from None
    log.info("%s: ready in %s", name, base)
    return base


def _download_archive_locked(archive: PublishedArchive, home: Path, force: bool, progress,
                             source: str | None) -> Path:
    """:func:`download` of a published archive of another family (``probing.data.archive_downloads``),
    under the name's download lock; returns the models home."""
    if source is not None:
        raise DownloadError(f"{archive.name}: --from is for AllenNLP's models; fetch {archive.name} from its "
                            f"source, or load a copy of the archive by its path")
    (home / DOWNLOADS_DIR).mkdir(parents=True, exist_ok=True)
    try:
        with output_lock(home / DOWNLOADS_DIR / archive.name, what="download"):
            download_archive(archive, home, force, progress)
    except OutputBusy:
        raise DownloadError(f"{archive.name}: another download of it into {home} is running; wait for it to "
                            "finish, then run this again if it failed") from None
    log.info("%s: ready in %s", archive.name, home)
    return home


def _download(name: str, model: PublishedModel | None, dataset: Dataset | None, base: Path, force: bool,
              progress, source: str | None = None) -> None:
    """The work of :func:`download`, under its lock."""
    if model is not None:
        _download_model(model, base, force, progress, source)
        missing = [kind for kind in (OPTIONS_FILE, WEIGHTS_FILE) if not (base / name / kind).is_file()]
    else:
        if dataset.method == "files":
            _download_files(dataset, base, force, progress)
        elif dataset.method == "nltk":
            _download_nltk(dataset, base, force, progress)
        elif dataset.method == "zip":
            _download_zip(dataset, base, force, progress)
        else:  # pragma: no cover - the registry only uses the methods above
            raise AssertionError(dataset.method)
        missing = missing_files(name, base)
    if missing:
        raise DownloadError(f"{name}: still missing after download: {', '.join(missing)}")
