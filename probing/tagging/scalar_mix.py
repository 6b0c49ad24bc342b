"""Scalar mix by hand: what a probe scores, and which SemCor occurrences are nearest, for s_j you set.

ELMo combines its layers as ``ELMo = gamma * sum_j s_j h_j`` and learns s_j per task
(``probing.tagging.probes.ScalarMixProbe``; the suite reports them). This module answers the question a
student asks next: *what if I set s_j myself?*

    >>> from probing.tagging.scalar_mix import load_mix_task, explore_mix
    >>> data = load_mix_task(model, "pos", limit=200)           # features of every layer, once
    >>> view = explore_mix(data, [0.2, 0.5, 0.3])               # one probe fit, ~a second
    >>> view.score.estimate, view.single_layer[1].estimate, view.uniform.estimate

- :func:`load_mix_task` reads a task's train/dev/test slices (``probing.tagging.tasks``), extracts
  every layer through the activation cache and preprocesses **each layer on its own** exactly as
  ``ScalarMixProbe`` does (centred and whitened on the training tokens), so the s_j set here are
  in the same units as the learned ones and can be compared with them. It then chooses the L2
  penalty on dev for the uniform mix and scores each single layer and the uniform mix once.
- :func:`explore_mix` mixes the preprocessed layers with the given s_j (normalised to sum to 1;
  gamma does not change a probe on whitened features, so it is not a parameter), trains one
  ``LinearProbe`` at that penalty on train and scores it on test with a bootstrap interval over
  sentences. Given a :class:`~probing.senses.retrieval.SenseRetriever`, it also lists the nearest SemCor
  occurrences of a query word under the same s_j: each layer's vector is scaled to unit length
  before mixing (a cosine space where s_j is the share of each layer's direction; raw layers
  differ in norm, which would let one layer drown the others whatever s_j says).
- :func:`lemma_mixes` is the per-lemma view of the app and of the probe report: learned s_j per
  lemma (``probing.senses.word_senses``) from SemCor, from the labelled demo sentences, or SemCor with
  the demo sentences as fallback, several lemmas side by side, refusals (too few occurrences, one
  sense) listed with their reason.

Memory: :class:`MixTask` holds every layer of the three slices as float32,
3 x n_layers x n_tokens x dim x 4 bytes (200 EWT sentences a split, ~3,400 tokens, 3 layers of
512: ~60 MB), so :func:`load_mix_task` caps the slice at :data:`MAX_SENTENCES`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from elmo_model.bilm.identity import model_identity
from elmo_model.corpus.embedder import ElmoEmbedder
from elmo_model.plumbing.io_safety import read_checked_json, write_checked_json
from elmo_model.plumbing.progress import ProgressCallback
from elmo_model.text.tokenizer import tokenize
from probing.context.playground import DemoSet, demo_set_names, load_demo_set
from probing.engine.activations import default_cache_dir, extract_activations
from probing.engine.envelope import TaggedJson
from probing.engine.metrics import BootstrapInterval, accuracy, bootstrap_ci, chunk_f1
from probing.engine.renamed_keywords import renamed_keywords
from probing.senses import word_senses
from probing.senses.corpora import gloss, wordnet
from probing.senses.word_senses import WordSensesComparison, WordSensesRefused, WordSensesResult
from probing.senses.wsd import normalize_lemma, unit_rows
from probing.tagging.probes import LinearProbe, _preprocessing, fit_on_dev
from probing.tagging.results import SuiteResult
from probing.tagging.tasks import TASKS, load_task

log = logging.getLogger(__name__)

RESULT_VERSION = 1
MAX_SENTENCES = 1000
"""At most this many sentences a split: every layer of the three splits is kept in memory
(1,000 EWT sentences a split, 3 layers of 512: about 250 MB)."""

DEFAULT_ALPHAS = (1e-2, 1e-3, 1e-4)
SPLITS = ("train", "dev", "test")


# --------------------------------------------------------------------------------------------
# A task's features, every layer, preprocessed per layer
# --------------------------------------------------------------------------------------------


@dataclass
class MixTask:
    """One task's slices with every layer preprocessed on its own (see the module docstring).

    ``features[split]``: (n_layers, n_tokens, dim) float32; ``labels[split]``: (n_tokens,) str;
    ``lengths[split]``: tokens per sentence (to score per sentence); ``alpha``: the probe's L2
    penalty, chosen on dev for the uniform mix; ``single_layer``: test score of each layer alone;
    ``uniform``: test score of s_j = 1/n_layers; ``notes``: what was capped or chosen.
    """

    task: str
    dataset: str
    metric: str
    model_name: str
    layers: list[int]
    features: dict[str, np.ndarray]
    labels: dict[str, np.ndarray]
    lengths: dict[str, np.ndarray]
    alpha: float
    single_layer: list[BootstrapInterval]
    uniform: BootstrapInterval
    limit: int | None
    seed: int
    notes: list[str] = field(default_factory=list)

    @property
    def n_layers(self) -> int:
        return len(self.layers)

    def mixed(self, split: str, weights: np.ndarray) -> np.ndarray:
        """sum_j s_j z_j for ``split``: (n_tokens, dim) float32."""
        return np.tensordot(weights.astype(np.float32), self.features[split], axes=1)


def _per_sentence(flat: np.ndarray, lengths: np.ndarray) -> list[list[str]]:
    return [list(part) for part in np.split(np.asarray(flat), np.cumsum(lengths)[:-1])]


def _fit_and_score(task: MixTask, weights: np.ndarray, alpha: float, seed: int,
                   n_bootstrap: int = 1000) -> BootstrapInterval:
    probe = LinearProbe(alpha=alpha, max_iter=30, random_state=seed)
    probe.fit(task.mixed("train", weights), task.labels["train"])
    pred = probe.predict(task.mixed("test", weights))
    lengths = task.lengths["test"]
    return bootstrap_ci(_per_sentence(task.labels["test"], lengths), _per_sentence(pred, lengths),
                        task.metric, n_resamples=n_bootstrap, seed=seed)


def _dev_score(task: MixTask, probe, weights: np.ndarray) -> float:
    lengths = task.lengths["dev"]
    gold = _per_sentence(task.labels["dev"], lengths)
    pred = _per_sentence(probe.predict(task.mixed("dev", weights)), lengths)
    return accuracy(gold, pred) if task.metric == "accuracy" else chunk_f1(gold, pred).f1


def load_mix_task(model, task: str, *, data_root: str | os.PathLike | None = None,
                  cache_dir: str | os.PathLike | None = None, limit: int | None = 200, seed: int = 0,
                  alphas: Sequence[float] = DEFAULT_ALPHAS, progress: ProgressCallback | None = None) -> MixTask:
    """Features of ``task`` ("pos", "upos", "chunk") for every layer of ``model`` (a ``BiLM``),
    first ``limit`` sentences a split (at most :data:`MAX_SENTENCES`), preprocessed per layer as
    ``ScalarMixProbe`` does; the penalty chosen on dev for the uniform mix; each single layer and
    the uniform mix scored on test. ``progress(label, done, total, unit)``.

    Raises ValueError for an unknown task or an empty slice, ``DatasetMissing`` when the data
    root lacks the task's dataset.
    """
    if task not in TASKS:
        raise ValueError(f"unknown task {task!r}; choose from {', '.join(TASKS)}")
    notes = []
    if limit is None or limit > MAX_SENTENCES:
        notes.append(f"the slider view reads the first {MAX_SENTENCES:,} sentences of each split "
                     "(every layer is kept in memory)")
        limit = MAX_SENTENCES
    if limit < 1:
        raise ValueError(f"limit must be at least 1 sentence, got {limit}")
    spec = TASKS[task]
    n_layers = model.config.n_output_layers
    layers = list(range(n_layers))
    features, labels, lengths = {}, {}, {}
    steps = len(SPLITS) + len(alphas) + n_layers + 1
    done = 0

    def report(label: str) -> None:
        if progress is not None:
            progress(label, done, steps, "steps")

    for split in SPLITS:
        sentences = load_task(task, split, data_root=data_root, limit=limit)
        if not sentences or not any(len(s) for s in sentences):
            raise ValueError(f"task {task}: the {split} split has no tokens")
        report(f"{task}: activations of {split}")
        cache = extract_activations(model, [list(s.tokens) for s in sentences], spec.dataset, split,
                                    cache_dir=cache_dir,
                                    progress=None if progress is None else (
                                        lambda d, t, s=split: progress(f"{task}: embedding {s}", d, t, "sentences")))
        try:
            features[split] = np.stack([cache.layer(j) for j in layers]).astype(np.float32)
        finally:
            cache.close()
        labels[split] = np.array([t for s in sentences for t in s.tags], dtype=str)
        lengths[split] = np.array([len(s) for s in sentences], dtype=np.int64)
        done += 1
    # each layer centred and whitened on the training tokens, as ScalarMixProbe's layers are
    for j in layers:
        mean, transform = _preprocessing(features["train"][j], "whiten", 1e-2)
        for split in SPLITS:
            features[split][j] = ((features[split][j] - mean) @ transform).astype(np.float32)

    data = MixTask(task=task, dataset=spec.dataset, metric=spec.metric,
                   model_name=str(getattr(model, "name", "") or "biLM"), layers=layers, features=features,
                   labels=labels, lengths=lengths, alpha=float(alphas[0]), single_layer=[],
                   uniform=None, limit=limit, seed=seed, notes=notes)  # type: ignore[arg-type]
    uniform = np.full(n_layers, 1.0 / n_layers)
    report(f"{task}: choosing the probe's penalty on dev")
    probe, path = fit_on_dev(LinearProbe(max_iter=30, random_state=seed), data.mixed("train", uniform),
                             labels["train"], lambda p: _dev_score(data, p, uniform), alphas, warm_max_iter=15)
    done += len(alphas)
    data.alpha = float(probe.alpha)
    notes.append(f"probe: softmax regression, L2 penalty {data.alpha:g} (chosen on dev for the uniform mix "
                 f"among {', '.join(f'{a:g}' for a in alphas)}), 30 L-BFGS iterations")
    for j in layers:
        report(f"{task}: layer {j} alone")
        data.single_layer.append(_fit_and_score(data, np.eye(n_layers)[j], data.alpha, seed))
        done += 1
    report(f"{task}: the uniform mix")
    data.uniform = _fit_and_score(data, uniform, data.alpha, seed)
    done += 1
    report(f"{task}: ready")
    return data


# --------------------------------------------------------------------------------------------
# One setting of s_j
# --------------------------------------------------------------------------------------------


@dataclass
class MixNeighbour:
    """A SemCor occurrence near the query under the hand-set mix (cosine, -1..1)."""

    rank: int
    similarity: float
    sentence: str
    start: int
    end: int
    words: str
    sense_key: str
    gloss: str


@dataclass
class MixView(TaggedJson, kind="mix_view", version=RESULT_VERSION):
    """:func:`explore_mix`'s result. ``weights``: s_j as given, normalised to sum to 1;
    ``score``: the probe on the mixed features (test, 95% bootstrap interval over sentences);
    ``single_layer`` and ``uniform``: the same probe on each layer alone and on s_j = 1/(L+1);
    ``neighbours``: nearest SemCor occurrences of ``word`` (lemma ``lemma``) under these s_j,
    None when no query was given; ``notes``: what the user should know."""

    task: str
    metric: str
    model_name: str
    weights: list[float]
    alpha: float
    score: BootstrapInterval
    single_layer: list[BootstrapInterval]
    uniform: BootstrapInterval
    n_train_tokens: int
    n_test_sentences: int
    word: str | None = None
    lemma: str | None = None
    neighbours: list[MixNeighbour] | None = None
    n_searched: int = 0
    notes: list[str] = field(default_factory=list)


def normalise_weights(weights: Sequence[float], n_layers: int) -> np.ndarray:
    """``weights`` as s_j summing to 1. ValueError unless there are ``n_layers`` finite,
    non-negative numbers with a positive sum."""
    w = np.asarray([float(x) for x in weights], dtype=np.float64)
    if w.shape != (n_layers,):
        raise ValueError(f"expected {n_layers} weights s_j (one per layer), got {len(w)}")
    if not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"s_j must be non-negative numbers, got {list(w)}")
    if w.sum() <= 0:
        raise ValueError("every s_j is 0: give at least one layer a weight above 0")
    return w / w.sum()


def explore_mix(task: MixTask, weights: Sequence[float], *, retriever=None, sentence: str | None = None,
                word: str | None = None, k: int = 5, seed: int | None = None) -> MixView:
    """The probe's test score for the hand-set ``weights`` (normalised), and, with a
    ``retriever`` (``probing.senses.retrieval.SenseRetriever``), a ``sentence`` and a ``word`` of it,
    the ``k`` SemCor occurrences of the word's lemma nearest to it under the same s_j.

    Raises ValueError for bad weights. A word that is not in the sentence (noted with or without a
    retriever), or a lemma SemCor's slice does not have, gives no neighbours and a note instead.
    """
    s = normalise_weights(weights, task.n_layers)
    seed = task.seed if seed is None else seed
    score = _fit_and_score(task, s, task.alpha, seed)
    view = MixView(task=task.task, metric=task.metric, model_name=task.model_name,
                   weights=[float(x) for x in s], alpha=task.alpha, score=score,
                   single_layer=list(task.single_layer), uniform=task.uniform,
                   n_train_tokens=int(len(task.labels["train"])),
                   n_test_sentences=int(len(task.lengths["test"])), notes=list(task.notes))
    if sentence and word:
        _add_neighbours(view, retriever, sentence, word, s, k)
    return view


def _add_neighbours(view: MixView, retriever, sentence: str, word: str, s: np.ndarray, k: int) -> None:
    """The neighbours of ``word`` in ``sentence``; without a ``retriever``, only the notes on a
    query that has no word to search (the caller had no index to search)."""
    tokens = [t for part in tokenize(sentence) for t in part]
    folded = [t.casefold() for t in tokens]
    if not tokens:
        view.notes.append("the query sentence is empty: no neighbours")
        return
    if word.casefold() not in folded:
        view.notes.append(f"{word!r} is not a word of the query sentence: no neighbours")
        return
    if retriever is None:
        return
    index = retriever.index
    position = folded.index(word.casefold())
    lemma, _pos = retriever.guess_lemma(tokens[position])
    view.word, view.lemma = tokens[position], lemma
    rows = index.lemma_rows(lemma)
    if len(rows) == 0:
        view.neighbours = []
        view.notes.append(f"SemCor's first {index.n_sentences:,} sentences have no sense-tagged "
                          f"{lemma!r}: no neighbours (a larger SemCor slice may have some)")
        return
    layers = ElmoEmbedder(retriever.model).embed_sentence(tokens)[:, position]  # (L+1, dim)
    query = sum(float(w) * unit_rows(layers[j][None])[0] for j, w in enumerate(s) if w)
    mixed = sum(float(w) * unit_rows(index.vectors(j, rows)) for j, w in enumerate(s) if w)
    sims = unit_rows(mixed) @ unit_rows(np.asarray(query)[None])[0]
    query_text = " ".join(tokens)
    neighbours = []
    for i in np.argsort(-sims, kind="stable"):
        inst = index.instance(int(rows[i]))
        text = index.sentence_text(inst.sentence)
        if text == query_text:  # a SemCor sentence typed as the query would find itself
            continue
        key = inst.sense_keys[0]
        try:
            definition = gloss(key)
        except KeyError:  # a key WordNet 3.0 does not resolve: shown without a gloss
            definition = ""
        neighbours.append(MixNeighbour(len(neighbours) + 1, float(sims[i]), text, inst.start, inst.end,
                                       " ".join(text.split(" ")[inst.start:inst.end]), key, definition))
        if len(neighbours) == k:
            break
    view.neighbours = neighbours
    view.n_searched = int(len(rows))


# --------------------------------------------------------------------------------------------
# Learned s_j per lemma, several lemmas
# --------------------------------------------------------------------------------------------

LEMMA_SOURCES = ("semcor", "demo", "auto")
MAX_LEMMA_CHARS = 60
WORD_SENSES_CACHE_VERSION = 2


@renamed_keywords(root="data_root")
def lemma_mixes(model, lemmas: Sequence[str | tuple[str, str | None]], *, source: str = "semcor", index=None,
                data_root: str | os.PathLike | None = None, pos: str | None = None,
                max_occurrences: int = 300, min_per_sense: int = 5, seeds: Sequence[int] = (0, 1),
                folds: int = 3, steps: int = 300, cache: bool = False, cache_dir: str | os.PathLike | None = None,
                progress: ProgressCallback | None = None) -> WordSensesComparison:
    """Learned s_j and gamma per lemma (``probing.senses.word_senses.learn_word_senses``), several
    lemmas side by side: a ``WordSensesComparison`` (fitted results, refusals with reasons). The
    one path of the app's Scalar mix page and the probe report's per-lemma panel.

    ``lemmas``: "bank", or ("play", "VERB") to restrict one lemma's part of speech (``pos``
    restricts the plain ones). ``source="semcor"``: the lemmas' occurrences in ``index`` (a
    ``SemcorIndex`` of ``model``), at most ``max_occurrences`` each (sampled with ``seeds[0]``);
    ``source="demo"``: the labelled demo sentences of ``data/demo`` (lemmas are demo-set names:
    bank, bark, play); ``source="auto"``: SemCor, and for a lemma SemCor cannot fit (too few
    occurrences, one sense) without a part of speech, its demo sentences when there is a set
    (the refusal says both reasons otherwise). Blank and repeated lemmas are skipped; a lemma
    that cannot be fitted (or is longer than :data:`MAX_LEMMA_CHARS`: pasted text) is refused
    with its reason. ``cache``: keep each lemma's outcome under ``cache_dir`` (default: the
    activation cache's folder), keyed by everything the fit depends on, so a rerun refits
    nothing. ``progress(label, done, total, "lemmas")``.
    """
    if source not in LEMMA_SOURCES:
        raise ValueError(f"source must be one of {LEMMA_SOURCES}, got {source!r}")
    items: list[tuple[str, str | None]] = []
    for item in lemmas:
        lemma, lemma_pos = (item, pos) if isinstance(item, str) else item
        if str(lemma).strip():
            items.append((normalize_lemma(lemma), lemma_pos))
    items = list(dict.fromkeys(items))
    if not items:
        raise ValueError("no lemma given: pick or type at least one")
    if source in ("semcor", "auto") and index is None:
        raise ValueError(f"source={source!r} needs a SemCor index (probing.senses.wsd.build_semcor_index)")
    refused: dict[str, str] = {}
    for name, lemma_pos in [item for item in items if len(item[0]) > MAX_LEMMA_CHARS]:
        refused[name[:MAX_LEMMA_CHARS] + "…"] = f"not a word ({len(name):,} characters): type one lemma at a time"
        items.remove((name, lemma_pos))
    seeds = tuple(int(s) for s in seeds)
    options = dict(min_per_sense=min_per_sense, seeds=seeds, folds=folds, steps=steps)
    wordnet(data_root)  # glosses, inflections
    results = []
    for k, (name, lemma_pos) in enumerate(items):
        label = name if lemma_pos is None or source == "demo" else f"{name} ({lemma_pos})"
        if progress is not None:
            progress(f"learning s_j for {label!r}", k, len(items), "lemmas")
        # the demo sets hold one sense inventory per word, with no part of speech to restrict:
        # asked for explicitly they are used as they are; as SemCor's fallback only for a plain lemma
        demo = _demo_set(name) if source == "demo" or (source == "auto" and lemma_pos is None) else None
        path = None
        outcome: WordSensesResult | str | None = None
        if cache:
            path = _lemma_cache_path(cache_dir, model, index, source, name, lemma_pos, demo, max_occurrences,
                                     options)
            outcome = _read_cached_outcome(path)
        if outcome is None:
            def inner(text: str, done: float, total: float | None, unit: str = "", k=k) -> None:
                if progress is not None:
                    progress(text, k + (done / total if total else 0.0), len(items), "lemmas")

            outcome = _learn_lemma(model, name, lemma_pos, source=source, index=index, demo=demo, data_root=data_root,
                                   max_occurrences=max_occurrences, progress=inner, **options)
            if path is not None:
                write_checked_json(path, {"result": outcome.to_json()} if isinstance(outcome, WordSensesResult)
                                   else {"refused": outcome})
        if isinstance(outcome, str):
            refused[label] = outcome
        else:
            results.append(outcome)
    if progress is not None:
        progress("learned s_j per lemma", len(items), len(items), "lemmas")
    return WordSensesComparison(results, refused)


def _demo_set(lemma: str) -> DemoSet | None:
    return load_demo_set(lemma) if lemma in demo_set_names() else None


def _learn_lemma(model, lemma: str, pos: str | None, *, source: str, index, demo: DemoSet | None, data_root,
                 max_occurrences: int, seeds: tuple[int, ...], progress: ProgressCallback,
                 **options) -> WordSensesResult | str:
    """One lemma from ``source``: the fitted ``WordSensesResult``, or why it was refused (a str)."""
    fit = dict(options, seeds=seeds, progress=progress)
    if source == "demo":
        if demo is None:
            return (f"no demo sentences for {lemma!r} (demo sets: {', '.join(demo_set_names())}); "
                    "use SemCor for other words")
        try:
            return word_senses.learn_word_senses(_demo_occurrences(model, demo, data_root), **fit)
        except WordSensesRefused as refusal:
            return refusal.reason
    try:
        occurrences = word_senses.semcor_occurrences(index, lemma, pos, max_occurrences=max_occurrences,
                                         seed=seeds[0] if seeds else 0)
        return word_senses.learn_word_senses(occurrences, **fit)
    except WordSensesRefused as refusal:
        if source == "semcor":
            return refusal.reason
        semcor_reason = refusal.reason
    if demo is None:
        return f"SemCor ({index.n_sentences:,} sentences): {semcor_reason}"
    try:
        fitted = word_senses.learn_word_senses(_demo_occurrences(model, demo, data_root), **fit)
    except WordSensesRefused as refusal:
        return f"SemCor: {semcor_reason}; demo sentences: {refusal.reason}"
    fitted.notes.insert(0, f"SemCor ({index.n_sentences:,} sentences): {semcor_reason}; fitted on the "
                           f"shipped demo sentences ({len(demo.texts)}) instead.")
    return fitted


def _demo_occurrences(model, demo: DemoSet, data_root):
    return word_senses.sentence_occurrences(model, demo.texts, demo.senses, demo.word, glosses=demo.glosses,
                                            data_root=data_root)


def _lemma_cache_path(cache_dir, model, index, source: str, lemma: str, pos: str | None, demo: DemoSet | None,
                      max_occurrences: int, options: dict) -> Path:
    """Where one lemma's outcome (fitted s_j, or why it was refused) is cached: keyed by
    everything the fit depends on (the index's model and tokens, or the model alone without an
    index, the source, the lemma, the demo sentences it may use, the seeds and the fit's settings)."""
    data = ([index.model_identity, index.tokens_digest, index.n_sentences] if index is not None
            else [model_identity(model)])
    parts = [WORD_SENSES_CACHE_VERSION, *data, source, lemma, pos,
             None if demo is None else [demo.word, list(demo.texts), list(demo.senses)],
             max_occurrences, {k: (list(v) if isinstance(v, tuple) else v) for k, v in sorted(options.items())}]
    key = hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:32]
    return Path(cache_dir or default_cache_dir()) / "word_senses" / f"{key}.json"


