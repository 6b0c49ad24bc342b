"""How contextual is each layer? Ethayarajh (2019), "How Contextual are Contextualized Word
Representations?", EMNLP: self-similarity, intra-sentence similarity, anisotropy.

Per layer l (all cosine similarities, unitless, -1..1):

- **self-similarity** of a word w: the mean cosine between its vectors in different contexts
  (one occurrence per sentence). 1 = the same vector everywhere (a static embedding);
  lower = more context-specific. Averaged over a sample of frequent words.
- **intra-sentence similarity** of a sentence: the mean cosine between each word's vector and
  the sentence's mean vector. Averaged over sentences.
- **anisotropy baseline**: the mean cosine between the vectors of randomly drawn pairs of
  tokens from different sentences (:func:`anisotropy_baseline` computes it alone, for any
  sentences; the Playground sets its same-vs-different-sense cosines against it). Ethayarajh's point: raw similarities are inflated when all
  vectors share a direction, so each measure is also reported minus this baseline
  (``*_adjusted``).

Layer 0 (the character CNN) is context-free, so its self-similarity is 1 by construction.

    >>> from probing.context.contextuality import contextuality
    >>> result = contextuality(model, data_root=data_root)          # a sample of LM-corpus test sentences
    >>> result.self_similarity_adjusted                    # one value per layer
"""

from __future__ import annotations

import logging
import os
import random
import unicodedata
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from elmo_model.embedding import ElmoEmbedder
from elmo_model.plumbing.progress import ProgressCallback
from elmo_model.text.reader import read_text_lines
from elmo_model.text.tokenizer import tokenize
from probing.context.playground import demo_set_names, load_demo_set
from probing.data import find_file, require
from probing.engine.activations import ActivationCache, extract_activations
from probing.engine.envelope import TaggedJson
from probing.engine.renamed_keywords import renamed_keywords
from probing.senses.wsd import unit_rows

log = logging.getLogger(__name__)

RESULT_VERSION = 1
LM_TEST_FILES = ("lm_corpus/wiki-test.txt.gz", "lm_corpus/gutenberg-test.txt.gz")


@dataclass
class ContextualityResult(TaggedJson, kind="contextuality", version=RESULT_VERSION):
    """Per-layer figures (index = layer) and the per-word self-similarities behind them.

    ``words``: the sampled words, ``word_contexts``: how many contexts each had,
    ``word_self_similarity``: {word: [per layer]}. ``settings``: the sampling parameters.
    """

    model_name: str
    n_sentences: int
    n_tokens: int
    words: list[str]
    word_contexts: list[int]
    self_similarity: list[float]
    intra_sentence_similarity: list[float]
    anisotropy: list[float]
    word_self_similarity: dict[str, list[float]]
    settings: dict
    notes: list[str] = field(default_factory=list)

    @property
    def self_similarity_adjusted(self) -> list[float]:
        """Self-similarity minus the anisotropy baseline, per layer."""
        return [s - a for s, a in zip(self.self_similarity, self.anisotropy)]

    @property
    def intra_sentence_adjusted(self) -> list[float]:
        """Intra-sentence similarity minus the anisotropy baseline, per layer."""
        return [s - a for s, a in zip(self.intra_sentence_similarity, self.anisotropy)]


def _is_word(token: str) -> bool:
    """True for tokens with at least one letter or digit (punctuation is not sampled)."""
    return any(unicodedata.category(c)[0] in "LN" for c in token)


def mean_pairwise_cosine(vectors: np.ndarray) -> float:
    """Mean cosine over all unordered pairs of distinct rows of ``vectors`` (n >= 2, (n, D))."""
    unit = unit_rows(vectors).astype(np.float64)
    n = len(unit)
    if n < 2:
        raise ValueError("mean_pairwise_cosine needs at least 2 vectors")
    total = unit.sum(axis=0)
    # sum over i != j of u_i . u_j = |sum u|^2 - sum |u_i|^2
    pair_sum = float(total @ total - np.sum(unit * unit))
    return pair_sum / (n * (n - 1))


