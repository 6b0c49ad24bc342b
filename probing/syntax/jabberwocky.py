"""Syntax on nonsense: EWT sentences whose content words are pronounceable pseudo-words of the same
part of speech, each sentence keeping its gold tree ("Twas brillig, and the slithy toves ...").

A structural probe trained on real sentences and scored on their Jabberwocky twins tells how much
of its UUAS rides on the words' meanings (a probe that reads syntax from the structure alone keeps
its score; one that leans on lexical cues drops). Gulordava et al. (2018) and Maudslay & Cotterell
(2021) run this control on LSTM language models and on the structural probe.

The generator:

- **What is replaced**: every NOUN, VERB and ADJ, and the ADVs ending in "-ly" (the manner adverbs:
  the other adverbs, "not", "when", "there", "very", ..., are closed-class and carry syntax).
  Function words, auxiliaries, proper nouns, numbers and punctuation stay.
- **Inflection stays**: the original's ending is kept on the pseudo-word, as Carroll kept it
  ("toves", "outgrabe"): a plural or third-person "-s", "-ed", "-ing", "-er" / "-est" of
  adjectives, "-ly" of adverbs. Capitalisation follows the original.
- **A lexicon, not noise**: the same (stem, UPOS) always becomes the same pseudo-word, in every
  sentence and every run: each is drawn from a generator seeded by a digest of the seed, the UPOS
  and the stem, so the mapping does not depend on which sentences are read or in what order.
- **Never a real word**: a pseudo-word (with its ending) that is a word form of EWT is drawn again.
- **Pronounceable**: one or two syllables of onset, vowel and coda from English's common clusters.

    >>> from probing.syntax.jabberwocky import jabberwocky_trees
    >>> nonsense = jabberwocky_trees(trees, seed=0)    # same heads, relations and UPOS
"""

from __future__ import annotations

import hashlib
import random
from typing import Iterable, Sequence

from probing.syntax.trees import DependencyTree

ONSETS = ("b", "bl", "br", "ch", "d", "dr", "f", "fl", "fr", "g", "gl", "gr", "j", "k", "l", "m", "n", "p", "pl",
          "pr", "r", "s", "sk", "sl", "sm", "sn", "sp", "st", "sw", "t", "th", "tr", "v", "w", "z")
VOWELS = ("a", "e", "i", "o", "u", "oo", "ea", "ai", "ou", "oi")
CODAS = ("", "", "b", "d", "g", "k", "l", "m", "n", "p", "t", "nd", "nk", "mp", "sh", "st", "rn", "lt")

#: The endings kept from the original word, longest first, per UPOS.
ENDINGS = {"NOUN": ("s",), "VERB": ("ing", "ed", "s"), "ADJ": ("est", "er"), "ADV": ("ly",)}
REPLACED_UPOS = ("NOUN", "VERB", "ADJ", "ADV")
ATTEMPTS = 50


def is_replaced(word: str, upos: str) -> bool:
    """Whether a token is a content word the generator replaces: NOUN, VERB, ADJ, and ADV ending
    in "-ly"; alphabetic only (no "e-mail", "3rd", "U.S.")."""
    if upos not in REPLACED_UPOS or not word.isalpha():
        return False
    return upos != "ADV" or (word.lower().endswith("ly") and len(word) > 4)


def split_ending(word: str, upos: str) -> tuple[str, str]:
    """(stem, ending): the inflectional ending the pseudo-word keeps ("" for none). A final "s" counts
    only after no other "s" ("class" has none); an ending must leave a stem of three letters."""
    lower = word.lower()
    for ending in ENDINGS.get(upos, ()):
        if lower.endswith(ending) and len(lower) - len(ending) >= 3 and not (ending == "s" and lower.endswith("ss")):
            return lower[:-len(ending)], ending
    return lower, ""


def _syllables(rng: random.Random) -> str:
    count = 1 if rng.random() < 0.45 else 2
    return "".join(rng.choice(ONSETS) + rng.choice(VOWELS) + rng.choice(CODAS) for _ in range(count))


def pseudo_word(stem: str, upos: str, ending: str, seed: int, avoid: frozenset[str] | set[str]) -> str:
    """The pseudo-word for ``stem`` of ``upos`` with ``ending``: the same for the same arguments
    everywhere; never a word in ``avoid`` (lower-cased real word forms)."""
    digest = hashlib.sha256(f"{seed}|{upos}|{stem}".encode()).digest()
    rng = random.Random(int.from_bytes(digest[:8], "big"))
    for _ in range(ATTEMPTS):
        word = _syllables(rng) + ending
        if word not in avoid and len(word) >= 3:
            return word
    raise RuntimeError(f"no pseudo-word for {stem!r} ({upos}) in {ATTEMPTS} draws outside the real words")


def _cased(word: str, like: str) -> str:
    if like.isupper() and len(like) > 1:
        return word.upper()
    return word[:1].upper() + word[1:] if like[:1].isupper() else word


def jabberwocky_tree(tree: DependencyTree, seed: int, avoid: frozenset[str] | set[str]) -> DependencyTree:
    """``tree`` with its content words replaced (:func:`is_replaced`); heads, relations and UPOS kept."""
    tokens = []
    for word, upos in zip(tree.tokens, tree.upos):
        if is_replaced(word, upos):
            stem, ending = split_ending(word, upos)
            word = _cased(pseudo_word(stem, upos, ending, seed, avoid), word)
        tokens.append(word)
    return DependencyTree(tuple(tokens), tree.heads, tree.relations, tree.upos,
                          f"{tree.sent_id}-jabberwocky" if tree.sent_id else "jabberwocky")


def real_words(*tree_sets: Iterable[DependencyTree]) -> frozenset[str]:
    """Every word form (lower-cased) of the given trees: what a pseudo-word must not be."""
    return frozenset(word.lower() for trees in tree_sets for tree in trees for word in tree.tokens)


def jabberwocky_trees(trees: Sequence[DependencyTree], seed: int = 0,
                      avoid: frozenset[str] | set[str] | None = None) -> list[DependencyTree]:
    """The Jabberwocky twin of every tree (:func:`jabberwocky_tree`); ``avoid``: the real words
    (default: those of ``trees``; the probes' callers pass all of EWT's)."""
    avoid = real_words(trees) if avoid is None else avoid
    return [jabberwocky_tree(tree, seed, avoid) for tree in trees]


def replaced_share(trees: Sequence[DependencyTree]) -> float:
    """The share of the tokens of ``trees`` that the generator replaces."""
    total = sum(len(t) for t in trees)
    replaced = sum(is_replaced(w, u) for t in trees for w, u in zip(t.tokens, t.upos))
    return replaced / max(1, total)


__all__ = ["is_replaced", "jabberwocky_tree", "jabberwocky_trees", "pseudo_word", "real_words", "replaced_share",
           "split_ending"]
