"""Per-layer projections of one lemma's occurrences: where do the senses of "bank" come apart?

    >>> from probing.senses.projections import project_lemma
    >>> result = project_lemma(model, "bank", pos="NOUN", index=index, data_root=data_root)
    >>> result.layers[2].loo_1nn_accuracy, result.layers[2].silhouette
    >>> result.layers[0].note     # 'layer 0 is context-free: the 37 occurrences collapse ...'

Occurrences come from SemCor (the shared SemCor index of ``probing.senses.wsd``: sense keys and
WordNet glosses) and/or sentences the user gives (raw text, an optional sense label each).
Every layer is projected to 2-D with PCA and UMAP (fixed seed, cosine metric), and each layer
gets a sense-separability score computed on the full vectors, not the 2-D picture:

- ``loo_1nn_accuracy``: leave-one-out 1-nearest-neighbour (cosine) sense accuracy over the
  labelled occurrences, beside ``majority_baseline`` (the share of the commonest sense);
- ``silhouette``: the mean silhouette coefficient of the sense labels (cosine distance,
  -1..1; higher = senses form tighter, better separated groups);
- ``semcor_loo_1nn_accuracy`` beside ``semcor_majority_baseline``: the same 1-NN score over the
  SemCor occurrences alone. Scored over SemCor and typed sentences together, 1-NN can also
  tell the *sources* apart (SemCor's prose vs short typed sentences), which is not sense:
  the within-SemCor score is the one to read.

Equal vectors (layer 0 gives every occurrence of one spelling one vector) are ties: a point
whose nearest neighbours tie takes the commonest sense among them, so a context-free layer
scores no better than the majority baseline, whatever the order of the points (a layer where
every point coincides is not scored).

Layer 0 (the character CNN) sees no context: every occurrence with the same spelling has the
same vector, so the layer collapses onto one point per spelling. The result says so
(``collapsed``, ``n_distinct``, ``note``) and places the points rather than failing; UMAP is
skipped for a layer with fewer than :data:`MIN_UMAP_POINTS` distinct points.
"""

from __future__ import annotations

import logging
import os
import random
import unicodedata
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from sklearn.decomposition import PCA
from sklearn.metrics import silhouette_score

from elmo_model.embedding import ElmoEmbedder
from elmo_model.plumbing.progress import ProgressCallback
from elmo_model.text.tokenizer import tokenize
from probing.engine.envelope import TaggedJson
from probing.engine.renamed_keywords import renamed_keywords
from probing.senses.corpora import gloss, wordnet
from probing.senses.wsd import SemcorIndex, normalize_lemma, unit_rows

log = logging.getLogger(__name__)

RESULT_VERSION = 1
METHODS = ("pca", "umap")
MIN_UMAP_POINTS = 5
"""UMAP needs at least this many distinct points in a layer; fewer get PCA coordinates only."""


@dataclass
class ProjectionPoint:
    """One occurrence: where it comes from, its sentence, the words [start, end) that are the
    lemma, its sense (a SemCor sense key, or the user's label) and that sense's gloss."""

    source: str
    sentence: str
    start: int
    end: int
    words: str
    sense: str | None
    gloss: str | None


@dataclass
class LayerProjection:
    """One layer. ``pca``/``umap``: (N, 2) coordinates, row i = point i (``umap`` None when
    skipped); ``pca_explained``: explained-variance ratio of the two components;
    ``n_distinct``: distinct vectors among the N; ``collapsed``: all N are one vector."""

    layer: int
    pca: list[list[float]]
    umap: list[list[float]] | None
    pca_explained: list[float]
    n_distinct: int
    collapsed: bool
    loo_1nn_accuracy: float | None
    majority_baseline: float | None
    silhouette: float | None
    note: str | None = None
    semcor_loo_1nn_accuracy: float | None = None
    semcor_majority_baseline: float | None = None
    semcor_n: int = 0  # SemCor occurrences with a sense key (the within-SemCor score's N)


