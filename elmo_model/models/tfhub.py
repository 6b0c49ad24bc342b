"""TF Hub's ELMo modules (Google's elmo/1-3, DeepPavlov's Russian ones: TF1 SavedModels holding
bilm-tf's biLM graph) converted once into the AllenNLP layout, without TensorFlow::

    python -m elmo_model.models.tfhub MODULE_DIR OUT_DIR     # options.json, weights.hdf5, model_card.json

``load_bilm(MODULE_DIR)`` (and ``Elmo``, ``ElmoEmbedder``, ``hub.Module``, the app) converts a
module folder by itself, once, into the models home's ``converted/`` (``names.resolve_model``).

What is read: the module's ``variables/`` checkpoint (:mod:`elmo_model.models.tensor_bundle`), the
biLM's variables under their names in the module's graph (a prefix before ``bilm/`` is allowed)::

    bilm/char_embed                          (262, E)  bilm-tf's graph adds a padding row 0: dropped
    bilm/CNN/W_cnn_<i>, b_cnn_<i>            the character CNN's filters
    bilm/CNN_high_<k>/{W,b}_{carry,transform}
    bilm/CNN_proj/{W,b}_proj                 (absent when the filters already give the projection size)
    bilm/RNN_<d>/RNN/MultiRNNCell/Cell<l>/rnn/lstm_cell/{kernel,bias,projection/kernel}
                                             (older graphs: .../LSTMCell/{W_0,B,W_P_0})
    aggregation/{weights,scaling}            the module's "elmo" mix, kept on the card (``hub.Module`` starts from it)

The variables give every size; four settings they cannot give are those of every published ELMo
module unless told otherwise (``--no-skip-connections``, ``--cell-clip``, ``--proj-clip``,
``--activation``, or ``--options FILE`` to take them from a bilm-tf options.json): skip
connections on, cell and projection clip 3, relu, 50 characters a token. The card records which
were assumed.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import sys
import tarfile
import tempfile
import zlib
from pathlib import Path
from typing import Any, Iterator

import h5py
import numpy as np

from ..plumbing.commands import error_exit
from ..plumbing.io_safety import check_output_dir, output_lock
from .tensor_bundle import BundleError, read_bundle

log = logging.getLogger(__name__)

#: what the variables cannot tell: the published ELMo modules' settings
DEFAULT_SETTINGS = {"use_skip_connections": True, "cell_clip": 3.0, "proj_clip": 3.0, "activation": "relu",
                    "max_characters_per_token": 50}
VARIABLES_PREFIX = Path("variables") / "variables"
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".tar")  # TF Hub's ?tf-hub-format=compressed and Kaggle's downloads
#: the LSTM variables' names in the module's graph, and in older graphs, -> the weight file's names
LSTM_NAMES = ({"kernel": "rnn/lstm_cell/kernel", "bias": "rnn/lstm_cell/bias",
               "projection": "rnn/lstm_cell/projection/kernel"},
              {"kernel": "LSTMCell/W_0", "bias": "LSTMCell/B", "projection": "LSTMCell/W_P_0"})
WEIGHT_FILE_LSTM = {"kernel": "W_0", "bias": "B", "projection": "W_P_0"}


def is_tfhub_module(folder: Path) -> bool:
    """Whether ``folder`` is a SavedModel / TF Hub module (a graph file and a variables checkpoint)."""
    return ((folder / "saved_model.pb").is_file() or (folder / "tfhub_module.pb").is_file()) and \
        (folder / "variables" / "variables.index").is_file()


def _bilm_prefix(arrays: dict[str, np.ndarray], where: str) -> str:
    prefixes = sorted(name[: -len("char_embed")] for name in arrays if re.fullmatch(r"(.*/)?bilm/char_embed", name))
    if len(prefixes) != 1:
        found = (", ".join(sorted(arrays)[:6]) or "none") + (", ..." if len(arrays) > 6 else "")
        raise ValueError(f"{where}: {'no' if not prefixes else 'more than one'} ELMo biLM in this module (looked "
                         f"for a variable .../bilm/char_embed; its variables: {found})")
    return prefixes[0]


def _count(arrays: dict[str, np.ndarray], pattern: str) -> int:
    n = 0
    while pattern.format(n) in arrays:
        n += 1
    return n


def _lstm_names(arrays: dict[str, np.ndarray], cell: str, where: str) -> dict[str, str]:
    for names in LSTM_NAMES:
        if all(f"{cell}/{name}" in arrays for name in names.values()):
            return {key: f"{cell}/{name}" for key, name in names.items()}
    raise ValueError(f"{where}: {cell} lacks an LSTM cell's kernel, bias and projection")


def weight_file_arrays(arrays: dict[str, np.ndarray], where: str) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """The module's variables -> (the weight file's datasets by bilm-tf's names, the sizes for
    options.json: ``char_cnn`` and ``lstm`` without the settings weights cannot give)."""
    p = _bilm_prefix(arrays, where)
    char_embed = arrays[p + "char_embed"]
    out = {"char_embed": char_embed[1:]}  # the graph's padding row 0 is not in the weight file
    filters = []
    for i in range(_count(arrays, p + "CNN/W_cnn_{}")):
        kernel = arrays[f"{p}CNN/W_cnn_{i}"]
        out[f"CNN/W_cnn_{i}"], out[f"CNN/b_cnn_{i}"] = kernel, arrays[f"{p}CNN/b_cnn_{i}"]
        filters.append([int(kernel.shape[1]), int(kernel.shape[3])])
    n_highway = _count(arrays, p + "CNN_high_{}/W_carry")
    for k in range(n_highway):
        for name in ("W_carry", "b_carry", "W_transform", "b_transform"):
            out[f"CNN_high_{k}/{name}"] = arrays[f"{p}CNN_high_{k}/{name}"]
    if p + "CNN_proj/W_proj" in arrays:
        out["CNN_proj/W_proj"], out["CNN_proj/b_proj"] = arrays[p + "CNN_proj/W_proj"], arrays[p + "CNN_proj/b_proj"]
    cell = p + "RNN_{}/RNN/MultiRNNCell/Cell{}"
    n_layers = 0
    while any(f"{cell.format(0, n_layers)}/{names['kernel']}" in arrays for names in LSTM_NAMES):
        n_layers += 1
    if not filters or not n_layers:
        raise ValueError(f"{where}: the biLM has {len(filters)} character filters and {n_layers} LSTM layers; "
                         "an ELMo module has both")
    for d in (0, 1):
        for layer in range(n_layers):
            names = _lstm_names(arrays, cell.format(d, layer), where)
            for key, name in names.items():
                out[f"RNN_{d}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/{WEIGHT_FILE_LSTM[key]}"] = arrays[name]
    projection = out["RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_P_0"]
    sizes = {"char_cnn": {"embedding": {"dim": int(char_embed.shape[1])}, "filters": filters, "n_highway": n_highway,
                          "n_characters": int(char_embed.shape[0])},
             "lstm": {"dim": int(projection.shape[0]), "projection_dim": int(projection.shape[1]),
                      "n_layers": n_layers}}
    return {name: np.ascontiguousarray(value, dtype=np.float32) for name, value in out.items()}, sizes


def module_mix(arrays: dict[str, np.ndarray]) -> dict[str, Any] | None:
    """The module's trained ``elmo`` mix (``aggregation/weights``, ``aggregation/scaling``), if it has one."""
    weights = next((v for k, v in arrays.items() if k.endswith("aggregation/weights")), None)
    scaling = next((v for k, v in arrays.items() if k.endswith("aggregation/scaling")), None)
    if weights is None or scaling is None:
        return None
    return {"weights": [float(w) for w in np.ravel(weights)], "gamma": float(np.ravel(scaling)[0])}


