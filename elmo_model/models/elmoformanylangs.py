"""ELMoForManyLangs model folders (HIT-SCIR's ``elmoformanylangs`` package), read as a ``BiLM``
that computes that package's numbers.

    >>> from elmo_model import load_bilm, ElmoEmbedder
    >>> model = load_bilm("path/to/efml-folder")          # names.resolve_model tells the layout apart
    >>> ElmoEmbedder("path/to/efml-folder").embed_sentence(["Das", "ist", "gut"])   # (L+1, 3, 2P)

A folder holds::

    config.json          {"config_path": NAME, ...}: names the architecture file, often absent from the folder
    char.dic, word.dic   the vocabularies, one ``token<TAB>id`` a line (a line of one field is U+3000)
    token_embedder.pkl   the token layer's state dict: character and word embeddings, Conv1d filters,
                         AllenNLP's highway layers, the projection
    encoder.pkl          the biLSTM's state dict: AllenNLP's LstmCellWithProjection, each layer, each direction

What the package does, reproduced here (each held by tests/test_elmoformanylangs.py against the
package's own ``Embedder``):

- the architecture: ``config_path`` joined to the folder, else the folder's file of that basename,
  else the package's own file of that basename (:data:`DEFAULT_ARCHITECTURES`);
- a token is cut to ``max_characters_per_token - 2`` characters (code points) before both
  lookups, the word's too; unknown characters and words are ``<oov>``; the unused character
  positions hold ``<pad>``'s id (a learned row, not zero);
- ``<bow>`` and ``<eow>`` are swapped: a word begins with ``<eow>``'s id and ends with ``<bow>``'s;
- the boundary words are ``[begin, <bos>, end, pad...]`` and ``[begin, <eos>, end, pad...]``, word
  ids ``<bos>`` / ``<eos>`` (or ``<oov>``); a token spelled ``<bos>`` or ``<eos>`` is read as one;
- the word branch comes first: the projection reads ``[word embedding; highway output]``;
- AllenNLP's highway ``g * x + (1 - g) * relu(A x)``: our ``Highway`` gates the transform, so its
  gate is ``1 - g``, the weights of ``g`` negated (``sigmoid(-z) = 1 - sigmoid(z)``);
- the encoder: gates i, f, g, o as ours; the bias sits on the recurrent product (ours on the
  input's: the same sum); no forget-bias offset (the state dict holds PyTorch's convention); a
  residual from the second layer on; a clip of 0 is none.

One difference, by design: the package's ``ElmobiLm`` is stateful (each batch starts from the
previous batch's final states), so its numbers depend on what it embedded before; this model is
stateless, as every ``BiLM`` is by default: it equals a freshly loaded ``Embedder``'s first batch.

Ids: :meth:`ElmoForManyLangsBiLM.token_ids` makes (B, T, C + 1): C character ids then the word id,
each + 1 so that 0 means "no token" as in bilm-tf's ids. The width is never bilm-tf's C, so ids
made for one kind of model are refused by the other, in one line.
"""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from torch import nn

from ..bilm.char_cnn import CharacterCNN
from ..bilm.config import ElmoConfig
from ..bilm.devices import check_device
from ..bilm.identity import stamp_loaded_weights
from ..bilm.modules import BiLM, add_sentence_boundaries
from ..bilm.precision import resolve_precision
from ..bilm.weights import file_checksum
from .names import (ELMOFORMANYLANGS_CHAR_VOCABULARY, ELMOFORMANYLANGS_CONFIG, ELMOFORMANYLANGS_ENCODER,
                    ELMOFORMANYLANGS_TOKEN_EMBEDDER, ELMOFORMANYLANGS_WORD_VOCABULARY)