def random_token_pairs(lengths: Sequence[int], n_pairs: int, rng: random.Random) -> tuple[np.ndarray, np.ndarray]:
    """``n_pairs`` random pairs of token rows (global rows of sentences of ``lengths`` laid end
    to end) from two different sentences: Ethayarajh's "random words in random contexts".
    Fewer (none) when the sentences cannot give them. Returns two int64 arrays of rows."""
    lengths = list(lengths)
    sentence_of = np.repeat(np.arange(len(lengths)), lengths)
    n_tokens = int(sum(lengths))
    pairs = []
    if len(lengths) >= 2 and n_tokens >= 2:
        tries = 0
        while len(pairs) < n_pairs and tries < 20 * n_pairs:
            a, b = rng.randrange(n_tokens), rng.randrange(n_tokens)
            tries += 1
            if sentence_of[a] != sentence_of[b]:
                pairs.append((a, b))
    return (np.array([p[0] for p in pairs], dtype=np.int64), np.array([p[1] for p in pairs], dtype=np.int64))


def mean_pair_cosine(layer: np.ndarray, rows_a: np.ndarray, rows_b: np.ndarray) -> float:
    """Mean cosine between rows ``rows_a[i]`` and ``rows_b[i]`` of ``layer`` (n_tokens, D)."""
    ua, ub = unit_rows(layer[rows_a]), unit_rows(layer[rows_b])
    return float(np.mean(np.sum(ua.astype(np.float64) * ub, axis=1)))


@dataclass
class AnisotropyBaseline:
    """The mean cosine between random words in random sentences, per layer (index = layer;
    unitless, -1..1): what any two vectors of a layer share whatever their words and contexts.
    A similarity means something only as far as it rises above this (Ethayarajh 2019).

    ``source``: which sentences (in words); ``n_sentences``, ``n_pairs``: how many."""

    cosine: list[float]
    source: str
    n_sentences: int
    n_pairs: int
    seed: int


#: The reference sentences of :func:`anisotropy_baseline` when none are given.
DEMO_SOURCE = "the shipped demo sentences (data/demo/, every set)"


def anisotropy_baseline(model, sentences: Sequence[str] | None = None, *, n_pairs: int = 2000,
                        seed: int = 0) -> AnisotropyBaseline:
    """The anisotropy baseline of ``model`` per layer: the mean cosine between ``n_pairs``
    random token pairs from different ``sentences`` (raw text, one sentence an item; default:
    every shipped demo sentence, so it needs no data root). The pairs are drawn as
    :func:`measure_contextuality` draws them; each sentence is embedded on its own.

    Cost: one biLM pass over the sentences (the demo sets: 36 short sentences).
    """
    source = "the given sentences"
    if sentences is None:
        sentences = [text for name in demo_set_names() for text in load_demo_set(name).texts]
        source = DEMO_SOURCE
    tokens = [[t for part in tokenize(text) for t in part] for text in sentences]
    tokens = [t for t in tokens if t]
    if len(tokens) < 2:
        raise ValueError(f"the anisotropy baseline needs at least 2 non-empty sentences, got {len(tokens)}")
    embedder = model if isinstance(model, ElmoEmbedder) else ElmoEmbedder(model)
    layers = np.concatenate([np.asarray(a, dtype=np.float32) for a in embedder.embed_sentences(tokens)],
                            axis=1)  # (L+1, n_tokens, D)
    rows_a, rows_b = random_token_pairs([len(t) for t in tokens], n_pairs, random.Random(seed))
    return AnisotropyBaseline(cosine=[mean_pair_cosine(layer, rows_a, rows_b) for layer in layers],
                              source=source, n_sentences=len(tokens), n_pairs=len(rows_a), seed=seed)


