"""The ELMo models AllenNLP published, by name: where each comes from, what it is, where it lands.

    elmo-small            2x1024_128_2048cnn_1xhighway
    elmo-medium           2x2048_256_2048cnn_1xhighway
    elmo-original         2x4096_512_2048cnn_2xhighway
    elmo-original-5.5b    2x4096_512_2048cnn_2xhighway_5.5B

Each is an ``options.json`` + ``weights.hdf5`` pair at
``<base_url>/<allennlp_name>/elmo_<allennlp_name>_{options.json,weights.hdf5}``;
``python -m probing.data download NAME`` fetches it into ``<data root>/models/NAME/`` with those
two file names, and ``load_bilm(NAME)`` then finds it there.

The data root a name is looked up in: ``$ELMO_WORKBENCH_DATA``, else the user cache
``${XDG_CACHE_HOME:-~/.cache}/elmo-workbench/data``: the folder ``probing.data``'s download writes
to when it is given no ``--data-root`` (spelled out here because ``elmo_model`` imports nothing
from ``probing``; a test keeps the two equal).

Light: no torch, no h5py, so the app's sidebar and ``python -m probing.data status`` import it
before any model is loaded.
"""

from __future__ import annotations

import os
import shlex
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from ..plumbing.resources import command_name
from ..plumbing.settings import folder_setting

DATA_ENV_VAR = "ELMO_WORKBENCH_DATA"
"""Environment variable naming the data root (as ``probing.data.ENV_VAR``)."""

MODELS_ENV_VAR = "ELMO_WORKBENCH_MODELS"
"""Environment variable naming the models home (:func:`default_models_home`)."""

MODELS_URL_ENV_VAR = "ELMO_WORKBENCH_MODELS_URL"
"""Environment variable naming a mirror of AllenNLP's model server (same layout), as ``HF_ENDPOINT``
does for the Hugging Face Hub."""

ALLENNLP_BASE_URL = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo"
"""Where AllenNLP publishes the ELMo models."""

OPTIONS_FILE = "options.json"
WEIGHTS_FILE = "weights.hdf5"
MODELS_SUBDIR = "models"

LICENCE = "Apache 2.0 (AllenNLP)"
CITATION = ("Peters, Neumann, Iyyer, Gardner, Clark, Lee and Zettlemoyer (2018), \"Deep contextualized word "
            "representations\", NAACL-HLT 2018")
ONE_BILLION = "1B Word Benchmark (about 800M tokens of WMT 2011 news crawl)"
FIVE_BILLION = "5.5B tokens: Wikipedia (1.9B) and the WMT 2008-2012 monolingual news crawl (3.6B)"
PUBMED = "PubMed abstracts (biomedical text; the corpus's size is not given where the model is listed)"
PUBMED_CITATION = "AllenNLP's contributed ELMo models (allennlp.org/elmo, \"Contributed ELMo Models\"): PubMed"
#: The character CNN every published model shares: (width, filters) per convolution, 2048 in all.
CHAR_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))


#: An ``options.json`` is a few hundred bytes; a server announcing more than this for one is not serving it.
OPTIONS_LARGEST = 1 << 20

#: The schemes a mirror's address may have (urllib's own).
MIRROR_SCHEMES = ("http", "https", "file")


def check_mirror_url(value: str, where: str) -> None:
    """Raise ValueError, one line naming ``where`` (the flag or variable), when ``value`` is not a
    URL a download can open: no scheme (``mirror.example.org/elmo``, ``localhost:8000/elmo``, which
    urllib reads as the scheme "localhost") or no host."""
    parts = urllib.parse.urlsplit(value)
    if parts.scheme.lower() not in MIRROR_SCHEMES or (parts.scheme.lower() != "file" and not parts.netloc):
        raise ValueError(f"{where} {value}: not a URL (it needs its scheme: http://, https:// or file://), "
                         f"e.g. https://{value.split('://')[-1].lstrip('/')}")


