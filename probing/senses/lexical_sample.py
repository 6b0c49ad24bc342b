"""The Senseval-2 lexical-sample probe: where sense information sits, seen by a supervised probe.

:func:`lexical_sample_probe` trains a linear (logistic-regression) probe per biLM layer for each
Senseval-2 lexical-sample word NLTK's ``senseval`` corpus holds (hard, interest, line, serve),
beside the majority-sense baseline and a control task (Hewitt & Liang 2019), so selectivity =
accuracy - control accuracy. A second view of word sense next to the all-words 1-NN WSD of
``probing.senses.wsd``.

CLI (with the all-words table)::

    python -m probing.senses.wsd --model elmo-mini --lexical-sample [--max-instances 600]
"""

from __future__ import annotations

import functools
import json
import logging
import os
import random
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from elmo_model.bilm.identity import model_identity
from elmo_model.plumbing.progress import ProgressCallback
from probing.data import require, use_nltk_data
from probing.engine.activations import extract_activations
from probing.engine.envelope import from_plain, to_plain, with_model_identity
from probing.engine.renamed_keywords import renamed_keywords
from probing.senses.instance_vectors import span_vectors
from probing.senses.semcor_index import as_count_callback, report_progress

log = logging.getLogger(__name__)

RESULT_VERSION = 1

SENSEVAL_WORDS = ("hard", "interest", "line", "serve")
"""The Senseval-2 lexical-sample words NLTK's ``senseval`` corpus holds."""


@dataclass(frozen=True)
class LexicalSampleInstance:
    """One Senseval-2 lexical-sample context: words (windowed), the target's index, its sense."""

    tokens: tuple[str, ...]
    position: int
    sense: str


@renamed_keywords(root="data_root")
def read_lexical_sample(word: str, data_root: str | os.PathLike | None = None, *, max_instances: int | None = None,
                        window: int = 30, seed: int = 0) -> list[LexicalSampleInstance]:
    """The Senseval-2 lexical sample of ``word`` (hard, interest, line or serve) from NLTK's
    ``senseval`` corpus in the data root.

    NLTK's contexts are lower-cased, POS-tagged words (the tags are dropped here, and so are
    the few bare-string markers such as ``FRASL``); every instance has one sense label.
    ``window``: words kept on each side of the target (the contexts run to several
    sentences). ``max_instances``: a seeded random sample of that many (None: all). NLTK parses
    the whole file (seconds) the first time a process reads a word; later reads of it sample
    from the contexts kept then.
    """
    if word not in SENSEVAL_WORDS:
        raise ValueError(f"no Senseval-2 lexical sample for {word!r}; NLTK has {', '.join(SENSEVAL_WORDS)}")
    require("senseval", data_root)
    use_nltk_data(data_root)
    from nltk.corpus import senseval  # imported here: nltk takes seconds to import, only this reader needs it

    # the archive NLTK's reader opened (it keeps one a process: the first data root used wins), as it is now
    archive = Path(getattr(getattr(senseval.root, "zipfile", None), "filename", None) or str(senseval.root))
    version = (str(senseval.abspath(f"{word}.pos")), archive.stat().st_mtime_ns, archive.stat().st_size)
    out = list(_contexts(word, window, version))
    if max_instances is not None and len(out) > max_instances:
        chosen = sorted(random.Random(seed).sample(range(len(out)), max_instances))
        out = [out[i] for i in chosen]
    return out


@functools.lru_cache(maxsize=8)
def _contexts(word: str, window: int, version: tuple) -> tuple[LexicalSampleInstance, ...]:
    """Every context of ``word`` NLTK's reader parses, windowed, once per ``version`` of its file
    (path, mtime, size); immutable, so shared."""
    from nltk.corpus import senseval

    out = []
    for inst in senseval.instances(f"{word}.pos"):
        words, position = [], None
        for k, item in enumerate(inst.context):
            if not isinstance(item, tuple):
                continue
            if k == inst.position:
                position = len(words)
            words.append(str(item[0]))
        if position is None or not inst.senses:
            continue
        lo = max(0, position - window)
        out.append(LexicalSampleInstance(tuple(words[lo:position + window + 1]), position - lo,
                                         str(inst.senses[0])))
    return tuple(out)


def control_key(instance: LexicalSampleInstance) -> str:
    """The word type a control label is keyed by: the target's surface form and the word after it
    (the target word is the same in every context of a word, so it alone would key one label)."""
    after = instance.tokens[instance.position + 1] if instance.position + 1 < len(instance.tokens) else "</s>"
    return f"{instance.tokens[instance.position]} {after}"


