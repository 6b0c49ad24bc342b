"""Nearest-neighbour sense retrieval (Peters et al. 2018, Table 4): which SemCor occurrences
does the biLM put next to "play" in *this* sentence, layer by layer?

    >>> from elmo_model import load_bilm
    >>> from probing.senses.retrieval import SenseRetriever
    >>> retriever = SenseRetriever.build(load_bilm("elmo-mini"), data_root)   # SemCor index: once
    >>> result = retriever.query("Kieffer plays the piano with great style .", "plays", k=5)
    >>> result.layers[2].neighbours[0].sense_keys, result.layers[2].majority_share

For a query sentence and one of its tokens: per layer, the ``k`` SemCor instances of the same
lemma (``scope="lemma"``; or of any word, ``scope="any"``) whose vectors have the highest
cosine similarity to the token's vector, each with its sentence, sense keys and WordNet gloss,
and whether most neighbours share one sense; plus, for contrast, the nearest word *types*
under static embeddings (the biLM's layer 0, word2vec: ``probing.context.static``;
``static_baselines(model)`` gives the ones available offline).

Search is exact (a matrix-vector product). The SemCor index (``probing.senses.wsd``) is built once
per model and holds instance vectors grouped by lemma, so a lemma query reads one contiguous
block; ``scope="any"`` keeps each searched layer in memory at unit length (226k x dim, stored
as float16: 231 MB a layer for a 512-dim biLM).
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from elmo_model.bilm.identity import model_identity
from elmo_model.corpus.embedder import ElmoEmbedder
from elmo_model.plumbing.progress import ProgressCallback
from elmo_model.text.tokenizer import tokenize
from probing.context.playground import word_form
from probing.context.static import layer0_embedding
from probing.context.static_embedding import StaticEmbedding
from probing.engine.envelope import TaggedJson
from probing.engine.renamed_keywords import renamed_keywords
from probing.senses.corpora import WSD_POS, gloss, normalize_pos, wordnet
from probing.senses.wsd import SemcorIndex, build_semcor_index, normalize_lemma, unit_rows

log = logging.getLogger(__name__)

RESULT_VERSION = 1
SCOPES = ("lemma", "any")
#: A query of this many tokens or more that matches a SemCor sentence's words at an instance's
#: offset is taken to be cut from that sentence (shorter ones, "the bank", match by chance).
MIN_CUT_TOKENS = 5
#: Cosines this close count as a tie (equal vectors give equal cosines up to float32 rounding).
TIE_TOLERANCE = 1e-6
_WORDNET_POS = {"NOUN": "n", "VERB": "v", "ADJ": "a", "ADV": "r"}


def lemma_candidates(word: str, data_root: str | os.PathLike | None = None) -> list[str]:
    """Every lemma :meth:`SenseRetriever.guess_lemma` may pick for ``word`` (its lower case and
    WordNet's base forms of it in each part of speech): an index that holds these lemmas' SemCor
    instances answers a query on ``word`` as the whole index does."""
    wn = wordnet(data_root)
    lower = word.lower()
    all_forms = getattr(wn, "_morphy", None)
    forms = [lower]
    for tag in _WORDNET_POS.values():
        forms += all_forms(lower, tag) if all_forms else [wn.morphy(lower, tag)]
    return list(dict.fromkeys(normalize_lemma(f) for f in forms if f))


def find_token(sentence: str | Sequence[str], token: int | str) -> tuple[list[str], int]:
    """(the query's tokens, the index of ``token`` among them), as :meth:`SenseRetriever.query`
    reads a query: ``sentence`` is raw text (the project tokenizer; several sentences are one
    context) or tokens; ``token`` is an index or a word (its first occurrence, ignoring case).
    Cheap (no model): a page checks a query with it before any index is built.

    Raises ValueError for an empty sentence or a token that is not in it."""
    tokens = ([t for s in tokenize(sentence) for t in s] if isinstance(sentence, str)
              else [str(t) for t in sentence])
    if not tokens:
        raise ValueError("the query sentence is empty")
    if isinstance(token, str):  # NFC first: an accent typed as two code points is the same word
        folded, wanted = [word_form(t) for t in tokens], word_form(token)
        if wanted not in folded:
            raise ValueError(f"{token!r} is not a token of the query sentence {tokens}")
        return tokens, folded.index(wanted)
    token_index = int(token)
    if not 0 <= token_index < len(tokens):
        raise ValueError(f"token index {token_index} is outside the sentence (0..{len(tokens) - 1})")
    return tokens, token_index


@dataclass
class Neighbour:
    """One retrieved SemCor instance. ``words`` = ``tokens[start:end]`` of its sentence;
    ``similarity`` is the cosine to the query (unitless, -1..1); ``gloss`` is the WordNet
    definition of its first sense key."""

    rank: int
    similarity: float
    sentence: str
    sentence_id: str
    start: int
    end: int
    words: str
    lemma: str
    pos: str
    sense_keys: list[str]
    gloss: str


@dataclass
class LayerNeighbours:
    """Neighbours in one layer. ``majority_sense``: the sense key most neighbours carry,
    ``majority_share`` the fraction carrying it, ``majority_agrees``: more than half of the
    neighbours share that sense; ``n_searched``: instances compared."""

    layer: int
    neighbours: list[Neighbour]
    n_searched: int
    majority_sense: str | None
    majority_share: float
    majority_gloss: str | None
    majority_agrees: bool
    n_tied_beyond: int = 0  # occurrences not shown that tie with the last one shown

    @property
    def cut_is_arbitrary(self) -> bool:
        """The last shown neighbour ties with occurrences left out: which of the tied ones are
        shown (and so the senses counted) is an accident of order, not the model's choice."""
        return self.n_tied_beyond > 0


@dataclass
class StaticNeighbours:
    """The nearest word types to the query word under one static embedding."""

    embedding: str
    word: str
    neighbours: list[tuple[str, float]]
    note: str | None = None


@dataclass
class RetrievalResult(TaggedJson, kind="retrieval", version=RESULT_VERSION):
    """What :meth:`SenseRetriever.query` found (see the module docstring)."""

    query_tokens: list[str]
    token_index: int
    word: str
    lemma: str
    pos: str | None
    scope: str
    k: int
    layers: list[LayerNeighbours]
    static: list[StaticNeighbours]
    notes: list[str] = field(default_factory=list)


def _safe_gloss(key: str) -> str:
    try:
        return gloss(key)
    except KeyError:
        return ""


class SenseRetriever:
    """Exact nearest-neighbour search over a model's SemCor index.

    ``model``: the ``BiLM`` the index was built with (queries are embedded with it);
    ``static``: static embeddings to list nearest word types under (optional);
    ``data_root``: the data root (WordNet for lemmas and glosses).
    """

    @renamed_keywords(root="data_root")
    def __init__(self, model, index: SemcorIndex, *, static: Sequence[StaticEmbedding] = (),
                 data_root: str | os.PathLike | None = None) -> None:
        if index.model_identity != model_identity(model):
            raise ValueError(f"the SemCor index {index.path} belongs to another model")
        self.model = model
        self.index = index
        self.static = list(static)
        self.data_root = data_root
        wordnet(data_root)
        self._embedder = ElmoEmbedder(model)

    @classmethod
    @renamed_keywords(root="data_root", limit_semcor="semcor_limit")
    def build(cls, model, data_root: str | os.PathLike | None = None, *, semcor_limit: int | None = None,
              cache_dir: str | os.PathLike | None = None, static: Sequence[StaticEmbedding] = (),
              progress: ProgressCallback | None = None) -> "SenseRetriever":
        """Open (or build, the first time for this model) the SemCor index of the first
        ``semcor_limit`` sentences, then a retriever."""
        index = build_semcor_index(model, data_root, semcor_limit=semcor_limit, cache_dir=cache_dir,
                                   progress=progress)
        return cls(model, index, static=static, data_root=data_root)

    # -- query helpers ------------------------------------------------------------------------
    def guess_lemma(self, word: str, pos: str | None = None) -> tuple[str, str | None]:
        """(lemma, pos) for a surface word: among WordNet's base forms of it per part of speech
        ("banks" -> banks, bank), the one SemCor has most instances of, then the one with
        most WordNet senses; the lower-cased word if WordNet has none."""
        wn = wordnet(self.data_root)
        lower = word.lower()
        options = [normalize_pos(pos)] if pos else list(WSD_POS)
        # NLTK's public morphy returns only the first base form, which for "banks" is the
        # surname "Banks"; _morphy lists them all
        all_forms = getattr(wn, "_morphy", None)
        best, best_rank = (normalize_lemma(lower), options[0] if pos else None), (-1, -1)
        for p in options:
            tag = _WORDNET_POS[p]
            forms = all_forms(lower, tag) if all_forms else [wn.morphy(lower, tag)]
            for base in dict.fromkeys(f for f in forms if f):
                rank = (len(self.index.lemma_rows(base, p)), len(wn.synsets(base, tag)))
                if rank > best_rank:
                    best, best_rank = (normalize_lemma(base), p), rank
        return best

    def _static_neighbours(self, word: str, k: int) -> list[StaticNeighbours]:
        out = []
        for embedding in self.static:
            vector, note = None, None
            if word not in embedding:
                if embedding.meta.get("kind") == "bilm_layer0":
                    vector = layer0_embedding(self.model, [word]).vectors[0]
                else:
                    note = f"{word!r} is not in the {embedding.name} vocabulary"
            pairs = embedding.nearest(word, k, vector=vector) if note is None else []
            out.append(StaticNeighbours(embedding.name, word, pairs, note))
        return out

    def _source_sentences(self, tokens: list[str], token_index: int, lemma: str, pos: str | None) -> set[int]:
        """SemCor sentences (index numbers) the query was cut from: an instance of ``lemma``
        whose sentence holds the query's words with the query word at the instance's offset,
        the query being the whole sentence or at least :data:`MIN_CUT_TOKENS` tokens of it."""
        found: set[int] = set()
        for row in self.index.lemma_rows(lemma, pos):
            inst = self.index.instance(int(row))
            words = self.index.sentence_text(inst.sentence).split(" ")
            first = inst.start - token_index
            if first < 0 or words[first:first + len(tokens)] != tokens:
                continue
            if len(tokens) >= MIN_CUT_TOKENS or len(tokens) == len(words):
                found.add(inst.sentence)
        return found

    def query(self, sentence: str | Sequence[str], token: int | str, *, lemma: str | None = None,
              pos: str | None = None, k: int = 5, scope: str = "lemma",
              layers: Sequence[int] | None = None, exclude_query_sentence: bool = True,
              exclude_sentence_ids: Sequence[str] = (), static_k: int = 10) -> RetrievalResult:
        """Nearest SemCor occurrences of the query token, per layer.

        - ``sentence``: raw text (tokenised with the project tokenizer; several sentences are
          joined into one context) or a list of tokens.
        - ``token``: the token's index in that list, or the word itself (its first
          occurrence, case-insensitive).
        - ``lemma``/``pos``: the SemCor lemma to search (default: WordNet's morphy of the word).
        - ``scope``: "lemma" (instances of that lemma, any POS unless ``pos``) or "any" (every
          SemCor instance).
        - ``exclude_query_sentence``: leave out the SemCor sentence the query comes from (else
          it finds itself first): one whose words at the instance's offset are the query's
          words, the whole sentence or a cut of at least :data:`MIN_CUT_TOKENS` tokens from it,
          and any sentence identical to the query. ``exclude_sentence_ids``: SemCor sentence ids
          to leave out as well (a caller that knows where the query comes from).

        Ties: similarities within :data:`TIE_TOLERANCE` tie; ``n_tied_beyond`` in each layer
        counts the occurrences left out that tie with the last one shown.

        Raises ValueError when the token is not in the sentence.
        """
        if scope not in SCOPES:
            raise ValueError(f"scope must be one of {SCOPES}, got {scope!r}")
        if k < 1:
            raise ValueError(f"k must be positive, got {k}")
        tokens, token_index = find_token(sentence, token)
        word = tokens[token_index]
        notes: list[str] = []
        if lemma is None:
            lemma, guessed_pos = self.guess_lemma(word, pos)
            if guessed_pos and pos is None and scope == "lemma":
                notes.append(f"lemma {lemma!r} from WordNet's base forms of {word!r}; all its parts "
                             "of speech are searched")
        lemma = normalize_lemma(lemma)
        layers = list(range(self.index.n_layers)) if layers is None else [int(j) for j in layers]

        vectors = self._embedder.embed_sentence(tokens)[:, token_index]  # (L+1, dim)
        if scope == "lemma":
            rows = self.index.lemma_rows(lemma, pos)
            if len(rows) == 0:
                notes.append(f"SemCor has no sense-tagged instance of {lemma!r}"
                             + (f" as {pos}" if pos else "") + f" among the index's "
                             f"{self.index.n_sentences:,} sentences: no neighbours")
        else:
            rows = None
        query_text = " ".join(tokens)
        source_sentences: set[int] = set()  # SemCor sentences (index numbers) the query comes from
        if exclude_query_sentence:
            source_sentences = self._source_sentences(tokens, token_index, lemma, pos)
        dropped_ids = set(exclude_sentence_ids)

        def left_out(row: int) -> bool:
            inst = self.index.instance(row)
            return (inst.sentence in source_sentences
                    or (exclude_query_sentence and self.index.sentence_text(inst.sentence) == query_text)
                    or bool(dropped_ids) and self.index.sentence_id(inst.sentence) in dropped_ids)

        any_excluded = False
        out_layers = []
        for j in layers:
            sims, candidates = self._similarities(j, unit_rows(vectors[j][None])[0], rows)
            layer, excluded = self._layer_neighbours(j, sims, candidates, k, left_out)
            out_layers.append(layer)
            any_excluded = any_excluded or excluded > 0
        if any_excluded or source_sentences:
            notes.append("the query comes from a SemCor sentence: that sentence is left out")
        if 0 in layers:
            notes.append("layer 0 is context-free: every instance with the query's spelling has "
                         "the same vector, so those neighbours tie")
        return RetrievalResult(
            query_tokens=tokens, token_index=token_index, word=word, lemma=lemma, pos=pos,
            scope=scope, k=k, layers=out_layers, static=self._static_neighbours(word, static_k),
            notes=notes)

    def _similarities(self, layer: int, q: np.ndarray, rows: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Cosines of the unit query vector ``q`` (dim,) with the instances of ``rows`` at
        ``layer`` (None: every SemCor instance, streamed in chunks), and the rows they belong to."""
        if rows is None:
            unit = self.index.unit_layer(layer)
            sims = np.concatenate([unit[lo:lo + 65536].astype(np.float32) @ q
                                   for lo in range(0, len(unit), 65536)]) if len(unit) else np.zeros(0)
            return sims, np.arange(len(sims))
        sims = unit_rows(self.index.vectors(layer, rows)) @ q if len(rows) else np.zeros(0)
        return sims, rows

    def _layer_neighbours(self, layer: int, sims: np.ndarray, candidates: np.ndarray, k: int,
                          left_out: Callable[[int], bool]) -> tuple[LayerNeighbours, int]:
        """The ``k`` most similar instances not ``left_out``, their majority sense and the ties
        beyond the last one shown; and how many were left out on the way."""
        order = np.argsort(-sims, kind="stable")
        neighbours: list[Neighbour] = []
        excluded = 0
        for pos_in in order:
            if len(neighbours) == k:
                break
            row = int(candidates[pos_in])
            inst = self.index.instance(row)
            text = self.index.sentence_text(inst.sentence)
            if left_out(row):
                excluded += 1
                continue
            words = text.split(" ")[inst.start:inst.end]
            neighbours.append(Neighbour(
                rank=len(neighbours) + 1, similarity=float(sims[pos_in]), sentence=text,
                sentence_id=self.index.sentence_id(inst.sentence), start=inst.start,
                end=inst.end, words=" ".join(words), lemma=inst.lemma, pos=inst.pos,
                sense_keys=list(inst.sense_keys), gloss=_safe_gloss(inst.sense_keys[0])))
        senses = Counter(n.sense_keys[0] for n in neighbours)
        top, count = senses.most_common(1)[0] if senses else (None, 0)
        share = count / len(neighbours) if neighbours else 0.0
        tied_beyond = 0
        if neighbours and len(sims):
            # equal vectors (one spelling at layer 0) give equal cosines up to float32 rounding
            last = neighbours[-1].similarity
            tied = np.flatnonzero(np.abs(sims - last) <= TIE_TOLERANCE)
            tied_shown = sum(abs(n.similarity - last) <= TIE_TOLERANCE for n in neighbours)
            tied_beyond = sum(not left_out(int(candidates[t])) for t in tied) - tied_shown
        return LayerNeighbours(
            layer=layer, neighbours=neighbours, n_searched=len(candidates) - excluded,
            majority_sense=top, majority_share=share,
            majority_gloss=_safe_gloss(top) if top else None,
            majority_agrees=share > 0.5 and tied_beyond == 0, n_tied_beyond=tied_beyond), excluded


def labelled_neighbours(model, sentence: str | Sequence[str], token: int | str, texts: Sequence[str],
                        senses: Sequence[str | None], *, k: int = 5) -> RetrievalResult:
    """Sense retrieval over the user's own labelled sentences, in any language (no SemCor, no
    WordNet): per layer, the ``k`` occurrences of the query word's spelling (NFC, ignoring case)
    in ``texts`` (raw text, one context each, tokenised as the query is) nearest to the query
    token, each with its sentence and label (``senses``, one a text; None: "unlabelled"). A text
    equal to the query is left out (it would find itself). The result is the SemCor retrieval's
    type: a neighbour's ``sense_keys`` hold its label, ``sentence_id`` its line (S1, S2, ...),
    ``gloss`` and ``pos`` are empty, ``scope`` is "labelled".

    Raises ValueError when the token is not in the query or ``senses`` does not match ``texts``."""
    if len(senses) != len(texts):
        raise ValueError(f"{len(senses)} sense labels for {len(texts)} sentences")
    if k < 1:
        raise ValueError(f"k must be positive, got {k}")
    tokens, token_index = find_token(sentence, token)
    word = tokens[token_index]
    embedder = ElmoEmbedder(model)
    query = embedder.embed_sentence(tokens)[:, token_index]  # (L+1, dim)
    found: list[tuple[int, list[str], int, str]] = []  # (line, its tokens, position, label)
    vectors = []  # (L+1, dim) each
    for line, (text, label) in enumerate(zip(texts, senses)):
        words = [t for part in tokenize(str(text)) for t in part]
        positions = [i for i, t in enumerate(words) if word_form(t) == word_form(word)]
        if not positions or words == tokens:
            continue
        layers = embedder.embed_sentence(words)  # (L+1, T, dim)
        for i in positions:
            found.append((line, words, i, (label or "").strip() or "unlabelled"))
            vectors.append(layers[:, i])
    notes = [] if found else [f"{word!r} is in none of the labelled sentences: no neighbours"]
    out_layers = []
    for j in range(query.shape[0]):
        sims = (unit_rows(np.stack([v[j] for v in vectors])) @ unit_rows(query[j][None])[0]
                if vectors else np.zeros(0))
        order = np.argsort(-sims, kind="stable")[:k]
        neighbours = [Neighbour(rank=r + 1, similarity=float(sims[n]), sentence=" ".join(found[n][1]),
                                sentence_id=f"S{found[n][0] + 1}", start=found[n][2], end=found[n][2] + 1,
                                words=found[n][1][found[n][2]], lemma=word_form(word), pos="",
                                sense_keys=[found[n][3]], gloss="") for r, n in enumerate(order)]
        counts = Counter(n.sense_keys[0] for n in neighbours)
        top, count = counts.most_common(1)[0] if counts else (None, 0)
        share = count / len(neighbours) if neighbours else 0.0
        tied = (int(np.sum(np.abs(sims - neighbours[-1].similarity) <= TIE_TOLERANCE))
                - sum(abs(n.similarity - neighbours[-1].similarity) <= TIE_TOLERANCE for n in neighbours)
                if neighbours else 0)
        out_layers.append(LayerNeighbours(layer=j, neighbours=neighbours, n_searched=len(found), majority_sense=top,
                                          majority_share=share, majority_gloss=None,
                                          majority_agrees=share > 0.5 and tied == 0, n_tied_beyond=tied))
    return RetrievalResult(query_tokens=tokens, token_index=token_index, word=word, lemma=word_form(word), pos=None,
                           scope="labelled", k=k, layers=out_layers, static=[], notes=notes)
