"""Interpolated Kneser-Ney trigram language model: the n-gram baseline for a biLM's perplexity.

The model (Chen & Goodman 1998, "interpolated Kneser-Ney"; plain by default, modified with
``modified=True``), for a word ``w`` after the context ``(u, v)``::

    P3(w | u v) = max(c(uvw) - D3(c), 0) / c(uv.)  +  gamma3(uv) * P2(w | v)
    P2(w | v)   = max(a(vw)  - D2(a), 0) / a(v.)   +  gamma2(v)  * P1(w)
    P1(w)       = max(a(w)   - D1(a), 0) / a(.)    +  gamma1     * 1 / |W|

    gamma(h) = sum of the discounts taken from the n-grams seen after h, divided by the total
               count of h; a context never seen (total 0) backs off with weight 1.

- ``c`` are raw trigram counts; ``a`` are Kneser-Ney continuation counts: a(vw) = number of
  distinct ``u`` seen before ``vw``, a(w) = number of distinct ``v`` seen before ``w``. An n-gram
  that starts with ``<S>`` keeps its raw count (its left context is always padding), as KenLM
  and Chen & Goodman do.
- Discounts, one per order (plain) or three per order for counts 1, 2, 3+ (modified), come from
  the count-of-counts n1..n4 of that order's counts: Ney's ``D = n1 / (n1 + 2 n2)``; modified:
  ``D_k = k - (k + 1) * D * n_{k+1} / n_k``. A given ``discount`` is used for every order.
- ``W``, the set the model predicts, is the vocabulary plus ``</S>`` and ``<UNK>``, never ``<S>``.
  The last level interpolates with the uniform distribution over ``W``, so every word of ``W``,
  seen in training or not, has a probability > 0 and the probabilities sum to 1 for any context.

Perplexity convention (use the same one for the biLM so the numbers compare): each sentence is
padded ``<S> <S> w1 ... wn </S>``; the model predicts ``w1 ... wn`` and ``</S>``, so a sentence
contributes ``n + 1`` predicted tokens and ``<S>`` is never predicted. Words outside the
vocabulary become ``<UNK>`` and are predicted (and counted) as ``<UNK>``. Perplexity is
``exp(-sum(ln P) / n_tokens)`` over all sentences.

Backward direction: a separate model built with ``reverse=True`` reverses every sentence before
padding, both in ``fit`` and ``perplexity``: for ``w1 ... wn`` it predicts ``wn, ..., w1, </S>``
from ``<S> <S> wn ... w1 </S>``, the same ``n + 1`` tokens as the backward biLM. Its ``logprob``
takes the context in its own reading order: ``(w[i+2], w[i+1])`` for ``w[i]``.
``fit_bidirectional`` fits both from one pass over the text.

Storage: words are integer ids; trigrams are int64 keys ``(u * V + v) * V + w`` in a sorted numpy
array (looked up with ``searchsorted``), bigram keys likewise, unigram and bigram-context tables
are dense arrays of length V. Fitting is single-threaded numpy (sort-based counting).
Measured 2026-11-22 on the 2-core CPU (shared with a training job), whitespace tokens, vocabulary
= the 50k most frequent words of the slice; time for ``fit`` (strings -> ids included), memory =
peak RSS growth during ``fit`` on top of the caller's token lists, perplexity on wiki-valid
(225,594 tokens, plain / modified KN)::

    first 2.0M tokens of wiki-train-00:  fit 1.3 s, +130 MB peak, model 45 MB,  ppl 400 / 392
    first 10M of wiki-train-00..02:      fit 7.8 s, +485 MB peak, model 154 MB, ppl 312 / 307

Scoring those 225k tokens takes 0.2-0.4 s. The CLI on the 2M slice (read, split, fit both
directions, evaluate both) ran in 4 s wall with 430 MB peak RSS.
"""

from __future__ import annotations

