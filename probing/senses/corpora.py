"""Word-sense data: the Raganato et al. (2017) WSD framework, WordNet 3.0 senses, and scoring.

Files read (under the data root, see docs/design.md, "The data root")::

    wsd/WSD_Evaluation_Framework/
        Training_Corpora/SemCor/semcor.data.xml.gz   (or semcor.data.xml) + semcor.gold.key.txt
        Evaluation_Datasets/NAME/NAME.data.xml + NAME.gold.key.txt
            NAME in senseval2, senseval3, semeval2007, semeval2013, semeval2015, ALL
    nltk_data/corpora/wordnet.zip                    (WordNet 3.0, NLTK's package layout)

The XML format (Raganato, Camacho-Collados & Navigli, EACL 2017)::

    <corpus lang="en" source="senseval2">
      <text id="d000">
        <sentence id="d000.s000">
          <wf lemma="the" pos="DET">The</wf>
          <instance id="d000.s000.t000" lemma="art" pos="NOUN">art</instance>
          ...
        <sentence id="d000.s010">
          <instance id="d000.s010.t000" lemma="belong_to" pos="VERB">belong to</instance>

``<wf>`` is a plain word, ``<instance>`` a word (or multiword expression, words separated by
spaces) to disambiguate; its lemma uses ``_`` between words and its pos is one of NOUN, VERB,
ADJ, ADV. The gold file has one line per instance: ``ID KEY [KEY ...]`` with WordNet 3.0 sense
keys (some instances have several correct keys). Raganato's keys and NLTK's ``Lemma.key()`` are
the same strings (lower case, e.g. ``art%1:06:00::``, ``peculiar%5:00:00:specific:00``), so keys
are compared as they are, lower-cased.

Multiword surface forms are split into words for the biLM: an instance's ``(start, end)`` is the
half-open span of its words in ``WsdSentence.tokens`` (average the words' vectors for the
instance vector).

Measured on a 2-core CPU machine shared with a training job (2026-11-22): reading all of
SemCor (37,176 sentences, 226,036 instances; 778,587 XML tokens = 820,410 words after splitting
multiwords; from .gz) takes 3.5-4.3 s and ~120 MB; the first 1,000 sentences 0.7 s (the gold
file is always read whole); ALL (7,253 instances) 0.1 s; loading WordNet 4-5 s once.
WordNet first-sense baseline F1: 65.9 on senseval2+senseval3+semeval2013+semeval2015 (4,477 /
6,798; Peters et al. 2018 report 65.9) and 65.2 on ALL (4,728 / 7,253); per set 66.8 / 66.2 /
55.2 / 63.0 / 67.8 (senseval2, senseval3, semeval2007, semeval2013, semeval2015), equal to
Raganato et al.'s (2017) "WN 1st sense" row. Every gold key of ALL and SemCor resolves in
WordNet 3.0 and is among ``candidate_senses`` of its instance's lemma and pos.
"""

from __future__ import annotations

import functools
import gzip
import logging
import os
import re
import sys
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Mapping

from elmo_model.text.reader import read_text_lines
from probing.data import data_root as resolve_data_root
from probing.data import find_file, require, use_nltk_data
from probing.engine.envelope import JsonDataclass
from probing.engine.renamed_keywords import renamed_keywords

log = logging.getLogger(__name__)

WSD_DIR = "wsd/WSD_Evaluation_Framework"
EVALUATION_SETS = ("senseval2", "senseval3", "semeval2007", "semeval2013", "semeval2015", "ALL")
TRAINING_CORPORA = ("semcor",)
CORPORA = TRAINING_CORPORA + EVALUATION_SETS
# The four test sets that Peters et al. (2018, Table 5) evaluate on together.
PETERS_2018_TEST_SETS = ("senseval2", "senseval3", "semeval2013", "semeval2015")
WSD_POS = ("NOUN", "VERB", "ADJ", "ADV")

_WORDNET_POS = {"NOUN": "n", "VERB": "v", "ADJ": "a", "ADV": "r"}
_POS_ALIASES = {
    "noun": "NOUN", "n": "NOUN",
    "verb": "VERB", "v": "VERB",
    "adj": "ADJ", "a": "ADJ", "s": "ADJ",
    "adv": "ADV", "r": "ADV",
}
_WORD_SPLIT = re.compile(r"[\s_]+")


# --------------------------------------------------------------------------- data root


def _find(relpath: str, data_root: str | os.PathLike | None, what: str) -> Path:
    """``relpath`` under the data root, plain or gzipped; DatasetMissing naming the fix if absent."""
    found = find_file(relpath, data_root)
    if found is None:
        require("wsd_framework", data_root)  # raises, naming the missing files and the download command
        raise FileNotFoundError(f"{what}: {resolve_data_root(data_root) / relpath} not found "
                                f"(`python -m probing.data status` lists the data root)")
    return found


