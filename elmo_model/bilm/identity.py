"""A biLM's identity: one digest of everything that changes its numbers.

    >>> from elmo_model import load_bilm
    >>> from elmo_model.bilm.identity import model_identity
    >>> model_identity(load_bilm("elmo-mini"))[:12]     # what the suite prints as the model's key

Every cache (activations, probe results, the SemCor index, word-sense and learned mixes, syntax
probes), every resumable output's job manifest (the embedder's ``.partial`` file, the Ray shard
directory) and every results file (suite, report, WSD, lexical sample, playground) is keyed on
:func:`model_identity`, so two models that compute different vectors never share an entry. It
is the sha256 of (canonical JSON):

- ``weights``: the sha256 of the weight file (``model.checksum``, set by ``load_bilm``) while the
  model still holds the weights it was loaded with (:func:`weights_stamp`: dtypes, devices,
  shapes and sums of every tensor), else of the parameters and buffers in memory (a model built
  in memory, e.g. a random baseline; or one fine-tuned, edited or cast with ``.half()`` after
  loading: the identity follows the weights the process holds, not the file);
- ``options``: the architecture as the model computes it (``ElmoConfig.describe()``: the
  character CNN's embedding, filters, highway layers, character vocabulary, activation; the
  LSTM's dims, layers, cell and projection clips, skip connections). Names and training-only
  keys of ``options.json`` (``extra``) are not in it: they change no number;
- ``precision``: the matrix products' precision (``model.precision``: fp32, bf16, ...);
- ``device``: the device type of the model's parameters, only where the precision is not fp32.
  fp32 on a CPU and on a GPU are expected to agree within the tolerance the workbench states
  (1e-5, docs/reliability.md; expected, measured by ``bench/gpu_check.py`` once a GPU runs it),
  so an fp32 cache serves both; bf16 kernels round differently on each, so a bf16 entry made on
  a GPU never serves a CPU run, nor the reverse.

Before this covered the options, the key was the weight file's sha256 alone (``+bf16`` for bf16):
:func:`legacy_checksum` recomputes that old key so that a cache can say why it rebuilds an entry
made under it (:data:`LEGACY_NOTE`).
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

import torch

log = logging.getLogger(__name__)

IDENTITY_VERSION = 1
LEGACY_NOTE = "made before the model identity covered the options"
_noted: set[str] = set()


def weights_stamp(model: torch.nn.Module) -> tuple:
    """What the weights are now, cheaply: per parameter and buffer its name, dtype, device,
    shape and the float64 sum of its values (as hex, so NaN equals NaN). An optimizer step, an
    edit (under ``no_grad`` or through ``.data``, which the version counter does not see), a cast
    (``.half()``) or a move changes it; a copy (``copy.deepcopy``, pickling to a worker) does not,
    where a version counter would (copies start theirs at 0). An edit that keeps every sum to the
    last bit (two values swapped) is not seen. Reads each tensor once, on its device (no copy);
    tensors on the meta device (no values) give only their shape."""
    tensors = [(name, t) for name, t in model.state_dict(keep_vars=True).items()]
    live = [t.detach() for _, t in tensors if t.device.type != "meta"]
    sums = iter(torch.stack([torch.sum(t, dtype=torch.float64) for t in live]).tolist() if live else [])
    return tuple((name, str(t.dtype), str(t.device), tuple(t.shape),
                  "meta" if t.device.type == "meta" else float(next(sums)).hex()) for name, t in tensors)


def stamp_loaded_weights(model: torch.nn.Module, checksum: str) -> None:
    """Record that ``model``'s weights are those of a weight file whose sha256 is ``checksum``
    (the loader calls this last): :func:`weights_digest` answers ``checksum`` only while the
    weights are still the ones stamped here."""
    model.checksum = checksum
    model._loaded_stamp = weights_stamp(model)


def _parameters_digest(model: torch.nn.Module) -> str:
    digest = hashlib.sha256(b"state_dict:")
    for name, tensor in sorted(model.state_dict().items()):
        array = tensor.detach().cpu().contiguous().numpy()
        digest.update(f"{name}:{array.dtype}:{array.shape};".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def weights_digest(model: torch.nn.Module) -> str:
    """sha256 of the weights the model holds now: ``model.checksum`` (its weight file's, set by
    ``load_bilm``) while the weights are those it was loaded with (:func:`weights_stamp` unchanged),
    else of its parameters and buffers in memory (names, dtypes, shapes, bytes), kept until they
    change. So a model fine-tuned, edited or cast (``.half()``) after loading never shares a cache
    entry, a partial file or a results key with the file's weights."""
    stamp = weights_stamp(model)
    checksum = getattr(model, "checksum", None)
    if checksum:
        loaded = model.__dict__.setdefault("_loaded_stamp", stamp)  # set elsewhere: trusted from first use
        if loaded == stamp or any(entry[4] == "meta" for entry in stamp):
            return str(checksum)
    cached = model.__dict__.get("_weights_digest")
    if cached is not None and cached[0] == stamp:
        return cached[1]
    digest = _parameters_digest(model)
    if checksum:
        log.info("the weights in memory differ from the weight file they were loaded from (fine-tuned, edited "
                 "or cast); identified by their own digest")
    model.__dict__["_weights_digest"] = (stamp, digest)
    return digest


def model_precision(model: torch.nn.Module) -> str:
    """The precision of the model's matrix products ("fp32" when it does not say)."""
    return str(getattr(model, "precision", None) or "fp32")


def device_class(model: torch.nn.Module) -> str | None:
    """The device type whose kernels the numbers depend on ("cpu", "cuda"), or None in fp32,
    where every device agrees within the stated tolerance. Read from the model's parameters,
    which live where the model computes."""
    if model_precision(model) == "fp32":
        return None
    parameter = next(iter(model.parameters()), None)
    return parameter.device.type if parameter is not None else "cpu"


def identity_record(model: torch.nn.Module) -> dict[str, Any]:
    """What :func:`model_identity` digests, as a JSON-able dict (for results files and logs)."""
    config = getattr(model, "config", None)
    options = config.describe() if hasattr(config, "describe") else None
    record: dict[str, Any] = {"weights": weights_digest(model), "options": options,
                              "precision": model_precision(model)}
    device = device_class(model)
    if device is not None:
        record["device"] = device
    return record


def model_identity(model: torch.nn.Module) -> str:
    """The model's identity for every cache, job manifest and results file: a 64-hex sha256 of
    its weights, the options that shape its computation, its precision and, outside fp32, its
    device type (see the module docstring)."""
    payload = json.dumps(["elmo-model-identity", IDENTITY_VERSION, identity_record(model)], sort_keys=True,
                         separators=(",", ":"), default=list)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def legacy_checksum(model: torch.nn.Module) -> str:
    """The key caches used before the identity covered the options: the weights' sha256,
    followed by ``+<precision>`` outside fp32. Only for saying why an old entry is rebuilt."""
    precision = model_precision(model)
    checksum = weights_digest(model)
    return checksum if precision == "fp32" else f"{checksum}+{precision}"


def note_legacy_entry(what: str) -> None:
    """Log, once per process and kind of cache, that an entry keyed the old way is rebuilt."""
    if what not in _noted:
        _noted.add(what)
        log.warning("%s: %s; rebuilding", what, LEGACY_NOTE)


__all__ = ["IDENTITY_VERSION", "LEGACY_NOTE", "device_class", "identity_record", "legacy_checksum",
           "model_identity", "model_precision", "note_legacy_entry", "stamp_loaded_weights", "weights_digest",
           "weights_stamp"]
