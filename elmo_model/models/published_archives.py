"""The published ELMo models of the other families, by name: one archive each.

    efml-english ... efml-chinese   ELMoForManyLangs (HIT-SCIR), 44 languages; also by their NLPL
                                    repository ids, nlpl-136 ... nlpl-179
    nlpl-201, -202, -203, -209      the NLPL repository's own ELMo (simple_elmo's layout: options.json,
                                    model.hdf5, vocab.txt): German, Swedish, Latin, English
    tfhub-elmo-2, tfhub-elmo-3      Google's TF Hub ELMo modules (TF1 SavedModels)

``python -m probing.data download NAME`` fetches the archive into the models home as
``<name>.zip`` / ``<name>.tar.gz`` (resumed, locked, its announced size bounded, then opened once
to see it holds a model, before it is put there) beside ``<name>.download.json`` (its URL, size
and sha256, and the facts below). ``load_bilm(NAME)`` and every ``--model`` then open it as they
open any such archive: an ELMoForManyLangs zip is unzipped once, a TF Hub module converted once to
the AllenNLP layout (``elmo_model.models.names.unzipped_model``, ``tfhub.converted_module``).

Where the facts come from: the ELMoForManyLangs README (its download table: the NLPL repository's
``http://vectors.nlpl.eu/repository/11/<id>.zip`` per language; the training data; the citation),
the README of Kutuzov and Giulianelli's SemEval-2020 code (github.com/akutuzov/semeval2020: the
NLPL ELMo models 209, 201, 203 and 202 by language, ``http://vectors.nlpl.eu/repository/20/<id>.zip``)
and TF Hub's module pages (``https://tfhub.dev/google/elmo/<version>``, served as a .tar.gz with
``?tf-hub-format=compressed``). Neither family publishes its archives' sizes or checksums: each
entry says how its size is estimated, and the download records the sha256 of what it fetched.

Light: no torch, no h5py (the app's sidebar and ``probing.data status`` import it).
"""

from __future__ import annotations

import os
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from .published import ONE_BILLION, models_home

EFML_SOURCE = "https://github.com/HIT-SCIR/ELMoForManyLangs (README, Downloads)"
EFML_URL = "http://vectors.nlpl.eu/repository/11/{id}.zip"
EFML_CORPUS = ("20 million words sampled from the CoNLL 2018 shared task's raw text of the language "
               "(Wikipedia dump and Common Crawl)")
EFML_LICENCE = "MIT (the ELMoForManyLangs code); the models' terms: the NLPL repository's entry"
EFML_CITATION = ("Che, Liu, Wang, Zheng and Liu (2018), \"Towards Better UD Parsing: Deep Contextualized Word "
                 "Embeddings, Ensemble, and Treebank Concatenation\", CoNLL 2018 Shared Task")
EFML_SIZE = ("not published; estimated 0.3-1 GB: about 75M encoder parameters at 4 bytes (0.3 GB) plus the "
             "language's word and character tables. The server announces the exact size")
#: Language and NLPL repository id of each ELMoForManyLangs model, in the README's table order.
EFML_MODELS = (
    ("Arabic", 136), ("Bulgarian", 137), ("Catalan", 138), ("Czech", 139), ("Old Church Slavonic", 140),
    ("Danish", 141), ("German", 142), ("Greek", 143), ("English", 144), ("Spanish", 145), ("Estonian", 146),
    ("Basque", 147), ("Persian", 148), ("Finnish", 149), ("French", 150), ("Irish", 151), ("Galician", 152),
    ("Ancient Greek", 153), ("Hebrew", 154), ("Hindi", 155), ("Croatian", 156), ("Hungarian", 157),
    ("Indonesian", 158), ("Italian", 159), ("Japanese", 160), ("Korean", 161), ("Latin", 162), ("Latvian", 163),
    ("Dutch", 164), ("Norwegian Bokmål", 165), ("Norwegian Nynorsk", 166), ("Polish", 167), ("Portuguese", 168),
    ("Romanian", 169), ("Russian", 170), ("Slovak", 171), ("Slovene", 172), ("Swedish", 173), ("Turkish", 174),
    ("Uyghur", 175), ("Ukrainian", 176), ("Urdu", 177), ("Vietnamese", 178), ("Chinese", 179),
)

NLPL_URL = "http://vectors.nlpl.eu/repository/20/{id}.zip"
NLPL_SOURCE = "https://github.com/akutuzov/semeval2020 (README, Download pre-trained embeddings: ELMo)"
NLPL_CITATION = ("Kutuzov and Giulianelli (2020), \"UiO-UvA at SemEval-2020 Task 1: Contextualised Embeddings for "
                 "Lexical Semantic Change Detection\"")
NLPL_CORPUS = "not stated where these models are listed; the NLPL repository's entry describes it"
NLPL_SIZE = "not published and not estimated here (the architecture is not listed); the server announces the size"
#: The NLPL repository's own ELMo models, by id, with their language.
NLPL_MODELS = ((209, "English"), (201, "German"), (203, "Latin"), (202, "Swedish"))