# The package's two architecture files (elmoformanylangs/configs/), which its published models name
# without shipping. Both hold the same architecture, word_dim 100 included, whatever the names say.
_SAMPLE_ARCHITECTURE = {
    "encoder": {"name": "elmo", "projection_dim": 512, "cell_clip": 3, "proj_clip": 3, "dim": 4096, "n_layers": 2},
    "token_embedder": {"name": "cnn", "activation": "relu",
                       "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
                       "n_highway": 2, "word_dim": 100, "char_dim": 50, "max_characters_per_token": 50},
    "classifier": {"name": "sampled_softmax", "n_samples": 8192},
    "dropout": 0.1,
}
DEFAULT_ARCHITECTURES = {"cnn_50_100_512_4096_sample.json": _SAMPLE_ARCHITECTURE,
                         "cnn_0_100_512_4096_sample.json": _SAMPLE_ARCHITECTURE}
_TOKEN_EMBEDDER_KEYS = ("name", "activation", "filters", "n_highway", "word_dim", "char_dim", "max_characters_per_token")
_ENCODER_KEYS = ("name", "projection_dim", "dim", "n_layers", "cell_clip", "proj_clip")
_CHARACTER_SPECIALS = ("<bow>", "<eow>", "<bos>", "<eos>", "<oov>", "<pad>")
_WORD_SPECIALS = ("<oov>", "<pad>")


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise ValueError(f"{path}: not a readable JSON file ({type(err).__name__}: {err})") from None


def read_architecture(folder: str | Path) -> tuple[dict[str, Any], str]:
    """The folder's architecture and where it came from (a path, or the package default's name),
    found as the package finds it: ``config.json``'s ``config_path`` joined to the folder, else
    the folder's file of that basename, else the package's own file of that basename."""
    folder = Path(folder)
    settings = _read_json(folder / ELMOFORMANYLANGS_CONFIG)
    named = settings.get("config_path") if isinstance(settings, dict) else None
    if not isinstance(named, str) or not named:
        raise ValueError(f"{folder / ELMOFORMANYLANGS_CONFIG}: no config_path naming the architecture file")
    for candidate in (folder / named, folder / Path(named).name):
        if candidate.is_file():
            architecture = _read_json(candidate)
            return architecture, str(candidate)
    default = DEFAULT_ARCHITECTURES.get(Path(named).name)
    if default is None:
        raise ValueError(f"{folder / ELMOFORMANYLANGS_CONFIG}: config_path {named!r} is neither in the folder nor one "
                         f"of the package's own architectures ({', '.join(DEFAULT_ARCHITECTURES)})")
    return copy.deepcopy(default), f"elmoformanylangs/configs/{Path(named).name}"


def architecture_config(architecture: Any, source: str, char_rows: int) -> tuple[ElmoConfig, int]:
    """An ELMoForManyLangs architecture -> (the ``ElmoConfig`` of its character CNN and biLSTM, its
    word_dim). One line naming ``source`` for what is not read here: a token embedder other than
    the character CNN, an encoder other than ELMo's biLSTM, a model without characters."""
    embedder = architecture.get("token_embedder") if isinstance(architecture, dict) else None
    encoder = architecture.get("encoder") if isinstance(architecture, dict) else None
    if not isinstance(embedder, dict) or not isinstance(encoder, dict):
        raise ValueError(f"{source}: not an ELMoForManyLangs architecture (it needs token_embedder and encoder)")
    missing = [f"token_embedder.{k}" for k in _TOKEN_EMBEDDER_KEYS if k not in embedder]
    missing += [f"encoder.{k}" for k in _ENCODER_KEYS if k not in encoder]
    if missing:
        raise ValueError(f"{source}: {', '.join(missing)} missing")
    if str(embedder["name"]).lower() != "cnn":
        raise ValueError(f"{source}: token_embedder {embedder['name']!r}: only the character CNN ('cnn') is read here")
    if str(encoder["name"]).lower() != "elmo":
        raise ValueError(f"{source}: encoder {encoder['name']!r}: only ELMo's biLSTM ('elmo') is read here")
    if not isinstance(embedder["char_dim"], int) or embedder["char_dim"] <= 0:
        raise ValueError(f"{source}: token_embedder.char_dim = {embedder['char_dim']!r}: models without the "
                         "character CNN are not read here")
    word_dim = embedder["word_dim"]
    if not isinstance(word_dim, int) or isinstance(word_dim, bool) or word_dim < 0:
        raise ValueError(f"{source}: token_embedder.word_dim = {word_dim!r}: must be an integer >= 0")
    options = {
        "char_cnn": {"embedding": {"dim": embedder["char_dim"]}, "filters": embedder["filters"],
                     "n_highway": embedder["n_highway"], "n_characters": char_rows,
                     "max_characters_per_token": embedder["max_characters_per_token"],
                     "activation": embedder["activation"]},
        # the package clips only where the value is truthy: 0 (or null) is no clip
        "lstm": {"dim": encoder["dim"], "projection_dim": encoder["projection_dim"], "n_layers": encoder["n_layers"],
                 "cell_clip": encoder["cell_clip"] or None, "proj_clip": encoder["proj_clip"] or None,
                 "use_skip_connections": True},
    }
    return ElmoConfig.from_options(options, source), word_dim


