"""The data root and the dataset registry: where the datasets live, which files each needs, which
of them are there.

A data root is a folder laid out like this (the shared folder the tests use is one)::

    <root>/ud_english_ewt/en_ewt-ud-{train,dev,test}.conllu
    <root>/nltk_data/corpora/{conll2000,senseval,wordnet}.zip      NLTK's own package layout
    <root>/wsd/WSD_Evaluation_Framework/Evaluation_Datasets/<set>/<set>.{data.xml,gold.key.txt}
    <root>/wsd/WSD_Evaluation_Framework/Training_Corpora/SemCor/semcor.{data.xml[.gz],gold.key.txt}
    <root>/lm_corpus/{wiki,gutenberg}-{train-NN,valid,test}.txt.gz
    <root>/ud/<code>/<code>-ud-{train,dev,test}.conllu, manifest.json   UD treebanks by language (fetched)

Which root, first match wins:

1. an explicit argument (the CLI's ``--data-root``);
2. the environment variable ``ELMO_WORKBENCH_DATA``;
3. the user cache directory ``${XDG_CACHE_HOME:-~/.cache}/elmo-workbench/data``, if it holds
   the files of at least one dataset (``download`` fills it);
4. a folder named ``shared`` beside the checkout (``<checkout>/../shared``, the root the tests
   read), if it holds the files of at least one dataset;
5. otherwise the user cache directory (empty: ``status`` lists everything missing).

``DATASETS`` says, per dataset, which files must be there, their sha256 and where they come
from. ``MODELS`` names the ELMo models AllenNLP published (``elmo_model.models.published``), which the
same command fetches into ``<root>/models/<name>/{options.json,weights.hdf5}``, where
``load_bilm(name)`` finds them. Fetching is ``probing.data.downloads``; the command line is
``probing.data.cli``::

    python -m probing.data status   [--data-root DIR] [--verify]
    python -m probing.data download [NAME ...] [--data-root DIR] [--force]
    python -m probing.data download elmo-small elmo-medium elmo-original elmo-original-5.5b
    python -m probing.data download ud:french         UD treebanks by language (probing.data.treebanks)
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shlex
import zipfile
from dataclasses import dataclass
from pathlib import Path

from elmo_model.models import published
from elmo_model.plumbing.resources import command_name
from probing.data.registry import (  # noqa: F401 (the registry's names, importable from here)
    _REGISTERED_FILES,
    DATASETS,
    DOWNLOAD_BYTES,
    EWT_COMMIT,
    MODELS,
    WSD_FRAMEWORK_URL,
    DataFile,
    Dataset,
    download_size_text,
    get_dataset,
)
from probing.engine.renamed_keywords import renamed_keywords
from elmo_model.plumbing.settings import folder_setting

log = logging.getLogger(__name__)

ENV_VAR = "ELMO_WORKBENCH_DATA"
"""Environment variable naming the data root."""

_CHUNK = 1 << 20


class DatasetMissing(FileNotFoundError):
    """A dataset's files are not in the data root.

    The message names the dataset, the root, the missing files and the command that fetches
    them. Attributes: ``dataset`` (name), ``root`` (Path), ``missing`` (relative paths).
    """

    dataset: str
    root: Path
    missing: tuple[str, ...]



# --------------------------------------------------------------------------------------------
# The root and its files
# --------------------------------------------------------------------------------------------


def default_cache_root() -> Path:
    """The user cache data root: ``${XDG_CACHE_HOME:-~/.cache}/elmo-workbench/data``."""
    cache = os.environ.get("XDG_CACHE_HOME") or ""
    base = Path(cache).expanduser() if cache.strip() else Path.home() / ".cache"
    return base / "elmo-workbench" / "data"


#: The data root found beside the checkout when neither ``--data-root`` nor the environment
#: variable names one and the user cache holds nothing (the layout the tests and CI use).
SIBLING_ROOT = Path(__file__).resolve().parents[3] / "shared"  # probing/data/__init__.py -> <checkout>/..


@renamed_keywords(root="data_root")
def holds_any_dataset(data_root: str | os.PathLike) -> bool:
    """True when ``data_root`` is a folder holding every file of at least one registered dataset, or
    a UD treebank fetched by language (its ``ud/<code>/manifest.json``)."""
    base = Path(data_root).expanduser()
    if not base.is_dir():
        return False
    return any(all(_locate(spec, base) is not None for spec in d.files) for d in DATASETS.values()) \
        or any((base / "ud").glob("*/manifest.json"))


def _resolve_root(explicit: str | os.PathLike | None) -> tuple[Path, str]:
    """(root, where the choice came from): the rule of this module's docstring."""
    if explicit is not None and str(explicit).strip():
        return Path(explicit).expanduser().resolve(), "--data-root"
    if os.environ.get(ENV_VAR, "").strip():
        return folder_setting(ENV_VAR), ENV_VAR
    cache = default_cache_root().expanduser().resolve()
    if holds_any_dataset(cache):
        return cache, "default user cache directory"
    if holds_any_dataset(SIBLING_ROOT):
        return SIBLING_ROOT.resolve(), "the 'shared' folder beside the checkout"
    return cache, "default user cache directory, empty"


