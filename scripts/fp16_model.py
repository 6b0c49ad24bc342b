"""A biLM's files with every weight rounded to fp16: half the bytes, for a transfer to a GPU machine.

``write_fp16_model`` is the one packer both GPU recipes use: ``bench/gpu_check.py --pack`` (the
model the check measures there) and ``scripts/gpu_job.py pack`` (the start of a training job).
The copy is a model directory as any other (``load_bilm`` and ``load_language_model`` read it and
compute in fp32 on the rounded values):

- ``options.json``: the model's, byte for byte;
- ``weights.hdf5``: the weight file's layout, every float dataset in fp16 (gzip with shuffle, which
  h5py undoes on reading: elmo-mini's weights take 18.8 MB rather than 21.4 MB);
- ``softmax.npz`` (when the model has one, as a trainer's export does, and the language model is
  asked for): every float array of more than one value in fp16, compressed; ``cutoffs`` and
  ``div_value`` as they are;
- ``vocab.txt`` (likewise), as it is;
- ``model_card.json`` (when there is one): the card with ``weights_sha256`` naming the rounded
  weight file (so the copy loads: a card names the weights it goes with) and a note saying so.

Imports only numpy, h5py and the standard library, so either script can load it by path.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import h5py
import numpy as np

NOTE = "every weight rounded to fp16 for the transfer to a GPU machine"


def _fp16(values: np.ndarray, where: str) -> np.ndarray:
    rounded = values.astype(np.float16)
    if not np.isfinite(rounded).all():
        raise ValueError(f"{where} holds values fp16 cannot hold")
    return rounded


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def write_fp16_model(options: Path, weights: Path, target: Path, language_model: bool = True) -> Path:
    """The model of ``options`` (its options.json) and ``weights`` (its hdf5 weight file) rounded
    to fp16 into the new folder ``target`` (the files above; the card, and with
    ``language_model`` the softmax and vocabulary a trainer starts from, are taken from the weight
    file's folder where they are). Returns ``target``. Refuses a weight that fp16 cannot hold
    (``ValueError`` naming the file and the dataset, and nothing left at ``target``), and a
    ``target`` that exists."""
    options, weights, target = Path(options), Path(weights), Path(target)
    if target.exists():
        raise ValueError(f"{target}: already exists; give a new folder for the fp16 copy")
    source = weights.parent
    target.mkdir(parents=True)
    try:
        shutil.copy2(options, target / "options.json")
        with h5py.File(weights, "r") as read, h5py.File(target / "weights.hdf5", "w") as out:
            def copy(name, node):
                if isinstance(node, h5py.Dataset):
                    values = node[()]
                    if values.dtype.kind == "f":
                        out.create_dataset(name, data=_fp16(values, f"{weights}: {name}"), compression="gzip",
                                           shuffle=True)
                    else:
                        out.create_dataset(name, data=values)
            read.visititems(copy)
        if language_model and (source / "softmax.npz").is_file():
            with np.load(source / "softmax.npz", allow_pickle=False) as f:
                arrays = {k: (_fp16(f[k], f"{source / 'softmax.npz'}: {k}") if f[k].dtype.kind == "f" and f[k].size > 1
                              else f[k]) for k in f.files}
            np.savez_compressed(target / "softmax.npz", **arrays)
        if language_model and (source / "vocab.txt").is_file():
            shutil.copy2(source / "vocab.txt", target / "vocab.txt")
        if (source / "model_card.json").is_file():
            card = json.loads((source / "model_card.json").read_text(encoding="utf-8"))
            card["weights_sha256"] = _sha256(target / "weights.hdf5")
            card["note"] = NOTE
            (target / "model_card.json").write_text(json.dumps(card, indent=1) + "\n", encoding="utf-8")
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    return target