@renamed_keywords(root="data_root")
def corpus_paths(name: str, data_root: str | os.PathLike | None = None) -> tuple[Path, Path]:
    """(data.xml[.gz], gold.key.txt[.gz]) paths of corpus ``name`` (see CORPORA) in the root."""
    if name == "semcor":
        folder = f"{WSD_DIR}/Training_Corpora/SemCor"
        xml_rel, gold_rel = f"{folder}/semcor.data.xml.gz", f"{folder}/semcor.gold.key.txt"
    elif name in EVALUATION_SETS:
        folder = f"{WSD_DIR}/Evaluation_Datasets/{name}"
        xml_rel, gold_rel = f"{folder}/{name}.data.xml", f"{folder}/{name}.gold.key.txt"
    else:
        raise ValueError(f"unknown WSD corpus {name!r}; expected one of {', '.join(CORPORA)}")
    return (_find(xml_rel, data_root, f"WSD corpus {name!r}"),
            _find(gold_rel, data_root, f"WSD gold keys of {name!r}"))


# --------------------------------------------------------------------------- corpus reader


@dataclass(frozen=True, slots=True)
class WsdInstance:
    """One word (or multiword expression) to disambiguate.

    ``start``/``end``: half-open span of its words in the sentence's ``tokens``.
    ``sense_keys``: the gold WordNet 3.0 sense keys (one or more; empty if the gold file lacks it).
    """

    instance_id: str
    lemma: str
    pos: str
    start: int
    end: int
    sense_keys: frozenset[str]

    @property
    def span(self) -> tuple[int, int]:
        return (self.start, self.end)


@dataclass(frozen=True, slots=True)
class WsdSentence:
    """A sentence as words for the biLM, with its instances in order."""

    sentence_id: str
    tokens: tuple[str, ...]
    instances: tuple[WsdInstance, ...]

    def words_of(self, instance: WsdInstance) -> tuple[str, ...]:
        return self.tokens[instance.start:instance.end]


def read_gold_keys(path: str | os.PathLike) -> dict[str, frozenset[str]]:
    """Gold file (plain or .gz) ``ID KEY [KEY ...]`` per line -> {instance id: keys, lower case}."""
    gold: dict[str, frozenset[str]] = {}
    for line_no, line in enumerate(read_text_lines(path), 1):
        fields = line.split()
        if not fields:
            continue
        if len(fields) < 2:
            raise ValueError(f"{path}:{line_no}: expected 'ID KEY [KEY ...]', got {line.strip()!r}")
        gold[fields[0]] = frozenset(sys.intern(k.lower()) for k in fields[1:])
    return gold


def _split_words(surface: str) -> list[str]:
    """'took place' / 'New_York' -> words; a lone '_' stays a word."""
    words = [w for w in _WORD_SPLIT.split(surface) if w]
    if not words and surface.strip():
        words = [surface.strip()]
    return words


@renamed_keywords(root="data_root", limit_sentences="limit")
def read_wsd_corpus(name: str, data_root: str | os.PathLike | None = None,
                    limit: int | None = None) -> list[WsdSentence]:
    """Read corpus ``name`` (semcor, senseval2, ..., ALL) with gold keys, in file order.

    ``limit`` stops after that many sentences (the rest of the file is not read).
    Streams with ``ElementTree.iterparse``; all of SemCor takes ~4 s on a 2-core CPU.
    """
    xml_path, gold_path = corpus_paths(name, data_root)
    gold = read_gold_keys(gold_path)
    sentences: list[WsdSentence] = []
    missing_gold = 0
    intern = sys.intern
    opener = gzip.open if xml_path.suffix == ".gz" else open
    with opener(xml_path, "rb") as f:
        parser = ET.iterparse(f, events=("end",))
        for _event, elem in parser:
            if elem.tag == "text":
                elem.clear()  # drop finished sentences' husks
                continue
            if elem.tag != "sentence":
                continue
            tokens: list[str] = []
            instances: list[WsdInstance] = []
            for child in elem:
                words = _split_words(child.text or "")
                if child.tag == "instance":
                    if not words:
                        raise ValueError(f"{xml_path}: instance {child.get('id')} has no text")
                    instance_id = child.get("id")
                    keys = gold.get(instance_id)
                    if keys is None:
                        missing_gold += 1
                        keys = frozenset()
                    instances.append(WsdInstance(
                        instance_id=instance_id,
                        lemma=intern(child.get("lemma", "").lower()),
                        pos=intern(child.get("pos", "")),
                        start=len(tokens),
                        end=len(tokens) + len(words),
                        sense_keys=keys,
                    ))
                tokens.extend(intern(w) for w in words)
            sentences.append(WsdSentence(elem.get("id"), tuple(tokens), tuple(instances)))
            elem.clear()
            if limit is not None and len(sentences) >= limit:
                break
    if missing_gold:
        log.warning("%s: %d instances have no line in %s", name, missing_gold, gold_path)
    log.info("read %s: %d sentences, %d instances", name, len(sentences),
                sum(len(s.instances) for s in sentences))
    return sentences