def _split_indices(labels: Sequence[str], fractions: Sequence[float], seed: int) -> list[np.ndarray]:
    """Indices of ``labels`` split by ``fractions`` (train, dev, test; summing to 1), each part
    stratified by label where every label has enough items, else drawn at random."""
    rest = np.arange(len(labels))
    parts = []
    for k, share in enumerate(fractions[:-1]):
        remaining = float(sum(fractions[k:]))
        sub = [labels[i] for i in rest]
        try:
            taken, rest = train_test_split(rest, train_size=share / remaining, random_state=seed, stratify=sub)
        except ValueError:  # a sense with one context, or more senses than a part has items
            taken, rest = train_test_split(rest, train_size=share / remaining, random_state=seed)
        parts.append(np.sort(taken))
    return [*parts, np.sort(rest)]


def lexical_sample_splits(model, data_root: str | os.PathLike | None = None, *, words: Sequence[str] = SENSEVAL_WORDS,
                          max_instances: int | None = 600, window: int = 30,
                          fractions: Sequence[float] = (0.6, 0.2, 0.2), seed: int = 0,
                          cache_dir: str | os.PathLike | None = None, batch_size: int = 32,
                          ) -> dict[str, tuple[list[LexicalSampleInstance], np.ndarray]]:
    """The lexical sample of ``words`` pooled into one labelling: each word's seeded sample of
    ``max_instances`` contexts split train/dev/test by ``fractions`` (stratified by sense where
    the senses allow), the words' parts joined. Returns {split: (instances, target vectors
    (n_layers, n, dim) float32)}, the vectors through the activation cache (the keys
    :func:`lexical_sample_probe` uses, so the two share their extractions)."""
    if len(fractions) != 3 or abs(sum(fractions) - 1.0) > 1e-9 or min(fractions) <= 0:
        raise ValueError(f"fractions must be three positive shares (train, dev, test) summing to 1, got {fractions}")
    out: dict[str, tuple[list[LexicalSampleInstance], list[np.ndarray]]] = {
        s: ([], []) for s in ("train", "dev", "test")}
    for word in words:
        instances = read_lexical_sample(word, data_root, max_instances=max_instances, window=window, seed=seed)
        if len(instances) < 10:
            raise ValueError(f"the lexical sample of {word!r} has {len(instances)} contexts; at least 10 are needed")
        vectors = lexical_sample_features(model, instances, word, cache_dir=cache_dir, batch_size=batch_size)
        parts = _split_indices([i.sense for i in instances], fractions, seed)
        for split, rows in zip(out, parts):
            out[split][0].extend(instances[i] for i in rows)
            out[split][1].append(vectors[:, rows])
    return {split: (chosen, np.concatenate(arrays, axis=1)) for split, (chosen, arrays) in out.items()}


def control_labels(keys: Sequence[str], labels: Sequence[str], seed: int = 0) -> list[str]:
    """Hewitt & Liang (2019) control task: each distinct ``key`` (a word type) gets a random
    label drawn from the empirical distribution of ``labels``; every occurrence of the key
    carries it. Deterministic for a seed."""
    rng = np.random.default_rng(seed)
    counts = Counter(labels)
    names = sorted(counts)
    p = np.array([counts[n] for n in names], dtype=np.float64)
    p /= p.sum()
    mapping: dict[str, str] = {}
    for key in sorted(set(keys)):
        mapping[key] = names[int(rng.choice(len(names), p=p))]
    return [mapping[k] for k in keys]


def probe_accuracy(x_train: np.ndarray, y_train: Sequence, x_test: np.ndarray, y_test: Sequence,
                   seed: int = 0, c: float = 1.0) -> float:
    """Accuracy of a multinomial logistic-regression probe (standardised features, L2 with
    inverse strength ``c``) trained on the train split, on the test split."""
    if len(set(y_train)) < 2:
        label = next(iter(y_train))
        return float(np.mean([y == label for y in y_test]))
    probe = make_pipeline(StandardScaler(), LogisticRegression(C=c, max_iter=2000, random_state=seed))
    probe.fit(x_train, list(y_train))
    return float(probe.score(x_test, list(y_test)))


@dataclass
class LexicalSampleWord:
    """Probe figures for one word: accuracies in [0, 1] per layer (index = layer)."""

    word: str
    sense_counts: dict[str, int]
    n_train: int
    n_test: int
    majority_accuracy: float
    layer_accuracy: list[float]
    control_accuracy: list[float]

    @property
    def selectivity(self) -> list[float]:
        """Task accuracy minus control accuracy, per layer."""
        return [a - c for a, c in zip(self.layer_accuracy, self.control_accuracy)]


@dataclass
class LexicalSampleResult:
    """The Senseval-2 lexical-sample probe (see :func:`lexical_sample_probe`)."""

    model_name: str
    model_identity: str
    words: list[LexicalSampleWord]
    settings: dict
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        return json.dumps({"kind": "wsd_lexical_sample", "version": RESULT_VERSION, **to_plain(self)})

    @classmethod
    def from_json(cls, text: str) -> "LexicalSampleResult":
        d = json.loads(text)
        if d.get("kind") != "wsd_lexical_sample" or d.get("version") != RESULT_VERSION:
            raise ValueError(f"not a lexical-sample result (kind {d.get('kind')!r})")
        return from_plain(cls, with_model_identity(d))