def _word_rows(cache: ActivationCache, sentences: Sequence[Sequence[str]], lowercase: bool) -> dict[str, list[int]]:
    """word -> the cache's global token rows of its first occurrence in each sentence holding it
    (punctuation left out)."""
    where: dict[str, list[int]] = defaultdict(list)
    for i, sentence in enumerate(sentences):
        seen = set()
        for t, token in enumerate(sentence):
            key = token.lower() if lowercase else token
            if key in seen or not _is_word(key):
                continue
            seen.add(key)
            where[key].append(int(cache.offsets[i]) + t)
    return where


def _intra_sentence_similarity(layer: np.ndarray, offsets: np.ndarray, sentences: Sequence[int]) -> float:
    """Mean over ``sentences`` of the mean cosine between each token's vector (rows of ``layer``
    (n_tokens, dim)) and its sentence's mean vector; NaN for no sentence."""
    values = []
    for i in sentences:
        x = unit_rows(layer[offsets[i]:offsets[i + 1]]).astype(np.float64)
        mean = x.mean(axis=0)
        norm = np.linalg.norm(mean)
        values.append(float(np.mean(x @ (mean / norm))) if norm > 0 else 0.0)
    return float(np.mean(values)) if values else float("nan")


def measure_contextuality(cache: ActivationCache, sentences: Sequence[Sequence[str]], *, n_words: int = 200,
                          min_contexts: int = 5, max_contexts: int = 30, n_baseline_pairs: int = 2000,
                          max_intra_sentences: int = 1000, lowercase: bool = False, seed: int = 0,
                          model_name: str = "biLM", progress: ProgressCallback | None = None) -> ContextualityResult:
    """Ethayarajh's measures from an activation cache of ``sentences`` (the same list, in order).

    - words: the ``n_words`` most frequent word types (exact spellings, as the biLM reads
      them; pooled lower-cased with ``lowercase``, which mixes "The" and "the" and so makes
      layer 0's self-similarity fall below 1; punctuation left out) that occur in at least ``min_contexts`` sentences; each keeps at
      most ``max_contexts`` contexts (a seeded sample), one occurrence per sentence.
    - intra-sentence similarity over at most ``max_intra_sentences`` sentences with >= 2 tokens.
    - anisotropy over ``n_baseline_pairs`` random token pairs from different sentences.
    """
    lengths = [len(s) for s in sentences]
    if len(lengths) != cache.n_sentences or not np.array_equal(np.cumsum([0] + lengths), cache.offsets):
        raise ValueError(f"the sentences ({len(lengths)}) do not match the activation cache "
                         f"{cache.path} ({cache.n_sentences} sentences)")
    rng = random.Random(seed)
    where = _word_rows(cache, sentences, lowercase)
    frequent = sorted((w for w, rows in where.items() if len(rows) >= min_contexts),
                      key=lambda w: (-len(where[w]), w))[:n_words]
    notes = []
    if not frequent:
        raise ValueError(f"no word occurs in {min_contexts} or more of the {len(sentences)} "
                         "sentences: give more sentences or lower min_contexts")
    if len(frequent) < n_words:
        notes.append(f"only {len(frequent)} words occur in at least {min_contexts} sentences (asked for {n_words}).")
    word_rows = {}
    for w in frequent:
        rows = where[w]
        word_rows[w] = sorted(rng.sample(rows, max_contexts)) if len(rows) > max_contexts else rows
    multi = [i for i, n in enumerate(lengths) if n >= 2]
    intra = sorted(rng.sample(multi, max_intra_sentences)) if len(multi) > max_intra_sentences else multi
    n_tokens = int(cache.n_tokens)
    pairs_a, pairs_b = random_token_pairs(lengths, n_baseline_pairs, rng)
    pairs = list(zip(pairs_a, pairs_b))
    if not pairs:
        notes.append("fewer than two sentences: no anisotropy baseline (reported as 0).")

    self_sim, intra_sim, aniso = [], [], []
    per_word = {w: [] for w in frequent}
    for j in range(cache.n_layers):
        if progress is not None:
            progress("contextuality", j, cache.n_layers, "layers")
        layer = cache.layer(j)  # (n_tokens, dim)
        sims = []
        for w in frequent:
            s = mean_pairwise_cosine(layer[word_rows[w]])
            per_word[w].append(s)
            sims.append(s)
        self_sim.append(float(np.mean(sims)))
        intra_sim.append(_intra_sentence_similarity(layer, cache.offsets, intra))
        aniso.append(mean_pair_cosine(layer, pairs_a, pairs_b) if pairs else 0.0)
        del layer
    if progress is not None:
        progress("contextuality", cache.n_layers, cache.n_layers, "layers")
    return ContextualityResult(
        model_name=model_name, n_sentences=len(lengths), n_tokens=n_tokens, words=frequent,
        word_contexts=[len(word_rows[w]) for w in frequent], self_similarity=self_sim,
        intra_sentence_similarity=intra_sim, anisotropy=aniso, word_self_similarity=per_word,
        settings={"n_words": n_words, "min_contexts": min_contexts, "max_contexts": max_contexts,
                  "n_baseline_pairs": len(pairs), "max_intra_sentences": max_intra_sentences,
                  "intra_sentences": len(intra), "lowercase": lowercase, "seed": seed},
        notes=notes)