def _read_cached_outcome(path: Path) -> WordSensesResult | str | None:
    """A cached lemma outcome, or None when there is none; an entry edited or damaged on disk is
    ignored (refitted, never reported)."""
    if not path.is_file():
        return None
    cached = read_checked_json(path)
    if cached is None:
        return None
    try:
        return (WordSensesResult.from_json(cached["result"]) if cached.get("result") is not None
                else str(cached["refused"]))
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        log.warning("ignoring a damaged word-senses cache entry %s (%s)", path, err)
        return None


def polysemous_lemmas(index, *, min_occurrences: int = 10, top: int = 40) -> list[tuple[str, int, int]]:
    """SemCor lemmas of ``index`` worth a learned mix: (lemma, occurrences, senses) with at
    least ``min_occurrences`` occurrences and two senses, most occurrences first."""
    counts = np.diff(index.lemma_offsets)
    order = np.argsort(-counts, kind="stable")
    out = []
    for k in order:
        n = int(counts[k])
        if n < min_occurrences:
            break
        rows = range(int(index.lemma_offsets[k]), int(index.lemma_offsets[k + 1]))
        senses = len({index.instance_keys(r)[0] for r in rows})
        if senses >= 2:
            out.append((index.lemmas[k], n, senses))
            if len(out) == top:
                break
    return out