def lexical_sample_features(model, instances: Sequence[LexicalSampleInstance], word: str, *,
                            cache_dir: str | os.PathLike | None = None, batch_size: int = 32,
                            progress: ProgressCallback | None = None) -> np.ndarray:
    """The target word's vector in every layer, (n_layers, N, dim) float32, through the
    activation cache (``dataset="senseval2_lexical_sample"``, ``split=word``)."""
    tokens = [list(i.tokens) for i in instances]
    cache = extract_activations(model, tokens, "senseval2_lexical_sample", word, cache_dir=cache_dir,
                                batch_size=batch_size, progress=as_count_callback(progress, f"embedding {word!r}"))
    rows = cache.offsets[:-1] + np.array([i.position for i in instances])
    out = np.stack([span_vectors(cache, j, rows, rows + 1) for j in range(cache.n_layers)])
    cache.close()
    return out


@renamed_keywords(root="data_root")
def lexical_sample_probe(model, data_root: str | os.PathLike | None = None, *, words: Sequence[str] = SENSEVAL_WORDS,
                         max_instances: int | None = 600, window: int = 30, test_fraction: float = 0.25, seed: int = 0,
                         cache_dir: str | os.PathLike | None = None, batch_size: int = 32,
                         progress: ProgressCallback | None = None) -> LexicalSampleResult:
    """A linear sense probe per layer for each Senseval-2 lexical-sample word.

    Per word: a seeded sample of ``max_instances`` contexts (None: all; there are 2,368 to
    4,378 a word), ``window`` words each side of the target, a stratified train/test split
    (``test_fraction``), a logistic-regression probe per layer on the target's vector, the
    majority-sense baseline, and a control task (Hewitt & Liang 2019). The target word type
    is the same in every context, so the control label is keyed by the word type *after* the
    target (its surface form + the next word): a random sense per such type, from the sense
    distribution, which a probe can only memorise. Selectivity = accuracy - control accuracy.
    """
    results = []
    notes = []
    checksum = model_identity(model)
    for k, word in enumerate(words):
        report_progress(progress, "lexical-sample probe", k, len(words), "words")
        instances = read_lexical_sample(word, data_root, max_instances=max_instances, window=window, seed=seed)
        x = lexical_sample_features(model, instances, word, cache_dir=cache_dir,
                                    batch_size=batch_size, progress=progress)
        y = [i.sense for i in instances]
        counts = Counter(y)
        stratify = y if min(counts.values()) >= 2 else None
        if stratify is None:
            notes.append(f"{word}: a sense with a single sampled context; the split is not stratified.")
        idx_train, idx_test = train_test_split(np.arange(len(y)), test_size=test_fraction,
                                               random_state=seed, stratify=stratify)
        keys = [control_key(i) for i in instances]
        control = control_labels(keys, y, seed=seed)
        y_train, y_test = [y[i] for i in idx_train], [y[i] for i in idx_test]
        c_train, c_test = [control[i] for i in idx_train], [control[i] for i in idx_test]
        majority = Counter(y_train).most_common(1)[0][0]
        accuracy, control_accuracy = [], []
        for j in range(x.shape[0]):
            accuracy.append(probe_accuracy(x[j, idx_train], y_train, x[j, idx_test], y_test, seed))
            control_accuracy.append(probe_accuracy(x[j, idx_train], c_train, x[j, idx_test], c_test, seed))
        results.append(LexicalSampleWord(
            word=word, sense_counts=dict(sorted(counts.items())), n_train=len(idx_train),
            n_test=len(idx_test), majority_accuracy=float(np.mean([t == majority for t in y_test])),
            layer_accuracy=accuracy, control_accuracy=control_accuracy))
    report_progress(progress, "lexical-sample probe", len(words), len(words), "words")
    return LexicalSampleResult(
        model_name=str(getattr(model, "name", "") or "biLM"), model_identity=checksum, words=results,
        settings={"max_instances": max_instances, "window": window, "test_fraction": test_fraction,
                  "seed": seed, "probe": "logistic regression, standardised features, C=1"},
        notes=notes)


def format_lexical_sample_table(result: LexicalSampleResult) -> str:
    """Accuracy (percent) per word and layer, with majority and control baselines."""
    n_layers = len(result.words[0].layer_accuracy) if result.words else 0
    head = f"{'word':<10}{'n':>6}{'majority':>10}" + "".join(f"{'layer ' + str(j):>10}" for j in range(n_layers))
    lines = [head, "-" * len(head)]
    for w in result.words:
        lines.append(f"{w.word:<10}{w.n_train + w.n_test:>6}{100 * w.majority_accuracy:>10.1f}"
                     + "".join(f"{100 * a:>10.1f}" for a in w.layer_accuracy))
        lines.append(f"{'  control':<10}{'':>6}{'':>10}"
                     + "".join(f"{100 * a:>10.1f}" for a in w.control_accuracy))
    lines.extend(f"note: {n}" for n in result.notes)
    return "\n".join(lines)