import argparse
import array
import json
import logging
import math
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

import numpy as np
from tqdm import tqdm

from ..plumbing.flags import EXIT_CODES, add_quiet_argument
from ..plumbing.io_safety import run_interruptible
from ..plumbing.progress import log_through_bars
from ..text.reader import check_text_file, read_text_lines

log = logging.getLogger(__name__)

# Keys pack three ids into one int64: V**3 must stay below 2**63.
_MAX_VOCAB_SIZE = 2_097_151
# Trigrams scored per numpy batch in perplexity(): bounds temporary memory (~100 MB).
_EVAL_BATCH = 1_000_000


@dataclass
class PerplexityResult:
    """Perplexity of a model on some sentences (convention: see the module docstring).

    perplexity: exp(-log_likelihood / n_tokens). n_tokens: predicted tokens, ``</S>`` included,
    ``<S>`` excluded. n_sentences: sentences scored. n_unk: predicted tokens that were ``<UNK>``.
    log_likelihood: sum of natural-log probabilities (nats). direction: "forward" or "backward".
    """

    perplexity: float
    n_tokens: int
    n_sentences: int
    n_unk: int = 0
    log_likelihood: float = 0.0
    direction: str = "forward"

    def to_json(self) -> str:
        """This result as a JSON object string."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> "PerplexityResult":
        """Inverse of ``to_json``."""
        return cls(**json.loads(text))


@dataclass
class _EncodedCorpus:
    """Sentences as one flat id array. ids: (n_words,) int32; lengths: (n_sentences,) int64."""

    ids: np.ndarray
    lengths: np.ndarray

    def padded(self, bos: int, eos: int, reverse: bool) -> np.ndarray:
        """All sentences as ``<S> <S> w1 .. wn </S>`` back to back: (n_words + 3 n_sentences,) int64."""
        n_words, n_sent = len(self.ids), len(self.lengths)
        sent_of_word = np.repeat(np.arange(n_sent, dtype=np.int64), self.lengths)
        ids = self.ids
        if reverse:
            ends = np.cumsum(self.lengths)
            starts = ends - self.lengths
            ids = ids[(starts + ends - 1)[sent_of_word] - np.arange(n_words, dtype=np.int64)]
        out = np.full(n_words + 3 * n_sent, bos, dtype=np.int64)
        out[np.arange(n_words, dtype=np.int64) + 3 * sent_of_word + 2] = ids
        out[np.cumsum(self.lengths + 3) - 1] = eos
        return out


def _ney_discounts(counts: np.ndarray, modified: bool, order: int) -> np.ndarray:
    """Discounts for counts 0, 1, 2, 3+ of one order: (4,) float64 (index 0 unused, kept 0)."""
    n = np.bincount(np.minimum(counts, 5), minlength=6)[:5].astype(np.float64)
    if n[1] == 0 or n[2] == 0 or (modified and (n[3] == 0 or n[4] == 0)):
        log.warning(
            "order %d: too few n-grams to estimate discounts (count-of-counts n1..n4 = %s); "
            "using D = 0.5, 1.0, 1.5", order, n[1:].astype(int).tolist())
        fallback = [0.0, 0.5, 1.0, 1.5] if modified else [0.0, 0.5, 0.5, 0.5]
        return np.array(fallback)
    y = n[1] / (n[1] + 2.0 * n[2])
    if not modified:
        return np.array([0.0, y, y, y])
    d = np.array([0.0, 1 - 2 * y * n[2] / n[1], 2 - 3 * y * n[3] / n[2], 3 - 4 * y * n[4] / n[3]])
    # D_k must lie in (0, k] for the distribution to stay proper with mass left to back off.
    return np.clip(d, [0.0, 1e-3, 1e-3, 1e-3], [0.0, 1.0, 2.0, 3.0])


def _group_sums(keys_sorted: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique keys of a sorted array and the sum of ``values`` over each run of equal keys."""
    if len(keys_sorted) == 0:
        return keys_sorted, values[:0].astype(np.float64)
    starts = np.flatnonzero(np.r_[True, keys_sorted[1:] != keys_sorted[:-1]])
    return keys_sorted[starts], np.add.reduceat(values, starts)


