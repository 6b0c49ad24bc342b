"""The word vocabulary of a trained biLM's softmax (``vocab.txt``, bilm-tf's format).

One word per line, most frequent first after the three specials ``</S>``, ``<S>``, ``<UNK>``
(bilm-tf's order). Only the trainer's softmax uses it: the biLM itself reads characters and
embeds any word.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence

from ..plumbing.io_safety import atomic_write_text

EOS, BOS, UNK = "</S>", "<S>", "<UNK>"
SPECIALS = (EOS, BOS, UNK)


class Vocabulary:
    """Word <-> id. Unknown words map to ``<UNK>``."""

    def __init__(self, words: Sequence[str]) -> None:
        if tuple(words[:3]) != SPECIALS:
            raise ValueError(f"a vocabulary starts with {SPECIALS}, got {tuple(words[:3])}")
        self.words = list(words)
        self.index = {w: i for i, w in enumerate(self.words)}
        if len(self.index) != len(self.words):
            raise ValueError("vocabulary has repeated words")
        self.eos, self.bos, self.unk = 0, 1, 2

    def __len__(self) -> int:
        return len(self.words)

    def id(self, word: str) -> int:
        """The word's id, ``<UNK>``'s for unknown words."""
        return self.index.get(word, self.unk)

    def ids(self, words: Iterable[str]) -> list[int]:
        return [self.index.get(w, self.unk) for w in words]

    @classmethod
    def build(cls, counts: Counter, max_size: int, min_count: int = 1) -> "Vocabulary":
        """The ``max_size - 3`` most frequent words with at least ``min_count`` occurrences (ties by
        word, so the result does not depend on counting order) plus the specials."""
        ranked = sorted(((c, w) for w, c in counts.items() if c >= min_count and w not in SPECIALS),
                        key=lambda cw: (-cw[0], cw[1]))
        return cls(list(SPECIALS) + [w for _, w in ranked[: max(0, max_size - 3)]])

    def save(self, path: str | Path) -> None:
        """Write ``vocab.txt`` atomically."""
        atomic_write_text(path, "\n".join(self.words) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> "Vocabulary":
        """Read ``vocab.txt``."""
        words = Path(path).read_text(encoding="utf-8").split("\n")
        return cls([w for w in words if w])