@renamed_keywords(root="data_root")
def read_wsd_corpora(names: Iterable[str], data_root: str | os.PathLike | None = None) -> list[WsdSentence]:
    """Concatenate evaluation sets; ids get the prefix ``NAME.`` exactly as in ALL's files.

    ``read_wsd_corpora(PETERS_2018_TEST_SETS)`` is the 6,798-instance set of Peters et al. (2018).
    """
    out: list[WsdSentence] = []
    for name in names:
        for s in read_wsd_corpus(name, data_root):
            out.append(WsdSentence(
                f"{name}.{s.sentence_id}", s.tokens,
                tuple(WsdInstance(f"{name}.{i.instance_id}", i.lemma, i.pos, i.start, i.end,
                                  i.sense_keys) for i in s.instances)))
    return out


def gold_keys(sentences: Iterable[WsdSentence]) -> dict[str, frozenset[str]]:
    """{instance id: gold keys} for scoring."""
    return {i.instance_id: i.sense_keys for s in sentences for i in s.instances}


def iter_instances(sentences: Iterable[WsdSentence]):
    """Yield (sentence, instance) pairs in corpus order."""
    for s in sentences:
        for i in s.instances:
            yield s, i


# --------------------------------------------------------------------------- WordNet 3.0


def normalize_pos(pos: str) -> str:
    """'n'/'noun'/'NOUN' -> 'NOUN' (likewise VERB, ADJ incl. satellite 's', ADV)."""
    upper = pos.upper()
    if upper in _WORDNET_POS:
        return upper
    try:
        return _POS_ALIASES[pos.lower()]
    except KeyError:
        raise ValueError(f"unknown part of speech {pos!r}; expected one of {', '.join(WSD_POS)} "
                         "or WordNet's n/v/a/s/r") from None


def _normalize_lemma(lemma: str) -> str:
    return "_".join(lemma.lower().split())


_wordnet_reader = None


@renamed_keywords(root="data_root")
def wordnet(data_root: str | os.PathLike | None = None):
    """NLTK's WordNet 3.0 reader from ``<data_root>/nltk_data`` (put first on ``nltk.data.path``).

    The first call loads the index (~4-5 s); later calls return the same reader: NLTK keeps one
    global reader, so the first data root used wins for the whole process.
    """
    global _wordnet_reader
    if _wordnet_reader is not None:
        return _wordnet_reader
    require("wordnet", data_root)
    nltk_dir = use_nltk_data(data_root)
    from nltk.corpus import wordnet as wn  # imported here: nltk takes seconds to import

    version = wn.get_version()
    if version != "3.0":
        raise RuntimeError(f"NLTK loaded WordNet {version} from {wn.root}; the WSD sense keys "
                           f"need WordNet 3.0 from {nltk_dir}")
    _wordnet_reader = wn
    return wn


@functools.lru_cache(maxsize=200_000)
def candidate_senses(lemma: str, pos: str) -> tuple[str, ...]:
    """Sense keys of ``lemma`` as ``pos`` in WordNet order (first = most frequent sense).

    ``lemma`` is matched case-insensitively against synset lemma names, spaces as ``_``;
    morphological variants that NLTK's morphy adds (e.g. 'find' for 'found') are left out.
    Returns () if WordNet does not have the lemma with that pos.
    """
    wn = wordnet()
    name = _normalize_lemma(lemma)
    keys: list[str] = []
    for synset in wn.synsets(name, _WORDNET_POS[normalize_pos(pos)]):
        for lem in synset.lemmas():
            if lem.name().lower() == name:
                key = lem.key().lower()
                if key not in keys:
                    keys.append(key)
    return tuple(keys)


def first_sense(lemma: str, pos: str) -> str | None:
    """WordNet's first sense key of ``lemma`` as ``pos``, or None if it has none."""
    keys = candidate_senses(lemma, pos)
    return keys[0] if keys else None


