"""Vectors in the Embedding Projector's format: projector.tensorflow.org and TensorBoard load them as they are.

    python -m elmo_model.corpus.embedder sentences.txt out.hdf5 --projector projector/

writes, into ``projector/``:

- ``layer0_tensors.tsv`` ... ``layerL_tensors.tsv``: one row a token, its 2P numbers tab-separated
  (the token layer, then each LSTM layer; with ``--top`` / ``--average`` a single ``tensors.tsv``);
- ``metadata.tsv``: a header row, then one row a token: the token, the sentence's line number
  (from 1), the sentence, and the sense label when one is known (a column the Projector colours by);
- ``projector_config.pbtxt``: one embedding a layer, each naming its tensors and the metadata, so
  ``tensorboard --logdir projector/`` shows them in its Projector tab.

On projector.tensorflow.org: "Load", then a layer's ``tensors.tsv`` and ``metadata.tsv``. Every
file is written under a temporary name and renamed when complete; tabs and line breaks inside a
sentence become spaces, since they separate the format's fields.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from collections.abc import Iterable, Sequence

import h5py
import numpy as np

from ..plumbing.io_safety import atomic_output, atomic_write_text, check_output_dir, output_lock

METADATA_FILE = "metadata.tsv"
CONFIG_FILE = "projector_config.pbtxt"


_TENSOR_FILE = re.compile(r"tensors\.tsv|layer[0-9]+_tensors\.tsv")  # the names tensor_file_names gives


def _field(text: str) -> str:
    return " ".join(str(text).split())


def tensor_file_names(n_layers: int) -> list[str]:
    """``layer{j}_tensors.tsv`` for each of ``n_layers`` layers; ``tensors.tsv`` for one."""
    return ["tensors.tsv"] if n_layers == 1 else [f"layer{j}_tensors.tsv" for j in range(n_layers)]


def write_projector(folder: str | os.PathLike, sentences: Sequence[Sequence[str]], vectors: Iterable[np.ndarray],
                    senses: Sequence[Sequence[str | None]] | None = None,
                    inputs: Sequence[str | os.PathLike] = ()) -> list[Path]:
    """Write the Projector's files for ``sentences`` (token lists) and their ``vectors``, one array
    a sentence, (L+1, T_i, 2P) or (T_i, 2P), in order; ``senses``: a label per token (None: no
    label) adds a ``sense`` column. ``inputs``: files the folder must not replace. Returns the
    files written. Raises ``ValueError`` (one line) for a folder that is a file or holds an input,
    or for vectors that do not match the sentences."""
    folder = check_output_dir(folder, inputs, flag="--projector", what="folder for the Projector's files")
    folder.mkdir(parents=True, exist_ok=True)
    with output_lock(folder, what="Projector folder"):  # one writer at a time: no mixed files
        return _write_projector(folder, sentences, vectors, senses)


def _write_projector(folder: Path, sentences, vectors, senses) -> list[Path]:
    arrays = iter(vectors)
    first = next(arrays, None)
    if first is None or not len(sentences):
        raise ValueError("no sentences to write for the Projector")
    n_layers = 1 if first.ndim == 2 else first.shape[0]
    names = tensor_file_names(n_layers)
    paths = [folder / name for name in names]
    header = "token\tsentence\ttext" + ("\tsense" if senses is not None else "")
    metadata = [header]
    with _AtomicFiles(paths) as outs:
        for i, array in enumerate(_chain(first, arrays)):
            if i >= len(sentences):
                raise ValueError(f"more vector arrays than the {len(sentences)} sentences")
            layers = array[None] if array.ndim == 2 else array  # (L+1, T, 2P)
            if layers.shape[:2] != (n_layers, len(sentences[i])):
                raise ValueError(f"sentence {i + 1}: vectors of shape {tuple(array.shape)} for "
                                 f"{len(sentences[i])} tokens and {n_layers} layers")
            for out, layer in zip(outs, layers):
                np.savetxt(out, np.asarray(layer, dtype=np.float32), fmt="%.6g", delimiter="\t")
            text = _field(" ".join(sentences[i]))
            for t, token in enumerate(sentences[i]):
                row = f"{_field(token)}\t{i + 1}\t{text}"
                if senses is not None:
                    row += "\t" + _field(senses[i][t] or "")
                metadata.append(row)
        if i + 1 != len(sentences):
            raise ValueError(f"{i + 1} vector arrays for {len(sentences)} sentences")
    atomic_write_text(folder / METADATA_FILE, "\n".join(metadata) + "\n")
    config = "".join(f'embeddings {{\n  tensor_name: "{name.removesuffix("_tensors.tsv").removesuffix(".tsv")}"\n'
                     f'  tensor_path: "{name}"\n  metadata_path: "{METADATA_FILE}"\n}}\n' for name in names)
    atomic_write_text(folder / CONFIG_FILE, config)
    for stale in folder.iterdir():  # an earlier run's tensors beside this run's metadata would load as its rows
        if _TENSOR_FILE.fullmatch(stale.name) and stale.name not in names and stale.is_file():
            stale.unlink()
    return [*paths, folder / METADATA_FILE, folder / CONFIG_FILE]


def projector_from_hdf5(hdf5_file: str | os.PathLike, sentences: Sequence[Sequence[str]], keys: Sequence[str],
                        folder: str | os.PathLike, inputs: Sequence[str | os.PathLike] = ()) -> list[Path]:
    """The Projector's files from an ``allennlp elmo``-layout hdf5 file (``ElmoEmbedder.embed_file``'s):
    the dataset ``keys[i]`` holds sentence ``i``'s vectors."""
    with h5py.File(hdf5_file, "r") as f:
        return write_projector(folder, sentences, (f[key][...] for key in keys), inputs=[hdf5_file, *inputs])


def _chain(first: np.ndarray, rest: Iterable[np.ndarray]) -> Iterable[np.ndarray]:
    yield first
    yield from rest


class _AtomicFiles:
    """Several text files opened for writing under temporary names, renamed together on success."""

    def __init__(self, paths: list[Path]) -> None:
        self.paths = paths
        self._contexts = [atomic_output(path) for path in paths]
        self._files: list = []

    def __enter__(self) -> list:
        for context in self._contexts:
            self._files.append(open(context.__enter__(), "w", encoding="utf-8"))
        return self._files

    def __exit__(self, *exc) -> None:
        for handle in self._files:
            handle.close()
        for context in reversed(self._contexts):
            context.__exit__(*exc)