LEARNED_MIX_VERSION = 1


@renamed_keywords(root="data_root")
def learned_mix_path(model_identity: str, tasks: Sequence[str], limit: int | None, data_root: str | os.PathLike,
                     settings: dict | None = None, cache_dir: str | os.PathLike | None = None) -> Path:
    """Where a learned scalar mix (a ``SuiteResult`` of the mix-only probe run) is kept on disk,
    keyed by everything it depends on: the model's weights, the tasks, the slice, the data
    root and the run's settings. Under the activation cache (``$ELMO_WORKBENCH_CACHE`` or the
    user cache), beside the report's cached per-lemma fits, so every browser tab and server
    restart finds a run any of them made."""
    parts = [LEARNED_MIX_VERSION, model_identity, sorted(tasks), limit, str(data_root), settings or {}]
    key = hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:32]
    return Path(cache_dir or default_cache_dir()) / "mix_learned" / f"{key}.json"


def load_learned_mix(path: str | os.PathLike):
    """The ``SuiteResult`` stored at ``path`` (JSON, never unpickled), or None when there is
    none or it cannot be read (a damaged entry is logged and ignored)."""
    path = Path(path)
    if not path.is_file():
        return None
    try:
        return SuiteResult.from_json(path)
    except (ValueError, KeyError, TypeError, OSError) as err:
        log.warning("ignoring a damaged learned-mix cache entry %s (%s)", path, err)
        return None


__all__ = ["LEARNED_MIX_VERSION", "LEMMA_SOURCES", "MAX_SENTENCES", "MixNeighbour", "MixTask", "MixView", "explore_mix",
           "learned_mix_path", "lemma_mixes", "load_learned_mix", "load_mix_task", "normalise_weights",
           "polysemous_lemmas"]