def data_root(explicit: str | os.PathLike | None = None) -> Path:
    """The data root: ``explicit`` > env ``ELMO_WORKBENCH_DATA`` > the user cache directory if
    it holds a dataset > ``<checkout>/../shared`` if it holds one > the (empty) user cache.

    Returns an absolute path; it need not exist yet (``download`` creates it).
    """
    return _resolve_root(explicit)[0]


def download_root(explicit: str | os.PathLike | None = None) -> Path:
    """Where ``download`` writes: the data root when ``--data-root`` or the environment variable
    names one, else the user cache, never the 'shared' folder beside the checkout (a read-only
    root that tests and other checkouts read)."""
    root, origin = _resolve_root(explicit)
    return default_cache_root().expanduser().resolve() if root == SIBLING_ROOT.resolve() and \
        origin.startswith("the 'shared'") else root


def root_origin(explicit: str | os.PathLike | None = None) -> str:
    """Where :func:`data_root` found the root, in words (for status lines and the app)."""
    return _resolve_root(explicit)[1]


#: :func:`data_root` under another name, for the functions below whose ``data_root`` parameter hides it.
_data_root = data_root


@renamed_keywords(root="data_root")
def find_file(relpath: str, data_root: str | os.PathLike | None = None) -> Path | None:
    """The file ``relpath`` under the data root, as given or gzipped (or gunzipped); None if absent."""
    base = _data_root(data_root)
    options = [relpath]
    options.append(relpath[: -len(".gz")] if relpath.endswith(".gz") else relpath + ".gz")
    for option in options:
        candidate = base / option
        if candidate.is_file():
            _check_size(option, candidate)
            return candidate
    return None


@renamed_keywords(root="data_root")
def dataset_folders(data_root: str | os.PathLike | None = None) -> list[Path]:
    """The folders (or top-level files) of the data root that hold a registered dataset's files
    (``ud_english_ewt/``, ``nltk_data/``, ``wsd/``, ...), those present: the inputs no output may
    be written into (``elmo_model.plumbing.io_safety.check_output_path``), so a results file named
    like a dataset or gold-key file never replaces it."""
    base = _data_root(data_root)
    tops = {spec.path.split("/", 1)[0] for d in DATASETS.values() for spec in d.files} | {"ud"}  # + the treebanks
    return [base / top for top in sorted(tops) if (base / top).exists()]


class DatasetTruncated(ValueError):
    """A dataset file is shorter than the registry's reference copy (cut short or replaced)."""


def _check_size(relpath: str, path: Path) -> None:
    """Refuse a registered file shorter than its reference copy: a download or copy cut short
    would otherwise be read as a smaller dataset. One ``stat``, no hashing (``status --verify``
    hashes every byte)."""
    found = _REGISTERED_FILES.get(relpath)
    if found is None or found[1].size is None:
        return
    dataset, spec = found
    size = path.stat().st_size
    if size < spec.size:
        fix = (f"fetch it again: python -m probing.data download {dataset.name}" if dataset.downloadable
               else f"copy it again from the reference data root ({dataset.source})")
        raise DatasetTruncated(f"{path}: {size:,} bytes, but the {dataset.title} file has {spec.size:,}: it is "
                               f"truncated; {fix} (python -m probing.data status --verify checks every file)")


def _locate(spec: DataFile, base: Path) -> Path | None:
    for option in spec.candidates():
        candidate = base / option
        if candidate.is_file():
            return candidate
    return None