def _lookup(keys_sorted: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index of each query in a sorted key array and whether it is there (index clipped)."""
    idx = np.searchsorted(keys_sorted, queries)
    idx = np.minimum(idx, max(len(keys_sorted) - 1, 0))
    found = keys_sorted[idx] == queries if len(keys_sorted) else np.zeros(len(queries), bool)
    return idx, found


class KneserNeyTrigram:
    """Interpolated Kneser-Ney trigram LM over a fixed vocabulary (see the module docstring).

    vocab: the words the model may predict besides ``</S>`` and ``<UNK>`` (the biLM's softmax
    vocabulary; special tokens in it are accepted and deduplicated). discount: one absolute
    discount in (0, 1] for every order, or None for Ney's estimate per order (plain KN).
    modified: modified KN, three discounts per order (counts 1, 2, 3+) estimated from the
    count-of-counts; excludes ``discount``. reverse: read sentences right to left (backward LM).

    Learned attributes (after ``fit``): ``discounts_`` (3, 4) float array, row = order 1..3,
    column = count 0..3+; ``n_train_tokens_``, ``n_train_sentences_``, ``n_trigrams_``.
    """

    def __init__(self, vocab: list[str] | set[str], discount: float | None = None, unk: str = "<UNK>", bos: str = "<S>",
                 eos: str = "</S>", modified: bool = False, reverse: bool = False):
        if discount is not None and not 0.0 < discount <= 1.0:
            raise ValueError(f"discount must be in (0, 1] or None, got {discount}")
        if discount is not None and modified:
            raise ValueError("modified=True estimates its own discounts; pass discount=None")
        if len({unk, bos, eos}) != 3:
            raise ValueError(f"unk, bos and eos must differ, got {unk!r}, {bos!r}, {eos!r}")
        self.vocab = vocab
        self.discount = discount
        self.unk, self.bos, self.eos = unk, bos, eos
        self.modified = modified
        self.reverse = reverse
        # ids: 0 = </S>, 1 = <S>, 2 = <UNK>, then the vocabulary in order (sets sorted).
        words = sorted(vocab) if isinstance(vocab, (set, frozenset)) else list(vocab)
        self.id_to_word: list[str] = [eos, bos, unk]
        self.word_to_id: dict[str, int] = {eos: 0, bos: 1, unk: 2}
        for word in words:
            if word not in self.word_to_id:
                self.word_to_id[word] = len(self.id_to_word)
                self.id_to_word.append(word)
        self.eos_id, self.bos_id, self.unk_id = 0, 1, 2
        if len(self.id_to_word) > _MAX_VOCAB_SIZE:
            raise ValueError(f"vocabulary of {len(self.id_to_word)} words is over the "
                             f"{_MAX_VOCAB_SIZE} that int64 trigram keys can hold")
        # A literal <S> inside a sentence would look like padding: read it as <UNK>.
        self._text_to_id = dict(self.word_to_id)
        self._text_to_id[bos] = self.unk_id

    @property
    def direction(self) -> str:
        """"backward" if the model reads sentences right to left, else "forward"."""
        return "backward" if self.reverse else "forward"

    @property
    def n_predictable(self) -> int:
        """|W|: number of words the model predicts (vocabulary + </S> + <UNK>, without <S>)."""
        return len(self.id_to_word) - 1

    # ---------------------------------------------------------------- fitting

    def encode(self, sentences: Iterable[Sequence[str]]) -> _EncodedCorpus:
        """Sentences of tokens -> flat ids; unknown tokens (and a literal <S>) become <UNK>."""
        get, unk = self._text_to_id.get, self.unk_id
        ids, lengths = array.array("i"), array.array("q")
        for sentence in sentences:
            ids.extend([get(token, unk) for token in sentence])
            lengths.append(len(sentence))
        return _EncodedCorpus(np.frombuffer(ids, dtype=np.int32) if ids else np.zeros(0, np.int32),
                              np.frombuffer(lengths, dtype=np.int64) if lengths
                              else np.zeros(0, np.int64))

    def fit(self, sentences: Iterable[list[str]]) -> "KneserNeyTrigram":
        """Count trigrams of the sentences (lists of tokens) and set the discounts; returns self."""
        return self._fit_encoded(self.encode(sentences))

    def _fit_encoded(self, corpus: _EncodedCorpus) -> "KneserNeyTrigram":
        V = np.int64(len(self.id_to_word))
        seq = corpus.padded(self.bos_id, self.eos_id, self.reverse)
        keep = seq[2:] != self.bos_id  # positions that predict a word, never <S>
        keys = seq[:-2][keep] * V
        keys += seq[1:-1][keep]
        keys *= V
        keys += seq[2:][keep]
        del seq, keep
        tri_keys, tri_counts = np.unique(keys, return_counts=True)
        del keys

        # Bigram level: continuation counts a(vw) = distinct u before vw; raw counts for <S> v.
        bi_of_tri = tri_keys % (V * V)
        bi_keys, inverse, n_left = np.unique(bi_of_tri, return_inverse=True, return_counts=True)
        del bi_of_tri
        raw = np.bincount(inverse.ravel(), weights=tri_counts, minlength=len(bi_keys))
        bi_counts = np.where(bi_keys // V == self.bos_id, np.rint(raw).astype(np.int64), n_left)
        del inverse, raw, n_left

        # Unigram level: a(w) = distinct v before w.
        uni_counts = np.bincount(bi_keys % V, minlength=int(V)).astype(np.int64)

        if self.discount is not None:
            self.discounts_ = np.tile([0.0, self.discount, self.discount, self.discount], (3, 1))
        else:
            self.discounts_ = np.stack([
                _ney_discounts(c, self.modified, order)
                for order, c in ((1, uni_counts[uni_counts > 0]), (2, bi_counts), (3, tri_counts))])
        d1, d2, d3 = self.discounts_

        self._tri_keys = tri_keys
        self._tri_counts = tri_counts.astype(np.int32)
        self._ctx3_keys, self._ctx3_total = _group_sums(tri_keys // V, tri_counts.astype(np.float64))
        _, self._ctx3_backoff = _group_sums(tri_keys // V, d3[np.minimum(tri_counts, 3)])

        self._bi_keys = bi_keys
        self._bi_counts = bi_counts.astype(np.int32)
        bi_ctx = bi_keys // V
        self._ctx2_total = np.bincount(bi_ctx, weights=bi_counts, minlength=int(V))
        self._ctx2_backoff = np.bincount(bi_ctx, weights=d2[np.minimum(bi_counts, 3)],
                                         minlength=int(V))

        self._uni_counts = uni_counts
        self._uni_total = float(uni_counts.sum())
        self._uni_backoff = float(d1[np.minimum(uni_counts, 3)].sum())

        self.n_train_tokens_ = int(corpus.lengths.sum() + len(corpus.lengths))
        self.n_train_sentences_ = int(len(corpus.lengths))
        self.n_trigrams_ = int(len(tri_keys))
        log.info("fit %s KN trigram: %d predicted tokens, %d sentences, %d trigrams, %d bigrams; "
                    "discounts %s", self.direction, self.n_train_tokens_, self.n_train_sentences_,
                    len(tri_keys), len(bi_keys), np.round(self.discounts_[:, 1:], 4).tolist())
        return self

    # ---------------------------------------------------------------- scoring

    def _check_fitted(self) -> None:
        if not hasattr(self, "discounts_"):
            raise RuntimeError("this KneserNeyTrigram is not fitted yet: call fit(sentences) first")

    def logprob_ids(self, u: np.ndarray, v: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Natural log P(w | u v) for arrays of ids, all (n,) int: returns (n,) float64."""
        self._check_fitted()
        V = np.int64(len(self.id_to_word))
        u, v, w = (np.asarray(x, dtype=np.int64) for x in (u, v, w))
        d1, d2, d3 = self.discounts_

        uni = self._uni_counts[w]
        if self._uni_total > 0:
            p = (np.maximum(uni - d1[np.minimum(uni, 3)], 0.0)
                 + self._uni_backoff / self.n_predictable) / self._uni_total
        else:
            p = np.full(len(w), 1.0 / self.n_predictable)

        idx, found = _lookup(self._bi_keys, v * V + w)
        a = np.where(found, self._bi_counts[idx], 0)
        total = self._ctx2_total[v]
        seen = total > 0
        p = np.where(seen, (np.maximum(a - d2[np.minimum(a, 3)], 0.0) + self._ctx2_backoff[v] * p)
                     / np.where(seen, total, 1.0), p)

        idx, found = _lookup(self._tri_keys, (u * V + v) * V + w)
        c = np.where(found, self._tri_counts[idx], 0)
        cidx, seen = _lookup(self._ctx3_keys, u * V + v)
        total = np.where(seen, self._ctx3_total[cidx], 1.0)
        backoff = np.where(seen, self._ctx3_backoff[cidx], 1.0)
        p = np.where(seen, (np.maximum(c - d3[np.minimum(c, 3)], 0.0) + backoff * p) / total, p)
        with np.errstate(divide="ignore"):
            out = np.log(p)
        out[w == self.bos_id] = -np.inf
        return out

    def _context_id(self, word: str) -> int:
        return self.word_to_id.get(word, self.unk_id)

    def logprob(self, context: tuple[str, str], word: str) -> float:
        """Natural log P(word | context); context = the two previous words in the model's reading
        order, nearest last (``("<S>", "<S>")`` at a sentence start). Unknown words -> <UNK>."""
        if len(context) != 2:
            raise ValueError(f"context must be two words, got {context!r}")
        if word == self.bos:
            raise ValueError(f"{self.bos!r} is never predicted")
        u, v = (self._context_id(x) for x in context)
        w = self._text_to_id.get(word, self.unk_id)
        return float(self.logprob_ids(np.array([u]), np.array([v]), np.array([w]))[0])

    def perplexity(self, sentences: Iterable[list[str]], direction: str | None = None) -> PerplexityResult:
        """Perplexity on sentences (lists of tokens), convention in the module docstring.

        direction: "forward" or "backward"; None means the model's own. It must match how the
        model was built (``reverse=True`` is the backward model) - a check, not a switch.
        """
        self._check_fitted()
        if direction is not None and direction not in ("forward", "backward"):
            raise ValueError(f"direction must be 'forward' or 'backward', got {direction!r}")
        if direction is not None and direction != self.direction:
            raise ValueError(
                f"this is a {self.direction} model; for {direction} perplexity fit "
                f"KneserNeyTrigram(vocab, reverse={direction == 'backward'}) "
                "(or use fit_bidirectional)")
        return self._perplexity_encoded(self.encode(sentences))

    def _perplexity_encoded(self, corpus: _EncodedCorpus) -> PerplexityResult:
        seq = corpus.padded(self.bos_id, self.eos_id, self.reverse)
        positions = np.flatnonzero(seq[2:] != self.bos_id) + 2
        total, n_unk = 0.0, 0
        for start in range(0, len(positions), _EVAL_BATCH):
            pos = positions[start:start + _EVAL_BATCH]
            w = seq[pos]
            total += float(self.logprob_ids(seq[pos - 2], seq[pos - 1], w).sum())
            n_unk += int((w == self.unk_id).sum())
        n_tokens = len(positions)
        ppl = math.exp(-total / n_tokens) if n_tokens else float("nan")
        return PerplexityResult(perplexity=ppl, n_tokens=n_tokens, n_sentences=len(corpus.lengths),
                                n_unk=n_unk, log_likelihood=total, direction=self.direction)


def fit_bidirectional(sentences: Iterable[list[str]], vocab: list[str] | set[str],
                      **kwargs) -> tuple[KneserNeyTrigram, KneserNeyTrigram]:
    """Forward and backward (``reverse=True``) models fit from one pass over the sentences.

    kwargs go to ``KneserNeyTrigram`` (discount, modified, unk, bos, eos).
    """
    forward = KneserNeyTrigram(vocab, reverse=False, **kwargs)
    backward = KneserNeyTrigram(vocab, reverse=True, **kwargs)
    corpus = forward.encode(sentences)  # both share the id mapping: it depends on vocab only
    return forward._fit_encoded(corpus), backward._fit_encoded(corpus)


# -------------------------------------------------------------------- text files


def whitespace_tokenize(text: str) -> list[list[str]]:
    """A paragraph as one sentence of whitespace-separated tokens (fallback tokenizer)."""
    tokens = text.split()
    return [tokens] if tokens else []


def read_sentences(paths: Iterable[str | Path], tokenize: Callable[[str], list[list[str]]]) -> Iterator[list[str]]:
    """Sentences from .txt / .txt.gz files of one paragraph per line, via ``tokenize(paragraph)
    -> list of sentences (lists of tokens)``; blank lines and empty sentences are skipped."""
    for path in paths:
        for line in read_text_lines(path):  # strict UTF-8, naming file and line (elmo_model.text.reader)
            if line.strip():
                yield from (s for s in tokenize(line.strip()) if s)


def load_vocab(path: str | Path) -> list[str]:
    """Words of a bilm-tf vocabulary file: one word per line, starting ``</S>``, ``<S>``, ``<UNK>``.
    A line holding several words (a text file given as the vocabulary) is a ``ValueError``."""
    words = []
    for number, line in enumerate(read_text_lines(path, what="vocabulary file"), start=1):
        word = line.strip()
        if len(word.split()) > 1:  # sentences given as a vocabulary: every word would be <UNK>
            raise ValueError(f"--vocab {path}:{number}: holds several words ({word[:60]!r}); a vocabulary "
                             "file has one word per line (the biLM's vocab.txt)")
        if word:
            words.append(word)
    if not words:
        raise ValueError(f"vocabulary file {path} is empty")
    if words[:3] != ["</S>", "<S>", "<UNK>"]:
        log.warning("vocabulary file %s does not start with </S>, <S>, <UNK> (bilm-tf order); using it anyway", path)
    return words


def _limit_tokens(sentences: Iterable[list[str]], max_tokens: int | None) -> Iterator[list[str]]:
    n = 0
    for sentence in sentences:
        if max_tokens is not None and n >= max_tokens:
            return
        n += len(sentence)
        yield sentence


def _resolve_tokenizer(name: str) -> Callable[[str], list[list[str]]]:
    if name == "whitespace":
        return whitespace_tokenize
    try:  # imported here: without NLTK the whitespace tokenizer still serves (the module needs no more)
        from ..text.tokenizer import tokenize
    except ImportError as error:
        if name == "workbench":
            raise
        log.warning("elmo_model.text.tokenizer not importable (%s): falling back to whitespace "
                       "tokens, one sentence per paragraph", error)
        return whitespace_tokenize
    return tokenize


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m elmo_model.training.kneser_ney",
        description="Fit forward and backward interpolated Kneser-Ney trigram LMs on --train text "
                    "and print their perplexity on --eval text, with the biLM's convention: "
                    "</S> is predicted and counted, <S> never; out-of-vocabulary words are <UNK>.",
        epilog=EXIT_CODES)
    parser.add_argument("--train", nargs="+", required=True, metavar="FILE",
                        help="training text: .txt or .txt.gz, one paragraph per line")
    parser.add_argument("--vocab", required=True, metavar="FILE",
                        help="vocabulary, one word per line, first lines </S>, <S>, <UNK> "
                             "(bilm-tf format; the biLM's softmax vocabulary)")
    parser.add_argument("--eval", nargs="+", required=True, metavar="FILE",
                        help="evaluation text, same format as --train")
    parser.add_argument("--discount", type=float, default=None,
                        help="one absolute discount in (0, 1] for all orders "
                             "(default: Ney's estimate n1/(n1+2n2) per order)")
    parser.add_argument("--modified", action="store_true",
                        help="modified Kneser-Ney: discounts for counts 1, 2, 3+ per order")
    parser.add_argument("--tokenizer", choices=["auto", "workbench", "whitespace"], default="auto",
                        help="workbench: elmo_model.text.tokenizer.tokenize; whitespace: split on "
                             "spaces, a paragraph is a sentence; auto: workbench if importable")
    parser.add_argument("--max-train-tokens", type=int, default=None, metavar="N",
                        help="stop reading training text after about N tokens")
    parser.add_argument("--json", action="store_true", help="print results as JSON lines")
    add_quiet_argument(parser)
    args = parser.parse_args(argv)
    # every file checked before the fit: a wrong path is one line, not a traceback after minutes
    try:
        for flag, paths in (("--train", args.train), ("--vocab", [args.vocab]), ("--eval", args.eval)):
            for path in paths:
                check_text_file(path, flag, "vocabulary file (one word per line)" if flag == "--vocab" else
                                "text file (.txt or .txt.gz, one paragraph per line)")
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.max_train_tokens is not None and args.max_train_tokens < 1:
        parser.error("--max-train-tokens must be at least 1")
    if args.discount is not None and not 0 < args.discount <= 1:
        parser.error("--discount must be in (0, 1]")
    log_through_bars(args.quiet, fmt="%(asctime)s %(levelname)s %(message)s")
    return run_interruptible(lambda: _fit_and_print(args),
                             lambda: "nothing is written by this command; rerun it to start again")


