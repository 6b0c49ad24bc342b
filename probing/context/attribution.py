"""Context attribution: which words of a sentence move one token's vector, layer by layer.

    >>> from probing.context.attribution import attribute_context
    >>> r = attribute_context("elmo-mini", "We pulled the canoe onto the muddy bank of the river", "bank",
    ...                       reference="They fished from the grassy bank of the stream")
    >>> r.leave_one_out[2]      # (T,): how far each word's removal moves "bank" in layer 2

Two measures, one bar per word and layer:

- **leave one out**: replace word k by ``<UNK>`` (the biLM reads characters, so ``<UNK>`` is a
  word it has no context for), run the biLM again and measure how far the target token's vector
  moved: ``1 - cos(v_l(target), v_l'(target))``. Layer 0 is context-free, so its row is zero
  (a check); the target's own column is nan (replacing it changes the token, not its context).
- **gradient x input**: the similarity ``cos(v_l(target), r_l)`` to a reference occurrence ``r``
  (the same word in another sentence, e.g. a river bank) differentiated with respect to every
  word's context-free input vector x_k (the character CNN's output), summed over dimensions:
  ``sum_d x_k[d] * d cos / d x_k[d]``. Positive: word k pulls the token towards the reference
  sense; negative: away. The target's own column is its own contribution.

A model is used through a small encoder interface (``embed(tokens) -> x (T, P)``,
``contextualize(x, tokens) -> L + 1 layers (T, D)``): ``BiLMEncoder`` wraps the workbench's biLM,
and a test can pass a toy encoder whose answer is known.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Protocol, Sequence

import numpy as np
import torch

from elmo_model import BiLM, load_bilm
from elmo_model.bilm import lstm_gradient
from elmo_model.bilm.char_ids import model_token_ids
from elmo_model.text.tokenizer import tokenize_words

UNK = "<UNK>"


class TokenEncoder(Protocol):
    def embed(self, tokens: Sequence[str]) -> torch.Tensor:
        """Context-free input vectors of the tokens, (T, P)."""

    def contextualize(self, x: torch.Tensor, tokens: Sequence[str]) -> list[torch.Tensor]:
        """Input vectors (T, P) -> every layer, a list of (T, D) tensors (layer 0 first)."""


class BiLMEncoder:
    """The workbench's ``BiLM`` split at its token layer: ``embed`` runs the character CNN,
    ``contextualize`` the two LSTM stacks (with ``<S>``/``</S>`` added around the sentence), so
    gradients reach each word's input vector. Layers as ``BiLM.forward``: layer 0 is [x; x]."""

    def __init__(self, model) -> None:
        self.model = model.eval()

    def _ids(self, tokens: Sequence[str]) -> tuple[torch.Tensor, torch.Tensor]:
        char_ids = model_token_ids(self.model, [list(tokens)]).to(self.model.device)  # where the model is
        mask = (char_ids > 0).any(dim=-1)
        return self.model.add_boundaries(char_ids, mask)

    def embed(self, tokens: Sequence[str]) -> torch.Tensor:
        ids, _ = self._ids(tokens)
        return self.model.token_embedder(ids)[0, 1: len(tokens) + 1]

    def contextualize(self, x: torch.Tensor, tokens: Sequence[str]) -> list[torch.Tensor]:
        ids, mask = self._ids(tokens)
        with torch.no_grad():
            boundaries = self.model.token_embedder(ids)[0]  # <S> and </S> vectors, (T + 2, P)
        full = torch.cat([boundaries[:1], x, boundaries[-1:]]).unsqueeze(0)  # (1, T + 2, P)
        fw, bw, _ = self.model.encode(full, mask)
        T = len(tokens)
        return [torch.cat([x, x], dim=-1)] + [torch.cat([f[0, 1:T + 1], b[0, 1:T + 1]], dim=-1) for f, b in zip(fw, bw)]


@dataclass(frozen=True)
class AttributionResult:
    """Per layer and word, how much each context word moves ``tokens[target]``.

    - ``leave_one_out`` (n_layers, T): ``1 - cos`` between the target's vector and its vector with
      word k replaced by ``<UNK>`` (target column nan).
    - ``gradient_x_input`` (n_layers, T): gradient x input of ``cos(v_l(target), r_l)``; empty
      without a reference.
    - ``similarity`` (n_layers,): that cosine to the reference, per layer (empty without one).
    - ``reference_tokens``, ``reference_target``: the reference occurrence.
    """

    tokens: tuple[str, ...]
    target: int
    leave_one_out: np.ndarray
    gradient_x_input: np.ndarray
    similarity: np.ndarray
    reference_tokens: tuple[str, ...] = ()
    reference_target: int | None = None

    @property
    def n_layers(self) -> int:
        return self.leave_one_out.shape[0]

    def top_words(self, measure: str = "leave_one_out", k: int = 3) -> list[list[tuple[str, float]]]:
        """Per layer, the ``k`` context words with the largest ``measure`` (the target left out)."""
        values = getattr(self, measure)
        out = []
        for row in values:
            order = [i for i in np.argsort(-np.nan_to_num(row, nan=-np.inf)) if i != self.target][:k]
            out.append([(self.tokens[i], float(row[i])) for i in order])
        return out

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, AttributionResult):
            return NotImplemented
        return self.to_json() == other.to_json()

    def to_json(self) -> str:
        rows = lambda a: [[None if not np.isfinite(v) else float(v) for v in r] for r in np.atleast_2d(a)] \
            if np.size(a) else []  # noqa: E731
        return json.dumps({"tokens": list(self.tokens), "target": self.target,
                           "leave_one_out": rows(self.leave_one_out), "gradient_x_input": rows(self.gradient_x_input),
                           "similarity": [float(v) for v in self.similarity],
                           "reference_tokens": list(self.reference_tokens), "reference_target": self.reference_target})

    @classmethod
    def from_json(cls, text: str) -> "AttributionResult":
        d = json.loads(text)
        arr = lambda rows: np.array([[np.nan if v is None else v for v in r] for r in rows], dtype=np.float64)  # noqa: E731
        return cls(tuple(d["tokens"]), int(d["target"]), arr(d["leave_one_out"]), arr(d["gradient_x_input"]),
                   np.array(d["similarity"], dtype=np.float64), tuple(d["reference_tokens"]), d["reference_target"])


