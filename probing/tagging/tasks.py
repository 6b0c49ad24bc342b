"""Readers for the sequence-labelling probing tasks: sentences with one label per token.

Every reader returns a list of ``TaggedSentence`` (frozen, JSON round-trip):

- ``read_ewt``: UD English-EWT, ``<root>/ud_english_ewt/en_ewt-ud-{split}.conllu`` (CoNLL-U).
  Ten tab-separated columns a token line: ID FORM LEMMA UPOS XPOS FEATS HEAD DEPREL DEPS MISC;
  ``#`` comment lines (``# sent_id = ...``); a blank line ends a sentence. Multiword-token
  lines (ID ``1-2``, e.g. "don't") and empty nodes (ID ``8.1``) are skipped: the syntactic
  words of a multiword token ("do", "n't") are the tokens, as in the PTB.
  12,544 / 2,001 / 2,077 sentences in train / dev / test.
- ``read_conll2000``: CoNLL-2000 chunking through NLTK (``<root>/nltk_data``): WORD POS CHUNK,
  BIO chunk tags over all 11 chunk types (B-NP, I-VP, B-SBAR, O, ...). The released train file
  (8,936 sentences) is split into train and dev by a fixed-seed sentence-level split; test is
  the released test file (2,012 sentences). Its POS column writes brackets as ``(``/``)``
  where EWT's XPOS has ``-LRB-``/``-RRB-``; both are kept as released.
- ``read_treebank``: the same from any UD treebank of the table (``probing.data.registry.TREEBANKS``)
  the host fetched (``python -m probing.data download ud:french``), by language or code; EWT is
  ``read_treebank("en_ewt", ...)``.
- ``load_task``: the task names the probes use: ``pos`` (EWT XPOS, the PTB tagset), ``upos``
  (EWT UPOS) and ``chunk`` (CoNLL-2000 BIO chunks); with ``treebank=``, ``pos`` and ``upos`` read
  that treebank's XPOS (its own tagset, where it has one) and UPOS.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from elmo_model.text.reader import read_text_lines
from probing.data import require, use_nltk_data
from probing.data.registry import Treebank, get_treebank
from probing.data.treebanks import treebank_file
from probing.engine.envelope import JsonDataclass
from probing.engine.renamed_keywords import renamed_keywords

log = logging.getLogger(__name__)

SPLITS = ("train", "dev", "test")
"""The split names every reader accepts."""

EWT_TAGSETS = ("xpos", "upos")


@dataclass(frozen=True)
class TaggedSentence(JsonDataclass):
    """One sentence, one label per token.

    - ``tokens``: the words as released (PTB-style tokenisation: "do", "n't"), length T.
    - ``tags``: the task's labels, length T (PTB or UPOS tags; BIO chunk tags like B-NP, O).
    - ``pos``: PTB part-of-speech tags, length T (EWT XPOS; CoNLL-2000's POS column), or ``()``.
    - ``sent_id``: where it comes from: EWT's ``sent_id``, or ``conll2000/train.txt#17``
      (the sentence's 0-based index in the released file).
    """

    tokens: tuple[str, ...]
    tags: tuple[str, ...]
    pos: tuple[str, ...] = ()
    sent_id: str = ""

    def __post_init__(self) -> None:
        if len(self.tags) != len(self.tokens) or (self.pos and len(self.pos) != len(self.tokens)):
            raise ValueError(f"sentence {self.sent_id or '?'}: {len(self.tokens)} tokens but {len(self.tags)} "
                             f"tags and {len(self.pos)} POS tags")

    def __len__(self) -> int:
        return len(self.tokens)


def _check_split(split: str) -> None:
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; choose from {', '.join(SPLITS)}")


def _check_limit(limit: int | None) -> None:
    if limit is not None and (not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be a non-negative int or None, got {limit!r}")


# --------------------------------------------------------------------------------------------
# UD English-EWT
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConlluSentence:
    """One CoNLL-U sentence as released: the syntactic words' columns, one entry a word.

    - ``forms``, ``upos``, ``xpos``, ``deprels``: FORM, UPOS, XPOS and DEPREL columns.
    - ``heads``: the HEAD column as written ("0" for the root, "3"; "_" where a file has none),
      checked by the readers that need it (``probing.syntax.structural``).
    - ``lines``: each word's 1-based line number in ``source``, for error messages.
    """

    sent_id: str
    forms: tuple[str, ...]
    upos: tuple[str, ...]
    xpos: tuple[str, ...]
    heads: tuple[str, ...]
    deprels: tuple[str, ...]
    lines: tuple[int, ...]


def read_conllu(lines: Iterable[str], source: str = "<conllu>") -> Iterator[ConlluSentence]:
    """Parse CoNLL-U lines into one ``ConlluSentence`` a sentence.

    Multiword-token lines (``1-2``) and empty nodes (``8.1``) are skipped, so the words are
    numbered 1..T. A token line without 10 tab-separated columns raises ValueError naming
    ``source`` and the line number.
    """
    sent_id, rows = "", []
    for lineno, line in enumerate(lines, 1):
        line = line.rstrip("\r\n")
        if not line.strip():
            if rows:
                yield _conllu_sentence(sent_id, rows)
            sent_id, rows = "", []
            continue
        if line.startswith("#"):
            if line.startswith("# sent_id"):
                sent_id = line.partition("=")[2].strip()
            continue
        cols = line.split("\t")
        if len(cols) != 10:
            raise ValueError(f"{source}:{lineno}: expected 10 tab-separated CoNLL-U columns, found {len(cols)}")
        token_id = cols[0]
        if "-" in token_id or "." in token_id:
            continue
        rows.append((cols[1], cols[3], cols[4], cols[6], cols[7], lineno))
    if rows:
        yield _conllu_sentence(sent_id, rows)


def _conllu_sentence(sent_id: str, rows: list[tuple]) -> ConlluSentence:
    forms, upos, xpos, heads, deprels, lines = zip(*rows)
    return ConlluSentence(sent_id, forms, upos, xpos, heads, deprels, lines)


def parse_conllu(lines: Iterable[str],
                 source: str = "<conllu>") -> Iterator[tuple[str, list[str], list[str], list[str]]]:
    """Parse CoNLL-U lines into ``(sent_id, forms, upos, xpos)``, one tuple a sentence
    (``read_conllu``'s sentences, cut to the tagging columns)."""
    for sentence in read_conllu(lines, source):
        yield sentence.sent_id, list(sentence.forms), list(sentence.upos), list(sentence.xpos)


def _treebank_sentences(path: Path, tagset: str, limit: int | None) -> Iterator[TaggedSentence]:
    with contextlib.closing(read_text_lines(path)) as lines:
        for count, (sent_id, forms, upos, xpos) in enumerate(parse_conllu(lines, str(path))):
            if limit is not None and count >= limit:
                return
            xpos_t = tuple(xpos)
            yield TaggedSentence(tokens=tuple(forms), tags=xpos_t if tagset == "xpos" else tuple(upos), pos=xpos_t,
                                 sent_id=sent_id)


@functools.lru_cache(maxsize=8)
def _treebank_cached(path: str, mtime_ns: int, size: int, tagset: str) -> tuple[TaggedSentence, ...]:
    # mtime and size are part of the key so that a replaced file is read again
    return tuple(_treebank_sentences(Path(path), tagset, None))


@renamed_keywords(root="data_root")
def read_ewt(split: str, tagset: str = "xpos", data_root: str | os.PathLike | None = None,
             limit: int | None = None) -> list[TaggedSentence]:
    """UD English-EWT sentences of ``split`` ("train", "dev", "test") with ``tagset`` labels.

    ``tagset``: "xpos" (PTB tags: NN, VBZ, -LRB-, ...) or "upos" (NOUN, VERB, ...); ``pos`` is
    always the XPOS. ``limit``: only the first N sentences (read lazily). Full files are cached
    in memory. Raises DatasetMissing when the files are not in the data root.
    """
    return read_treebank("en_ewt", split, tagset, data_root, limit)


@renamed_keywords(root="data_root")
def read_treebank(treebank: str | Treebank, split: str, tagset: str = "upos",
                  data_root: str | os.PathLike | None = None, limit: int | None = None) -> list[TaggedSentence]:
    """The sentences of a UD treebank's ``split`` with ``tagset`` labels ("upos", or "xpos": the
    treebank's own tagset, refused where the treebank has none); ``treebank``: a code
    (``fr_gsd``), a language or its ISO code (``French``, ``fr``). Raises DatasetMissing, naming the
    command that fetches it, when it is not in the data root; TreebankChanged when a file differs
    from what its first fetch recorded."""
    _check_split(split)
    _check_limit(limit)
    if tagset not in EWT_TAGSETS:
        raise ValueError(f"unknown tagset {tagset!r}; choose from {', '.join(EWT_TAGSETS)}")
    treebank = get_treebank(treebank) if isinstance(treebank, str) else treebank
    path = treebank_file(treebank, split, data_root)
    if limit is not None:
        sentences = tuple(_treebank_sentences(path, tagset, limit))
    else:
        stat = path.stat()
        sentences = _treebank_cached(str(path), stat.st_mtime_ns, stat.st_size, tagset)
    if tagset == "xpos" and sentences and all(tag == "_" for s in sentences for tag in s.tags):
        raise ValueError(f"{treebank.title} has no XPOS tags (every one is '_' in {path.name}): probe its universal "
                         "tags instead (the upos task)")
    log.debug("read %d %s %s sentences from %s", len(sentences), treebank.code, split, path)
    return list(sentences)


# --------------------------------------------------------------------------------------------
# CoNLL-2000
# --------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def _conll2000_file(nltk_dir: str, fileid: str) -> tuple[TaggedSentence, ...]:
    # imported here: nltk takes seconds to import and only the CoNLL-2000 reader needs it
    import nltk
    from nltk.corpus.reader import ConllChunkCorpusReader

    # Found under this root only (not wherever else nltk.data.path points), and read through
    # a reader of our own rather than the nltk.corpus.conll2000 singleton, which stays bound
    # to the first root it was loaded from. Same arguments as that singleton.
    try:
        corpus_root = nltk.data.find("corpora/conll2000", paths=[nltk_dir])
    except LookupError:
        corpus_root = nltk.data.find("corpora/conll2000.zip/conll2000/", paths=[nltk_dir])
    reader = ConllChunkCorpusReader(corpus_root, ["train.txt", "test.txt"], ("NP", "VP", "PP"), tagset="wsj",
                                    encoding="ascii")
    sentences = []
    # iob_sents gives the raw chunk column, all 11 chunk types; chunked_sents would keep only
    # the reader's NP/VP/PP.
    for index, triples in enumerate(reader.iob_sents(fileid)):
        words, pos, chunks = zip(*triples) if triples else ((), (), ())
        sentences.append(TaggedSentence(tokens=tuple(words), tags=tuple(chunks), pos=tuple(pos),
                                        sent_id=f"conll2000/{fileid}#{index}"))
    return tuple(sentences)


def dev_indices(n: int, dev_fraction: float, seed: int) -> frozenset[int]:
    """The indices (of ``n`` sentences) that go to dev: ``round(n * dev_fraction)`` of them.

    Ranked by sha256 of ``"seed:index"``, so the split is the same on every platform and
    NumPy or Python version.
    """
    if not 0.0 < dev_fraction < 1.0:
        raise ValueError(f"dev_fraction must be between 0 and 1 (exclusive), got {dev_fraction!r}")
    n_dev = round(n * dev_fraction)
    ranked = sorted(range(n), key=lambda i: hashlib.sha256(f"{seed}:{i}".encode()).digest())
    return frozenset(ranked[:n_dev])


@renamed_keywords(root="data_root")
def read_conll2000(split: str, data_root: str | os.PathLike | None = None, dev_fraction: float = 0.1, seed: int = 0,
                   limit: int | None = None) -> list[TaggedSentence]:
    """CoNLL-2000 chunking sentences of ``split``: ``tags`` are BIO chunk tags, ``pos`` PTB tags.

    "train" and "dev" partition the released train file (dev: ``dev_fraction`` of its
    sentences, chosen by ``seed``; both keep the file's order); "test" is the released test
    file. ``limit``: only the first N sentences. Raises DatasetMissing when the NLTK package is
    not in the data root.
    """
    _check_split(split)
    _check_limit(limit)
    data_root = require("conll2000", data_root)
    nltk_dir = use_nltk_data(data_root)
    if split == "test":
        sentences = list(_conll2000_file(str(nltk_dir), "test.txt"))
    else:
        train = _conll2000_file(str(nltk_dir), "train.txt")
        dev = dev_indices(len(train), dev_fraction, seed)
        want_dev = split == "dev"
        sentences = [s for i, s in enumerate(train) if (i in dev) == want_dev]
    return sentences if limit is None else sentences[:limit]


# --------------------------------------------------------------------------------------------
# Tasks
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Task:
    """A sequence-labelling probing task: its dataset, labels and metric ("accuracy" or "chunk_f1")."""

    name: str
    dataset: str
    description: str
    metric: str


TASKS: dict[str, Task] = {
    "pos": Task("pos", "ud_english_ewt", "part of speech, PTB tagset (EWT XPOS)", "accuracy"),
    "upos": Task("upos", "ud_english_ewt", "universal part of speech (EWT UPOS)", "accuracy"),
    "chunk": Task("chunk", "conll2000", "syntactic chunks, BIO tags (CoNLL-2000)", "chunk_f1"),
}
"""The sequence-labelling tasks ``load_task`` knows."""

TREEBANK_TASKS = ("pos", "upos")
"""The tasks a ``treebank=`` changes: they read that UD treebank instead of EWT."""


def task_dataset(task: str, treebank: str | Treebank | None = None) -> str:
    """The dataset ``task`` reads with ``treebank`` (caches and results are named by it):
    ``ud_fr_gsd`` for POS on UD French-GSD, the task's own dataset otherwise."""
    if treebank is not None and task in TREEBANK_TASKS:
        return (get_treebank(treebank) if isinstance(treebank, str) else treebank).dataset
    return TASKS[task].dataset


@renamed_keywords(root="data_root")
def load_task(task: str, split: str, data_root: str | os.PathLike | None = None,
              limit: int | None = None, treebank: str | Treebank | None = None) -> list[TaggedSentence]:
    """The sentences of ``task`` ("pos", "upos", "chunk") and ``split``; ``limit``: the first N;
    ``treebank``: the UD treebank "pos" and "upos" read (a code, a language or its ISO code;
    None: UD English-EWT)."""
    if task in TREEBANK_TASKS:
        return read_treebank(treebank or "en_ewt", split, "xpos" if task == "pos" else "upos", data_root, limit=limit)
    if task == "chunk":
        return read_conll2000(split, data_root, limit=limit)
    raise ValueError(f"unknown task {task!r}; choose from {', '.join(TASKS)}")


__all__ = ["SPLITS", "EWT_TAGSETS", "TASKS", "TREEBANK_TASKS", "Task", "TaggedSentence", "dev_indices",
           "ConlluSentence", "load_task", "parse_conllu", "read_conllu", "read_conll2000", "read_ewt", "read_treebank", "task_dataset"]
