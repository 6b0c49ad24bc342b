"""``Elmo`` and ``batch_to_ids`` with the signatures and return values of ``allennlp.modules.elmo``.

Code written against AllenNLP changes one import line::

    # from allennlp.modules.elmo import Elmo, batch_to_ids
    from elmo_model import Elmo, batch_to_ids

    elmo = Elmo(options_file, weight_file, num_output_representations=2, dropout=0)
    character_ids = batch_to_ids([["First", "sentence", "."], ["Another", "."]])  # (B, T, 50)
    out = elmo(character_ids)
    out["elmo_representations"]   # 2 tensors (B, T, 2P): one learned scalar mix of the layers each
    out["mask"]                   # (B, T) bool

Shapes: B = batch, T = tokens (T + 2 with ``keep_sentence_boundaries``: ``<S>`` and ``</S>``
included), L = LSTM layers, P = LSTM projection dim (2P = 1024 for the original ELMo, 512 for
elmo-mini).

One difference, on purpose: the biLM is stateless by default (every sentence starts from a zero
LSTM state, so its vectors do not depend on the sentences batched before it). AllenNLP carries
each batch row's final state into the next batch; ``stateful=True`` does the same here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import torch
from torch import nn

from .bilm.char_ids import batch_to_char_ids, bos_char_ids, eos_char_ids, model_token_ids
from .bilm.config import number_problem, show_value
from .bilm.modules import BiLM, ScalarMix
from .bilm.precision import resolve_precision
from .models.published import PUBLISHED_MODELS, published_name
from .models.registry import load_bilm, load_bilm_from_files


def batch_to_ids(batch: Sequence[Sequence[str]]) -> torch.Tensor:
    """Tokenised sentences -> character ids, LongTensor (B, T, 50), as AllenNLP's ``batch_to_ids``.

    Each token: begin-of-word (259), its UTF-8 bytes + 1, end-of-word (260), then padding (261)
    to 50; longer tokens keep their first 48 bytes. Shorter sentences are padded with all-zero
    tokens. ``"<S>"`` / ``"</S>"`` become the sentence boundary words (259, 257 or 258, 260,
    261, ...). No boundary words are added: ``Elmo`` adds them itself.
    """
    if isinstance(batch, str) or any(isinstance(sentence, str) for sentence in batch):
        raise TypeError("batch_to_ids takes a list of token lists, e.g. [['Hello', 'world', '.']]")
    return batch_to_char_ids(batch)


def _as_path(value: str | Path, what: str) -> Path:
    path = Path(value).expanduser()
    if not path.is_file():
        raise ValueError(f"{what} {str(value)!r}: no such file (give local paths to options.json and the hdf5 "
                         f"weight file, or a model's name or folder: {', '.join(('elmo-mini', *PUBLISHED_MODELS))})")
    return path


def _is_url(text: str) -> bool:
    return "://" in text


def _name_of_pair(options_file: str | Path, weight_file: str | Path | None) -> str | None:
    """The published model an AllenNLP pair (URLs, or its file names not found on disk) means,
    or None when the pair is files on disk or names no published model."""
    options_text = str(options_file)
    name = published_name(options_text)
    if name is None or (weight_file is None and not _is_url(options_text) and Path(options_text).is_file()):
        return None
    if weight_file is not None:
        weight_text = str(weight_file)
        if published_name(weight_text) != name:
            return None
        if not _is_url(options_text) and Path(options_text).is_file() and Path(weight_text).is_file():
            return None  # AllenNLP's files on disk, by their own names: opened as files
    return name


def bilm_from_arguments(model: str | Path | BiLM, weight_file: str | Path | None, precision: str | None,
                        device: str | torch.device = "cpu", data_root: str | Path | None = None,
                        cache_dir: str | Path | None = None, who: str = "Elmo") -> BiLM:
    """What ``Elmo`` and ``ElmoEmbedder`` run, on ``device``: a ``BiLM`` (moved there; its own
    precision kept when ``precision`` is None); a model's name or folder (``load_bilm``, looked up
    in ``data_root``'s models, then the models home ``cache_dir``); or AllenNLP's
    (options_file, weight_file) pair: two local files, or AllenNLP's URLs or file names, which
    mean the published model of that name (loaded from the models home; when it is not there, one
    line with the command that fetches it). ``precision`` None means "fp32" for anything loaded."""
    if isinstance(model, BiLM):
        if weight_file is not None:
            raise ValueError(f"{who}: weight_file goes with an options file, not with a loaded BiLM")
        model.to(device)
        if precision is not None:
            model.set_precision(resolve_precision(precision, device))
        return model
    precision = precision or "fp32"
    name = _name_of_pair(model, weight_file)
    if name is not None:
        return load_bilm(name, precision, device=str(device), data_root=data_root, cache_dir=cache_dir)
    if weight_file is not None:
        return load_bilm_from_files(_as_path(model, "options_file"), _as_path(weight_file, "weight_file"),
                                    precision, device=str(device))
    if _is_url(str(model)):
        raise ValueError(f"{who}: {str(model)!r} is no published ELMo's URL; download its files and give their "
                         "paths, or a folder holding options.json and weights.hdf5")
    return load_bilm(model, precision, device=str(device), data_root=data_root, cache_dir=cache_dir)


class Elmo(nn.Module):
    """ELMo representations: a pretrained biLM run once, then ``num_output_representations``
    learned scalar mixes of its L+1 layers, each followed by dropout.

    Arguments are AllenNLP's, in AllenNLP's order:

    - ``options_file``, ``weight_file``: the biLM's options.json and hdf5 weights (bilm-tf /
      AllenNLP layout, or this project's own). ``None`` for both when ``module`` is given.
      AllenNLP's URLs (or file names) of a published model mean that model, by its name here,
      read from the models home. ``options_file`` may also be a model's name or folder, with no
      weight file: ``Elmo("elmo-original", 2)``.
    - ``num_output_representations``: how many mixes (each with its own weights s_j and gamma).
    - ``requires_grad``: fine-tune the biLM's own weights too (default: frozen).
    - ``do_layer_norm``: layer-normalise each layer over the unmasked positions before mixing.
    - ``dropout``: applied to every output representation (training mode only).
    - ``vocab_to_cache``: words whose character-CNN vectors are computed once; ``forward`` then
      takes ``word_inputs`` (B, T) of indices into this list, 0 meaning padding (so put a padding
      word such as ``"@@PADDING@@"`` first).
    - ``keep_sentence_boundaries``: keep ``<S>`` and ``</S>`` in the output (T + 2 positions).
    - ``scalar_mix_parameters``: fixed pre-softmax mix weights, one per layer (L+1); given, the
      mixes (and gamma = 1) are not trained.
    - ``module``: an already loaded ``BiLM`` to use instead of the files.
    - ``stateful`` (this project's addition): carry the LSTM state from batch to batch as
      AllenNLP does; default ``False``, each sentence from a zero state.

    Keyword-only, this project's: ``precision`` (None: "fp32", AllenNLP's numbers; a ``module``
    keeps its own; "auto" or "bf16": bf16 matrix products where the device has bf16 units, about
    2.5-3x faster on the full-size model, at a cost of up to 7.5e-3 in the top layer on bilm-tf's
    replay against 8.3e-7 in fp32: docs/migrating-from-allennlp.md), ``data_root`` and
    ``cache_dir`` (where a model's name is looked up: ``data_root``'s ``models/`` first, then the
    models home, ``cache_dir`` or ``$ELMO_WORKBENCH_MODELS``).
    """

    def __init__(self, options_file: str | Path | None, weight_file: str | Path | int | None = None,
                 num_output_representations: int | None = None, requires_grad: bool = False,
                 do_layer_norm: bool = False, dropout: float = 0.5, vocab_to_cache: list[str] | None = None,
                 keep_sentence_boundaries: bool = False, scalar_mix_parameters: list[float] | None = None,
                 module: BiLM | None = None, stateful: bool = False, *, precision: str | None = None,
                 data_root: str | Path | None = None, cache_dir: str | Path | None = None) -> None:
        super().__init__()
        if isinstance(weight_file, int) and not isinstance(weight_file, bool):  # Elmo(name, 2)
            if num_output_representations is not None:
                raise ValueError("Elmo(name, num_output_representations, ...): give the arguments after the count "
                                 "by keyword (requires_grad=..., dropout=...)")
            weight_file, num_output_representations = None, weight_file
        if num_output_representations is None:
            raise ValueError("Elmo: num_output_representations is required, e.g. Elmo(options_file, weight_file, 2)")
        if isinstance(num_output_representations, bool) or not isinstance(num_output_representations, int) \
                or num_output_representations < 1:  # checked before the model is read
            raise ValueError(f"Elmo: num_output_representations must be at least 1, got {num_output_representations!r}")
        if number_problem(dropout, 0.0, 1.0) is not None:
            raise ValueError(f"Elmo: dropout = {show_value(dropout)}: {number_problem(dropout, 0.0, 1.0)}")
        if module is not None:
            if options_file is not None or weight_file is not None:
                raise ValueError("Elmo: pass options_file=None and weight_file=None when module is given")
            if not isinstance(module, BiLM):
                raise TypeError(f"Elmo: module must be an elmo_model.BiLM, got {type(module).__name__}")
            bilm = bilm_from_arguments(module, None, precision, module.device)
        elif options_file is None:
            raise ValueError("Elmo: give options_file and weight_file, a model's name or folder, or module=a BiLM")
        else:
            bilm = bilm_from_arguments(options_file, weight_file, precision, "cpu", data_root, cache_dir)
        n_layers = bilm.config.lstm.n_layers + 1
        if scalar_mix_parameters is not None and len(scalar_mix_parameters) != n_layers:
            raise ValueError(f"Elmo: scalar_mix_parameters has {len(scalar_mix_parameters)} values; this biLM has "
                             f"{n_layers} layers (the token layer and {n_layers - 1} LSTM layers)")
        bad = [show_value(w) for w in scalar_mix_parameters or () if number_problem(w) is not None]
        if bad:
            raise ValueError(f"Elmo: scalar_mix_parameters = {', '.join(bad)}: each must be a finite number")
        self._elmo_lstm = bilm
        bilm.stateful = stateful
        bilm.reset_states()
        self.requires_grad = requires_grad
        for parameter in bilm.parameters():
            parameter.requires_grad = requires_grad
        self._keep_sentence_boundaries = keep_sentence_boundaries
        self._dropout = nn.Dropout(p=dropout)
        self._scalar_mixes: list[ScalarMix] = []
        for k in range(num_output_representations):
            mix = ScalarMix(n_layers, do_layer_norm=do_layer_norm, initial_scalar_parameters=scalar_mix_parameters,
                            trainable=scalar_mix_parameters is None)
            self.add_module(f"scalar_mix_{k}", mix)  # AllenNLP's parameter names
            self._scalar_mixes.append(mix)
        # (V, P) character-CNN vectors of vocab_to_cache (row 0: padding); a buffer, so .to() moves it
        self.register_buffer("_word_vectors", None, persistent=False)
        if vocab_to_cache is not None:
            self._cache_words(list(vocab_to_cache))

    @property
    def bilm(self) -> BiLM:
        """The biLM underneath (``BiLM``)."""
        return self._elmo_lstm

    @property
    def stateful(self) -> bool:
        """Whether the LSTM state carries over from one batch to the next."""
        return self._elmo_lstm.stateful

    def get_output_dim(self) -> int:
        """Width of every representation: 2P."""
        return self._elmo_lstm.config.output_dim

    def reset_states(self) -> None:
        """Forget the carried-over LSTM state (stateful mode)."""
        self._elmo_lstm.reset_states()

    def _cache_words(self, words: list[str], batch_size: int = 512) -> None:
        vectors = []
        with torch.no_grad():
            for start in range(0, len(words), batch_size):
                ids = model_token_ids(self._elmo_lstm, [[w] for w in words[start : start + batch_size]])  # (n, 1, C)
                vectors.append(self._elmo_lstm.token_embedder(ids)[:, 0])
        width = self._elmo_lstm.config.lstm.projection_dim
        self._word_vectors = torch.cat(vectors) if vectors else torch.zeros(0, width)

    def _layers_from_words(self, word_inputs: torch.Tensor) -> tuple[list[torch.Tensor], torch.Tensor]:
        """word_inputs (B, T) -> L+1 layers (B, T+2, 2P) and the mask (B, T+2), with boundaries."""
        bilm = self._elmo_lstm
        if word_inputs.numel() and int(word_inputs.max()) >= len(self._word_vectors):
            raise IndexError(f"word_inputs holds index {int(word_inputs.max())}; vocab_to_cache has "
                             f"{len(self._word_vectors)} words")
        mask = word_inputs > 0
        chars = bilm.config.char_cnn.max_characters_per_token
        # the cached words stand in for the char CNN; <S> and </S> still go through it
        boundary_ids = torch.stack([torch.from_numpy(bos_char_ids(chars)), torch.from_numpy(eos_char_ids(chars))])
        with torch.set_grad_enabled(torch.is_grad_enabled() and self.requires_grad):
            bos, eos = bilm.token_embedder(boundary_ids.unsqueeze(0).to(word_inputs.device))[0]
        words = self._word_vectors[word_inputs] * mask.unsqueeze(-1)  # (B, T, P)
        batch, steps = word_inputs.shape
        lengths = mask.sum(dim=1)
        tokens = words.new_zeros(batch, steps + 2, words.shape[-1])
        tokens[:, 1 : steps + 1] = words
        tokens[:, 0] = bos
        tokens[torch.arange(batch, device=tokens.device), lengths + 1] = eos
        full_mask = torch.arange(steps + 2, device=mask.device).unsqueeze(0) < (lengths + 2).unsqueeze(1)
        with torch.set_grad_enabled(torch.is_grad_enabled() and self.requires_grad):
            fw, bw, finals = bilm.encode(tokens, full_mask, bilm._initial_states(batch, tokens))
        if bilm.stateful:
            bilm._store_states(finals)
        return [torch.cat([tokens, tokens], dim=-1)] + [torch.cat(pair, dim=-1) for pair in zip(fw, bw)], full_mask

    def forward(self, inputs: torch.Tensor, word_inputs: torch.Tensor | None = None) -> dict:
        """inputs (B, T, 50) character ids from ``batch_to_ids`` (or (B, ..., T, 50)) ->
        ``{"elmo_representations": [num_output_representations tensors (B, T, 2P)], "mask": (B, T) bool}``.

        ``word_inputs`` (B, T) (or (B, ..., T)), with ``vocab_to_cache``: indices of the cached
        words, used instead of the characters. With ``keep_sentence_boundaries`` T becomes T + 2.
        """
        if not isinstance(inputs, torch.Tensor):
            raise TypeError(f"Elmo: inputs must be a tensor of character ids from batch_to_ids, got "
                            f"{type(inputs).__name__}")
        original_shape = tuple(inputs.shape)
        if len(original_shape) < 3:
            raise ValueError(f"Elmo: inputs must be character ids (batch, tokens, 50), got shape {original_shape}")
        char_ids = inputs.reshape(-1, *original_shape[-2:]) if len(original_shape) > 3 else inputs
        original_word_shape = None
        if word_inputs is not None and self._word_vectors is not None:
            original_word_shape = tuple(word_inputs.shape)
            words = word_inputs.reshape(-1, original_word_shape[-1]) if len(original_word_shape) > 2 else word_inputs
            layers, mask_with_boundaries = self._layers_from_words(words)
        else:
            with torch.set_grad_enabled(torch.is_grad_enabled() and self.requires_grad):
                out = self._elmo_lstm(char_ids, keep_boundaries=True)
            layers, mask_with_boundaries = out.layers, out.mask
        if self._keep_sentence_boundaries:
            mask = mask_with_boundaries
        else:
            mask = mask_with_boundaries[:, 2:]  # token i is real iff i < n, i.e. position i + 2 < n + 2
        representations = []
        for mix in self._scalar_mixes:
            mixed = mix(layers, mask_with_boundaries)  # (B, T+2, 2P); layer norm sees <S> and </S>, as in AllenNLP
            if not self._keep_sentence_boundaries:
                mixed = mixed[:, 1:-1] * mask.unsqueeze(-1)  # drop <S>; zero </S> and the padding
            representations.append(self._dropout(mixed))
        shape = None
        if original_word_shape is not None and len(original_word_shape) > 2:
            shape = original_word_shape
        elif len(original_shape) > 3:
            shape = original_shape[:-1]
        if shape is not None:
            mask = mask.reshape(shape)
            representations = [r.reshape(*shape, -1) for r in representations]
        return {"elmo_representations": representations, "mask": mask}