def settings_from(options_file: str | Path | None, overrides: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The settings weights cannot give: ``overrides`` (flags), then ``options_file``'s (a bilm-tf
    options.json), then :data:`DEFAULT_SETTINGS`; and the names taken from the defaults."""
    given: dict[str, Any] = {}
    if options_file is not None:
        try:
            options = json.loads(Path(options_file).read_text(encoding="utf-8"))
            lstm, cnn = options.get("lstm", {}), options.get("char_cnn", {})
        except (OSError, ValueError, AttributeError) as err:
            raise ValueError(f"--options {options_file}: not a readable options.json ({err})") from None
        given.update({k: lstm[k] for k in ("use_skip_connections", "cell_clip", "proj_clip") if k in lstm})
        given.update({k: cnn[k] for k in ("activation", "max_characters_per_token") if k in cnn})
    given.update({k: v for k, v in overrides.items() if v is not None})
    assumed = [k for k in DEFAULT_SETTINGS if k not in given]
    return {**DEFAULT_SETTINGS, **given}, assumed


def _options(sizes: dict[str, Any], settings: dict[str, Any]) -> dict[str, Any]:
    lstm = {**sizes["lstm"], **{k: settings[k] for k in ("use_skip_connections", "cell_clip", "proj_clip")}}
    cnn = {**sizes["char_cnn"], "activation": settings["activation"],
           "max_characters_per_token": settings["max_characters_per_token"]}
    return {"lstm": lstm, "char_cnn": cnn}


def _write_model(folder: Path, arrays: dict[str, np.ndarray], options: dict[str, Any], card: dict[str, Any]) -> None:
    (folder / "options.json").write_text(json.dumps(options, indent=1) + "\n", encoding="utf-8")
    with h5py.File(folder / "weights.hdf5", "w") as f:
        for name, value in arrays.items():
            f.create_dataset(name, data=value)
    digest = hashlib.sha256((folder / "weights.hdf5").read_bytes()).hexdigest()
    (folder / "model_card.json").write_text(json.dumps({**card, "weights_sha256": digest}, indent=1) + "\n",
                                            encoding="utf-8")


def _check_free(out: Path) -> None:
    if out.is_dir() and any(out.iterdir()):
        raise ValueError(f"{out}: holds files already; convert into a new or empty folder (nothing was replaced)")


def convert_module(module: str | Path, out: str | Path, options_file: str | Path | None = None,
                   **overrides: Any) -> Path:
    """Convert the TF Hub ELMo module ``module`` (its folder, or the ``.tar.gz`` TF Hub and Kaggle
    serve) into ``out`` (options.json, weights.hdf5, model_card.json), which must not exist or be
    empty: an existing model is never replaced. Written into a temporary folder beside ``out`` and
    renamed into place under ``out``'s lock, so a cut conversion leaves nothing. ``overrides``:
    ``use_skip_connections``, ``cell_clip``, ``proj_clip``, ``activation``,
    ``max_characters_per_token`` (None: from ``options_file``, else the defaults). ``ValueError`` in
    one line for what is not an ELMo module, or a taken ``out``."""
    module, out = Path(module), Path(out)
    if not is_module_archive(module) and not (module.is_dir() and is_tfhub_module(module)):
        raise ValueError(f"{module}: not a TF Hub module (a folder with saved_model.pb or tfhub_module.pb and "
                         f"variables/variables.index, or its {' / '.join(ARCHIVE_SUFFIXES)} archive)")
    check_output_dir(out, [module], what="new folder for the converted model")
    _check_free(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if is_module_archive(module):
        with unpacked(module, out.parent) as folder:
            return _convert_folder(folder, out, module, options_file, overrides)
    return _convert_folder(module, out, module, options_file, overrides)


def _convert_folder(folder: Path, out: Path, source: Path, options_file: str | Path | None,
                    overrides: dict[str, Any]) -> Path:
    try:
        bundle = read_bundle(folder / VARIABLES_PREFIX)
    except BundleError as err:
        raise ValueError(str(err)) from None
    arrays, sizes = weight_file_arrays(bundle.arrays, str(source))
    settings, assumed = settings_from(options_file, overrides)
    card = {"source": {"tfhub_module": str(source.resolve())}, "layout": "converted from a TF Hub module",
            "settings_assumed": assumed, "tfhub_mix": module_mix(bundle.arrays)}
    if assumed:
        log.info("%s: %s taken as the published ELMo modules' (%s); the weights cannot tell them", source,
                 ", ".join(assumed), ", ".join(f"{k}={DEFAULT_SETTINGS[k]}" for k in assumed))
    with output_lock(out, wait=True, what="converted model"):
        _check_free(out)  # again under the lock: another converter may have filled it meanwhile
        tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=".converting-"))
        try:
            _write_model(tmp, arrays, _options(sizes, settings), card)
            if out.exists():
                out.rmdir()
            os.replace(tmp, out)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)  # a cut conversion: gone; a finished one: renamed already
    return out


def is_module_archive(path: Path) -> bool:
    """Whether ``path`` is a file named as a module's archive (``.tar.gz``, ``.tgz``, ``.tar``)."""
    return path.is_file() and path.name.lower().endswith(ARCHIVE_SUFFIXES)


