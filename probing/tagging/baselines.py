"""What a probe's score is compared with: trivial taggers, control tasks, a random biLM, the paper.

- ``MajorityTagger``: every token gets the most frequent training label.
- ``WordMajorityTagger``: the most frequent training label of the word type; the overall
  majority label for words not seen in training.
- ``ControlTask`` (Hewitt & Liang 2019): every word type gets one random label, drawn from the
  task's training label distribution. A probe that scores well on the control task memorises
  word identity rather than reading the property from the representation; selectivity =
  task accuracy - control accuracy. The label of a type is a function of (seed, word) alone
  (a sha256 of both, mapped through the label distribution's inverse CDF), so it is the same in
  every split and every slice, whatever other words are present.
- ``random_bilm``: a biLM of the same architecture with seeded random weights (PyTorch's
  default initialisation): how much of a probe's score the architecture gives for free.
- ``REFERENCE_NUMBERS``: Peters et al. (2018)'s figures quoted in docs/design.md.

The taggers take words (strings), not feature matrices, so scikit-learn's estimator checks
(which feed numeric 2-d arrays) do not apply to them; they still follow its conventions:
``fit(words, labels)``, ``predict(words)``, learned attributes ending in ``_``.
"""

from __future__ import annotations

import hashlib
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
import torch

from elmo_model import BiLM, ElmoConfig
from elmo_model.bilm import compile_engine
from elmo_model.bilm.identity import weights_digest
from probing.engine.envelope import JsonDataclass


def _most_common(counter: Counter) -> str:
    """The most frequent label; ties go to the label that sorts first (deterministic)."""
    best = max(counter.values())
    return min(label for label, count in counter.items() if count == best)


class MajorityTagger:
    """Predicts the most frequent training label for every token. Learned: ``label_``,
    ``classes_``."""

    def fit(self, words: Sequence[str], labels: Sequence[str]) -> "MajorityTagger":
        """``words`` and ``labels``: flat, one per training token."""
        if len(words) != len(labels) or not labels:
            raise ValueError(f"need one label per word and at least one: {len(words)} words, {len(labels)} labels")
        counts = Counter(labels)
        self.classes_ = np.array(sorted(counts))
        self.label_ = _most_common(counts)
        return self

    def predict(self, words: Sequence[str]) -> np.ndarray:
        """(n,) labels."""
        return np.full(len(words), self.label_, dtype=object)


class WordMajorityTagger:
    """Predicts each word type's most frequent training label; unseen words get the overall
    majority label. ``lowercase``: match word types case-insensitively.
    Learned: ``lexicon_`` (word -> label), ``default_``, ``classes_``."""

    def __init__(self, lowercase: bool = False) -> None:
        self.lowercase = lowercase

    def _key(self, word: str) -> str:
        return word.lower() if self.lowercase else word

    def fit(self, words: Sequence[str], labels: Sequence[str]) -> "WordMajorityTagger":
        """``words`` and ``labels``: flat, one per training token."""
        if len(words) != len(labels) or not labels:
            raise ValueError(f"need one label per word and at least one: {len(words)} words, {len(labels)} labels")
        per_word: dict[str, Counter] = defaultdict(Counter)
        for word, label in zip(words, labels):
            per_word[self._key(word)][label] += 1
        self.lexicon_ = {word: _most_common(counts) for word, counts in per_word.items()}
        self.default_ = _most_common(Counter(labels))
        self.classes_ = np.array(sorted(set(labels)))
        return self

    def predict(self, words: Sequence[str]) -> np.ndarray:
        """(n,) labels."""
        return np.array([self.lexicon_.get(self._key(w), self.default_) for w in words], dtype=object)