def file_sha256(path: str | os.PathLike) -> str:
    """Hex sha256 of a file's bytes (read in 1 MiB blocks)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


@renamed_keywords(root="data_root")
def missing_files(name: str, data_root: str | os.PathLike | None = None) -> list[str]:
    """Relative paths of the files of dataset ``name`` absent from the root (empty: all there)."""
    base = _data_root(data_root)
    return [spec.path for spec in get_dataset(name).files if _locate(spec, base) is None]


def unreadable_archive(path: Path) -> str | None:
    """Why a ``.zip`` file cannot be read (truncated, not a zip), or None. Reads only the zip's
    central directory at the end of the file, so it is cheap enough for every status."""
    if path.suffix != ".zip":
        return None
    try:
        with zipfile.ZipFile(path) as archive:
            archive.infolist()
    except (zipfile.BadZipFile, OSError, EOFError) as err:
        return f"not a readable zip archive ({err})"
    return None


@renamed_keywords(root="data_root")
def damaged_files(name: str, data_root: str | os.PathLike | None = None) -> list[str]:
    """Relative paths of the files of dataset ``name`` that are there but cannot be read
    (a truncated archive); cheap, unlike the checksums of ``status --verify``."""
    base = _data_root(data_root)
    damaged = []
    for spec in get_dataset(name).files:
        found = _locate(spec, base)
        if found is not None and unreadable_archive(found):
            damaged.append(spec.path)
    return damaged


@renamed_keywords(root="data_root")
def is_present(name: str, data_root: str | os.PathLike | None = None) -> bool:
    """True when every file of dataset ``name`` is in the root and every archive among them is
    readable (checksums not checked)."""
    return not missing_files(name, data_root) and not damaged_files(name, data_root)


@renamed_keywords(root="data_root")
def download_command(name: str, data_root: str | os.PathLike | None = None) -> str:
    """The shell command that fetches dataset ``name`` into the root: ``elmo-data download ...`` when the
    project is installed (``python -m`` would need the venv's own python), the module form in a checkout."""
    return f"{data_command()} download {name} --data-root {shlex.quote(str(download_root(data_root)))}"


def data_command() -> str:
    """How hints spell the data command: ``elmo-data`` installed, ``python -m probing.data`` in a checkout."""
    return command_name("elmo-data", "python -m probing.data")


@renamed_keywords(root="data_root")
def require(name: str, data_root: str | os.PathLike | None = None) -> Path:
    """Check that dataset ``name`` is complete in the root; return the root.

    Raises ``DatasetMissing`` (a FileNotFoundError) naming the dataset, the root, the missing
    files and the command that fetches them.
    """
    base = _data_root(data_root)
    missing = missing_files(name, base)
    dataset = get_dataset(name)
    if not missing:
        damaged = damaged_files(name, base)
        if not damaged:
            return base
        fix = (f"fetch it again with:\n  {download_command(name, base)} --force" if dataset.downloadable
               else f"replace it ({dataset.source})")
        exc = DatasetMissing(f"dataset {name!r} ({dataset.title}) in the data root {base}: {', '.join(damaged)} "
                             f"is damaged ({unreadable_archive(base / damaged[0]) or 'unreadable'}); {fix}")
        exc.dataset, exc.root, exc.missing = name, base, tuple(damaged)
        raise exc
    shown = ", ".join(missing[:4]) + (f" and {len(missing) - 4} more" if len(missing) > 4 else "")
    if dataset.downloadable:
        fix = f"Fetch it with:\n  {download_command(name, base)}"
    else:
        fix = f"It has no automatic download: {dataset.source}."
    message = (f"dataset {name!r} ({dataset.title}) is missing from the data root {base}: {shown} not found.\n{fix}\n"
               f"Or point --data-root / {ENV_VAR} at a data root that has it (see `python -m probing.data status`).")
    exc = DatasetMissing(message)
    exc.dataset, exc.root, exc.missing = name, base, tuple(missing)
    raise exc


@renamed_keywords(root="data_root")
def use_nltk_data(data_root: str | os.PathLike | None = None) -> Path:
    """Put ``<root>/nltk_data`` first on ``nltk.data.path`` (idempotent); return that folder.

    After this ``nltk.corpus.conll2000``, ``.senseval`` and ``.wordnet`` read from the root
    with no download.
    """
    import nltk  # imported here: nltk is slow to import and most callers never need it

    folder = _data_root(data_root) / "nltk_data"
    entry = str(folder)
    if not (nltk.data.path and nltk.data.path[0] == entry):
        while entry in nltk.data.path:
            nltk.data.path.remove(entry)
        nltk.data.path.insert(0, entry)
    return folder


# --------------------------------------------------------------------------------------------
# Status
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DatasetStatus:
    """What the root holds of one dataset.

    ``missing``: files absent. ``corrupt``: archives that do not open and files shorter than
    their reference copy (always), and with ``verify`` files whose checksum differs where it is
    pinned (strict); ``differs`` files that differ from the reference copy where that is allowed
    (e.g. NLTK's newer package); ``verified`` says whether checksums were read.
    """

    name: str
    root: Path
    n_files: int
    missing: tuple[str, ...] = ()
    corrupt: tuple[str, ...] = ()
    differs: tuple[str, ...] = ()
    verified: bool = False

    @property
    def present(self) -> bool:
        """All files there and none with a wrong pinned checksum."""
        return not self.missing and not self.corrupt

    @property
    def state(self) -> str:
        """One word for the table: present, partial, missing or corrupt."""
        if self.corrupt:
            return "corrupt"
        if not self.missing:
            return "present"
        return "missing" if len(self.missing) == self.n_files else "partial"


@renamed_keywords(root="data_root")
def dataset_status(name: str, data_root: str | os.PathLike | None = None, verify: bool = False) -> DatasetStatus:
    """The status of dataset ``name`` in the root; ``verify`` also checks sha256 (reads every byte)."""
    base = _data_root(data_root)
    dataset = get_dataset(name)
    missing, corrupt, differs = [], [], []
    for spec in dataset.files:
        found = _locate(spec, base)
        if found is None:
            missing.append(spec.path)
        elif unreadable_archive(found):  # a truncated download is not "present", --verify or not
            corrupt.append(spec.path)
        elif spec.size and found == base / spec.path and found.stat().st_size < spec.size:  # cut short: one stat
            corrupt.append(spec.path)
        elif verify and spec.sha256 and found == base / spec.path:
            if file_sha256(found) != spec.sha256:
                (corrupt if spec.strict else differs).append(spec.path)
    return DatasetStatus(name, base, len(dataset.files), tuple(missing), tuple(corrupt), tuple(differs), verify)


@renamed_keywords(root="data_root")
def status(data_root: str | os.PathLike | None = None, verify: bool = False) -> list[DatasetStatus]:
    """The status of every registered dataset in the root."""
    return [dataset_status(name, data_root, verify) for name in DATASETS]


# --------------------------------------------------------------------------------------------
# Published models
# --------------------------------------------------------------------------------------------


def model_home(data_root: str | os.PathLike | None = None, models_dir: str | os.PathLike | None = None) -> Path:
    """The folder a published model is downloaded into (one ``<name>/`` each): ``models_dir``
    (``--models-dir``); else, given an explicit data root, its ``models/``; else the models home
    (``$ELMO_WORKBENCH_MODELS``, else ``~/.cache/elmo-workbench/models``), which every command
    searches whatever its data root."""
    if models_dir is not None or data_root is None:
        return published.models_home(models_dir)
    return download_root(data_root) / published.MODELS_SUBDIR


def model_missing_files(name: str, data_root: str | os.PathLike | None = None,
                        models_dir: str | os.PathLike | None = None) -> list[str]:
    """Which of ``options.json`` and ``weights.hdf5`` published model ``name`` lacks where the
    loaders look for it (``published.model_folders``; empty: downloaded)."""
    published.get_published(name)
    return published.missing_files(name, data_root, models_dir)


@dataclass(frozen=True)
class ModelStatus:
    """Whether a published model is in ``folder``: ``missing`` lists the files absent;
    ``sha256_ok`` whether its weights match the sha256 its ``model_card.json`` records (None:
    not checked, or no record)."""

    name: str
    folder: Path
    missing: tuple[str, ...]
    sha256_ok: bool | None = None

    @property
    def state(self) -> str:
        """present, partial, missing, or DAMAGED (present, but not the recorded sha256)."""
        if not self.missing:
            return "DAMAGED" if self.sha256_ok is False else "present"
        return "missing" if len(self.missing) == 2 else "partial"


def model_status(data_root: str | os.PathLike | None = None, models_dir: str | os.PathLike | None = None,
                 verify: bool = False) -> list[ModelStatus]:
    """The status of every published model where the loaders look for it; ``verify`` also
    checks each present model's weights against the sha256 its ``model_card.json`` records."""
    rows = []
    for name in MODELS:
        folder = published.published_model_dir(name, data_root, models_dir)
        missing = tuple(published.missing_files(name, data_root, models_dir))
        rows.append(ModelStatus(name, folder, missing,
                                _weights_match_card(folder) if verify and not missing else None))
    return rows


def _weights_match_card(folder: Path) -> bool | None:
    """Whether ``folder``'s weights.hdf5 has the sha256 its model_card.json records (None: no record)."""
    try:
        recorded = json.loads((folder / "model_card.json").read_text(encoding="utf-8")).get("weights_sha256")
    except (OSError, ValueError, AttributeError):
        return False if (folder / "model_card.json").exists() else None
    return None if not recorded else file_sha256(folder / published.WEIGHTS_FILE) == recorded


def model_download_command(name: str, models_dir: str | os.PathLike | None = None) -> str:
    """The shell command that fetches published model ``name`` into the models home."""
    return published.download_command(name, models_dir)