@functools.lru_cache(maxsize=200_000)
def sense_key_to_synset(sense_key: str):
    """The NLTK ``Synset`` of a WordNet 3.0 sense key; KeyError naming the key if unknown."""
    wn = wordnet()
    try:
        return wn.lemma_from_key(sense_key.lower()).synset()
    except Exception as e:  # NLTK raises WordNetError or ValueError depending on the key
        raise KeyError(f"sense key {sense_key!r} is not in WordNet 3.0 ({e})") from None


def gloss(sense_key: str) -> str:
    """The definition of the synset a sense key belongs to."""
    return sense_key_to_synset(sense_key).definition()


def unresolved_gold_keys(sentences: Iterable[WsdSentence]) -> dict[str, list[str]]:
    """{instance id: its gold keys that WordNet 3.0 does not resolve}; {} when all resolve."""
    bad: dict[str, list[str]] = {}
    for _s, inst in iter_instances(sentences):
        for key in sorted(inst.sense_keys):
            try:
                sense_key_to_synset(key)
            except KeyError:
                bad.setdefault(inst.instance_id, []).append(key)
    return bad


# --------------------------------------------------------------------------- scoring


@dataclass(frozen=True)
class WsdScore(JsonDataclass):
    """Raganato scorer figures; precision/recall/f1 are fractions in [0, 1], not percent."""

    precision: float
    recall: float
    f1: float
    n_correct: int
    n_answered: int
    n_total: int


def wsd_f1(gold: Mapping[str, Iterable[str]], pred: Mapping[str, str | None]) -> WsdScore:
    """Score one predicted key per instance against gold key sets.

    Correct if the prediction is in the instance's gold set. precision = correct / answered,
    recall = correct / all gold instances, F1 their harmonic mean (as Raganato et al.'s scorer
    with one answer per instance). A None prediction counts as unanswered; a prediction for an
    id missing from ``gold`` is an error.
    """
    unknown = [i for i in pred if i not in gold]
    if unknown:
        raise ValueError(f"{len(unknown)} predicted instance ids are not in the gold keys, e.g. {unknown[:3]}")
    answered = {i: k for i, k in pred.items() if k is not None}
    correct = sum(1 for i, k in answered.items() if k.lower() in {g.lower() for g in gold[i]})
    n_answered, n_total = len(answered), len(gold)
    p = correct / n_answered if n_answered else 0.0
    r = correct / n_total if n_total else 0.0
    f1 = 2 * p * r / (p + r) if p + r else 0.0
    return WsdScore(p, r, f1, correct, n_answered, n_total)


def first_sense_predictions(sentences: Iterable[WsdSentence]) -> dict[str, str]:
    """WordNet first-sense baseline: {instance id: first sense key}; instances whose lemma/pos
    WordNet lacks are left unanswered."""
    pred: dict[str, str] = {}
    for _s, inst in iter_instances(sentences):
        key = first_sense(inst.lemma, inst.pos)
        if key is not None:
            pred[inst.instance_id] = key
    return pred


# --------------------------------------------------------------------------- lemma index


@dataclass(frozen=True, slots=True)
class LemmaOccurrence:
    """One tagged occurrence of a lemma: its sentence (words) and instance (span, keys)."""

    sentence: WsdSentence
    instance: WsdInstance

    @property
    def tokens(self) -> tuple[str, ...]:
        return self.sentence.tokens

    @property
    def span(self) -> tuple[int, int]:
        return self.instance.span

    @property
    def sense_keys(self) -> frozenset[str]:
        return self.instance.sense_keys


@functools.lru_cache(maxsize=4)
def _lemma_index(corpus: str, data_root: str | None) -> dict[str, tuple[LemmaOccurrence, ...]]:
    """{lemma: occurrences in corpus order}, built once per (corpus, data root)."""
    index: dict[str, list[LemmaOccurrence]] = {}
    for s, inst in iter_instances(read_wsd_corpus(corpus, data_root)):
        index.setdefault(inst.lemma, []).append(LemmaOccurrence(s, inst))
    return {lemma: tuple(occ) for lemma, occ in index.items()}


@renamed_keywords(root="data_root")
def lemma_occurrences(lemma: str, pos: str | None = None, corpus: str = "semcor",
                      data_root: str | os.PathLike | None = None) -> tuple[LemmaOccurrence, ...]:
    """All tagged occurrences of ``lemma`` (optionally only as ``pos``) in ``corpus``.

    The first call reads the corpus and indexes it (~5 s, ~130 MB for SemCor); then lookups.
    """
    root_key = str(resolve_data_root(data_root))
    found = _lemma_index(corpus, root_key).get(_normalize_lemma(lemma), ())
    if pos is None:
        return found
    want = normalize_pos(pos)
    return tuple(o for o in found if o.instance.pos == want)
