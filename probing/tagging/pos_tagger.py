"""A part-of-speech tag for every occurrence a teacher types: a bigram hidden Markov model over
Universal POS, counted from UD English-EWT's training file, so the Playground can say when sense
labels follow part of speech even where no WordNet key or "(noun)" label says so.

Counting is one pass (about a second), so nothing is kept on disk: the tagger is built on first
use in a process and kept for it (``tagger_for``). Emissions of a word seen in training are its
counts; an unseen word's come from its lower-cased suffix of three letters (then two, one), with
its capital and digit shape; transitions are add-one smoothed. Viterbi decoding over the sentence.
It tags English only; ``tagger_for`` returns None for a data root without EWT, and the Playground
then falls back to the labels and keys alone. Its accuracy on EWT's dev file is checked by
``tests/test_pos_tagger.py`` and written in docs/teaching.md. (In ``probing.tagging``: it reads EWT
with the room's CoNLL-U reader; ``probing.context`` may not import this room.)
"""

from __future__ import annotations

import math
import os
from collections import Counter, defaultdict
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from probing.tagging.tasks import read_conllu

START = "<s>"


def _shape(word: str) -> str:
    return ("C" if word[:1].isupper() else "c") + ("d" if any(ch.isdigit() for ch in word) else "")


def _suffixes(word: str) -> list[str]:
    low = word.lower()
    return [f"{_shape(word)}:{low[-n:]}" for n in (3, 2, 1) if len(low) >= n] + [f"{_shape(word)}:"]


class PosTagger:
    """``tag(tokens) -> [UPOS per token]``, from counts of (words, tags) sentences."""

    def __init__(self, sentences: Sequence[tuple[Sequence[str], Sequence[str]]]) -> None:
        self.emit: dict[str, Counter] = defaultdict(Counter)
        self.suffix: dict[str, Counter] = defaultdict(Counter)
        transitions: dict[str, Counter] = defaultdict(Counter)
        tag_counts: Counter = Counter()
        for words, tags in sentences:
            prev = START
            for word, tag in zip(words, tags):
                self.emit[word][tag] += 1
                transitions[prev][tag] += 1
                tag_counts[tag] += 1
                prev = tag
        for word, by_tag in self.emit.items():
            if sum(by_tag.values()) <= 2:  # rare words: what unseen words look like
                for key in _suffixes(word):
                    self.suffix[key].update(by_tag)
        self.tags = sorted(tag_counts)
        self.tag_counts = tag_counts
        n_tags = len(self.tags)
        self.log_transition = {prev: {tag: math.log((row[tag] + 1) / (sum(row.values()) + n_tags)) for tag in self.tags}
                               for prev, row in ((p, transitions[p]) for p in [START, *self.tags])}

    def _log_emission(self, word: str) -> dict[str, float]:
        """log P(word | tag) up to a constant per word: its own counts, else its suffix class's."""
        counts = self.emit.get(word) or self.emit.get(word.lower())
        if not counts:
            counts = next((self.suffix[k] for k in _suffixes(word) if self.suffix.get(k)), None) or self.tag_counts
        total = sum(counts.values())
        return {tag: math.log(counts[tag] / total / self.tag_counts[tag]) for tag in self.tags if counts.get(tag)}

    def tag(self, tokens: Sequence[str]) -> list[str]:
        if not tokens:
            return []
        best = [{tag: (self.log_transition[START][tag] + e, None) for tag, e in self._log_emission(tokens[0]).items()}]
        for word in tokens[1:]:
            column = {}
            for tag, e in self._log_emission(word).items():
                prev, score = max(((p, s + self.log_transition[p][tag]) for p, (s, _) in best[-1].items()),
                                  key=lambda item: item[1])
                column[tag] = (score + e, prev)
            best.append(column)
        tag = max(best[-1], key=lambda t: best[-1][t][0])
        out = [tag]
        for column in reversed(best[1:]):
            tag = column[tag][1]
            out.append(tag)
        return out[::-1]


#: UPOS -> the words the Playground's other part-of-speech checks use (WordNet's)
UPOS_WORDS = {"NOUN": "noun", "PROPN": "noun", "VERB": "verb", "AUX": "verb", "ADJ": "adjective", "ADV": "adverb"}


def tagged_confound(senses: Sequence[str | None], tags: Sequence[str], share: float = 0.75) -> str | None:
    """A warning when the sense labels follow part of speech as the tagger reads each occurrence:
    each sense's most common part of speech holds at least ``share`` of its occurrences (the tagger
    errs about one word in twelve) and they are not all the same. None otherwise."""
    by_sense: dict[str, Counter] = defaultdict(Counter)
    for sense, tag in zip(senses, tags):
        if sense is not None:
            by_sense[sense][UPOS_WORDS.get(tag, tag.lower())] += 1
    if len(by_sense) < 2:
        return None
    majority = {sense: counts.most_common(1)[0] for sense, counts in by_sense.items()}
    if any(n < share * sum(by_sense[sense].values()) for sense, (_, n) in majority.items()):
        return None
    if len({pos for pos, _ in majority.values()}) == 1:
        return None
    parts = "; ".join(f"{sense}: {pos}, {n} of {sum(by_sense[sense].values())}"
                      for sense, (pos, n) in sorted(majority.items()))
    return (f"These senses differ in part of speech, as a tagger reads each occurrence ({parts}): a gap between "
            "them can be part of speech, not sense. Hold it fixed: compare senses of one part of speech (the "
            "tagger is counted from UD English-EWT and reads about 92 words in 100 right).")


def ewt_upos(data_root: Path, split: str) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """(forms, UPOS) of each sentence of EWT's ``split`` file."""
    path = Path(data_root) / "ud_english_ewt" / f"en_ewt-ud-{split}.conllu"
    with open(path, encoding="utf-8") as lines:
        return [(s.forms, s.upos) for s in read_conllu(lines, str(path))]


@lru_cache(maxsize=2)
def _tagger(data_root: str, size: int, mtime_ns: int) -> PosTagger:
    return PosTagger(ewt_upos(Path(data_root), "train"))


def tagger_for(data_root: str | os.PathLike | None) -> PosTagger | None:
    """The tagger counted from ``data_root``'s EWT training file (once a process), or None where the
    data root has no EWT."""
    if data_root is None:
        return None
    train = Path(data_root) / "ud_english_ewt" / "en_ewt-ud-train.conllu"
    if not train.is_file():
        return None
    stat = train.stat()
    return _tagger(str(Path(data_root).resolve()), stat.st_size, stat.st_mtime_ns)


__all__ = ["PosTagger", "ewt_upos", "tagger_for"]
