"""Learned s_j for one polysemous word: which layers separate the senses of "bank", "play"?

ELMo's task-specific combination ``ELMo_k = gamma * sum_j s_j * h_k,j`` (s = softmax(w) over
layers 0..L, a scalar gamma) is learned jointly with a linear sense classifier on one lemma's
sense-tagged occurrences, across several seeds x cross-validation folds, and compared with the
same classifier on each single layer and with the majority sense:

    >>> from probing.senses.word_senses import semcor_occurrences, learn_word_senses
    >>> occ = semcor_occurrences(index, "play", pos="VERB")        # SemCor index of probing.senses.wsd
    >>> result = learn_word_senses(occ)
    >>> result.weights_mean, result.mix_accuracy_mean, result.layer_accuracy_mean

Occurrences come from SemCor (:func:`semcor_occurrences`) or from sentences a user labels
(:func:`sentence_occurrences`, e.g. the demo sets in ``data/demo``). Senses with fewer than
``min_per_sense`` occurrences are merged into "other" (or dropped) and the result says which;
a lemma left with one sense, or too few occurrences, is refused with
:class:`WordSensesRefused` and a message, never fitted.

The model, per fold (full-batch Adam on the training part only):

- every layer is centred and scaled on the training part so its mean squared norm is D (one
  scalar per layer, as ELMo's optional layer norm), so s_j reflects information, not scale;
- logits = W (gamma * sum_j s_j x_j) + b; loss = cross-entropy + ``l2`` * (|W|^2 + gamma^2).
  gamma and W are only determined up to their product; the penalty on both fixes the split.
- the single-layer baselines are the same classifier with s fixed to one layer.
"""

from __future__ import annotations

import logging
import os
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch
from sklearn.model_selection import StratifiedKFold

from elmo_model.bilm import compile_engine
from elmo_model.corpus.embedder import ElmoEmbedder
from elmo_model.plumbing.progress import ProgressCallback
from elmo_model.text.tokenizer import tokenize
from probing.engine.envelope import TaggedJson
from probing.engine.renamed_keywords import renamed_keywords
from probing.senses.corpora import gloss, wordnet
from probing.senses.projections import find_lemma
from probing.senses.wsd import normalize_lemma

log = logging.getLogger(__name__)

RESULT_VERSION = 1
OTHER = "other"
RARE_POLICIES = ("merge", "drop")


class WordSensesRefused(ValueError):
    """The lemma cannot be fitted: a single sense, or too few occurrences. ``lemma`` and
    ``reason`` (the message a user sees) are attributes."""

    def __init__(self, lemma: str, reason: str) -> None:
        super().__init__(f"{lemma!r}: {reason}")
        self.lemma = lemma
        self.reason = reason


@dataclass
class SenseOccurrences:
    """One lemma's labelled occurrences: ``vectors`` (L+1, N, D) float32, ``labels`` (N,),
    ``sentences``/``words`` (N,) for display, ``glosses`` {label: gloss}, ``source``."""

    lemma: str
    pos: str | None
    vectors: np.ndarray
    labels: list[str]
    sentences: list[str]
    words: list[str]
    glosses: dict[str, str]
    source: str
    model_name: str = "biLM"

    def __post_init__(self) -> None:
        n = len(self.labels)
        if self.vectors.ndim != 3 or self.vectors.shape[1] != n:
            raise ValueError(f"vectors must be (layers, {n}, dim), got {self.vectors.shape}")
        if len(self.sentences) != n or len(self.words) != n:
            raise ValueError("sentences, words and labels must have one entry per occurrence")