class ControlTask:
    """Hewitt & Liang (2019) control labels: one random label per word type, drawn from the
    training label distribution, fixed by ``seed``.

    ``fit(labels)`` learns the distribution (``classes_``, ``probabilities_``);
    ``labels(words)`` gives each word its control label (same word, same label, any split)."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def fit(self, labels: Iterable[str]) -> "ControlTask":
        counts = Counter(labels)
        if not counts:
            raise ValueError("ControlTask needs at least one training label")
        self.classes_ = np.array(sorted(counts))
        total = sum(counts.values())
        self.probabilities_ = np.array([counts[c] / total for c in self.classes_])
        self._cdf = np.cumsum(self.probabilities_)
        self._cdf[-1] = 1.0
        self._cache: dict[str, str] = {}
        return self

    def _uniform(self, word: str) -> float:
        digest = hashlib.sha256(f"{self.seed}\x00{word}".encode("utf-8")).digest()
        return int.from_bytes(digest[:8], "big") / 2.0 ** 64  # in [0, 1)

    def label(self, word: str) -> str:
        """The control label of one word type."""
        label = self._cache.get(word)
        if label is None:
            index = int(np.searchsorted(self._cdf, self._uniform(word), side="right"))
            label = self._cache[word] = str(self.classes_[min(index, len(self.classes_) - 1)])
        return label

    def labels(self, words: Iterable[str]) -> np.ndarray:
        """(n,) control labels, one per word."""
        return np.array([self.label(w) for w in words], dtype=object)


def random_bilm(config: ElmoConfig, seed: int = 0, precision: str = "fp32") -> BiLM:
    """A biLM of ``config``'s architecture with random weights (PyTorch's default
    initialisation) drawn from ``seed``; the global torch RNG is left as it was. ``checksum``
    is the sha256 of its parameters (the weights part of its identity in activation caches),
    ``name`` says what it is.
    ``precision``: its matrix products' (``BiLM.set_precision``); a baseline computes in the
    precision of the model it stands beside, so the two differ only in their weights."""
    with compile_engine.RNG_LOCK, torch.random.fork_rng(devices=[]):  # no compile rewinds the RNG meanwhile
        torch.manual_seed(seed)
        model = BiLM(config)
    model.eval()
    model.checksum = weights_digest(model)
    model.name = f"random-init (seed {seed})"
    return model.set_precision(precision)


@dataclass(frozen=True)
class ReferenceNumber(JsonDataclass):
    """A published figure to print beside ours. ``value`` in [0, 1]; ``layer`` None for a
    whole system; ``note`` says how the setting differs from the workbench's."""

    task: str
    system: str
    layer: int | None
    value: float
    metric: str
    source: str
    note: str


_PETERS = "Peters et al. (2018), Table 6"
_PTB = "PTB WSJ test set with a linear classifier on full-size ELMo (not EWT, not this model)"
REFERENCE_NUMBERS: tuple[ReferenceNumber, ...] = (
    ReferenceNumber("pos", "biLM", 1, 0.973, "accuracy", _PETERS, _PTB),
    ReferenceNumber("pos", "biLM", 2, 0.968, "accuracy", _PETERS, _PTB),
    ReferenceNumber("pos", "CoVe", 1, 0.933, "accuracy", _PETERS, _PTB),
    ReferenceNumber("pos", "CoVe", 2, 0.928, "accuracy", _PETERS, _PTB),
    ReferenceNumber("pos", "Collobert et al. (2011)", None, 0.973, "accuracy", _PETERS, "PTB WSJ, a full tagger"),
    ReferenceNumber("pos", "Ma & Hovy (2016)", None, 0.976, "accuracy", _PETERS, "PTB WSJ, a full tagger"),
    ReferenceNumber("pos", "Ling et al. (2015)", None, 0.978, "accuracy", _PETERS, "PTB WSJ, a full tagger"),
)
"""Every published figure docs/design.md quotes for a task of the suite (none for chunking)."""


def reference_numbers(task: str) -> list[ReferenceNumber]:
    """The published figures for ``task`` ("pos"; the PTB tagset, as EWT XPOS). Empty for
    tasks the paper has no per-layer figure for (chunking, UPOS)."""
    return [r for r in REFERENCE_NUMBERS if r.task == task]


__all__ = ["ControlTask", "MajorityTagger", "REFERENCE_NUMBERS", "ReferenceNumber", "WordMajorityTagger",
           "random_bilm", "reference_numbers"]
