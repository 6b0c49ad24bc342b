"""The dataset registry: every dataset the workbench knows, which files each needs (with their
reference sizes and checksums), where each comes from, and the published models ``download``
fetches beside them. ``probing.data`` re-exports every name here."""

from __future__ import annotations

from dataclasses import dataclass

from elmo_model.models.published import PUBLISHED_MODELS, PublishedModel


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


def _ewt() -> Dataset:
    """UD English-EWT: the .conllu of each split, fetched from the treebank's repository."""
    return Dataset(
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


def _nltk_dataset(name: str, title: str, description: str, licence: str, sha256: str, note: str = "") -> Dataset:
    """A dataset NLTK's downloader installs as one package (its zip under nltk_data/corpora)."""
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


def _nltk_datasets() -> tuple[Dataset, Dataset, Dataset]:
    """CoNLL-2000, the Senseval-2 lexical sample and WordNet 3.0, as NLTK packages."""
    conll2000 = _nltk_dataset(
        "conll2000",
        "CoNLL-2000 chunking",
        "WSJ sections 15-18 (train, 8,936 sentences) and 20 (test, 2,012) with POS and BIO chunk tags",
        "as distributed by NLTK",
        "01e65164f268366e7caa0db92332a1955d081908c87016e2c7640c3c5279b7cd",
    )
    senseval = _nltk_dataset(
        "senseval",
        "Senseval-2 lexical sample",
        "Senseval-2 English lexical sample for hard, interest, line and serve",
        "as distributed by NLTK",
        "fbcb658b562969e47a19a45e04c452d874755d157db936d815ca391ca88bfdea",
    )
    wordnet = _nltk_dataset(
        "wordnet",
        "WordNet 3.0",
        "the WordNet 3.0 database in NLTK's package layout (Princeton synset offsets)",
        "WordNet 3.0 licence",
        # The reference copy was assembled (wsd/SOURCES.md); NLTK's package differs in bytes.
        "a0a36e7a224066803bfef78c8ff0745e5f5e2d25f8d7e7fbc16c5101a837de57",
    )
    return conll2000, senseval, wordnet


def _wsd_framework() -> Dataset:
    """Raganato et al.'s WSD Evaluation Framework: the evaluation sets and SemCor, from its zip."""
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
    return Dataset(
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


def _lm_corpus() -> Dataset:
    """The LM corpus shards (assembled for the workbench: no download)."""
    return Dataset(
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


def _build_registry() -> dict[str, Dataset]:
    conll2000, senseval, wordnet = _nltk_datasets()
    return {d.name: d for d in (_ewt(), conll2000, senseval, wordnet, _wsd_framework(), _lm_corpus())}


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


# --------------------------------------------------------------------------------------------
# Universal Dependencies treebanks by language
# --------------------------------------------------------------------------------------------

UD_RELEASE = "r2.14"
"""The UD release tag every treebank but English-EWT is fetched at: the tag pins the files, so a
fetch is the same bytes on every machine (their sha256 is recorded at the first fetch)."""

UD_RAW = "https://raw.githubusercontent.com/UniversalDependencies"
"""Where the treebanks' raw files are: ``<UD_RAW>/<repository>/<tag>/<code>-ud-<split>.conllu``."""


@dataclass(frozen=True)
class Treebank:
    """A UD treebank of the table: ``code`` (its files' prefix, ``fr_gsd``), its ``language`` and
    ISO 639-1 code ``iso``, its GitHub ``repository`` (``UD_French-GSD``) and ``licence`` (as its
    README says at the release tag); ``default``: the one a language name or code means.

    UD English-EWT is the registry's ``ud_english_ewt`` dataset (its commit and checksums
    pinned); every other treebank lives in ``<root>/ud/<code>/`` beside the ``manifest.json`` that
    its first fetch wrote (``probing.data.treebanks``)."""

    code: str
    language: str
    iso: str
    repository: str
    licence: str
    default: bool = False

    @property
    def title(self) -> str:
        """"UD French-GSD"."""
        return "UD " + self.repository.removeprefix("UD_")

    @property
    def name(self) -> str:
        """The name ``download`` takes: ``ud:fr_gsd``."""
        return f"ud:{self.code}"

    @property
    def dataset(self) -> str:
        """The dataset name caches and results use: ``ud_english_ewt`` for EWT, else ``ud_<code>``."""
        return "ud_english_ewt" if self.code == "en_ewt" else f"ud_{self.code}"

    @property
    def folder(self) -> str:
        """Its folder under the data root: ``ud_english_ewt`` for EWT, else ``ud/<code>``."""
        return "ud_english_ewt" if self.code == "en_ewt" else f"ud/{self.code}"

    def file(self, split: str) -> str:
        """The relative path of ``split``'s file under the data root."""
        return f"{self.folder}/{self.code}-ud-{split}.conllu"

    def url(self, split: str, base: str = UD_RAW) -> str:
        """Where ``split``'s file is fetched from: ``base`` laid out as GitHub's raw files."""
        ref = EWT_COMMIT if self.code == "en_ewt" else UD_RELEASE
        return f"{base.rstrip('/')}/{self.repository}/{ref}/{self.code}-ud-{split}.conllu"


_T = Treebank
#: Well-known treebanks with train, dev and test files, one default a language (the first listed).
# Each row checked against the treebank's repository at the release tag: the three .conllu files
# of that name, and its README's "License:" line (README.md, or README.txt where there is one).
TREEBANKS: dict[str, Treebank] = {t.code: t for t in (
    _T("en_ewt", "English", "en", "UD_English-EWT", "CC BY-SA 4.0", default=True),
    _T("ar_padt", "Arabic", "ar", "UD_Arabic-PADT", "CC BY-NC-SA 3.0", default=True),
    _T("zh_gsdsimp", "Chinese", "zh", "UD_Chinese-GSDSimp", "CC BY-SA 4.0", default=True),
    _T("zh_gsd", "Chinese", "zh", "UD_Chinese-GSD", "CC BY-SA 4.0"),
    _T("nl_alpino", "Dutch", "nl", "UD_Dutch-Alpino", "CC BY-SA 4.0", default=True),
    _T("fi_tdt", "Finnish", "fi", "UD_Finnish-TDT", "CC BY-SA 4.0", default=True),
    _T("fr_gsd", "French", "fr", "UD_French-GSD", "CC BY-SA 4.0", default=True),
    _T("fr_sequoia", "French", "fr", "UD_French-Sequoia", "LGPL-LR"),
    _T("de_gsd", "German", "de", "UD_German-GSD", "CC BY-SA 4.0", default=True),
    _T("he_htb", "Hebrew", "he", "UD_Hebrew-HTB", "CC BY-NC-SA 4.0", default=True),
    _T("hi_hdtb", "Hindi", "hi", "UD_Hindi-HDTB", "CC BY-NC-SA 4.0", default=True),
    _T("id_gsd", "Indonesian", "id", "UD_Indonesian-GSD", "CC BY-SA 4.0", default=True),
    _T("it_isdt", "Italian", "it", "UD_Italian-ISDT", "CC BY-NC-SA 3.0", default=True),
    _T("ja_gsd", "Japanese", "ja", "UD_Japanese-GSD", "CC BY-SA 4.0", default=True),
    _T("pt_bosque", "Portuguese", "pt", "UD_Portuguese-Bosque", "CC BY-SA 4.0", default=True),
    _T("ru_gsd", "Russian", "ru", "UD_Russian-GSD", "CC BY-SA 4.0", default=True),
    _T("es_ancora", "Spanish", "es", "UD_Spanish-AnCora", "CC BY 4.0", default=True),
    _T("es_gsd", "Spanish", "es", "UD_Spanish-GSD", "CC BY-SA 4.0"),
    _T("sv_talbanken", "Swedish", "sv", "UD_Swedish-Talbanken", "CC BY-SA 4.0", default=True),
)}


def find_treebank(name: str) -> Treebank | None:
    """The treebank ``name`` means: a code (``fr_gsd``), a language (``French``, any case) or its
    ISO code (``fr``, that language's default), with or without ``ud:`` in front; None if none."""
    key = name.strip().removeprefix("ud:").strip().casefold()
    if key in TREEBANKS:
        return TREEBANKS[key]
    return next((t for t in TREEBANKS.values() if t.default and key in (t.language.casefold(), t.iso)), None)


def get_treebank(name: str) -> Treebank:
    """:func:`find_treebank`, or a ValueError listing the languages and treebanks the table has."""
    found = find_treebank(name)
    if found is None:
        raise ValueError(f"no UD treebank {name!r} in the table; languages: "
                         f"{', '.join(sorted({t.language.lower() for t in TREEBANKS.values()}))}; "
                         f"treebanks: {', '.join(TREEBANKS)}")
    return found


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