def semcor_occurrences(index, lemma: str, pos: str | None = None, *,
                       max_occurrences: int | None = 1000, seed: int = 0) -> SenseOccurrences:
    """``lemma``'s SemCor instances from a ``probing.senses.wsd.SemcorIndex`` (label: the first
    gold sense key; gloss from WordNet, which must be loaded: ``wsd_corpora.wordnet(data_root)``)."""
    rows = index.lemma_rows(lemma, pos)
    if max_occurrences is not None and len(rows) > max_occurrences:
        rows = np.array(sorted(random.Random(seed).sample(list(rows), max_occurrences)))
    labels, sentences, words, glosses = [], [], [], {}
    for row in rows:
        inst = index.instance(int(row))
        text = index.sentence_text(inst.sentence)
        key = inst.sense_keys[0]
        labels.append(key)
        sentences.append(text)
        words.append(" ".join(text.split(" ")[inst.start:inst.end]))
        if key not in glosses:
            try:
                glosses[key] = gloss(key)
            except KeyError:
                glosses[key] = ""
    vectors = (np.stack([index.vectors(j, rows) for j in range(index.n_layers)])
               if len(rows) else np.zeros((index.n_layers, 0, index.dim), dtype=np.float32))
    return SenseOccurrences(normalize_lemma(lemma), pos, vectors, labels, sentences, words, glosses,
                            source="semcor", model_name=index.model_name or "biLM")


@renamed_keywords(root="data_root")
def sentence_occurrences(model, texts: Sequence[str], senses: Sequence[str], word: str, *,
                         glosses: dict[str, str] | None = None,
                         data_root: str | os.PathLike | None = None) -> SenseOccurrences:
    """Occurrences of ``word`` in sentences a user labelled (one sense label per text; every
    occurrence in a text gets its label). Inflections count when WordNet is in the data root."""
    if len(texts) != len(senses):
        raise ValueError(f"{len(senses)} sense labels for {len(texts)} sentences")
    try:
        wordnet(data_root)
        use_wordnet = True
    except (FileNotFoundError, RuntimeError):
        use_wordnet = False
    embedder = ElmoEmbedder(model)
    vectors, labels, sentences, words = [], [], [], []
    for text, sense in zip(texts, senses):
        tokens = [t for s in tokenize(str(text)) for t in s]
        spans = find_lemma(tokens, word, use_wordnet=use_wordnet)
        if not spans:
            continue
        layers = embedder.embed_sentence(tokens)
        for start, end in spans:
            vectors.append(layers[:, start:end].mean(axis=1))
            labels.append(str(sense))
            sentences.append(" ".join(tokens))
            words.append(" ".join(tokens[start:end]))
    n_layers, dim = model.config.n_output_layers, model.config.output_dim
    array = np.stack(vectors, axis=1) if vectors else np.zeros((n_layers, 0, dim), dtype=np.float32)
    return SenseOccurrences(word.lower(), None, array.astype(np.float32), labels, sentences, words,
                            dict(glosses or {}), source="sentences",
                            model_name=str(getattr(model, "name", "") or "biLM"))


# --------------------------------------------------------------------------------------------
# Label preparation
# --------------------------------------------------------------------------------------------


def prepare_labels(labels: Sequence[str], min_per_sense: int, rare: str = "merge"
                   ) -> tuple[list[str | None], list[str], list[str], list[str]]:
    """Apply the minimum per sense. Returns (new label per occurrence, None = dropped;
    merged senses; dropped senses; notes). ``rare="merge"`` pools senses below the minimum
    into "other" when the pool reaches the minimum itself (else they are dropped);
    ``rare="drop"`` drops them."""
    if rare not in RARE_POLICIES:
        raise ValueError(f"rare must be one of {RARE_POLICIES}, got {rare!r}")
    counts = Counter(labels)
    small = sorted(s for s, c in counts.items() if c < min_per_sense)
    notes: list[str] = []
    merged: list[str] = []
    dropped: list[str] = []
    if small and rare == "merge" and sum(counts[s] for s in small) >= min_per_sense and len(small) > 1:
        merged = small
        notes.append(f"{len(small)} senses with fewer than {min_per_sense} occurrences each "
                     f"({sum(counts[s] for s in small)} in all) are merged into {OTHER!r}.")
    elif small:
        dropped = small
        notes.append(f"{len(small)} senses with fewer than {min_per_sense} occurrences each "
                     f"({sum(counts[s] for s in small)} in all) are dropped.")
    out = [OTHER if s in merged else (None if s in dropped else s) for s in labels]
    return out, merged, dropped, notes


# --------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------


