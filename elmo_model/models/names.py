"""Which folder a model name means: the one rule, and the files it gives (no torch, no h5py).

Every place that turns what a user typed (``--model``, the app's sidebar, a script's argument)
into a model's folder asks :func:`model_place`: the loader (``registry.load_bilm`` through
:func:`resolve_model`), the commands' output checks (:func:`model_files`: the files no output may
replace), the app's model choice and the model card it shows (:func:`model_card_rows`). So the
files a command refuses to write over are the files it loads.

The rule, for ``name_or_dir`` (a ``str`` or a path; only its text counts):

1. A *bare name* is text without a path separator, other than ``.``, ``..`` and ``~...``:
   ``elmo-mini``, ``elmo-original``, ``my-run``.
2. A bare name that is a folder of ``data/models/`` (:data:`MODELS_DIR`, found by
   :mod:`elmo_model.plumbing.resources` from any working directory) is that shipped model.
3. Otherwise a bare name that is a published ELMo (:mod:`elmo_model.models.published`) is its
   folder: ``<data root>/models/<name>`` when a data root is given and holds it, else the
   models home's ``<name>`` (``cache_dir``, ``$ELMO_WORKBENCH_MODELS``, else
   ``~/.cache/elmo-workbench/models``), where ``elmo-data download NAME`` puts it (downloaded or not).
4. Anything else is a path: a directory (or a file, for the output checks), relative to the
   working directory unless absolute; ``~`` is expanded.

So a known name always means the known model, wherever the command runs: a folder named
``elmo-mini`` or ``elmo-small`` in the working directory is not read for the name (the loader
logs a warning that it was passed over). To open such a folder, give it as a path with a
separator: ``./elmo-mini`` on the command line, or an absolute path (``Path("./elmo-mini")`` is
the bare name again, since pathlib drops the ``./``: use ``Path("elmo-mini").resolve()``). A bare
name that is no known model is a folder in the working directory, as before.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ..plumbing.io_safety import output_lock
from ..plumbing.resources import shipped_data
from .published import (OPTIONS_FILE, PUBLISHED_MODELS, download_command, is_downloaded, models_home,
                        not_downloaded_message, published_card_rows, published_model_dir)
from .published_archives import archive_named

log = logging.getLogger(__name__)

MODELS_DIR = shipped_data("models")
DEFAULT_MODEL = "elmo-mini"
# AllenNLP's export, bilm-tf's dump, and the NLPL repository's (and simple_elmo's) name for the same layout
WEIGHT_FILE_NAMES = ("weights.hdf5", "lm_weights.hdf5", "model.hdf5")
# ELMoForManyLangs (HIT-SCIR): its files, read by elmo_model.models.elmoformanylangs
ELMOFORMANYLANGS = "elmoformanylangs"
ELMOFORMANYLANGS_CONFIG = "config.json"
ELMOFORMANYLANGS_CHAR_VOCABULARY = "char.dic"
ELMOFORMANYLANGS_WORD_VOCABULARY = "word.dic"
ELMOFORMANYLANGS_TOKEN_EMBEDDER = "token_embedder.pkl"
ELMOFORMANYLANGS_ENCODER = "encoder.pkl"
#: the one line for a folder of no layout read here
LAYOUTS_READ = ("options.json with weights.hdf5 (AllenNLP), lm_weights.hdf5 (bilm-tf) or model.hdf5 (NLPL), "
                "in a folder or a .zip; config.json with encoder.pkl, token_embedder.pkl and char.dic "
                "(ELMoForManyLangs), in a folder or a .zip; or a TF Hub module (saved_model.pb or "
                "tfhub_module.pb, with variables/), in a folder or a .tar.gz")
CARD_FILE = "model_card.json"


@dataclass(frozen=True)
class ModelFiles:
    """Where a biLM's files are. ``vocab`` and ``card`` may be absent. ``layout``: "allennlp" (options
    and an hdf5 weight file) or "elmoformanylangs" (``options`` its config.json, ``weights`` its
    encoder.pkl; the folder holds the rest)."""

    name: str
    options: Path
    weights: Path
    vocab: Path | None = None
    card: Path | None = None
    layout: str = "allennlp"

    @property
    def directory(self) -> Path:
        """The folder the files are in."""
        return self.options.parent


@dataclass(frozen=True)
class ModelPlace:
    """The folder a name or path means (:func:`model_place`), before anything in it is checked.
    ``kind``: "shipped", "published", "archive" (a published archive of another family:
    ``directory`` is the archive file) or "path"; ``text``: what was given."""

    text: str
    kind: str
    directory: Path


def shipped_models() -> list[str]:
    """Names of the models in ``data/models/`` that have their files."""
    if not MODELS_DIR.is_dir():
        return []
    return sorted(p.name for p in MODELS_DIR.iterdir() if (p / OPTIONS_FILE).is_file())


def is_bare_name(text: str) -> bool:
    """Whether ``text`` reads as a model name rather than a path: no path separator, not
    ``.``/``..``, not starting with ``~``, not empty."""
    separators = {"/", os.sep} | ({os.altsep} if os.altsep else set())
    return bool(text) and text not in (".", "..") and not text.startswith("~") \
        and not any(s in text for s in separators)


def model_place(name_or_dir: str | os.PathLike = DEFAULT_MODEL, data_root: str | os.PathLike | None = None,
                cache_dir: str | os.PathLike | None = None) -> ModelPlace:
    """The folder ``name_or_dir`` means, by the module's rule: a shipped model's folder, a
    published model's folder (``data_root``'s ``models/`` when given and holding it, else the
    models home: ``cache_dir``, ``$ELMO_WORKBENCH_MODELS`` or the user cache; see
    ``published.model_folders``), or the path itself. Looks at the disk only to see which
    folders exist; never raises."""
    text = str(name_or_dir)
    if is_bare_name(text):
        shipped = MODELS_DIR / text
        if shipped.is_dir():
            return ModelPlace(text, "shipped", shipped)
        if text in PUBLISHED_MODELS:
            return ModelPlace(text, "published", published_model_dir(text, data_root, cache_dir))
        archive = archive_named(text)
        if archive is not None:
            return ModelPlace(text, "archive", archive.archive_path(cache_dir))
    return ModelPlace(text, "path", Path(text).expanduser())


def _warn_if_passed_over(place: ModelPlace) -> None:
    here = Path(place.text)
    if place.kind != "path" and here.is_dir() and here.resolve() != place.directory.resolve():
        log.warning("model %r is the %s model in %s; the folder %s in the working directory is not read "
                    "(give ./%s to load that one)", place.text, place.kind, place.directory,
                    here.resolve(), place.text)


def resolve_model(name_or_dir: str | os.PathLike = DEFAULT_MODEL, data_root: str | os.PathLike | None = None,
                  cache_dir: str | os.PathLike | None = None) -> ModelFiles:
    """Name or directory -> its files (:func:`model_place` says which folder). Raises
    ``ValueError`` saying what is missing where; for a published model not downloaded yet, one
    line with the command that fetches it. The weight file is ``weights.hdf5`` or bilm-tf's
    ``lm_weights.hdf5``."""
    place = model_place(name_or_dir, data_root, cache_dir)
    text, directory = place.text, place.directory
    if place.kind == "archive" and not directory.is_file():
        entry = archive_named(text)
        raise ValueError(f"model {text!r} ({entry.title}, {entry.size_text()}) is not downloaded (looked for "
                         f"{directory}); fetch it with: {download_command(text, cache_dir)}")
    opens_archives = place.kind in ("path", "archive")
    if opens_archives and directory.is_file() and directory.suffix.lower() == ".zip":
        directory = unzipped_model(directory, cache_dir)  # an NLPL or ELMoForManyLangs archive: its unzipped copy
    if opens_archives and not (directory / OPTIONS_FILE).is_file():
        from .tfhub import converted_module, is_module_archive, is_tfhub_module  # h5py, numpy: only for a module
        if is_module_archive(directory) or (directory.is_dir() and is_tfhub_module(directory)):
            directory = converted_module(directory, models_home(cache_dir))  # converted once, then read
    if place.kind == "published" and not is_downloaded(text, data_root, cache_dir):
        raise ValueError(not_downloaded_message(text, data_root, cache_dir))
    _warn_if_passed_over(place)
    if not directory.exists():
        known = ", ".join(shipped_models()) or "none"
        raise ValueError(f"model {text!r}: no such shipped model (shipped: {known}; published, once downloaded: "
                         f"{', '.join(PUBLISHED_MODELS)}) and no such directory")
    if not directory.is_dir():
        raise ValueError(f"model {text!r}: {directory} is not a model folder; read here: {LAYOUTS_READ}")
    options = directory / OPTIONS_FILE
    weights = next((directory / n for n in WEIGHT_FILE_NAMES if (directory / n).is_file()), None)
    if not options.is_file() and weights is None and is_elmoformanylangs_folder(directory):
        return ModelFiles(directory.name, directory / ELMOFORMANYLANGS_CONFIG, directory / ELMOFORMANYLANGS_ENCODER,
                          layout=ELMOFORMANYLANGS)
    if not options.is_file() and weights is None:
        raise ValueError(f"model {text!r}: {directory} holds no model of a layout read here ({LAYOUTS_READ})")
    if not options.is_file():
        raise ValueError(f"model {text!r}: {options} is missing")
    if weights is None:
        raise ValueError(f"model {text!r}: no weight file in {directory} (looked for {', '.join(WEIGHT_FILE_NAMES)})")
    if place.kind == "published":
        _check_architecture(text, options, cache_dir)
    vocab = directory / "vocab.txt"
    card = directory / CARD_FILE
    return ModelFiles(directory.name, options, weights, vocab if vocab.is_file() else None,
                      card if card.is_file() else None)


def is_elmoformanylangs_folder(directory: Path) -> bool:
    """Whether ``directory`` holds an ELMoForManyLangs model: config.json, encoder.pkl and a vocabulary."""
    return ((directory / ELMOFORMANYLANGS_CONFIG).is_file() and (directory / ELMOFORMANYLANGS_ENCODER).is_file()
            and any((directory / n).is_file() for n in (ELMOFORMANYLANGS_CHAR_VOCABULARY,
                                                         ELMOFORMANYLANGS_WORD_VOCABULARY)))


def unzipped_model(archive: Path, cache_dir: str | os.PathLike | None = None) -> Path:
    """The folder of a model archive (an NLPL / simple_elmo zip: options.json, model.hdf5, vocab.txt;
    or an ELMoForManyLangs zip: config.json, char.dic, token_embedder.pkl, encoder.pkl; at its top
    or in one folder), unzipped once into the models home's ``unzipped/<name>-<digest>`` (the
    digest of the archive's path, size and time: a new archive under the same name is unzipped
    anew). One unzipper at a time (``io_safety.output_lock`` on the target: a second waits, then
    reads what the first unzipped), into a temporary folder renamed into place, so a cut
    extraction is never read. ValueError, one line, for an archive that is not a zip or holds no
    model (or more than one)."""
    stat = archive.stat()
    digest = hashlib.sha256(f"{archive.resolve()}:{stat.st_size}:{stat.st_mtime_ns}".encode()).hexdigest()[:12]
    target = models_home(cache_dir) / "unzipped" / f"{archive.stem}-{digest}"
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with output_lock(target, wait=True, what="unzipped model"):
        if target.is_dir():  # unzipped by the holder we waited for
            return target
        try:
            with zipfile.ZipFile(archive) as zipped:
                names = [n for n in zipped.namelist() if not n.endswith("/")]
                if any(Path(n).is_absolute() or ".." in Path(n).parts for n in names):
                    raise ValueError(f"model archive {archive}: it names files outside itself; not extracted")
                with tempfile.TemporaryDirectory(dir=target.parent, prefix=".unzipping-") as tmp:
                    zipped.extractall(tmp)
                    inner = _model_folders_in(Path(tmp))
                    if len(inner) != 1:
                        raise ValueError(f"model archive {archive}: {len(inner)} model folders in it; a model "
                                         f"archive holds one ({LAYOUTS_READ})")
                    inner[0].rename(target)
        except zipfile.BadZipFile as err:
            raise ValueError(f"model archive {archive}: not a readable zip file ({err})") from None
    return target


def _model_folders_in(tree: Path) -> list[Path]:
    """The folders under ``tree`` that hold a model: an options.json (AllenNLP, bilm-tf, NLPL) or
    ELMoForManyLangs' files."""
    found = {p.parent for p in tree.rglob(OPTIONS_FILE)}
    found |= {p.parent for p in tree.rglob(ELMOFORMANYLANGS_CONFIG) if is_elmoformanylangs_folder(p.parent)}
    return sorted(found)