def read_vocabulary(path: str | Path) -> dict[str, int]:
    """A ``char.dic`` / ``word.dic``: ``token<TAB>id`` lines -> {token: id}, as the package reads
    them: lines split where ``str.splitlines`` splits (its ``codecs`` reader's rule), stripped, a line
    of one field is U+3000 (the stripped-away full-width space), a later line wins. Blank lines,
    which the package fails on, are passed over."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"{path}: not readable as UTF-8 text ({type(err).__name__})") from None
    vocabulary: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        fields = line.strip().split("\t")
        if fields == [""]:
            continue
        if len(fields) == 1:
            fields.insert(0, "\u3000")
        try:
            token, index = fields
            vocabulary[token] = int(index)
        except ValueError:
            raise ValueError(f"{path}, line {number}: {line!r} is not 'token<TAB>id'") from None
    return vocabulary


class ElmoForManyLangsVocabulary:
    """The character and word vocabularies and the package's batching rules, as id rows (C + 1,):
    C character ids and the word id, each + 1 (0: no token)."""

    def __init__(self, chars: dict[str, int], words: dict[str, int] | None, max_characters: int) -> None:
        missing = [k for k in _CHARACTER_SPECIALS if k not in chars]
        missing += [f"{k} (word.dic)" for k in _WORD_SPECIALS if words is not None and k not in words]
        if missing:
            raise ValueError(f"ELMoForManyLangs vocabulary: no entry for {', '.join(missing)}")
        self.chars, self.words, self.max_characters = chars, words, max_characters
        # the package's batching swaps the two: a word begins with <eow>'s id and ends with <bow>'s
        self.begin, self.end = chars["<eow>"], chars["<bow>"]
        self._rows: dict[str, np.ndarray] = {}

    @property
    def width(self) -> int:
        """Ids per token: the characters and the word."""
        return self.max_characters + 1

    def row(self, token: str) -> np.ndarray:
        """One token -> its ids (C + 1,), int64."""
        cached = self._rows.get(token)
        if cached is not None:
            return cached
        limit = self.max_characters
        cut = token[: limit - 2] if len(token) + 2 > limit else token
        chars = self.chars
        if cut in ("<bos>", "<eos>"):
            ids = [self.begin, chars[cut], self.end]
        else:
            ids = [self.begin, *(chars.get(c, chars["<oov>"]) for c in cut), self.end]
        row = np.full(self.width, chars["<pad>"] + 1, dtype=np.int64)
        row[: len(ids)] = np.asarray(ids, dtype=np.int64) + 1
        row[limit] = 1 if self.words is None else self.words.get(cut, self.words["<oov>"]) + 1
        if len(self._rows) < 100_000:
            self._rows[token] = row
        return row

    def batch(self, sentences: Sequence[Sequence[str]]) -> torch.Tensor:
        """Sentences of tokens -> LongTensor (B, T, C + 1), shorter sentences padded with 0 rows."""
        if isinstance(sentences, (str, bytes)) or any(isinstance(s, (str, bytes)) for s in sentences):
            raise TypeError("token_ids takes sentences as lists of tokens (str), e.g. [['The', 'bank']], not strings")
        steps = max((len(s) for s in sentences), default=0)
        out = np.zeros((len(sentences), steps, self.width), dtype=np.int64)
        for i, sentence in enumerate(sentences):
            for j, token in enumerate(sentence):
                if not isinstance(token, str):
                    raise TypeError(f"sentence {i}, token {j}: {token!r} is a {type(token).__name__}, not a str")
                out[i, j] = self.row(token)
        return torch.from_numpy(out)


class ElmoForManyLangsTokenEmbedder(CharacterCNN):
    """The package's ``ConvTokenEmbedder``: ids (B, T, C + 1) -> token vectors (B, T, P): the
    character CNN and highway of ``CharacterCNN`` on the C character ids (its own character table:
    row 0 for "no token", row k + 1 for the package's id k), the word's embedding (when
    ``word_dim`` > 0) before them, then the projection."""

    def __init__(self, config: ElmoConfig, char_rows: int, word_rows: int, word_dim: int) -> None:
        super().__init__(config)
        c = config.char_cnn
        self.char_embedding = nn.Embedding(char_rows + 1, c.embedding_dim, padding_idx=0)
        self.word_embedding = nn.Embedding(word_rows + 1, word_dim, padding_idx=0) if word_dim > 0 else None
        self.projection = nn.Linear(word_dim + c.n_filters, config.lstm.projection_dim)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        batch, tokens, _ = ids.shape
        h = self.character_features(ids[..., :-1])  # (B*T, F)
        if self.word_embedding is not None:
            words = self.word_embedding(ids[..., -1].reshape(batch * tokens))
            h = torch.cat([words.to(h.dtype), h], dim=-1)
        return self.project(h).reshape(batch, tokens, -1)


class ElmoForManyLangsBiLM(BiLM):
    """A ``BiLM`` over an ELMoForManyLangs model's vocabularies: ``token_ids`` makes its ids (the
    workbench's call sites ask for them through ``char_ids.model_token_ids``), ``add_boundaries``
    adds its ``<bos>`` / ``<eos>`` words; the LSTM has no forget-bias offset. Stateless by default."""

    def __init__(self, config: ElmoConfig, vocabulary: ElmoForManyLangsVocabulary, char_rows: int, word_rows: int,
                 word_dim: int) -> None:
        super().__init__(config)
        self.vocabulary = vocabulary
        self.token_embedder = ElmoForManyLangsTokenEmbedder(config, char_rows, word_rows, word_dim)
        for stack in (self.forward_lstm, self.backward_lstm):
            for layer in stack.layers:
                layer.forget_bias_offset.zero_()

    def token_ids(self, sentences: Sequence[Sequence[str]]) -> torch.Tensor:
        """Sentences of tokens -> the ids this model reads, (B, T, C + 1), on the CPU."""
        return self.vocabulary.batch(sentences)

    def add_boundaries(self, char_ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        bos, eos = (torch.from_numpy(self.vocabulary.row(word)) for word in ("<bos>", "<eos>"))
        return add_sentence_boundaries(char_ids, mask, bos, eos)

    def _check_char_ids(self, char_ids: torch.Tensor) -> None:
        """One line, before any work, for ids this model would misread (bilm-tf's among them)."""
        if not isinstance(char_ids, torch.Tensor):
            raise TypeError(f"ids must be a tensor from the model's token_ids, got {type(char_ids).__name__}")
        width = self.vocabulary.width
        if char_ids.dim() != 3 or char_ids.shape[-1] != width:
            raise ValueError(f"ids must be (batch, tokens, {width}) as this ELMoForManyLangs model's token_ids makes "
                             f"them (bilm-tf's character ids do not fit it), got shape {tuple(char_ids.shape)}")
        if char_ids.dtype.is_floating_point or char_ids.dtype.is_complex or char_ids.dtype == torch.bool:
            raise ValueError(f"ids must be integers, got {char_ids.dtype}")
        if char_ids.shape[0] == 0:
            raise ValueError(f"ids of shape {tuple(char_ids.shape)}: no sentence to embed")
        if char_ids.device.type != "cpu" or char_ids.numel() == 0:
            return
        embedder = self.token_embedder
        tables = [(char_ids[..., :-1], embedder.char_embedding.num_embeddings, "character")]
        if embedder.word_embedding is not None:
            tables.append((char_ids[..., -1], embedder.word_embedding.num_embeddings, "word"))
        for ids, rows, what in tables:
            if int(ids.min()) < 0 or int(ids.max()) >= rows:
                raise ValueError(f"{what} ids hold values {int(ids.min())}..{int(ids.max())}; they lie in 0..{rows - 1}")


def _load_state(path: Path) -> dict[str, torch.Tensor]:
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # a damaged, truncated or foreign pickle: one line, never its traceback
        raise ValueError(f"{path}: not a readable PyTorch state dict ({type(err).__name__}: "
                         f"{' '.join(str(err).split())[:200]})") from None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise ValueError(f"{path}: not a PyTorch state dict of tensors")
    return state


def _fetch(state: dict[str, torch.Tensor], key: str, shape: tuple[int, ...], path: Path) -> torch.Tensor:
    tensor = state.get(key)
    if tensor is None:
        raise ValueError(f"{path}: {key} is missing (the architecture implies shape {shape})")
    if tuple(tensor.shape) != shape:
        raise ValueError(f"{path}: {key} has shape {tuple(tensor.shape)}, the architecture implies {shape}; the "
                         "architecture file and the weights do not match")
    if not torch.isfinite(tensor).all():
        raise ValueError(f"{path}: {key} holds NaN or infinite values")
    return tensor.float()


def _fill_token_embedder(model: ElmoForManyLangsBiLM, state: dict[str, torch.Tensor], path: Path) -> None:
    embedder, config = model.token_embedder, model.config
    features = config.char_cnn.n_filters
    get = lambda key, like: _fetch(state, key, tuple(like.shape), path)  # noqa: E731
    char_table = embedder.char_embedding.weight
    char_table[0].zero_()
    char_table[1:].copy_(get("char_emb_layer.embedding.weight", char_table[1:]))
    if embedder.word_embedding is not None:
        word_table = embedder.word_embedding.weight
        word_table[0].zero_()
        word_table[1:].copy_(get("word_emb_layer.embedding.weight", word_table[1:]))
    for i, conv in enumerate(embedder.convolutions):
        conv.weight.copy_(get(f"convolutions.{i}.weight", conv.weight))  # Conv1d's (n, E, w) both sides
        conv.bias.copy_(get(f"convolutions.{i}.bias", conv.bias))
    for k, highway in enumerate(embedder.highways):
        weight = _fetch(state, f"highways._layers.{k}.weight", (2 * features, features), path)
        bias = _fetch(state, f"highways._layers.{k}.bias", (2 * features,), path)
        highway.transform.weight.copy_(weight[:features])
        highway.transform.bias.copy_(bias[:features])
        highway.gate.weight.copy_(-weight[features:])  # our gate is the package's 1 - g
        highway.gate.bias.copy_(-bias[features:])
    embedder.projection.weight.copy_(get("projection.weight", embedder.projection.weight))
    embedder.projection.bias.copy_(get("projection.bias", embedder.projection.bias))


def _fill_encoder(model: ElmoForManyLangsBiLM, state: dict[str, torch.Tensor], path: Path) -> None:
    """AllenNLP's LstmCellWithProjection per layer and direction: ``input_linearity`` (no bias),
    ``state_linearity`` (with the gates' bias), ``state_projection``; gates i, f, g, o as ours."""
    for direction, stack in (("forward", model.forward_lstm), ("backward", model.backward_lstm)):
        for k, layer in enumerate(stack.layers):
            prefix = f"{direction}_layer_{k}"
            get = lambda name, like: _fetch(state, f"{prefix}.{name}", tuple(like.shape), path)  # noqa: E731
            layer.input_linear.weight.copy_(get("input_linearity.weight", layer.input_linear.weight))
            layer.state_linear.weight.copy_(get("state_linearity.weight", layer.state_linear.weight))
            layer.input_linear.bias.copy_(get("state_linearity.bias", layer.input_linear.bias))
            layer.projection.weight.copy_(get("state_projection.weight", layer.projection.weight))


def folder_checksum(files: Sequence[Path]) -> str:
    """One sha256 of the folder's files that change the numbers (vocabularies included: the same
    weights under another char.dic read other rows)."""
    digest = hashlib.sha256(b"elmoformanylangs:")
    for path in files:
        digest.update(f"{path.name}:{file_checksum(path)};".encode())
    return digest.hexdigest()


def _table_rows(state: dict[str, torch.Tensor], key: str, path: Path) -> int:
    tensor = state.get(key)
    if tensor is None or tensor.dim() != 2:
        raise ValueError(f"{path}: {key} is missing or not a table")
    return int(tensor.shape[0])


def _checked_vocabulary(folder: Path, rows: int, name: str, required: bool) -> dict[str, int] | None:
    path = folder / name
    if not path.is_file():
        if required:
            raise ValueError(f"{folder}: {name} is missing (the architecture has this embedding)")
        return None
    vocabulary = read_vocabulary(path)
    if vocabulary and (max(vocabulary.values()) >= rows):
        raise ValueError(f"{path}: ids up to {max(vocabulary.values())}, the embedding table has {rows} rows")
    return vocabulary


def load_elmoformanylangs(folder: str | Path, precision: str = "fp32", device: str | None = "cpu"
                          ) -> ElmoForManyLangsBiLM:
    """An ELMoForManyLangs folder -> an ``ElmoForManyLangsBiLM`` in eval mode on ``device``, computing
    in ``precision`` (as ``registry.load_bilm_from_files``), with ``.checksum`` (of every file that
    changes its numbers), ``.source`` (encoder.pkl) and ``.options_source`` (the architecture).
    ``ValueError``, one line, for what it cannot read; shapes are checked before the model is built."""
    folder = Path(folder)
    target = check_device(device, "device")
    architecture, source = read_architecture(folder)
    embedder_path, encoder_path = folder / ELMOFORMANYLANGS_TOKEN_EMBEDDER, folder / ELMOFORMANYLANGS_ENCODER
    for path in (embedder_path, encoder_path):
        if not path.is_file():
            raise ValueError(f"{folder}: {path.name} is missing")
    embedder_state, encoder_state = _load_state(embedder_path), _load_state(encoder_path)
    char_rows = _table_rows(embedder_state, "char_emb_layer.embedding.weight", embedder_path)
    config, word_dim = architecture_config(architecture, source, char_rows)
    word_rows = _table_rows(embedder_state, "word_emb_layer.embedding.weight", embedder_path) if word_dim else 0
    chars = _checked_vocabulary(folder, char_rows, ELMOFORMANYLANGS_CHAR_VOCABULARY, True)
    words = _checked_vocabulary(folder, word_rows, ELMOFORMANYLANGS_WORD_VOCABULARY, word_dim > 0) if word_dim else None
    vocabulary = ElmoForManyLangsVocabulary(chars, words, config.char_cnn.max_characters_per_token)
    model = ElmoForManyLangsBiLM(config, vocabulary, char_rows, word_rows, word_dim)
    with torch.no_grad():
        _fill_token_embedder(model, embedder_state, embedder_path)
        _fill_encoder(model, encoder_state, encoder_path)
    model.to(target).eval()
    model.source, model.options_source = str(encoder_path), source
    model.set_precision(resolve_precision(precision, target))
    files = [folder / ELMOFORMANYLANGS_CONFIG, *([Path(source)] if Path(source).is_file() else []),
             folder / ELMOFORMANYLANGS_CHAR_VOCABULARY, *([folder / ELMOFORMANYLANGS_WORD_VOCABULARY] if words else []),
             embedder_path, encoder_path]
    stamp_loaded_weights(model, folder_checksum(files))
    return model