def _scale_layers(train: np.ndarray, test: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Centre each layer on the training mean and scale it so the training vectors' mean
    squared norm is D. ``train`` (L+1, n, D), ``test`` (L+1, m, D)."""
    mean = train.mean(axis=1, keepdims=True)
    centred = train - mean
    rms = np.sqrt((centred ** 2).sum(axis=2).mean(axis=1) / train.shape[2])[:, None, None]
    rms = np.where(rms > 0, rms, 1.0)
    return centred / rms, (test - mean) / rms


def fit_scalar_mix(x: np.ndarray, y: np.ndarray, n_classes: int, *, seed: int = 0, fixed_layer: int | None = None,
                   l2: float = 1e-3, steps: int = 300, lr: float = 0.05):
    """Fit ``softmax(w)``, gamma and a linear classifier on ``x`` (L+1, n, D) float32 with
    integer labels ``y`` (n,). ``fixed_layer``: s one-hot on that layer (not learned).
    Returns ``predict(x_test) -> labels``, s (L+1,) and gamma."""
    n_layers, _n, dim = x.shape
    xt = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
    yt = torch.from_numpy(np.asarray(y, dtype=np.int64))
    w = torch.zeros(n_layers, requires_grad=fixed_layer is None)
    gamma = torch.ones((), requires_grad=True)
    with compile_engine.RNG_LOCK:  # no compile in another thread rewinds the RNG between the seed and the draws
        torch.manual_seed(seed)
        linear = torch.nn.Linear(dim, n_classes)
        torch.nn.init.normal_(linear.weight, std=0.01)
    torch.nn.init.zeros_(linear.bias)
    one_hot = None
    if fixed_layer is not None:
        one_hot = torch.zeros(n_layers)
        one_hot[fixed_layer] = 1.0
    params = [gamma, *linear.parameters()] + ([w] if fixed_layer is None else [])
    optimizer = torch.optim.Adam(params, lr=lr)

    def mixed(inputs: torch.Tensor) -> torch.Tensor:
        s = one_hot if one_hot is not None else torch.softmax(w, dim=0)
        return gamma * torch.einsum("l,lnd->nd", s, inputs)

    for _ in range(steps):
        optimizer.zero_grad()
        logits = linear(mixed(xt))
        loss = torch.nn.functional.cross_entropy(logits, yt) \
            + l2 * (linear.weight.pow(2).sum() + gamma.pow(2))
        loss.backward()
        optimizer.step()

    def predict(x_test: np.ndarray) -> np.ndarray:
        with torch.no_grad():
            inputs = torch.from_numpy(np.ascontiguousarray(x_test, dtype=np.float32))
            return linear(mixed(inputs)).argmax(dim=1).numpy()

    s = (one_hot if one_hot is not None else torch.softmax(w, dim=0)).detach().numpy().astype(float)
    return predict, s, float(gamma.detach())


# --------------------------------------------------------------------------------------------
# The experiment
# --------------------------------------------------------------------------------------------


@dataclass
class WordSensesResult(TaggedJson, kind="word_senses", version=RESULT_VERSION):
    """:func:`learn_word_senses`'s result. Accuracies are fractions in [0, 1]; ``*_mean`` and
    ``*_std`` are over every (seed, fold) run; ``weights_runs`` holds each run's s_j.
    ``layer_accuracy_*`` has one entry per layer (the classifier on that layer alone).
    ``senses``: {label: occurrences used}; ``occurrences``: each used occurrence's sentence,
    words, original label and the label it was fitted with."""

    lemma: str
    pos: str | None
    source: str
    model_name: str
    n_layers: int
    senses: dict[str, int]
    glosses: dict[str, str]
    merged: list[str]
    dropped: list[str]
    min_per_sense: int
    n_folds: int
    seeds: list[int]
    weights_mean: list[float]
    weights_std: list[float]
    weights_runs: list[list[float]]
    gamma_mean: float
    gamma_std: float
    mix_accuracy_mean: float
    mix_accuracy_std: float
    layer_accuracy_mean: list[float]
    layer_accuracy_std: list[float]
    majority_accuracy_mean: float
    majority_accuracy_std: float
    occurrences: list[dict]
    settings: dict
    notes: list[str] = field(default_factory=list)

    @property
    def best_layer(self) -> int:
        """The layer whose single-layer accuracy is highest."""
        return int(np.argmax(self.layer_accuracy_mean))


def learn_word_senses(occurrences: SenseOccurrences, *, min_per_sense: int = 5, rare: str = "merge",
                      min_occurrences: int = 10, seeds: Sequence[int] = (0, 1, 2), folds: int = 5, l2: float = 1e-3,
                      steps: int = 300, lr: float = 0.05, progress: ProgressCallback | None = None) -> WordSensesResult:
    """Learn s_j and gamma jointly with a linear sense classifier for one lemma (see the
    module docstring), over ``seeds`` x ``folds`` stratified cross-validation runs.

    Refuses (:class:`WordSensesRefused`) a lemma with fewer than ``min_occurrences``
    occurrences, or fewer than two senses once senses below ``min_per_sense`` are merged or
    dropped. The number of folds is lowered to the smallest sense's count when needed (said
    in ``notes``).
    """
    lemma = occurrences.lemma
    n = len(occurrences.labels)
    if n < min_occurrences:
        raise WordSensesRefused(lemma, f"only {n} labelled occurrence(s) "
                                       f"({occurrences.source}); at least {min_occurrences} are needed "
                                       "to learn a layer mix")
    original_counts = Counter(occurrences.labels)
    if len(original_counts) < 2:
        only = next(iter(original_counts))
        raise WordSensesRefused(lemma, f"all {n} occurrences have one sense ({only}): there is "
                                       "nothing to separate, so no layer weights can be learned")
    labels, merged, dropped, notes = prepare_labels(occurrences.labels, min_per_sense, rare)
    keep = np.array([l is not None for l in labels])
    kept_labels = [l for l in labels if l is not None]
    counts = Counter(kept_labels)
    if len(counts) < 2:
        raise WordSensesRefused(lemma, f"after setting aside senses with fewer than {min_per_sense} "
                                       f"occurrences, {len(counts)} sense is left "
                                       f"({dict(original_counts.most_common(4))}): nothing to separate")
    if len(kept_labels) < min_occurrences:
        raise WordSensesRefused(lemma, f"only {len(kept_labels)} occurrences left after dropping rare "
                                       f"senses; at least {min_occurrences} are needed")
    n_folds = min(folds, min(counts.values()))
    if n_folds < 2:
        raise WordSensesRefused(lemma, "a sense has a single occurrence: cross-validation is impossible")
    if n_folds < folds:
        notes.append(f"{n_folds} folds instead of {folds}: the smallest sense has {min(counts.values())} occurrences.")
    names = sorted(counts)
    y = np.array([names.index(l) for l in kept_labels])
    x = occurrences.vectors[:, keep].astype(np.float32)
    n_layers = x.shape[0]

    weights_runs, gammas, mix_acc, layer_acc, majority_acc = _cross_validate(
        x, y, len(names), seeds, n_folds, l2=l2, steps=steps, lr=lr, lemma=lemma, progress=progress)

    weights = np.array(weights_runs)
    used = [{"sentence": occurrences.sentences[i], "words": occurrences.words[i],
             "label": occurrences.labels[i], "fitted_as": labels[i]} for i in range(n)]
    glosses = {k: occurrences.glosses.get(k, "") for k in names if k != OTHER}
    if OTHER in names:
        glosses[OTHER] = "senses with fewer than %d occurrences: %s" % (min_per_sense, ", ".join(merged))
    return WordSensesResult(
        lemma=lemma, pos=occurrences.pos, source=occurrences.source,
        model_name=occurrences.model_name, n_layers=n_layers,
        senses={k: int(counts[k]) for k in names}, glosses=glosses, merged=merged, dropped=dropped,
        min_per_sense=min_per_sense, n_folds=n_folds, seeds=[int(s) for s in seeds],
        weights_mean=weights.mean(axis=0).tolist(), weights_std=weights.std(axis=0).tolist(),
        weights_runs=weights.tolist(), gamma_mean=float(np.mean(gammas)),
        gamma_std=float(np.std(gammas)), mix_accuracy_mean=float(np.mean(mix_acc)),
        mix_accuracy_std=float(np.std(mix_acc)),
        layer_accuracy_mean=[float(np.mean(a)) for a in layer_acc],
        layer_accuracy_std=[float(np.std(a)) for a in layer_acc],
        majority_accuracy_mean=float(np.mean(majority_acc)),
        majority_accuracy_std=float(np.std(majority_acc)), occurrences=used,
        settings={"rare": rare, "min_occurrences": min_occurrences, "l2": l2, "steps": steps,
                  "lr": lr, "optimizer": "Adam, full batch",
                  "scaling": "per layer: centred, mean squared norm = D (training part)"},
        notes=notes)


def _cross_validate(x: np.ndarray, y: np.ndarray, n_classes: int, seeds: Sequence[int], n_folds: int, *,
                    l2: float, steps: int, lr: float, lemma: str, progress: ProgressCallback | None
                    ) -> tuple[list[list[float]], list[float], list[float], list[list[float]], list[float]]:
    """``seeds`` x ``n_folds`` stratified runs on ``x`` (L+1, N, D) and labels ``y`` (N,): per run
    the learned s_j, gamma and the mix's test accuracy; per layer, a probe on that layer alone;
    the majority class's accuracy."""
    n_layers = x.shape[0]
    weights_runs, gammas, mix_acc, majority_acc = [], [], [], []
    layer_acc = [[] for _ in range(n_layers)]
    total = len(seeds) * n_folds
    done = 0
    for seed in seeds:
        splitter = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=seed)
        for fold, (train, test) in enumerate(splitter.split(np.zeros(len(y)), y)):
            if progress is not None:
                progress(f"learning s_j for {lemma!r}", done, total, "fits")
            x_train, x_test = _scale_layers(x[:, train], x[:, test])
            run_seed = seed * 1000 + fold
            predict, s, gamma = fit_scalar_mix(x_train, y[train], n_classes, seed=run_seed,
                                               l2=l2, steps=steps, lr=lr)
            weights_runs.append([float(v) for v in s])
            gammas.append(gamma)
            mix_acc.append(float(np.mean(predict(x_test) == y[test])))
            for j in range(n_layers):
                predict_j, _s, _g = fit_scalar_mix(x_train, y[train], n_classes, seed=run_seed,
                                                   fixed_layer=j, l2=l2, steps=steps, lr=lr)
                layer_acc[j].append(float(np.mean(predict_j(x_test) == y[test])))
            majority = np.bincount(y[train], minlength=n_classes).argmax()
            majority_acc.append(float(np.mean(y[test] == majority)))
            done += 1
    if progress is not None:
        progress(f"learning s_j for {lemma!r}", total, total, "fits")
    return weights_runs, gammas, mix_acc, layer_acc, majority_acc