@dataclass(frozen=True)
class PublishedModel:
    """One published ELMo model: its name here and AllenNLP's, what it is and where it comes from.

    Dimensions as in its ``options.json``: ``n_layers`` LSTM layers a direction of ``lstm_dim``
    cells projected to ``projection_dim``; a character CNN with ``char_filters`` (width, filters)
    convolutions over ``char_embedding_dim``-d character embeddings, ``n_highway`` highway layers.
    ``parameters_millions``: the figure AllenNLP publishes (``parameters()`` counts them from the
    dimensions). ``weights_bytes``: the weight file's size, about (``size_note`` says how it is
    known; the download reports the server's exact size). ``base_url``: where the files are
    published (a test points it at a local server).
    """

    name: str
    title: str
    allennlp_name: str
    n_layers: int
    lstm_dim: int
    projection_dim: int
    n_highway: int
    parameters_millions: float
    corpus: str
    weights_bytes: int
    size_note: str
    char_filters: tuple[tuple[int, int], ...] = CHAR_FILTERS
    char_embedding_dim: int = 16
    licence: str = LICENCE
    citation: str = CITATION
    base_url: str = ALLENNLP_BASE_URL
    file_names: tuple[str, str] = ()  # (options, weights) where not AllenNLP's elmo_<allennlp_name>_<kind>
    language: str = "English"

    def file_name(self, kind: str) -> str:
        """``kind``'s file name on the server: ``elmo_<allennlp_name>_<kind>``, or the entry's own."""
        if self.file_names:
            return self.file_names[0] if kind == OPTIONS_FILE else self.file_names[1]
        return f"elmo_{self.allennlp_name}_{kind}"

    def url(self, kind: str, base_url: str | None = None) -> str:
        """The URL of ``kind`` "options.json" or "weights.hdf5" under ``base_url`` (None: a mirror
        named by ``$ELMO_WORKBENCH_MODELS_URL``, else where AllenNLP published it), in AllenNLP's
        layout: ``<base>/<allennlp_name>/elmo_<allennlp_name>_<kind>``."""
        given = base_url or os.environ.get(MODELS_URL_ENV_VAR, "").strip()
        if given:
            check_mirror_url(given, "--from" if base_url else MODELS_URL_ENV_VAR)
        base = (given or self.base_url).rstrip("/")
        return f"{base}/{self.allennlp_name}/{self.file_name(kind)}"

    def largest_file(self, kind: str) -> int:
        """The most bytes ``kind``'s file can hold: twice the published weight file's size, and
        :data:`OPTIONS_LARGEST` for ``options.json``. A server announcing more is serving something
        else (a wrong address, a mirror's error page in a loop), not the file."""
        return OPTIONS_LARGEST if kind == OPTIONS_FILE else 2 * self.weights_bytes

    @property
    def options_url(self) -> str:
        return self.url(OPTIONS_FILE)

    @property
    def weights_url(self) -> str:
        return self.url(WEIGHTS_FILE)

    @property
    def n_filters(self) -> int:
        """Total character-CNN filters (the highway width)."""
        return sum(n for _, n in self.char_filters)

    def parameters(self) -> int:
        """The weights the hdf5 file holds, counted from the dimensions (the softmax is not
        published): character embedding, convolutions, highways, projection, LSTMs."""
        e, f, p, h = self.char_embedding_dim, self.n_filters, self.projection_dim, self.lstm_dim
        cnn = 261 * e + sum(width * e * n + n for width, n in self.char_filters)
        highway = self.n_highway * 2 * (f * f + f)
        projection = f * p + p
        lstm = 2 * self.n_layers * ((p + p) * 4 * h + 4 * h + h * p)
        return cnn + highway + projection + lstm

    def size_text(self) -> str:
        """The weight file's size in words: "about 374 MB"."""
        return f"about {self.weights_bytes / 1e6:.0f} MB"

    def architecture_problem(self, options: dict) -> str | None:
        """What in ``options`` (a parsed options.json) differs from this model's architecture, in
        words ("lstm.dim is 64, but elmo-original has 4096"), or None when it matches."""
        try:
            cnn, lstm = options["char_cnn"], options["lstm"]
            found = {"lstm.n_layers": lstm["n_layers"], "lstm.dim": lstm["dim"],
                     "lstm.projection_dim": lstm["projection_dim"],
                     "char_cnn.n_filters": sum(int(n) for _, n in cnn["filters"]),
                     "char_cnn.n_highway": cnn["n_highway"], "char_cnn.embedding_dim": cnn["embedding"]["dim"]}
        except (KeyError, TypeError, ValueError) as err:
            return f"not an ELMo options file ({type(err).__name__}: {err})"
        for key, expected in self.architecture().items():
            if found[key] != expected:
                return f"{key} is {found[key]}, but {self.name} has {expected}"
        return None

    def architecture(self) -> dict[str, int]:
        """What ``options.json`` must say for this model (the download checks it)."""
        return {"lstm.n_layers": self.n_layers, "lstm.dim": self.lstm_dim,
                "lstm.projection_dim": self.projection_dim, "char_cnn.n_filters": self.n_filters,
                "char_cnn.n_highway": self.n_highway, "char_cnn.embedding_dim": self.char_embedding_dim}

    def card(self) -> dict[str, str]:
        """The model card's rows, in order: what the app shows and the docs list."""
        return {
            "name": f"{self.name} ({self.title})",
            "AllenNLP name": self.allennlp_name,
            "layers": f"{self.n_layers} biLSTM layers + the character-CNN token layer "
                      f"({self.n_layers + 1} output layers)",
            "LSTM": f"{self.lstm_dim} cells, projected to {self.projection_dim} "
                    f"(vectors of {2 * self.projection_dim}: forward + backward)",
            "character CNN": f"{self.n_filters} filters (widths 1-{max(w for w, _ in self.char_filters)}), "
                             f"{self.n_highway} highway layer{'s' if self.n_highway != 1 else ''}, "
                             f"{self.char_embedding_dim}-d character embeddings",
            "parameters": f"{self.parameters() / 1e6:.1f}M (AllenNLP: {self.parameters_millions:.1f}M; "
                          "the softmax is not published)",
            "training corpus": self.corpus,
            "weight file": f"{self.size_text()} ({self.size_note})",
            "licence": self.licence,
            "citation": self.citation,
            "source": self._shown_source(),
        }

    def _shown_source(self) -> str:
        """Where the weights come from, for a card: the mirror's address, or the publisher's while the
        mirror setting is not a URL (the download says so in one line)."""
        try:
            return self.weights_url
        except ValueError:
            return self.url(WEIGHTS_FILE, self.base_url)