@renamed_keywords(root="data_root")
def sample_lm_sentences(data_root: str | os.PathLike | None = None, n_sentences: int = 2000, *,
                        min_tokens: int = 5, max_tokens: int = 50, seed: int = 0) -> list[list[str]]:
    """A seeded sample of ``n_sentences`` sentences of ``min_tokens``..``max_tokens`` tokens
    from the LM corpus test split (wiki-test + gutenberg-test: text the biLM was not trained
    on), split and tokenised by the project tokenizer. Paragraphs are drawn at random and all
    their sentences of the right length taken, until there are enough."""
    require("lm_corpus", data_root)
    paragraphs = []
    for rel in LM_TEST_FILES:
        path = find_file(rel, data_root)
        paragraphs.extend(line.strip() for line in read_text_lines(path) if line.strip())
    random.Random(seed).shuffle(paragraphs)
    out: list[list[str]] = []
    for paragraph in paragraphs:
        for sentence in tokenize(paragraph):
            if min_tokens <= len(sentence) <= max_tokens:
                out.append(sentence)
        if len(out) >= n_sentences:
            break
    return out[:n_sentences]


@renamed_keywords(root="data_root")
def contextuality(model, sentences: Sequence[Sequence[str]] | None = None, *,
                  data_root: str | os.PathLike | None = None, n_sentences: int = 2000, dataset: str | None = None,
                  cache_dir: str | os.PathLike | None = None, batch_size: int = 32, seed: int = 0,
                  progress: ProgressCallback | None = None, **measure_options) -> ContextualityResult:
    """Embed ``sentences`` (default: :func:`sample_lm_sentences` of ``n_sentences``) through
    the activation cache and measure contextuality per layer (:func:`measure_contextuality`;
    ``measure_options`` go there). ``dataset`` names the cache file (default: derived).

    Cost: one biLM pass over the sentences (2,000 LM-corpus sentences are ~50k tokens).
    """
    if sentences is None:
        sentences = sample_lm_sentences(data_root, n_sentences, seed=seed)
        dataset = dataset or "lm_corpus"
        split = f"contextuality-{len(sentences)}-seed{seed}"
    else:
        sentences = [list(s) for s in sentences]
        dataset = dataset or "user"
        split = "contextuality"
    if not sentences:
        raise ValueError("no sentences to measure contextuality on")
    stage = None if progress is None else (lambda d, t: progress("embedding sentences", d, t, "sentences"))
    cache = extract_activations(model, sentences, dataset, split, cache_dir=cache_dir,
                                batch_size=batch_size, progress=stage)
    try:
        return measure_contextuality(cache, sentences, seed=seed,
                                     model_name=str(getattr(model, "name", "") or "biLM"),
                                     progress=progress, **measure_options)
    finally:
        cache.close()