@dataclass
class WordSensesComparison(TaggedJson, kind="word_senses_comparison", version=RESULT_VERSION):
    """Several lemmas side by side (the s_j bar figure): fitted results and refusals
    ({lemma: message})."""

    results: list[WordSensesResult]
    refused: dict[str, str]

    def table(self) -> list[dict]:
        """One row per fitted lemma: s_j, mix / per-layer / majority accuracy (fractions)."""
        return [{"lemma": r.lemma, "pos": r.pos, "n": sum(r.senses.values()), "senses": len(r.senses),
                 "s_j": r.weights_mean, "mix": r.mix_accuracy_mean, "layers": r.layer_accuracy_mean,
                 "majority": r.majority_accuracy_mean} for r in self.results]


def compare_words(index, lemmas: Sequence[str | tuple[str, str]], *,
                  progress: ProgressCallback | None = None, **options) -> WordSensesComparison:
    """:func:`learn_word_senses` for several SemCor lemmas ("bank" or ("play", "VERB")); a
    refused lemma is listed with its message instead of failing the rest. ``options`` go to
    :func:`learn_word_senses` (``max_occurrences``/``seed`` to :func:`semcor_occurrences`)."""
    occ_options = {k: options.pop(k) for k in ("max_occurrences", "seed") if k in options}
    results, refused = [], {}
    for item in lemmas:
        lemma, pos = (item, None) if isinstance(item, str) else item
        label = lemma if pos is None else f"{lemma} ({pos})"
        try:
            results.append(learn_word_senses(semcor_occurrences(index, lemma, pos, **occ_options),
                                             progress=progress, **options))
        except WordSensesRefused as refusal:
            refused[label] = refusal.reason
    return WordSensesComparison(results, refused)