def _cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.cosine_similarity(a, b, dim=-1, eps=1e-12)


def leave_one_out(encoder: TokenEncoder, tokens: Sequence[str], target: int, replacement: str = UNK) -> np.ndarray:
    """(n_layers, T): ``1 - cos(v_l(target), v_l(target) with word k replaced by replacement)``;
    the target's own column is nan."""
    tokens = list(tokens)
    with torch.no_grad():
        base = [layer[target] for layer in encoder.contextualize(encoder.embed(tokens), tokens)]
        out = np.full((len(base), len(tokens)), np.nan)
        for k in range(len(tokens)):
            if k == target:
                continue
            changed = tokens[:k] + [replacement] + tokens[k + 1:]
            layers = encoder.contextualize(encoder.embed(changed), changed)
            for j, (v, layer) in enumerate(zip(base, layers)):
                out[j, k] = float(1.0 - _cosine(v, layer[target]))
    return out


def gradient_x_input(encoder: TokenEncoder, tokens: Sequence[str], target: int, reference_tokens: Sequence[str],
                     reference_target: int) -> tuple[np.ndarray, np.ndarray]:
    """Gradient x input of ``cos(v_l(target), r_l)`` with respect to every word's input vector,
    (n_layers, T), and the cosines (n_layers,). ``r`` is ``reference_tokens[reference_target]``."""
    tokens, reference_tokens = list(tokens), list(reference_tokens)
    with torch.no_grad():
        reference = [layer[reference_target] for layer in
                     encoder.contextualize(encoder.embed(reference_tokens), reference_tokens)]
    x = encoder.embed(tokens).detach().requires_grad_(True)
    try:
        with torch.enable_grad():
            layers = encoder.contextualize(x, tokens)
            scores, sims = [], []
            for j, (layer, r) in enumerate(zip(layers, reference)):
                sim = _cosine(layer[target], r)
                (grad,) = torch.autograd.grad(sim, x, retain_graph=j + 1 < len(layers), allow_unused=True)
                grad = torch.zeros_like(x) if grad is None else grad
                scores.append((grad * x).sum(-1).detach().cpu().numpy().astype(np.float64))
                sims.append(float(sim.detach()))
            layers = sim = None  # the graph, and with it the time loops' buffers, goes back now
    finally:
        # a page's one attribution is not a training run: the buffers kept for the next step go back
        lstm_gradient.release_workspace()
    return np.stack(scores), np.array(sims)


def _target_index(tokens: Sequence[str], target: int | str, what: str) -> int:
    if isinstance(target, str):
        folded = [t.lower() for t in tokens]
        if target.lower() not in folded:
            raise ValueError(f"{what}: the word {target!r} is not among its tokens {list(tokens)}")
        return folded.index(target.lower())
    if not 0 <= int(target) < len(tokens):
        raise ValueError(f"{what}: target index {target} is outside 0..{len(tokens) - 1}")
    return int(target)


def _tokens(text: str | Sequence[str]) -> list[str]:
    if isinstance(text, str):
        return list(tokenize_words(text))
    return list(text)


def attribute_context(model, sentence: str | Sequence[str], target: int | str,
                      reference: str | Sequence[str] | None = None, reference_target: int | str | None = None,
                      replacement: str = UNK) -> AttributionResult:
    """Both attributions for ``sentence``'s token ``target`` (an index, or a word: its first
    occurrence). ``model``: a ``BiLM``, a shipped name, or a ``TokenEncoder``. ``reference``: a
    sentence holding the reference occurrence (``reference_target``, default the same word as the
    target); without one only leave-one-out is computed. Sentences given as text are tokenised by
    the workbench's tokenizer."""
    if not (hasattr(model, "embed") and hasattr(model, "contextualize")):
        model = BiLMEncoder(model if isinstance(model, BiLM) else load_bilm(model))
    tokens = _tokens(sentence)
    if not tokens:
        raise ValueError("the sentence has no tokens")
    t = _target_index(tokens, target, "sentence")
    loo = leave_one_out(model, tokens, t, replacement)
    gxi, sims, ref_tokens, ref_t = np.zeros((0, 0)), np.zeros(0), (), None
    if reference is not None:
        ref_tokens = _tokens(reference)
        ref_t = _target_index(ref_tokens, tokens[t] if reference_target is None else reference_target, "reference")
        gxi, sims = gradient_x_input(model, tokens, t, ref_tokens, ref_t)
    return AttributionResult(tuple(tokens), t, loo, gxi, sims, tuple(ref_tokens), ref_t)


__all__ = ["UNK", "AttributionResult", "BiLMEncoder", "TokenEncoder", "attribute_context", "gradient_x_input",
           "leave_one_out"]