def _counted(items: Iterable[list[str]], seen: list[int]) -> Iterator[list[str]]:
    for item in items:
        seen[0] += 1
        yield item


def _fit_and_print(args: argparse.Namespace) -> int:
    tokenize = _resolve_tokenizer(args.tokenizer)
    try:
        vocab = load_vocab(args.vocab)
        seen = [0]  # counted here: a bar's own count stays 0 when bars are off (TQDM_DISABLE=1)
        train = tqdm(_counted(_limit_tokens(read_sentences(args.train, tokenize), args.max_train_tokens), seen),
                     desc="train", unit=" sent", disable=args.quiet)
        try:
            forward, backward = fit_bidirectional(train, vocab, discount=args.discount,
                                                  modified=args.modified)
        finally:  # the bar ends its line before any message (an error, an interrupt)
            train.close()
        if seen[0] == 0:
            raise ValueError(f"--train {' '.join(args.train)}: no sentences (empty or blank files)")
        eval_sentences = list(tqdm(read_sentences(args.eval, tokenize), desc="eval", unit=" sent",
                                   disable=args.quiet))
        if not eval_sentences:
            raise ValueError(f"--eval {' '.join(args.eval)}: no sentences (empty or blank files)")
    except (ValueError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    for model in (forward, backward):
        result = model.perplexity(eval_sentences)
        if args.json:
            print(result.to_json())
        else:
            print(f"{result.direction:>8} perplexity {result.perplexity:10.2f}  "
                  f"({result.n_tokens} tokens incl. </S>, {result.n_sentences} sentences, {result.n_unk} <UNK>)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