def _registry() -> dict[str, PublishedModel]:
    # Dimensions and parameter counts: AllenNLP's ELMo page (allennlp.org/elmo) lists, per model,
    # 13.6 / 28.0 / 93.6 / 93.6 million parameters, LSTM 1024/128, 2048/256, 4096/512, 4096/512 and
    # 1 / 1 / 2 / 2 highway layers; parameters() counts the same figures from the dimensions. The
    # weight files hold float32, 4 bytes a parameter: 374 MB for the original (the size mirrors of
    # it list), the others estimated the same way.
    models = [
        PublishedModel("elmo-small", "ELMo small", "2x1024_128_2048cnn_1xhighway", 2, 1024, 128, 1, 13.6,
                       ONE_BILLION, 54_373_184, "4 bytes a parameter, estimated"),
        PublishedModel("elmo-medium", "ELMo medium", "2x2048_256_2048cnn_1xhighway", 2, 2048, 256, 1, 28.0,
                       ONE_BILLION, 112_110_912, "4 bytes a parameter, estimated"),
        PublishedModel("elmo-original", "ELMo original", "2x4096_512_2048cnn_2xhighway", 2, 4096, 512, 2, 93.6,
                       ONE_BILLION, 374_403_392, "as mirrors of it list"),
        PublishedModel("elmo-original-5.5b", "ELMo original (5.5B)", "2x4096_512_2048cnn_2xhighway_5.5B", 2,
                       4096, 512, 2, 93.6, FIVE_BILLION, 374_403_392,
                       "the original's architecture, 4 bytes a parameter, estimated"),
        # AllenNLP's contributed models: the same server, a folder and file names of their own
        PublishedModel("elmo-pubmed", "ELMo PubMed", "contributed/pubmed", 2, 4096, 512, 2, 93.6, PUBMED,
                       374_403_392, "the original's architecture, 4 bytes a parameter, estimated",
                       citation=PUBMED_CITATION,
                       file_names=("elmo_2x4096_512_2048cnn_2xhighway_options.json",
                                   "elmo_2x4096_512_2048cnn_2xhighway_weights_PubMed_only.hdf5")),
    ]
    return {m.name: m for m in models}


PUBLISHED_MODELS: dict[str, PublishedModel] = _registry()
"""The published ELMo models, by the name the workbench gives them."""

#: the ``--model`` help every command line shares
MODEL_HELP = ("elmo-mini (shipped), a published ELMo once downloaded (" + ", ".join(PUBLISHED_MODELS)
              + ": python -m probing.data download NAME), or a directory with options.json and weights.hdf5 "
              "(./NAME for a folder named like a model)")


def get_published(name: str) -> PublishedModel:
    """The entry ``name``; ValueError naming the published models otherwise."""
    try:
        return PUBLISHED_MODELS[name]
    except KeyError:
        raise ValueError(f"unknown published model {name!r}; known: {', '.join(PUBLISHED_MODELS)}") from None


def published_name(text: str | os.PathLike) -> str | None:
    """The published model that an AllenNLP file name or URL means, or None: the base name of
    ``.../2x1024_128_2048cnn_1xhighway/elmo_2x1024_128_2048cnn_1xhighway_weights.hdf5`` (or its
    ``_options.json``), a URL or a path alike, gives ``"elmo-small"``."""
    base = str(text).replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    for model in PUBLISHED_MODELS.values():  # an options file two models share means the first
        if base in (model.file_name(OPTIONS_FILE), model.file_name(WEIGHTS_FILE)):
            return model.name
    return None


