"""Reading and writing biLM weights in the AllenNLP / bilm-tf hdf5 layout.

This is the one place where TensorFlow's conventions meet ours. The file layout (bilm-tf's
``dump_weights``), with F = total char-CNN filters, E = char embedding dim, H = LSTM cell dim,
P = projection dim, d = direction (0 forward, 1 backward), l = LSTM layer::

    char_embed                     (261, E)         rows for char ids 1..261 (ours add a zero row 0)
    CNN/W_cnn_{i}                  (1, w_i, E, n_i) conv kernel, TF "NHWC" with height 1
    CNN/b_cnn_{i}                  (n_i,)
    CNN_high_{k}/W_transform       (F, F)           TF kernels are (in, out): y = x @ W + b
    CNN_high_{k}/b_transform       (F,)
    CNN_high_{k}/W_carry           (F, F)           bilm-tf's "carry" gate g multiplies the
    CNN_high_{k}/b_carry           (F,)             transform: y = g*relu(x W_t + b_t) + (1-g)*x
    CNN_proj/W_proj                (F, P)
    CNN_proj/b_proj                (P,)
    RNN_{d}/RNN/MultiRNNCell/Cell{l}/LSTMCell/W_0   (D_in + P, 4H)  [input; previous h] @ W_0
    RNN_{d}/RNN/MultiRNNCell/Cell{l}/LSTMCell/B     (4H,)           gates in TF order i, j, f, o
    RNN_{d}/RNN/MultiRNNCell/Cell{l}/LSTMCell/W_P_0 (H, P)          projection, (in, out)

TensorFlow conventions and how they are handled here:
- Kernel orientation: TF stores (in, out); ``nn.Linear`` wants (out, in): transpose.
  Conv kernels (1, w, E, n) become ``nn.Conv1d`` weights (n, E, w).
- Gate order: TF's LSTMCell splits the gate pre-activations as (i, j, f, o) with j the new
  candidate; ours are (i, f, g, o): blocks 1 and 2 swap.
- Forget bias: TF's LSTMCell adds ``forget_bias = 1.0`` to f at run time and does not store it;
  our ``LstmWithProjection`` does the same (a non-persistent buffer), so B is copied as is and
  read -> write -> read is exact, bit for bit.
- Highway gate: bilm-tf's formula is kept as it is (AllenNLP instead negates W_carry / b_carry to
  fit its own Highway), so the carry weights are copied with only the transpose.
- ``char_embed`` has no row for id 0 (padding); ours has a zero row 0, added on read and dropped
  on write.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import h5py
import numpy as np
import torch

from ..plumbing.io_safety import atomic_output
from ..plumbing.progress import ProgressCallback
from .config import ElmoConfig
from .modules import BiLM

# TF (i, j, f, o) -> ours (i, f, g=j, o): which TF block goes to each of our blocks; a swap,
# so the same permutation maps ours back to TF.
_GATE_PERMUTATION = (0, 2, 1, 3)


def _permute_gates(array: np.ndarray, cell_dim: int, axis: int) -> np.ndarray:
    blocks = np.split(array, 4, axis=axis)
    if blocks[0].shape[axis] != cell_dim:
        raise AssertionError("gate block size mismatch")
    return np.concatenate([blocks[k] for k in _GATE_PERMUTATION], axis=axis)


def _lstm_prefix(direction: int, layer: int) -> str:
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


def expected_shapes(config: ElmoConfig) -> dict[str, tuple[int, ...]]:
    """Every dataset of the hdf5 layout with the shape ``config`` implies."""
    c, l = config.char_cnn, config.lstm
    shapes: dict[str, tuple[int, ...]] = {"char_embed": (261, c.embedding_dim)}
    for i, (width, n) in enumerate(c.filters):
        shapes[f"CNN/W_cnn_{i}"] = (1, width, c.embedding_dim, n)
        shapes[f"CNN/b_cnn_{i}"] = (n,)
    for k in range(c.n_highway):
        for name in ("transform", "carry"):
            shapes[f"CNN_high_{k}/W_{name}"] = (c.n_filters, c.n_filters)
            shapes[f"CNN_high_{k}/b_{name}"] = (c.n_filters,)
    shapes["CNN_proj/W_proj"] = (c.n_filters, l.projection_dim)
    shapes["CNN_proj/b_proj"] = (l.projection_dim,)
    for d in range(2):
        for layer in range(l.n_layers):
            p = _lstm_prefix(d, layer)
            shapes[f"{p}/W_0"] = (l.projection_dim + l.projection_dim, 4 * l.dim)
            shapes[f"{p}/B"] = (4 * l.dim,)
            shapes[f"{p}/W_P_0"] = (l.dim, l.projection_dim)
    return shapes


def _one_line(err: BaseException) -> str:
    return " ".join(str(err).split())


def _open_weight_file(path: Path, name: str) -> h5py.File:
    if not path.is_file():
        raise ValueError(f"{name}: weight file not found")
    try:
        return h5py.File(path, "r")
    except OSError as err:
        raise ValueError(f"{name}: not a complete hdf5 file ({_one_line(err)}); it may be truncated or "
                         "damaged") from None


def _dataset(f: h5py.File, name: str, shape: tuple[int, ...], file_name: str) -> h5py.Dataset:
    """Dataset ``name`` of the layout, checked for being there with ``shape`` (metadata only)."""
    item = f.get(name)
    if item is None:
        raise ValueError(f"{file_name}: dataset {name!r} is missing (options.json implies shape {shape}); "
                         "is this an ELMo weight file, and does options.json match it?")
    if not isinstance(item, h5py.Dataset):
        raise ValueError(f"{file_name}: {name!r} is a group, expected a dataset of shape {shape}")
    if tuple(item.shape) != shape:
        raise ValueError(f"{file_name}: dataset {name!r} has shape {tuple(item.shape)}, options.json implies {shape}; "
                         "the options and the weights do not match (the expected shape comes from options.json)")
    return item


def _values(item: h5py.Dataset, name: str, file_name: str) -> np.ndarray:
    """Every value of dataset ``name``, read to its last byte, as float32; finite, else ValueError."""
    try:
        array = np.asarray(item[...], dtype=np.float32)
    except (OSError, KeyError, RuntimeError, ValueError) as err:  # truncated / corrupted file
        raise ValueError(f"{file_name}: dataset {name!r} cannot be read ({_one_line(err)}); the file is damaged "
                         "or incomplete") from None
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{file_name}: dataset {name!r} contains NaN or infinite values")
    return array


def check_weight_shapes(config: ElmoConfig, weight_file: str | Path, *, read_values: bool = False,
                        progress: ProgressCallback | None = None,
                        label: str = "checking weights", name: str | None = None) -> None:
    """Check ``weight_file`` against ``config``: it opens as hdf5 and holds every dataset of the
    bilm-tf layout with the shape the options imply (metadata only: nothing is allocated, so it
    runs before a model is). ``read_values``: also read every dataset to its last byte, one at a
    time, and refuse NaN or infinite values (a download's check; the largest dataset, an LSTM
    layer of the original ELMo, is 64 MB), reporting ``progress(label, done, total, "dataset")``
    after each. Raises ``ValueError``, one line naming the file (``name``; default: its path) and
    the first dataset that fails, with expected vs actual shape."""
    path = Path(weight_file)
    file_name = name or str(path)
    shapes = expected_shapes(config)
    with _open_weight_file(path, file_name) as f:
        for done, (dataset, shape) in enumerate(shapes.items()):
            item = _dataset(f, dataset, shape, file_name)
            if read_values:
                _values(item, dataset, file_name)
                if progress:
                    progress(label, done + 1, len(shapes), "dataset")


def load_weights(model: BiLM, weight_file: str | Path) -> None:
    """Fill ``model`` in place from a bilm-tf / AllenNLP hdf5 file. Raises ``ValueError`` naming
    the file, the dataset and expected vs actual shape on any mismatch."""
    path = Path(weight_file)
    shapes = expected_shapes(model.config)
    with _open_weight_file(path, str(path)) as f, torch.no_grad():
        read = lambda name: _values(_dataset(f, name, shapes[name], str(path)), name, str(path))  # noqa: E731
        t = torch.from_numpy
        cnn = model.token_embedder
        emb = cnn.char_embedding.weight
        emb[0].zero_()
        emb[1:].copy_(t(read("char_embed")))
        for i, conv in enumerate(cnn.convolutions):
            conv.weight.copy_(t(read(f"CNN/W_cnn_{i}")[0].transpose(2, 1, 0)))  # (w,E,n) -> (n,E,w)
            conv.bias.copy_(t(read(f"CNN/b_cnn_{i}")))
        for k, highway in enumerate(cnn.highways):
            highway.transform.weight.copy_(t(read(f"CNN_high_{k}/W_transform").T))
            highway.transform.bias.copy_(t(read(f"CNN_high_{k}/b_transform")))
            highway.gate.weight.copy_(t(read(f"CNN_high_{k}/W_carry").T))
            highway.gate.bias.copy_(t(read(f"CNN_high_{k}/b_carry")))
        cnn.projection.weight.copy_(t(read("CNN_proj/W_proj").T))
        cnn.projection.bias.copy_(t(read("CNN_proj/b_proj")))
        for d, stack in enumerate((model.forward_lstm, model.backward_lstm)):
            for layer_index, layer in enumerate(stack.layers):
                p = _lstm_prefix(d, layer_index)
                d_in = layer.input_linear.weight.shape[1]
                w = _permute_gates(read(f"{p}/W_0").T, layer.cell_dim, axis=0)  # (4H, D_in + P)
                layer.input_linear.weight.copy_(t(np.ascontiguousarray(w[:, :d_in])))
                layer.state_linear.weight.copy_(t(np.ascontiguousarray(w[:, d_in:])))
                layer.input_linear.bias.copy_(t(_permute_gates(read(f"{p}/B"), layer.cell_dim, axis=0)))
                layer.projection.weight.copy_(t(read(f"{p}/W_P_0").T))


def state_to_hdf5_arrays(model: BiLM) -> dict[str, np.ndarray]:
    """The model's parameters as the bilm-tf datasets (name -> float32 array)."""
    arrays: dict[str, np.ndarray] = {}
    n = lambda x: x.detach().cpu().numpy().astype(np.float32)  # noqa: E731
    cnn = model.token_embedder
    arrays["char_embed"] = n(cnn.char_embedding.weight)[1:]
    for i, conv in enumerate(cnn.convolutions):
        arrays[f"CNN/W_cnn_{i}"] = n(conv.weight).transpose(2, 1, 0)[np.newaxis]
        arrays[f"CNN/b_cnn_{i}"] = n(conv.bias)
    for k, highway in enumerate(cnn.highways):
        arrays[f"CNN_high_{k}/W_transform"] = n(highway.transform.weight).T
        arrays[f"CNN_high_{k}/b_transform"] = n(highway.transform.bias)
        arrays[f"CNN_high_{k}/W_carry"] = n(highway.gate.weight).T
        arrays[f"CNN_high_{k}/b_carry"] = n(highway.gate.bias)
    arrays["CNN_proj/W_proj"] = n(cnn.projection.weight).T
    arrays["CNN_proj/b_proj"] = n(cnn.projection.bias)
    for d, stack in enumerate((model.forward_lstm, model.backward_lstm)):
        for layer_index, layer in enumerate(stack.layers):
            p = _lstm_prefix(d, layer_index)
            w = np.concatenate([n(layer.input_linear.weight), n(layer.state_linear.weight)], axis=1)
            arrays[f"{p}/W_0"] = _permute_gates(w, layer.cell_dim, axis=0).T
            arrays[f"{p}/B"] = _permute_gates(n(layer.input_linear.bias), layer.cell_dim, axis=0)
            arrays[f"{p}/W_P_0"] = n(layer.projection.weight).T
    return {k: np.ascontiguousarray(v) for k, v in arrays.items()}


def save_weights(model: BiLM, weight_file: str | Path) -> None:
    """Write the model in the bilm-tf layout, atomically (temporary file, then rename)."""
    with atomic_output(weight_file) as tmp, h5py.File(tmp, "w") as f:
        for name, array in state_to_hdf5_arrays(model).items():
            f.create_dataset(name, data=array)


def file_checksum(path: str | Path, chunk: int = 1 << 20) -> str:
    """sha256 of a file (the model's identity in activation caches and results)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()