TFHUB_URL = "https://tfhub.dev/google/elmo/{version}?tf-hub-format=compressed"
TFHUB_SOURCE = "https://tfhub.dev/google/elmo/{version} (now served through Kaggle Models)"
TFHUB_SIZE = "not published; about 0.37 GB estimated (93.6M parameters at 4 bytes, as elmo-original)"
TFHUB_CITATION = ("Peters, Neumann, Iyyer, Gardner, Clark, Lee and Zettlemoyer (2018), \"Deep contextualized word "
                  "representations\", NAACL-HLT 2018")

GIGABYTE = 1 << 30


@dataclass(frozen=True)
class PublishedArchive:
    """One published ELMo of another family: a single archive at ``url``. ``suffix``: ".zip" or
    ".tar.gz"; ``largest_bytes``: a server announcing more is serving something else;
    ``nlpl_id``: its id in the NLPL vectors repository (None: not hosted there)."""

    name: str
    title: str
    family: str
    language: str
    url: str
    suffix: str
    corpus: str
    licence: str
    citation: str
    source: str
    size_note: str
    largest_bytes: int
    nlpl_id: int | None = None

    @property
    def file_name(self) -> str:
        return f"{self.name}{self.suffix}"

    @property
    def record_name(self) -> str:
        """The download's record beside the archive: URL, bytes, sha256."""
        return f"{self.name}.download.json"

    def archive_path(self, cache_dir: str | os.PathLike | None = None) -> Path:
        """Where the download puts the archive: the models home's ``<name><suffix>``."""
        return models_home(cache_dir) / self.file_name

    def size_text(self) -> str:
        return "size not published" if "not published" in self.size_note else self.size_note

    def card(self) -> dict[str, str]:
        """The model card's rows, in order (what the app and ``status`` show)."""
        rows = {"name": f"{self.name} ({self.title})", "family": self.family, "language": self.language,
                "training corpus": self.corpus, "archive": f"{self.url} ({self.size_note})",
                "licence": self.licence, "citation": self.citation, "source": self.source}
        if self.nlpl_id is not None:
            rows["NLPL repository id"] = str(self.nlpl_id)
        return rows


def _slug(language: str) -> str:
    """"Norwegian Bokmål" -> "norwegian-bokmal"."""
    ascii_text = unicodedata.normalize("NFKD", language).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")


def _registry() -> dict[str, PublishedArchive]:
    entries = [PublishedArchive(f"efml-{_slug(language)}", f"ELMoForManyLangs {language}", "ELMoForManyLangs",
                                language, EFML_URL.format(id=nlpl_id), ".zip", EFML_CORPUS, EFML_LICENCE,
                                EFML_CITATION, EFML_SOURCE, EFML_SIZE, 4 * GIGABYTE, nlpl_id)
               for language, nlpl_id in EFML_MODELS]
    entries += [PublishedArchive(f"nlpl-{nlpl_id}", f"NLPL ELMo {nlpl_id}, {language}", "NLPL", language,
                                 NLPL_URL.format(id=nlpl_id), ".zip", NLPL_CORPUS,
                                 "the NLPL repository's entry states it", NLPL_CITATION, NLPL_SOURCE, NLPL_SIZE,
                                 4 * GIGABYTE, nlpl_id)
                for nlpl_id, language in NLPL_MODELS]
    entries += [PublishedArchive(f"tfhub-elmo-{version}", f"TF Hub ELMo, version {version} (Google)", "TF Hub",
                                 "English", TFHUB_URL.format(version=version), ".tar.gz", ONE_BILLION,
                                 "Apache 2.0", TFHUB_CITATION, TFHUB_SOURCE.format(version=version), TFHUB_SIZE,
                                 GIGABYTE)
                for version in (2, 3)]
    return {entry.name: entry for entry in entries}


PUBLISHED_ARCHIVES: dict[str, PublishedArchive] = _registry()
"""The published archives, by the name the workbench gives them."""

#: the NLPL repository's ids, as names: "nlpl-144" is efml-english
NLPL_NAMES: dict[str, str] = {f"nlpl-{a.nlpl_id}": a.name for a in PUBLISHED_ARCHIVES.values() if a.nlpl_id}
"""Every NLPL repository id the registry knows, as a name (``nlpl-144``), to the entry's name."""


def archive_named(name: str) -> PublishedArchive | None:
    """The archive ``name`` (or its NLPL id's name) means, or None."""
    return PUBLISHED_ARCHIVES.get(NLPL_NAMES.get(name, name))


def is_archive_downloaded(name: str, cache_dir: str | os.PathLike | None = None) -> bool:
    """Whether the archive ``name`` means is in the models home (the download put it there only after
    opening it)."""
    entry = archive_named(name)
    return entry is not None and entry.archive_path(cache_dir).is_file()


def downloaded_archives(cache_dir: str | os.PathLike | None = None) -> list[str]:
    """The published archives present, in the registry's order."""
    return [name for name in PUBLISHED_ARCHIVES if is_archive_downloaded(name, cache_dir)]