def _check_architecture(name: str, options: Path, cache_dir: str | os.PathLike | None) -> None:
    """Refuse a copy of published model ``name`` (downloaded, fetched from a mirror or put there by
    hand) whose options.json describes another architecture: it would be used under a name it is not."""
    try:
        found = json.loads(options.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ValueError(f"model {name!r}: {options} is not readable ({err})") from None
    problem = PUBLISHED_MODELS[name].architecture_problem(found if isinstance(found, dict) else {})
    if problem:
        raise ValueError(f"model {name!r}: {options}: {problem}; this folder holds another model, not {name}. "
                         f"Move it away and fetch {name} with: {download_command(name, cache_dir)} --force "
                         "(or load the folder by its path)")


ENGLISH = "English"
#: the CoNLL 2018 shared task's raw-text folders, which ELMoForManyLangs' configs name as train_path
_RAW_TEXT_LANGUAGE = re.compile(r"raw_text[/\\]+([^/\\]+)[/\\]")


def model_language(name_or_dir: str | os.PathLike, data_root: str | os.PathLike | None = None,
                   cache_dir: str | os.PathLike | None = None) -> str:
    """The language a model reads, as its files say: its ``model_card.json``'s ``language`` (or its
    ``published`` facts' ``language``); for an ELMoForManyLangs folder or zip, its config.json's
    ``language``, else the language folder of its ``train_path`` (the published models'
    ``.../raw_text/Indonesian/id-20m.raw``); else English, as AllenNLP's published models, elmo-mini
    and a model that says nothing. Reads JSON only (a zip's two small files, nothing extracted);
    never raises."""
    place = model_place(name_or_dir, data_root, cache_dir)
    if place.kind == "published":
        return ENGLISH
    if place.kind == "archive":
        return archive_named(place.text).language
    card = _small_json(place.directory, CARD_FILE)
    published = card.get("published") if isinstance(card.get("published"), dict) else {}
    named = card.get("language") or published.get("language")
    if not named:
        config = _small_json(place.directory, ELMOFORMANYLANGS_CONFIG)
        raw_text = _RAW_TEXT_LANGUAGE.search(str(config.get("train_path") or ""))
        named = config.get("language") or (raw_text.group(1) if raw_text else None)
    return str(named).strip() if isinstance(named, str) and named.strip() else ENGLISH


def is_english(language: str) -> bool:
    """Whether ``language`` (a name or an ISO code, as :func:`model_language` gives it) is English."""
    return language.strip().casefold() in {"english", "en", "eng"}


def _small_json(place: Path, name: str) -> dict:
    """The JSON object ``name`` in folder ``place``, or in the zip ``place`` (at its top or in one
    folder); {} when absent or unreadable."""
    try:
        if place.is_file() and place.suffix.lower() == ".zip":
            with zipfile.ZipFile(place) as zipped:
                inner = sorted((n for n in zipped.namelist() if Path(n).name == name), key=len)
                text = zipped.read(inner[0]).decode("utf-8") if inner else "{}"
        else:
            text = (place / name).read_text(encoding="utf-8") if (place / name).is_file() else "{}"
        found = json.loads(text)
    except (OSError, ValueError, zipfile.BadZipFile):
        return {}
    return found if isinstance(found, dict) else {}


def model_files(model: str | os.PathLike, data_root: str | os.PathLike | None = None,
                cache_dir: str | os.PathLike | None = None) -> list[Path]:
    """The inputs no output may replace: the folder :func:`model_place` gives (the folder
    :func:`resolve_model` loads from; no output may be written inside it, so a new
    ``weights.hdf5`` never shadows a bilm-tf ``lm_weights.hdf5``) and every file in it, or the
    file itself when ``model`` is a file's path; empty when there is nothing there yet. For the
    output checks of ``elmo_model.plumbing.io_safety`` (``check_output_path``, ``check_output_dir``)."""
    path = model_place(model, data_root, cache_dir).directory
    if not path.is_dir():
        return [path] if path.is_file() else []
    return [path, *(p for p in path.iterdir() if p.is_file())]


def model_card_rows(name_or_dir: str | os.PathLike, data_root: str | os.PathLike | None = None,
                    cache_dir: str | os.PathLike | None = None) -> dict[str, str]:
    """What a model card shows, as ordered (field, text) rows, for the folder :func:`model_place`
    gives: its name and language (:func:`model_language`), then for a published model its registry
    entry (and where it is on disk, or the command that fetches it); for any other the folder's
    ``options.json`` and ``model_card.json``. Reads JSON only (no torch), so the app's sidebar
    shows it before a model is loaded. Unreadable files give a row saying so, never an exception."""
    place = model_place(name_or_dir, data_root, cache_dir)
    if place.kind == "published":
        rows = published_card_rows(place.text, data_root, cache_dir)
    elif place.kind == "archive":
        rows = archive_card_rows(place.text, cache_dir)
    else:
        rows = folder_card_rows(place.text, place.directory)
    first = next(iter(rows))
    return {first: rows.pop(first), "language": model_language(name_or_dir, data_root, cache_dir), **rows}


def archive_card_rows(name: str, cache_dir: str | os.PathLike | None = None) -> dict[str, str]:
    """The card rows of a published archive (``published_archives``): its registry facts, then where
    it is on disk or the command that fetches it."""
    entry = archive_named(name)
    rows = entry.card()
    path = entry.archive_path(cache_dir)
    rows["on disk"] = str(path) if path.is_file() else f"not downloaded: {download_command(name, cache_dir)}"
    return rows


def folder_card_rows(name: str, folder: str | os.PathLike) -> dict[str, str]:
    """The card rows of a model folder (``name``: the first row): layers and sizes from its
    ``options.json``, parameters, training corpus and (a published model's folder opened by its
    path) the published facts from its ``model_card.json``, and the folder."""
    folder = Path(folder)
    rows = {"name": name}
    if folder.is_file() and folder.suffix.lower() == ".zip":
        rows["archive"] = f"{folder}: unzipped into the models home when first loaded; its sizes show then"
        return rows
    if folder.is_file() and folder.name.lower().endswith((".tar.gz", ".tgz", ".tar")):
        rows["archive"] = (f"{folder}: a TF Hub module, converted into the models home when first loaded; "
                           "its sizes show then")
        return rows
    if not (folder / OPTIONS_FILE).is_file() and ((folder / "saved_model.pb").is_file()
                                                 or (folder / "tfhub_module.pb").is_file()):
        rows["layout"] = ("TF Hub module (variables/ checkpoint); converted into the models home when first "
                          "loaded, its sizes show then")
        rows["folder"] = str(folder)
        return rows
    if not (folder / OPTIONS_FILE).is_file() and is_elmoformanylangs_folder(folder):
        rows["layout"] = ("ELMoForManyLangs (config.json, char.dic, token_embedder.pkl, encoder.pkl); its sizes "
                          "show once it is loaded")
        rows["folder"] = str(folder)
        return rows
    try:
        options = json.loads((folder / OPTIONS_FILE).read_text(encoding="utf-8"))
        cnn, lstm = options["char_cnn"], options["lstm"]
        filters = [tuple(f) for f in cnn["filters"]]
        rows["layers"] = (f"{lstm['n_layers']} biLSTM layers + the character-CNN token layer "
                          f"({lstm['n_layers'] + 1} output layers)")
        rows["LSTM"] = (f"{lstm['dim']} cells, projected to {lstm['projection_dim']} "
                        f"(vectors of {2 * lstm['projection_dim']}: forward + backward)")
        rows["character CNN"] = (f"{sum(n for _, n in filters)} filters (widths 1-{max(w for w, _ in filters)}), "
                                 f"{cnn['n_highway']} highway layer{'s' if cnn['n_highway'] != 1 else ''}, "
                                 f"{cnn['embedding']['dim']}-d character embeddings")
    except (OSError, ValueError, KeyError, TypeError) as err:
        rows["options"] = f"{folder / OPTIONS_FILE}: not readable ({type(err).__name__})"
        return rows
    card_path = folder / CARD_FILE
    if card_path.is_file():
        try:
            card = json.loads(card_path.read_text(encoding="utf-8"))
            if isinstance(card.get("published"), dict):  # a published model's folder, opened by its path
                rows.update({str(k): str(v) for k, v in card["published"].items()})
            if card.get("licence"):  # the weights' licence, which may differ from the code's
                rows["licence"] = str(card["licence"])
            encoder = card.get("parameters", {}).get("encoder")
            if encoder:
                softmax = card["parameters"].get("softmax", 0)
                rows["parameters"] = f"{encoder / 1e6:.1f}M (+ {softmax / 1e6:.1f}M softmax)"
            train = card.get("corpus", {}).get("train") or []
            if train:
                names = [item.get("file", "?") if isinstance(item, dict) else str(item) for item in train]
                shown = ", ".join(names) if len(names) <= 3 else f"{names[0]} ... {names[-1]}"
                rows["training corpus"] = (f"{len(names)} files ({shown}), "
                                           f"{card.get('tokens_seen', 0) / 1e6:.1f}M tokens seen")
        except (OSError, ValueError, AttributeError, TypeError) as err:
            rows["model card"] = f"{card_path}: not readable ({type(err).__name__})"
    rows["folder"] = str(folder)
    return rows
