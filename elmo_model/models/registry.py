"""Find and load a biLM by name or directory: ``load_bilm("elmo-mini")``, ``load_bilm("elmo-original")``.

Which folder a name means is decided in one place, :mod:`elmo_model.models.names` (light: no
torch), whose ``resolve_model`` this module loads from and re-exports: a name is one of the models
shipped in ``data/models/`` (found by :mod:`elmo_model.plumbing.resources`, in a checkout or
installed, from any working directory) or one of the ELMo models AllenNLP published
(``elmo_model.models.published``: elmo-small, elmo-medium, elmo-original, elmo-original-5.5b),
read from the models home (``$ELMO_WORKBENCH_MODELS``, else ``~/.cache/elmo-workbench/models``; an
explicit data root's ``models/`` first) once ``python -m probing.data download <name>`` has put it
there, even when the working directory has a folder of the same name (give ``./NAME`` for that
one); anything else is a directory holding ``options.json`` and a weight file (``weights.hdf5``, or
bilm-tf's ``lm_weights.hdf5``), an ELMoForManyLangs folder (config.json, encoder.pkl,
token_embedder.pkl, char.dic: :mod:`elmo_model.models.elmoformanylangs`), or a pair of file paths. When the directory's ``model_card.json``
records ``weights_sha256``, the weight file must match it.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from ..bilm.config import ElmoConfig
from ..bilm.devices import check_device
from ..bilm.identity import stamp_loaded_weights
from ..bilm.modules import BiLM
from ..bilm.precision import resolve_precision
from ..bilm.weights import check_weight_shapes, file_checksum, load_weights
from .elmoformanylangs import load_elmoformanylangs
from .names import (DEFAULT_MODEL, ELMOFORMANYLANGS, MODELS_DIR, WEIGHT_FILE_NAMES, ModelFiles, model_files, model_place,
                    resolve_model, shipped_models)

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_MODEL", "MODELS_DIR", "WEIGHT_FILE_NAMES", "ModelFiles", "load_bilm", "load_bilm_from_files",
           "model_files", "model_place", "recorded_weights_sha256", "resolve_model", "shipped_models"]


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
    weight file), ``.source`` (the weight file), ``.options_source`` and ``.precision`` set.
    ``precision``: "fp32" (the reference,
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
    model.source = str(weight_file)
    model.options_source = str(options_file)
    model.set_precision(resolve_precision(precision, target))
    stamp_loaded_weights(model, checksum)  # the identity is the file's while these weights are held
    return model


def load_bilm(name_or_dir: str | Path = DEFAULT_MODEL, precision: str = "fp32", device: str | None = "cpu",
              data_root: str | Path | None = None, cache_dir: str | Path | None = None) -> BiLM:
    """``"elmo-mini"``, a published name (``"elmo-original"``, read from ``data_root``'s
    ``models/``, else the models home ``cache_dir`` / ``$ELMO_WORKBENCH_MODELS``; see
    ``resolve_model``), a directory with options.json + weights.hdf5 or an ELMoForManyLangs folder
    (``elmo_model.models.elmoformanylangs``) -> a
    ``BiLM`` in eval mode on ``device`` ("cpu", "cuda", "cuda:N"; None: the GPU when there is
    one), computing in ``precision`` ("fp32", "bf16" or "auto", resolved for that device; see
    ``load_bilm_from_files``). ``model.device`` and ``model.precision`` say what it got."""
    files = resolve_model(name_or_dir, data_root, cache_dir)
    log.info("loading biLM %s from %s", files.name, files.weights)
    if files.layout == ELMOFORMANYLANGS:
        model = load_elmoformanylangs(files.directory, precision, device)
    else:
        model = load_bilm_from_files(files.options, files.weights, precision, recorded_weights_sha256(files.card),
                                     device)
    model.name = files.name
    return model