@dataclass
class ProjectionResult(TaggedJson, kind="projection", version=RESULT_VERSION):
    """:func:`project_lemma`'s result. ``senses``: {sense: gloss} of the senses present;
    ``notes``: what was sampled, skipped or could not be scored, in plain words."""

    lemma: str
    pos: str | None
    model_name: str
    seed: int
    points: list[ProjectionPoint]
    layers: list[LayerProjection]
    senses: dict[str, str]
    notes: list[str] = field(default_factory=list)

    def separability(self) -> dict[str, list[float | None]]:
        """Per-layer separability figures for a table or a line plot."""
        return {"loo_1nn_accuracy": [l.loo_1nn_accuracy for l in self.layers],
                "majority_baseline": [l.majority_baseline for l in self.layers],
                "silhouette": [l.silhouette for l in self.layers]}


# --------------------------------------------------------------------------------------------
# Separability
# --------------------------------------------------------------------------------------------


def _as_stored(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` rounded to float16 (as the SemCor index stores them), in float64: the same
    occurrence embedded afresh and read from the index then compare equal."""
    return np.asarray(vectors, dtype=np.float16).astype(np.float64)


def loo_1nn_accuracy(vectors: np.ndarray, labels: Sequence[str]) -> float:
    """Leave-one-out 1-NN accuracy: each point takes the label of its most cosine-similar
    other point; when several tie (equal vectors at float16 precision), the commonest label
    among them (then the first in order). ``vectors`` (N, D), N >= 2."""
    unit = unit_rows(_as_stored(vectors))
    sims = unit @ unit.T
    np.fill_diagonal(sims, -np.inf)
    labels = list(labels)
    best = sims.max(axis=1, keepdims=True)
    correct = 0
    for i, row in enumerate(sims >= best):
        tied = Counter(labels[j] for j in np.flatnonzero(row))
        top = max(tied.values())
        guess = next(labels[j] for j in np.flatnonzero(row) if tied[labels[j]] == top)
        correct += guess == labels[i]
    return correct / len(labels)


def sense_silhouette(vectors: np.ndarray, labels: Sequence[str]) -> float | None:
    """Mean silhouette (cosine distance) of the labels; None unless 2 <= n_labels <= N - 1."""
    n_labels = len(set(labels))
    if not 2 <= n_labels <= len(labels) - 1:
        return None
    return float(silhouette_score(np.asarray(vectors, dtype=np.float64), list(labels), metric="cosine"))


def n_distinct_rows(vectors: np.ndarray) -> int:
    """Distinct rows of ``vectors`` at float16 precision (the SemCor index's), so one spelling's
    context-free vector read from the index and embedded afresh counts once."""
    if len(vectors) == 0:
        return 0
    return int(len(np.unique(_as_stored(vectors), axis=0)))


# --------------------------------------------------------------------------------------------
# Occurrences
# --------------------------------------------------------------------------------------------


def find_lemma(tokens: Sequence[str], lemma: str, use_wordnet: bool = True) -> list[tuple[int, int]]:
    """Spans (start, end) of ``lemma`` in ``tokens``: the same word lower-cased, or an
    inflection WordNet's morphy maps to it ("banks", "played"); a multiword lemma
    ("take_place") matches its words in a row, the first one inflected or not."""
    parts = unicodedata.normalize("NFC", normalize_lemma(lemma)).split("_")
    lower = [unicodedata.normalize("NFC", t).lower() for t in tokens]  # an accent typed as two code points too
    wn = wordnet() if use_wordnet else None

    # every base form (NLTK's public morphy stops at the first: "banks" -> the surname Banks)
    all_forms = getattr(wn, "_morphy", None) if wn is not None else None

    def same(token: str, base: str) -> bool:
        if token == base:
            return True
        if wn is None:
            return False
        if all_forms is not None:
            return any(base in all_forms(token, p) for p in ("n", "v", "a", "r"))
        return any(wn.morphy(token, p) == base for p in ("n", "v", "a", "r"))

    spans = []
    for i in range(len(lower) - len(parts) + 1):
        if same(lower[i], parts[0]) and lower[i + 1:i + len(parts)] == parts[1:]:
            spans.append((i, i + len(parts)))
    return spans


def _sense_gloss(key: str | None) -> str | None:
    if key is None or "%" not in key:
        return None
    try:
        return gloss(key)
    except KeyError:
        return None


@renamed_keywords(root="data_root")
def project_lemma(model, lemma: str, *, pos: str | None = None, index: SemcorIndex | None = None,
                  data_root: str | os.PathLike | None = None, sentences: Sequence[str] = (),
                  senses: Sequence[str | None] | None = None, sense_glosses: dict[str, str] | None = None,
                  max_semcor: int | None = 300, layers: Sequence[int] | None = None, methods: Sequence[str] = METHODS,
                  umap_neighbors: int = 15, seed: int = 0,
                  progress: ProgressCallback | None = None) -> ProjectionResult:
    """Project every layer's vectors of ``lemma``'s occurrences to 2-D and score sense
    separability.

    - ``index``: a SemCor index of ``model`` for SemCor occurrences (None: user sentences only);
      ``pos`` restricts them (NOUN/VERB/ADJ/ADV); ``max_semcor`` caps them with a seeded sample.
    - ``sentences``: raw-text contexts the user gives, ``senses`` an optional label each (e.g.
      a demo set's "river"/"money"), ``sense_glosses`` {label: gloss} for hover text.
    - ``methods``: any of "pca", "umap" (PCA coordinates are always computed).
    - ``data_root``: the data root (WordNet for glosses and for matching inflections).

    Raises ValueError when the lemma has fewer than 2 occurrences in all.
    """
    for m in methods:
        if m not in METHODS:
            raise ValueError(f"unknown projection method {m!r}; choose from {METHODS}")
    if senses is not None and len(senses) != len(sentences):
        raise ValueError(f"{len(senses)} sense labels for {len(sentences)} sentences")
    wordnet(data_root)
    lemma = normalize_lemma(lemma)
    notes: list[str] = []
    points: list[ProjectionPoint] = []
    parts: list[np.ndarray] = []  # each (L+1, n, dim)
    n_layers = model.config.n_output_layers

    if index is not None:
        _semcor_occurrences(index, lemma, pos, max_semcor, seed, points, parts, notes)
    if sentences:
        _user_occurrences(model, lemma, sentences, senses, sense_glosses, points, parts, notes, progress)
    if len(points) < 2:
        raise ValueError(f"{lemma!r}: {len(points)} occurrence(s) found; a projection needs at "
                         "least 2 (type sentences that use the word, or pick a lemma SemCor has)")
    vectors = np.concatenate(parts, axis=1).astype(np.float32)  # (L+1, N, dim)
    labels = [p.sense for p in points]
    labelled = np.array([s is not None for s in labels])
    counts = Counter(s for s in labels if s is not None)
    notes += _label_notes(points, counts, index is not None)

    layers = list(range(n_layers)) if layers is None else [int(j) for j in layers]
    out_layers = []
    for step, j in enumerate(layers):
        if progress is not None:
            progress("projecting layers", step, len(layers), "layers")
        out_layers.append(_project_layer(j, vectors[j], labels, labelled, counts, points, methods,
                                         umap_neighbors, seed))
    if progress is not None:
        progress("projecting layers", len(layers), len(layers), "layers")
    glosses = {}
    for p in points:
        if p.sense is not None and p.sense not in glosses:
            glosses[p.sense] = p.gloss or ""
    return ProjectionResult(
        lemma=lemma, pos=pos, model_name=str(getattr(model, "name", "") or "biLM"), seed=seed,
        points=points, layers=out_layers, senses=glosses, notes=notes)


def _semcor_occurrences(index: SemcorIndex, lemma: str, pos: str | None, max_semcor: int | None, seed: int,
                        points: list[ProjectionPoint], parts: list[np.ndarray], notes: list[str]) -> None:
    """``lemma``'s sense-tagged SemCor occurrences (a seeded sample of ``max_semcor``), appended
    to ``points`` and their (L+1, n, dim) vectors to ``parts``."""
    rows = index.lemma_rows(lemma, pos)
    if len(rows) == 0:
        notes.append(f"SemCor has no sense-tagged {lemma!r}" + (f" as {pos}" if pos else "")
                     + f" (in the {index.n_sentences:,} sentences indexed).")
    if max_semcor is not None and len(rows) > max_semcor:
        notes.append(f"{len(rows)} SemCor occurrences; a random sample of {max_semcor} (seed {seed}) is shown.")
        rows = np.array(sorted(random.Random(seed).sample(list(rows), max_semcor)))
    for row in rows:
        inst = index.instance(int(row))
        text = index.sentence_text(inst.sentence)
        key = inst.sense_keys[0] if inst.sense_keys and inst.sense_keys[0] else None
        points.append(ProjectionPoint("semcor", text, inst.start, inst.end,
                                      " ".join(text.split(" ")[inst.start:inst.end]),
                                      key, _sense_gloss(key)))
    if len(rows):
        parts.append(np.stack([index.vectors(j, rows) for j in range(index.n_layers)]))


def _user_occurrences(model, lemma: str, sentences: Sequence[str], senses: Sequence[str | None] | None,
                      sense_glosses: dict[str, str] | None, points: list[ProjectionPoint], parts: list[np.ndarray],
                      notes: list[str], progress: ProgressCallback | None) -> None:
    """``lemma``'s occurrences in the user's sentences, embedded afresh, appended to ``points``
    and their (L+1, n, dim) vectors (a span's mean) to ``parts``."""
    embedder = ElmoEmbedder(model)
    user_vectors = []
    for k, text in enumerate(sentences):
        if progress is not None:
            progress("embedding sentences", k, len(sentences), "sentences")
        tokens = [t for s in tokenize(str(text)) for t in s]
        spans = find_lemma(tokens, lemma)
        if not spans:
            notes.append(f"{lemma!r} not found in sentence {k + 1}.")
            continue
        layers_k = embedder.embed_sentence(tokens)  # (L+1, T, dim)
        label = senses[k] if senses is not None else None
        for start, end in spans:
            user_vectors.append(layers_k[:, start:end].mean(axis=1))
            points.append(ProjectionPoint(
                "user", " ".join(tokens), start, end, " ".join(tokens[start:end]), label,
                (_sense_gloss(label) or (sense_glosses or {}).get(label)) if label else None))
    if progress is not None:
        progress("embedding sentences", len(sentences), len(sentences), "sentences")
    if user_vectors:
        parts.append(np.stack(user_vectors, axis=1))


def _label_notes(points: list[ProjectionPoint], counts: Counter, with_semcor: bool) -> list[str]:
    """What the sense labels do to the separability: labels that are not sense keys beside
    SemCor's, fewer than two senses, senses that occur once."""
    notes = []
    foreign = sorted({p.sense for p in points if p.source == "user" and p.sense and "%" not in p.sense})
    if with_semcor and foreign:
        notes.append(f"The labels {', '.join(repr(x) for x in foreign[:4])} are not WordNet sense keys: "
                     "the separability over all points counts them as senses of their own, apart "
                     "from SemCor's (write a sense key such as bank%1:17:01:: to merge them).")
    if len(counts) < 2:
        notes.append("fewer than two senses among the occurrences: separability is not scored.")
    elif any(c == 1 for c in counts.values()):
        notes.append(f"{sum(1 for c in counts.values() if c == 1)} sense(s) occur once: 1-NN can "
                     "never get those right, which lowers every layer's accuracy alike.")
    return notes


def _project_layer(j: int, x: np.ndarray, labels: list, labelled: np.ndarray, counts: Counter,
                   points: list[ProjectionPoint], methods: Sequence[str], umap_neighbors: int,
                   seed: int) -> LayerProjection:
    n = len(x)
    distinct = n_distinct_rows(x)
    collapsed = distinct == 1
    note = None
    if collapsed:
        note = (f"layer {j} gives all {n} occurrences the same vector (it sees no context): "
                "they collapse onto one point")
    elif distinct < n and j == 0:
        spellings = sorted({p.words for p in points})  # the char CNN reads case: "Bank" is its own
        note = (f"layer 0 is context-free: the {n} occurrences collapse onto {distinct} points, "
                f"one per spelling ({', '.join(spellings[:6])}{', ...' if len(spellings) > 6 else ''})")
    if collapsed:  # PCA of float noise (~1e-8 between batch positions) would invent structure
        pca, explained = np.zeros((n, 2)), [0.0, 0.0]
    else:
        pca, explained = _pca(x, seed)
    umap_xy = None
    if "umap" in methods:
        if distinct >= MIN_UMAP_POINTS:
            umap_xy = _umap(x, umap_neighbors, seed)
        else:
            note = (note + "; " if note else "") + f"UMAP skipped ({distinct} distinct points)"
    semcor = [i for i, p in enumerate(points) if p.source == "semcor" and p.sense is not None]
    semcor_counts = Counter(points[i].sense for i in semcor)
    semcor_loo = semcor_majority = None
    if len(semcor_counts) >= 2 and not collapsed:
        semcor_majority = max(semcor_counts.values()) / len(semcor)
        semcor_loo = loo_1nn_accuracy(x[semcor], [points[i].sense for i in semcor])
    loo = majority = sil = None
    if len(counts) >= 2:
        xl = x[labelled]
        yl = [l for l in labels if l is not None]
        majority = max(counts.values()) / len(yl)
        sil = sense_silhouette(xl, yl)
        if collapsed:
            note += "; 1-NN accuracy is undefined when every point coincides"
        else:
            loo = loo_1nn_accuracy(xl, yl)
    return LayerProjection(layer=j, pca=pca.tolist(), umap=None if umap_xy is None else umap_xy.tolist(),
                           pca_explained=explained, n_distinct=distinct, collapsed=collapsed,
                           loo_1nn_accuracy=loo, majority_baseline=majority, silhouette=sil, note=note,
                           semcor_loo_1nn_accuracy=semcor_loo, semcor_majority_baseline=semcor_majority,
                           semcor_n=len(semcor) if semcor_loo is not None else 0)


def _pca(x: np.ndarray, seed: int) -> tuple[np.ndarray, list[float]]:
    """(N, 2) PCA coordinates (zeros where the data has no variance) and explained ratios."""
    x = np.asarray(x, dtype=np.float64)
    centred = x - x.mean(axis=0)
    if len(x) < 2 or not np.any(np.abs(centred) > 1e-9):
        return np.zeros((len(x), 2)), [0.0, 0.0]
    k = min(2, len(x), x.shape[1])
    pca = PCA(n_components=k, svd_solver="full", random_state=seed)
    xy = pca.fit_transform(x)
    ratios = [float(r) for r in pca.explained_variance_ratio_]
    if k < 2:
        xy = np.concatenate([xy, np.zeros((len(x), 2 - k))], axis=1)
        ratios += [0.0] * (2 - k)
    return xy, ratios


def _umap(x: np.ndarray, n_neighbors: int, seed: int) -> np.ndarray:
    """(N, 2) UMAP coordinates, cosine metric, fixed seed (UMAP then runs single-threaded and
    is reproducible)."""
    import umap  # imported when asked for: its import compiles numba code for seconds

    n_neighbors = max(2, min(n_neighbors, len(x) - 1))
    reducer = umap.UMAP(n_components=2, n_neighbors=n_neighbors, metric="cosine",
                        random_state=seed, init="spectral" if len(x) > 20 else "random",
                        min_dist=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # n_jobs overridden by random_state; tiny-graph notes
        return np.asarray(reducer.fit_transform(np.asarray(x, dtype=np.float32)), dtype=np.float64)
