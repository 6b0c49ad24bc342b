"""The data root and the dataset registry: where the datasets live, which files each needs, which
of them are there.

A data root is a folder laid out like this (the shared folder the tests use is one)::

    <root>/ud_english_ewt/en_ewt-ud-{train,dev,test}.conllu
    <root>/nltk_data/corpora/{conll2000,senseval,wordnet}.zip      NLTK's own package layout
    <root>/wsd/WSD_Evaluation_Framework/Evaluation_Datasets/<set>/<set>.{data.xml,gold.key.txt}
    <root>/wsd/WSD_Evaluation_Framework/Training_Corpora/SemCor/semcor.{data.xml[.gz],gold.key.txt}
    <root>/lm_corpus/{wiki,gutenberg}-{train-NN,valid,test}.txt.gz

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
from elmo_model.models.published import PUBLISHED_MODELS, PublishedModel
from probing.engine.renamed_keywords import renamed_keywords

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
# The registry
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DataFile:
    """One file a dataset needs.

    ``path`` is relative to the data root, POSIX-style. ``sha256`` is the checksum of the
    reference copy (the shared data root). ``strict``: a download must match it byte for byte;
    when False the checksum is only informative (e.g. NLTK may ship a newer package, or the
    reference copy was rebuilt). ``alternatives`` are other accepted names for the same content
    (readers open ``.gz`` transparently). ``url``: where to fetch this one file, if it is
    fetched on its own. ``size``: the reference copy's bytes; a file at ``path`` shorter than
    that is refused on first use (``find_file``), without hashing it.
    """

    path: str
    sha256: str | None = None
    strict: bool = True
    alternatives: tuple[str, ...] = ()
    url: str | None = None
    size: int | None = None

    def candidates(self) -> tuple[str, ...]:
        """The accepted relative paths, the preferred one first."""
        return (self.path, *self.alternatives)


@dataclass(frozen=True)
class Dataset:
    """A dataset of the registry: what it is, which files it needs, how to fetch them.

    ``method`` is one of: ``"files"`` (each DataFile has its own ``url``), ``"nltk"`` (the NLTK
    downloader's package ``nltk_package``, into ``<root>/nltk_data``), ``"zip"`` (the archive at
    ``archive_url``; its folder ``archive_prefix`` is extracted under ``<root>/archive_dest``)
    or ``"none"`` (no automatic download; ``source`` says where it comes from).
    """

    name: str
    title: str
    description: str
    licence: str
    source: str
    files: tuple[DataFile, ...]
    method: str
    nltk_package: str | None = None
    archive_url: str | None = None
    archive_prefix: str | None = None
    archive_dest: str | None = None

    @property
    def downloadable(self) -> bool:
        """True when ``python -m probing.data download NAME`` can fetch it."""
        return self.method != "none"


EWT_COMMIT = "15d613d8447b3478787d4c278730a1e48a945efb"
"""UD_English-EWT commit the reference files come from (after v2.16); pinned so checksums hold."""

_EWT_RAW = f"https://raw.githubusercontent.com/UniversalDependencies/UD_English-EWT/{EWT_COMMIT}"
_EWT_SHA256 = {
    "train": "3fb78e2b55482c8ee00caa653af436c88c9e5bc9a73ce26e4ae3ddc79d2b7e7b",
    "dev": "531a54ff90d6ab12201c5a50c3e78e6ddac4de69abc4bce5d275d3cd29efe2b6",
    "test": "e266e515a0a7547657ed3d90d9ba46487d6bd251f27ad4269d4e8a427c8555cd",
}
_EWT_BYTES = {"train": 14_203_025, "dev": 1_805_545, "test": 1_804_515}

WSD_FRAMEWORK_URL = "http://lcl.uniroma1.it/wsdeval/data/WSD_Evaluation_Framework.zip"
"""Raganato et al. (2017) unified WSD evaluation framework, as its authors distribute it."""

_WSD = "wsd/WSD_Evaluation_Framework"
_WSD_EVAL_SHA256 = {  # wsd/SOURCES.md: verbatim copies of the framework's Evaluation_Datasets
    ("senseval2", "data.xml"): "5f5fe6a74fdd4ee85ca271c49a3b88131e4a7ba04a11a1392c1333efcbfe9be9",
    ("senseval2", "gold.key.txt"): "1e1c43116dadc796763c59f66cc61aa204cfb1886e5825836a96cf9b96a056e8",
    ("senseval3", "data.xml"): "ecd472808c5f3873b0e90fda6182519e5ed6081929435a67eb7f2c5a8fd36839",
    ("senseval3", "gold.key.txt"): "1faa09ca47a9c4627c0c1078dfc30e39c16d6ce728a532cc670007fbca0be70e",
    ("semeval2007", "data.xml"): "ff0cb1350acf7d0bf09f05b18c537870c8205f12daa2510099674a227c149f38",
    ("semeval2007", "gold.key.txt"): "06dce0b5892bb5c625ebfd8755d1a31a5a04df6882709aa29c1dcd44befb3b41",
    ("semeval2013", "data.xml"): "58682da53cdb24e7563f9a77bc357616eee6863399c2be62f8927c9d5eb20245",
    ("semeval2013", "gold.key.txt"): "3dcedb0b9bed2906c3651d089236801c5353198ba6eda0575f864e3d18ee81cc",
    ("semeval2015", "data.xml"): "e0804170a39fac9d0da6c707b0b974d493a385743557a40626abf36609372650",
    ("semeval2015", "gold.key.txt"): "3a15c65607f27efb3846a71a303b21d0916b5bb527348bf27f526d6770301eaf",
    ("ALL", "data.xml"): "27a9da01b6d4a1e4dc7c76d15148a38eaa56cc0df371cae4416d04e541b6fe36",
    ("ALL", "gold.key.txt"): "0bf2ffc38f572587c72b59ea928da676423b99b5a54bd1a83eb4848b517d3170",
}
_WSD_EVAL_BYTES = {
    ("senseval2", "data.xml"): 301_219, ("senseval2", "gold.key.txt"): 77_498,
    ("senseval3", "data.xml"): 281_256, ("senseval3", "gold.key.txt"): 61_519,
    ("semeval2007", "data.xml"): 142_049, ("semeval2007", "gold.key.txt"): 14_555,
    ("semeval2013", "data.xml"): 386_664, ("semeval2013", "gold.key.txt"): 54_463,
    ("semeval2015", "data.xml"): 137_606, ("semeval2015", "gold.key.txt"): 37_352,
    ("ALL", "data.xml"): 1_340_442, ("ALL", "gold.key.txt"): 324_159,
}

_LM_SHA256 = {  # computed from the shared data root (lm_corpus/SOURCES.md says how it was built)
    "wiki-train-00.txt.gz": "f0c039aa917e1d45583ebc77e076472ef898c6115d1d19ecd09e00ed004b0f93",
    "wiki-train-01.txt.gz": "162f2e98f5863a82e2dc6678637b8b36d8169af50447d9f0baf85db7020a2c64",
    "wiki-train-02.txt.gz": "2cc45a9020c1174513cb344f323d42d181dcf874a0868288e1e9590c4f0dea89",
    "wiki-train-03.txt.gz": "d7f35e22a3d3ded15f2bec6f42de74233aba0676a265b9e736777765abfed6ae",
    "wiki-train-04.txt.gz": "b8ce97d6cf5e93c043185c7b0687bbe091be1d2edfe8433dd432e168157eb0cf",
    "wiki-valid.txt.gz": "bcf03b01318db69c112cdfecb0bca817c75ff2db8e8ac107931484dc152e76d4",
    "wiki-test.txt.gz": "bb70a2bca17f5a2903bbaa5f80b94d4e806c636324b6c6172fa7d39447de2723",
    "gutenberg-train-00.txt.gz": "a38ffe5cb8bb74b5fb3d57cca044c20f4d58468974881e1a17d593c3a5e76baa",
    "gutenberg-train-01.txt.gz": "d3b61dba564c34d068fe9ceb7b89bdf26f0f58967a330e2722d6fc0b3e45368a",
    "gutenberg-train-02.txt.gz": "9e054dd38554be6154e188871040992feccc46f76fa78b9a5f56eda3e24e55b7",
    "gutenberg-valid.txt.gz": "87ee8ade8a621b317af548dad998fbce2efd19524e8ac758be6817c5ca2f4b39",
    "gutenberg-test.txt.gz": "ad9f26312bef2b19d9492566ca518e367c333413ce4538dc84870d580b9ce087",
}
_LM_BYTES = {
    "wiki-train-00.txt.gz": 9_269_326, "wiki-train-01.txt.gz": 9_297_921, "wiki-train-02.txt.gz": 9_307_297,
    "wiki-train-03.txt.gz": 9_328_411, "wiki-train-04.txt.gz": 9_205_680, "wiki-valid.txt.gz": 519_070,
    "wiki-test.txt.gz": 511_252, "gutenberg-train-00.txt.gz": 8_256_767, "gutenberg-train-01.txt.gz": 8_326_688,
    "gutenberg-train-02.txt.gz": 8_045_688, "gutenberg-valid.txt.gz": 374_635, "gutenberg-test.txt.gz": 469_202,
}


def _build_registry() -> dict[str, Dataset]:
    ewt = Dataset(
        name="ud_english_ewt",
        title="UD English-EWT",
        description="Universal Dependencies English Web Treebank: 12,544 / 2,001 / 2,077 "
        "sentences (train/dev/test) with UPOS and PTB XPOS tags",
        licence="CC BY-SA 4.0",
        source=f"https://github.com/UniversalDependencies/UD_English-EWT (commit {EWT_COMMIT[:8]})",
        files=tuple(
            DataFile(
                path=f"ud_english_ewt/en_ewt-ud-{split}.conllu",
                sha256=_EWT_SHA256[split],
                size=_EWT_BYTES[split],
                alternatives=(f"ud_english_ewt/en_ewt-ud-{split}.conllu.gz",),
                url=f"{_EWT_RAW}/en_ewt-ud-{split}.conllu",
            )
            for split in ("train", "dev", "test")
        ),
        method="files",
    )

    def nltk_dataset(name, title, description, licence, sha256, note=""):
        return Dataset(
            name=name,
            title=title,
            description=description,
            licence=licence,
            source=f"NLTK data package {name!r} (github.com/nltk/nltk_data){note}",
            # NLTK's downloader verifies its own index checksum; ours is the reference copy's.
            files=(DataFile(f"nltk_data/corpora/{name}.zip", sha256=sha256, strict=False),),
            method="nltk",
            nltk_package=name,
        )

    conll2000 = nltk_dataset(
        "conll2000",
        "CoNLL-2000 chunking",
        "WSJ sections 15-18 (train, 8,936 sentences) and 20 (test, 2,012) with POS and "
        "BIO chunk tags",
        "as distributed by NLTK",
        "01e65164f268366e7caa0db92332a1955d081908c87016e2c7640c3c5279b7cd",
    )
    senseval = nltk_dataset(
        "senseval",
        "Senseval-2 lexical sample",
        "Senseval-2 English lexical sample for hard, interest, line and serve",
        "as distributed by NLTK",
        "fbcb658b562969e47a19a45e04c452d874755d157db936d815ca391ca88bfdea",
    )
    wordnet = nltk_dataset(
        "wordnet",
        "WordNet 3.0",
        "the WordNet 3.0 database in NLTK's package layout (Princeton synset offsets)",
        "WordNet 3.0 licence",
        # The reference copy was assembled (wsd/SOURCES.md); NLTK's package differs in bytes.
        "a0a36e7a224066803bfef78c8ff0745e5f5e2d25f8d7e7fbc16c5101a837de57",
    )

    eval_files = tuple(
        DataFile(
            path=f"{_WSD}/Evaluation_Datasets/{corpus}/{corpus}.{kind}",
            sha256=sha256,
            alternatives=(f"{_WSD}/Evaluation_Datasets/{corpus}/{corpus}.{kind}.gz",),
            size=_WSD_EVAL_BYTES[corpus, kind],
        )
        for (corpus, kind), sha256 in _WSD_EVAL_SHA256.items()
    )
    semcor = f"{_WSD}/Training_Corpora/SemCor"
    semcor_files = (
        # The reference SemCor was rebuilt from the SemCor 3.0 tag files (wsd/SOURCES.md);
        # the framework's own release is accepted as well, so these checksums do not bind.
        DataFile(
            path=f"{semcor}/semcor.data.xml.gz",
            sha256="c4d53e9e9d3a00cbbba211b4bc2237604631e2c7019cff3c56b0c62a83ff8de4",
            strict=False,
            alternatives=(f"{semcor}/semcor.data.xml",),
        ),
        DataFile(
            path=f"{semcor}/semcor.gold.key.txt",
            sha256="dc160207acbee1e045e1afdb2184541ff9dee9a83a7e98a5ff7e8870255f1c85",
            strict=False,
            alternatives=(f"{semcor}/semcor.gold.key.txt.gz",),
        ),
    )
    wsd = Dataset(
        name="wsd_framework",
        title="WSD Evaluation Framework",
        description="Raganato et al. (2017): senseval2/3, semeval2007/2013/2015 and ALL "
        "(7,253 instances) for evaluation, SemCor (226,036 instances) for training",
        licence="research use; task licences",
        source=WSD_FRAMEWORK_URL,
        files=eval_files + semcor_files,
        method="zip",
        archive_url=WSD_FRAMEWORK_URL,
        archive_prefix="WSD_Evaluation_Framework/",
        archive_dest="wsd",
    )

    lm = Dataset(
        name="lm_corpus",
        title="LM training corpus",
        description="English Wikipedia (~20M tokens) and Project Gutenberg (~12M tokens) text, "
        "one paragraph a line, train/valid/test shards",
        licence="CC BY-SA (Wikipedia), public domain (Gutenberg)",
        source="assembled for the workbench (lm_corpus/SOURCES.md in a workbench data root); "
        "copy the lm_corpus folder from an existing data root",
        files=tuple(DataFile(f"lm_corpus/{name}", sha256=sha, size=_LM_BYTES[name])
                    for name, sha in _LM_SHA256.items()),
        method="none",
    )
    return {d.name: d for d in (ewt, conll2000, senseval, wordnet, wsd, lm)}


DATASETS: dict[str, Dataset] = _build_registry()
"""Every dataset the workbench knows, by name."""

_REGISTERED_FILES: dict[str, tuple[Dataset, DataFile]] = {
    spec.path: (dataset, spec) for dataset in DATASETS.values() for spec in dataset.files}


#: Bytes each automatic download fetches, from the reference copies in the shared data root
#: (UD English-EWT's three files exactly, as their checksums are pinned; NLTK's packages may
#: differ a little). The WSD framework's archive is not listed: the server says its size when the
#: download starts.
DOWNLOAD_BYTES = {
    "ud_english_ewt": 17_813_085,
    "conll2000": 756_607,
    "senseval": 2_151_350,
    "wordnet": 10_693_845,
}


MODELS: dict[str, PublishedModel] = PUBLISHED_MODELS
"""The published ELMo models ``download`` fetches beside the datasets, by name."""


def download_size_text(name: str) -> str:
    """The size of dataset or model ``name``'s download in words: "17.8 MB", "about 2.2 MB" (NLTK's
    packages), "about 374 MB" (a model's weight file), or "size given by the server" when not
    known in advance."""
    if name in MODELS:
        return MODELS[name].size_text()
    size = DOWNLOAD_BYTES.get(name)
    if size is None:
        return "size given by the server"
    exact = get_dataset(name).method == "files"
    return f"{'' if exact else 'about '}{size / 1e6:.1f} MB"


def get_dataset(name: str) -> Dataset:
    """The registry entry ``name``; ValueError naming the known datasets otherwise."""
    try:
        return DATASETS[name]
    except KeyError:
        raise ValueError(
            f"unknown dataset {name!r}; known datasets: {', '.join(DATASETS)}"
        ) from None


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
    """True when ``data_root`` is a folder holding every file of at least one registered dataset."""
    base = Path(data_root).expanduser()
    if not base.is_dir():
        return False
    return any(all(_locate(spec, base) is not None for spec in d.files) for d in DATASETS.values())


def _resolve_root(explicit: str | os.PathLike | None) -> tuple[Path, str]:
    """(root, where the choice came from): the rule of this module's docstring."""
    if explicit is not None and str(explicit).strip():
        return Path(explicit).expanduser().resolve(), "--data-root"
    if os.environ.get(ENV_VAR, "").strip():
        return Path(os.environ[ENV_VAR]).expanduser().resolve(), ENV_VAR
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
    tops = {spec.path.split("/", 1)[0] for d in DATASETS.values() for spec in d.files}
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
    """The shell command that fetches dataset ``name`` into the root."""
    return f"python -m probing.data download {name} --data-root {shlex.quote(str(download_root(data_root)))}"


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
    message = (
        f"dataset {name!r} ({dataset.title}) is missing from the data root {base}: "
        f"{shown} not found.\n{fix}\n"
        f"Or point --data-root / {ENV_VAR} at a data root that has it "
        f"(see `python -m probing.data status`)."
    )
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
    return DatasetStatus(
        name, base, len(dataset.files), tuple(missing), tuple(corrupt), tuple(differs), verify
    )


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
