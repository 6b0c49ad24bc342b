"""TensorFlow Hub's ELMo module, as its tutorials call it: ``hub.Module(handle)``, ``hub.load(handle)``.

Code written for TF Hub changes its import and nothing else::

    # import tensorflow_hub as hub
    from elmo_model import hub

    elmo = hub.Module("https://tfhub.dev/google/elmo/3", trainable=True)
    out = elmo(["the cat is on the mat", "dogs are in the fog"], signature="default", as_dict=True)
    out["elmo"].shape                         # (2, 6, 1024): (batch, tokens, 2P)
    out["default"].numpy()                    # (2, 1024): the mean of "elmo" over each sentence's tokens

The handles ``https://tfhub.dev/google/elmo/1``, ``/2`` and ``/3`` mean elmo-original, the model
TF Hub served (read from the data root once ``python -m probing.data download elmo-original`` has
put it there); a model name (``"elmo-mini"``) or a model folder works too.

Outputs, as TF Hub's module gave them (B = batch, T = tokens, P = the LSTM projection, 512 for
elmo-original, 256 for elmo-mini; positions past a sentence's length are zero):

- ``word_emb`` (B, T, P): the character CNN's output, once (not the [x; x] layer 0 of ``ElmoEmbedder``);
- ``lstm_outputs1``, ``lstm_outputs2`` (B, T, 2P): the first and second biLSTM layers, [forward; backward];
- ``elmo`` (B, T, 2P): gamma * sum_j softmax(w)_j * layer_j over the three layers (layer 0 = [word_emb;
  word_emb]), w = 0 and gamma = 1 at the start, learned when ``trainable=True``;
- ``default`` (B, 2P): the mean of ``elmo`` over each sentence's tokens.

The biLM is the project's own (``load_bilm``) and stays frozen, as TF Hub's did: ``trainable=True``
makes the four mixing scalars (w and gamma, a ``ScalarMix``) trainable, nothing else. Each output
is a ``HubTensor``: a torch tensor whose ``.numpy()`` works even while it carries gradients.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import torch
from torch import nn

from .bilm.char_ids import model_token_ids
from .bilm.modules import BiLM, ScalarMix
from .models.registry import load_bilm

#: TF Hub's ELMo handles (versions 1-3 are the same network) -> the model they mean here
# tfhub.dev's address, and Kaggle's where tfhub.dev now redirects (both of its path forms)
TFHUB_ELMO = re.compile(r"^(?:https?://)?(?:www\.)?(?:tfhub\.dev/google/elmo/([123])"
                        r"|kaggle\.com/models/google/elmo/(?:frameworks/)?tensorflow1/"
                        r"(?:variations/)?elmo/(?:versions/)?([123]))/?(?:\?.*)?$", re.IGNORECASE)
HUB_MODEL = "elmo-original"
SIGNATURES = ("default", "tokens")
OUTPUTS = ("word_emb", "lstm_outputs1", "lstm_outputs2", "elmo", "default")


class HubTensor(torch.Tensor):
    """A torch tensor whose ``.numpy()`` also works while it requires grad (as TF's eager tensors)."""

    def numpy(self, *, force: bool = False) -> np.ndarray:  # noqa: ARG002 (torch's keyword, accepted)
        """The values as a NumPy array (detached, on the CPU)."""
        return torch.Tensor.numpy(self.detach().cpu().as_subclass(torch.Tensor))


def model_for_handle(handle: str | Path) -> str | Path:
    """A TF Hub ELMo handle -> ``"elmo-original"``; a model name or folder as it is. Raises
    ``ValueError`` for another tfhub.dev handle (this module serves ELMo only)."""
    text = str(handle).strip()
    if TFHUB_ELMO.match(text):
        return HUB_MODEL
    if "tfhub.dev" in text or "kaggle.com" in text:
        raise ValueError(f"hub handle {text!r}: only TF Hub's ELMo is served here (https://tfhub.dev/google/elmo/1, "
                         "/2 or /3, which mean elmo-original); give one of those, a model name or a model folder")
    return handle


def _as_text(value: Any, where: str) -> str:
    """A sentence or token as text; anything else (a token list, None, NaN, a number) is refused
    in one line naming ``where``, never embedded as its printed form."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple, np.ndarray)):
        raise ValueError(f"{where} is a token list, not a string: signature 'default' takes untokenised sentences "
                         "(one string each); token lists go to signature 'tokens'")
    raise ValueError(f"{where} is {value!r} ({type(value).__name__}), not a string: a missing value is not "
                     "embedded as a word; give text")


def _split_sentences(strings: Any) -> list[list[str]]:
    """Signature ``default``: a 1-D sequence of untokenised sentences -> token lists, split on
    spaces (as TF Hub's ``tf.string_split``: empty pieces dropped)."""
    if isinstance(strings, (str, bytes)):
        raise ValueError("signature 'default' takes a 1-D list (or NumPy array) of sentences, got one string; "
                         "wrap it in a list")
    array = np.asarray(strings, dtype=object)
    if array.ndim != 1:
        raise ValueError(f"signature 'default' takes a 1-D sequence of sentences, got shape {array.shape}; "
                         "tokenised input goes to signature 'tokens'")
    return [[t for t in _as_text(s, f"signature 'default': sentence {i}").split(" ") if t]
            for i, s in enumerate(array)]


def _token_lists(inputs: Any) -> tuple[list[list[str]], int]:
    """Signature ``tokens``: ``{"tokens": (B, W) str padded with "", "sequence_len": (B,) ints}``
    -> (token lists, W)."""
    if not isinstance(inputs, Mapping) or set(inputs) != {"tokens", "sequence_len"}:
        got = sorted(inputs) if isinstance(inputs, Mapping) else type(inputs).__name__
        raise ValueError(f"signature 'tokens' takes a dict with keys 'tokens' and 'sequence_len', got {got}")
    tokens = np.asarray(inputs["tokens"], dtype=object)
    lengths = np.asarray(inputs["sequence_len"])
    if tokens.ndim != 2:
        raise ValueError(f"signature 'tokens': 'tokens' must be 2-D (batch, max tokens), got shape {tokens.shape}")
    if lengths.shape != (tokens.shape[0],) or not np.issubdtype(lengths.dtype, np.integer):
        raise ValueError(f"signature 'tokens': 'sequence_len' must be {tokens.shape[0]} integers (one per row of "
                         f"'tokens'), got shape {lengths.shape} of {lengths.dtype}")
    if len(lengths) and (lengths.min() < 0 or lengths.max() > tokens.shape[1]):
        raise ValueError(f"signature 'tokens': 'sequence_len' values must lie in 0..{tokens.shape[1]} (the width "
                         f"of 'tokens'), got {lengths.min()}..{lengths.max()}")
    return [[_as_text(t, f"signature 'tokens': token {j} of row {i}") for j, t in enumerate(row[:n])]
            for i, (row, n) in enumerate(zip(tokens, lengths))], tokens.shape[1]


def _start_from_module_mix(mix: ScalarMix, bilm: BiLM) -> None:
    """A model converted from a TF Hub module (``elmo_model.models.tfhub``) keeps the module's trained
    mix on its card (``tfhub_mix``): ``elmo`` starts from it, as the module's did. Other models: w = 0, gamma = 1."""
    card = Path(str(getattr(bilm, "source", "") or "")).parent / "model_card.json"
    try:
        saved = json.loads(card.read_text(encoding="utf-8")).get("tfhub_mix") if card.is_file() else None
        weights, gamma = [float(w) for w in saved["weights"]], float(saved["gamma"])
    except (OSError, ValueError, AttributeError, TypeError, KeyError):
        return  # no card, or no mix on it
    if len(weights) == mix.n_layers:
        with torch.no_grad():
            mix.scalar_parameters.copy_(torch.tensor(weights))
            mix.gamma.fill_(gamma)


class Module(nn.Module):
    """TF Hub's ELMo module: ``Module(handle, trainable=False)``, then
    ``module(inputs, signature="default", as_dict=False)``.

    ``handle``: a TF Hub ELMo URL (elmo-original), a model name, a model folder or a loaded
    ``BiLM``. ``trainable``: learn the mix of ``elmo`` (its three weights and gamma). ``precision``
    and ``device`` as ``load_bilm``'s; ``data_root``: where published models are read from."""

    def __init__(self, handle: str | Path | BiLM, trainable: bool = False, *, precision: str = "fp32",
                 device: str = "cpu", data_root: str | Path | None = None) -> None:
        super().__init__()
        if isinstance(handle, BiLM):
            bilm = handle  # the caller's: its requires_grad and train/eval mode stay theirs
        else:
            bilm = load_bilm(model_for_handle(handle), precision, device, data_root)
            for parameter in bilm.parameters():  # loaded here: frozen, as TF Hub's module is
                parameter.requires_grad = False
            bilm.eval()
        self.bilm = bilm
        self.trainable = trainable
        self.mix = ScalarMix(bilm.config.n_output_layers, trainable=trainable).to(bilm.device)
        _start_from_module_mix(self.mix, bilm)

    @property
    def signatures(self) -> dict[str, Callable[[Any], dict[str, HubTensor]]]:
        """TF2's ``hub.load(handle).signatures``: ``{"default": f, "tokens": f}``, each ``f(inputs)``
        returning the outputs as a dict."""
        return {name: functools.partial(self, signature=name, as_dict=True) for name in SIGNATURES}

    @property
    def variables(self) -> list[nn.Parameter]:
        """The mix's parameters (w, gamma), as TF Hub lists its variables."""
        return list(self.mix.parameters())

    def forward(self, inputs: Any, signature: str = "default", as_dict: bool = False) -> Any:
        """inputs -> ``{"word_emb", "lstm_outputs1", "lstm_outputs2", "elmo", "default"}`` (as_dict),
        else ``default`` (B, 2P). Signature ``default``: a 1-D list or array of sentences (split on
        spaces); ``tokens``: ``{"tokens": (B, W) str, "sequence_len": (B,) ints}``."""
        if signature == "default":
            sentences, width = _split_sentences(inputs), None
        elif signature == "tokens":
            sentences, width = _token_lists(inputs)
        else:
            raise ValueError(f"signature {signature!r}: this module has {' and '.join(map(repr, SIGNATURES))}")
        outputs = self.embed(sentences, width)
        return outputs if as_dict else outputs["default"]

    def embed(self, sentences: Sequence[Sequence[str]], width: int | None = None) -> dict[str, HubTensor]:
        """Token lists -> the five outputs, each (B, W, ...) with W = ``width`` or the longest sentence."""
        config = self.bilm.config
        batch = len(sentences)
        width = max((len(s) for s in sentences), default=0) if width is None else width
        lengths = torch.tensor([len(s) for s in sentences], dtype=torch.long, device=self.bilm.device)
        if batch and max(lengths.tolist(), default=0) > 0:
            training = self.bilm.training
            try:  # the biLM is frozen, as TF Hub's was: no gradient, no dropout (a caller's mode is restored)
                self.bilm.eval()
                with torch.no_grad():
                    out = self.bilm(model_token_ids(self.bilm, sentences).to(self.bilm.device))
            finally:
                self.bilm.train(training)
            layers = [layer.float() for layer in out.layers]
            mask = out.mask
        else:  # no tokens at all: every output is zeros
            layers = [torch.zeros(batch, 0, config.output_dim, device=self.bilm.device)] * config.n_output_layers
            mask = torch.zeros(batch, 0, dtype=torch.bool, device=self.bilm.device)
        elmo = self.mix(layers) * mask.unsqueeze(-1)  # (B, T, 2P); zero past each sentence
        default = elmo.sum(dim=1) / lengths.clamp(min=1).unsqueeze(-1).to(elmo.dtype)  # (B, 2P)
        padded = {"word_emb": layers[0][..., : config.lstm.projection_dim],
                  **{f"lstm_outputs{j}": layers[j] for j in range(1, len(layers))}, "elmo": elmo}
        outputs = {name: _pad_to(value, width) for name, value in padded.items()}
        outputs["default"] = default
        return {name: value.as_subclass(HubTensor) for name, value in outputs.items()}


def _pad_to(x: torch.Tensor, width: int) -> torch.Tensor:
    """(B, T, D) -> (B, width, D), zeros appended (``width`` >= T)."""
    if x.shape[1] == width:
        return x
    return torch.cat([x, x.new_zeros(x.shape[0], width - x.shape[1], x.shape[2])], dim=1)


def load(handle: str | Path | BiLM, **kwargs: Any) -> Module:
    """TF2's ``hub.load(handle)``: the module, not trainable; ``.signatures["default"](inputs)``
    returns the outputs as a dict, and calling it works as ``Module``'s."""
    return Module(handle, trainable=False, **kwargs)