@contextlib.contextmanager
def unpacked(archive: Path, where: Path) -> Iterator[Path]:
    """The one module folder in a tar archive (at its top or in one folder), unpacked into a
    temporary folder in ``where`` and removed afterwards. Members that would land outside it, links
    and devices are refused (tarfile's "data" filter)."""
    tmp = Path(tempfile.mkdtemp(dir=where, prefix=".unpacking-"))
    try:
        try:
            with tarfile.open(archive) as tar:
                tar.extractall(tmp, filter="data")
        except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
            raise ValueError(f"{archive}: not a readable module archive ({type(err).__name__}: {err})") from None
        folders = sorted({index.parent.parent for index in tmp.rglob("variables/variables.index")
                          if is_tfhub_module(index.parent.parent)})
        if len(folders) != 1:
            raise ValueError(f"{archive}: {len(folders)} TF Hub modules in it; a module archive holds one")
        yield folders[0]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def converted_module(module: Path, home: Path) -> Path:
    """The module's AllenNLP copy in ``home``/converted/<name>-<digest> (the digest of its path and of
    its files' sizes and times: a module replaced under the same path is converted anew), converted
    once; a second caller waits for the first's and reads it. ``module``: a folder or an archive."""
    files = [module] if module.is_file() else sorted((module / "variables").iterdir())
    key = f"{module.resolve()}:" + ";".join(f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in files)
    name = re.sub(r"(\.tar\.gz|\.tgz|\.tar)$", "", module.resolve().name, flags=re.IGNORECASE)
    target = home / "converted" / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:12]}"
    if not (target / "weights.hdf5").is_file():
        try:
            convert_module(module, target)
        except ValueError:
            if not (target / "weights.hdf5").is_file():  # not a second converter that found the first's copy
                raise
    return target


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m elmo_model.models.tfhub",
        description="Convert a TF Hub ELMo module (a TF1 SavedModel folder: Google's elmo/1-3, DeepPavlov's) "
                    "into the AllenNLP layout (options.json, weights.hdf5, model_card.json), without TensorFlow. "
                    "Settings the weights cannot give default to the published modules' (skip connections, "
                    "clips 3, relu).")
    parser.add_argument("module", help="the module's folder (saved_model.pb or tfhub_module.pb, variables/) or "
                                       "its .tar.gz, as TF Hub and Kaggle serve it")
    parser.add_argument("out", help="a new or empty folder for the converted model")
    parser.add_argument("--options", help="a bilm-tf options.json to take the settings from")
    parser.add_argument("--no-skip-connections", dest="use_skip_connections", action="store_const", const=False,
                        help="the biLM has no skip connections (the published modules have them)")
    parser.add_argument("--cell-clip", type=float, help="the LSTM cell clip (default 3)")
    parser.add_argument("--proj-clip", type=float, help="the LSTM projection clip (default 3)")
    parser.add_argument("--activation", choices=("relu", "tanh"), help="the character CNN's (default relu)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    overrides = {"use_skip_connections": args.use_skip_connections, "cell_clip": args.cell_clip,
                 "proj_clip": args.proj_clip, "activation": args.activation}
    try:
        out = convert_module(args.module, args.out, args.options, **overrides)
    except (ValueError, OSError) as err:
        return error_exit(err)
    print(f"wrote {out} (options.json, weights.hdf5, model_card.json); load it with load_bilm({str(out)!r})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
