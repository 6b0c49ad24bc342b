"""Find and load a biLM by name or directory: ``load_bilm("elmo-mini")``, ``load_bilm("elmo-original")``.

A name is one of the models shipped in ``data/models/`` (found by :mod:`elmo_model.plumbing.resources`,
in a checkout or installed, from any working directory) or one of the ELMo models AllenNLP published
(``elmo_model.models.published``: elmo-small, elmo-medium, elmo-original, elmo-original-5.5b), read from
``<data root>/models/<name>/`` once ``python -m probing.data download <name>`` has put it there;
anything else is a directory holding ``options.json`` and a weight file (``weights.hdf5``, or
bilm-tf's ``lm_weights.hdf5``), or a pair of file paths. When the directory's ``model_card.json``
records ``weights_sha256``, the weight file must match it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from ..bilm.config import ElmoConfig
from ..bilm.devices import check_device
from ..bilm.modules import BiLM
from ..bilm.precision import resolve_precision
from ..bilm.weights import check_weight_shapes, file_checksum, load_weights
from ..plumbing.resources import shipped_data
from .published import PUBLISHED_MODELS, is_downloaded, not_downloaded_message, published_model_dir

log = logging.getLogger(__name__)

MODELS_DIR = shipped_data("models")
DEFAULT_MODEL = "elmo-mini"
WEIGHT_FILE_NAMES = ("weights.hdf5", "lm_weights.hdf5")


@dataclass(frozen=True)
class ModelFiles:
    """Where a biLM's files are. ``vocab`` and ``card`` may be absent."""

    name: str
    options: Path
    weights: Path
    vocab: Path | None = None
    card: Path | None = None


def shipped_models() -> list[str]:
    """Names of the models in ``data/models/`` that have their files."""
    if not MODELS_DIR.is_dir():
        return []
    return sorted(p.name for p in MODELS_DIR.iterdir() if (p / "options.json").is_file())


def resolve_model(name_or_dir: str | Path = DEFAULT_MODEL, data_root: str | Path | None = None) -> ModelFiles:
    """Name or directory -> its files. Raises ``ValueError`` saying what is missing where; for a
    published model not downloaded yet, one line with the command that fetches it. A published
    name is read from ``<data_root>/models/<name>`` (None: ``$ELMO_WORKBENCH_DATA``, else the user
    cache, where ``python -m probing.data download`` writes without ``--data-root``)."""
    text = str(name_or_dir)
    if text in PUBLISHED_MODELS and not (MODELS_DIR / text).is_dir():
        if not is_downloaded(text, data_root):
            raise ValueError(not_downloaded_message(text, data_root))
        directory = published_model_dir(text, data_root)
    else:
        directory = MODELS_DIR / text if (MODELS_DIR / text).is_dir() and "/" not in text else Path(text).expanduser()
    if not directory.exists():
        known = ", ".join(shipped_models()) or "none"
        raise ValueError(f"model {text!r}: no such shipped model (shipped: {known}; published, once downloaded: "
                         f"{', '.join(PUBLISHED_MODELS)}) and no such directory")
    if not directory.is_dir():
        raise ValueError(f"model {text!r}: {directory} is not a directory with options.json and weights.hdf5")
    options = directory / "options.json"
    if not options.is_file():
        raise ValueError(f"model {text!r}: {options} is missing")
    weights = next((directory / n for n in WEIGHT_FILE_NAMES if (directory / n).is_file()), None)
    if weights is None:
        raise ValueError(f"model {text!r}: no weight file in {directory} (looked for {', '.join(WEIGHT_FILE_NAMES)})")
    vocab = directory / "vocab.txt"
    card = directory / "model_card.json"
    return ModelFiles(directory.name, options, weights, vocab if vocab.is_file() else None,
                      card if card.is_file() else None)


def recorded_weights_sha256(card: str | Path | None) -> str | None:
    """The sha256 of the weight file that a model card records (``weights_sha256``), or None when
    there is no card or it records none. Raises ``ValueError`` naming an unreadable card."""
    if card is None:
        return None
    try:
        data = json.loads(Path(card).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ValueError(f"{card}: not a readable model card ({err}); restore it or remove it") from None
    value = data.get("weights_sha256") if isinstance(data, dict) else None
    return str(value) if value else None


def load_bilm_from_files(options_file: str | Path, weight_file: str | Path, precision: str = "fp32",
                         expected_sha256: str | None = None, device: str | None = "cpu") -> BiLM:
    """An AllenNLP-style pair of paths -> a ``BiLM`` in eval mode on ``device`` ("cpu", "cuda",
    "cuda:N"; None: the GPU when torch sees one, else the CPU), with ``.checksum`` (sha256 of the
    weight file), ``.source`` and ``.precision`` set. ``precision``: "fp32" (the reference,
    verified against bilm-tf), "bf16" (bf16 matrix products where the device's bf16 units pay,
    else fp32 with a warning) or "auto" (bf16 where it pays); resolved for ``device`` (see
    ``elmo_model.bilm.precision``). The device is checked first (``ValueError``: one line, e.g. a GPU
    asked for on a machine without one); the weight file's shapes are checked against the
    options before the model is allocated; with ``expected_sha256`` (a model card's record) a
    weight file whose checksum differs is refused."""
    target = check_device(device, "device")
    config = ElmoConfig.from_json(options_file)
    if not Path(weight_file).is_file():
        raise ValueError(f"{weight_file}: weight file not found")
    checksum = file_checksum(weight_file)
    if expected_sha256 and checksum != expected_sha256:
        raise ValueError(f"{weight_file}: sha256 {checksum[:16]}... differs from the {expected_sha256[:16]}... "
                         "recorded on the model card; the file is damaged or was replaced: restore it "
                         "(or, if it was replaced on purpose, remove weights_sha256 from model_card.json)")
    check_weight_shapes(config, weight_file)  # before allocating: options.json may ask for gigabytes
    model = BiLM(config)
    load_weights(model, weight_file)
    model.to(target).eval()
    model.checksum = checksum
    model.source = str(weight_file)
    model.set_precision(resolve_precision(precision, target))
    return model


def load_bilm(name_or_dir: str | Path = DEFAULT_MODEL, precision: str = "fp32", device: str | None = "cpu",
              data_root: str | Path | None = None) -> BiLM:
    """``"elmo-mini"``, a published name (``"elmo-original"``, read from ``data_root``'s
    ``models/``; see ``resolve_model``) or a directory with options.json + weights.hdf5 -> a
    ``BiLM`` in eval mode on ``device`` ("cpu", "cuda", "cuda:N"; None: the GPU when there is
    one), computing in ``precision`` ("fp32", "bf16" or "auto", resolved for that device; see
    ``load_bilm_from_files``). ``model.device`` and ``model.precision`` say what it got."""
    files = resolve_model(name_or_dir, data_root)
    log.info("loading biLM %s from %s", files.name, files.weights)
    model = load_bilm_from_files(files.options, files.weights, precision, recorded_weights_sha256(files.card), device)
    model.name = files.name
    return model