def default_data_root() -> Path:
    """``$ELMO_WORKBENCH_DATA``, else ``${XDG_CACHE_HOME:-~/.cache}/elmo-workbench/data``: where
    ``python -m probing.data download`` writes without ``--data-root``."""
    return folder_setting(DATA_ENV_VAR, "data")


def default_models_home() -> Path:
    """The models home: ``$ELMO_WORKBENCH_MODELS``, else ``${XDG_CACHE_HOME:-~/.cache}/elmo-workbench/models``:
    where ``elmo-data download NAME`` puts a published model, one folder a name, and where every
    entry point looks for it (after an explicit data root's ``models/``)."""
    return folder_setting(MODELS_ENV_VAR, "models")


def models_home(cache_dir: str | os.PathLike | None = None) -> Path:
    """``cache_dir`` (a ``--models-dir``), else :func:`default_models_home`."""
    return Path(cache_dir).expanduser().resolve() if cache_dir is not None else default_models_home()


def model_folders(name: str, data_root: str | os.PathLike | None = None,
                  cache_dir: str | os.PathLike | None = None) -> list[Path]:
    """The folders model ``name`` is looked for in, in order: ``<data_root>/models/<name>`` when
    a data root is given, the models home's ``<name>`` (:func:`models_home`), and, with no data
    root given, the default data root's ``models/<name>`` (where downloads went before there was
    a models home)."""
    folders = []
    if data_root is not None:
        folders.append(Path(data_root).expanduser().resolve() / MODELS_SUBDIR / name)
    folders.append(models_home(cache_dir) / name)
    if data_root is None:
        folders.append(default_data_root() / MODELS_SUBDIR / name)
    return list(dict.fromkeys(folders))


def _has_files(folder: Path) -> bool:
    return all((folder / f).is_file() for f in (OPTIONS_FILE, WEIGHTS_FILE))


def published_model_dir(name: str, data_root: str | os.PathLike | None = None,
                        cache_dir: str | os.PathLike | None = None) -> Path:
    """The folder model ``name`` is read from: the first of :func:`model_folders` holding both
    files; when none does, the models home's ``<name>``, where the download puts it."""
    folders = model_folders(name, data_root, cache_dir)
    return next((f for f in folders if _has_files(f)), models_home(cache_dir) / name)


def missing_files(name: str, data_root: str | os.PathLike | None = None,
                  cache_dir: str | os.PathLike | None = None) -> list[str]:
    """Which of ``options.json`` and ``weights.hdf5`` model ``name`` lacks (empty: downloaded)."""
    directory = published_model_dir(name, data_root, cache_dir)
    return [f for f in (OPTIONS_FILE, WEIGHTS_FILE) if not (directory / f).is_file()]


def is_downloaded(name: str, data_root: str | os.PathLike | None = None,
                  cache_dir: str | os.PathLike | None = None) -> bool:
    """Whether both files of published model ``name`` are in one of :func:`model_folders` (the
    download checked them before it put them there; loading checks them again)."""
    return not missing_files(name, data_root, cache_dir)


def downloaded_models(data_root: str | os.PathLike | None = None,
                      cache_dir: str | os.PathLike | None = None) -> list[str]:
    """The published models present, in the registry's order."""
    return [name for name in PUBLISHED_MODELS if is_downloaded(name, data_root, cache_dir)]


def download_command(name: str, cache_dir: str | os.PathLike | None = None) -> str:
    """The shell command that fetches model ``name`` into the models home (``cache_dir``, when
    given, as ``--models-dir``), where every command finds it whatever its data root."""
    where = f" --models-dir {shlex.quote(str(models_home(cache_dir)))}" if cache_dir is not None else ""
    return f"{command_name('elmo-data', 'python -m probing.data')} download {name}{where}"


def not_downloaded_message(name: str, data_root: str | os.PathLike | None = None,
                           cache_dir: str | os.PathLike | None = None) -> str:
    """One line: model ``name`` is not downloaded, where it was looked for, and the command."""
    model = get_published(name)
    looked = ", ".join(str(f) for f in model_folders(name, data_root, cache_dir))
    return (f"model {name!r} ({model.title}, {model.size_text()}) is not downloaded (looked in {looked}); "
            f"fetch it with: {download_command(name, cache_dir)}")


def published_card_rows(name: str, data_root: str | os.PathLike | None = None,
                        cache_dir: str | os.PathLike | None = None) -> dict[str, str]:
    """The card rows of published model ``name``: its registry entry, then where it is on disk in
    ``data_root`` or the command that fetches it. ``elmo_model.models.names.model_card_rows``
    shows these for a name that means a published model."""
    rows = get_published(name).card()
    rows["on disk"] = (str(published_model_dir(name, data_root, cache_dir)) if is_downloaded(name, data_root, cache_dir)
                       else f"not downloaded: {download_command(name, cache_dir)}")
    return rows
