"""Syntax per layer: the structural probes of Hewitt & Manning (2019), trained on the gold trees of
UD English-EWT (or of a fetched UD treebank of another language: ``SyntaxConfig.treebank``). The
trees and the metrics (tree distances and depths, the MST, UUAS, root accuracy,
the Spearman correlations) are in ``probing.syntax.trees``.

    >>> from probing.syntax.structural import run_structural
    >>> from probing.syntax.structural_probe import StructuralProbe

- ``StructuralProbe`` (``probing.syntax.structural_probe``): a linear map B (rank x dim) trained
  with Adam so that ``||B(h_i - h_j)||^2`` approximates the tree distance (``kind="distance"``)
  or ``||B h_i||^2`` the depth (``kind="depth"``). Loss, as in the paper: L1 between predicted
  and gold squared distances, summed over pairs of a sentence and divided by its length squared
  (by its length for depth), averaged over the sentences of a batch.
- ``run_structural``: both probes per layer on EWT for a biLM and a random-initialised biLM of
  the same shape (rank chosen on dev), layer 0 and the linear-chain tree as baselines; returns a
  ``StructuralResult`` (JSON round-trip).

Hewitt & Manning report ELMo layer 1 best on PTB: UUAS 77.0, DSpr. 0.83 (distance), root accuracy
90.0, NSpr. 0.87 (depth).
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np
import torch

from elmo_model import BiLM, load_bilm
from elmo_model.bilm.char_ids import model_token_ids
from elmo_model.bilm.identity import model_identity
from elmo_model.plumbing.progress import ProgressCallback
from probing.engine.activations import default_cache_dir, extract_activations
from probing.data.registry import get_treebank
from probing.engine.envelope import JsonDataclass
from probing.syntax.jabberwocky import jabberwocky_trees, real_words, replaced_share
from probing.syntax.structural_probe import PROBE_KINDS, StructuralProbe, fit_jointly
from probing.syntax.trees import (
    ARC_LENGTHS,
    PUNCT_UPOS,
    DependencyTree,
    linear_chain_uuas,
    mst_edges,
    read_treebank_trees,
    root_accuracy,
    spearman_by_length,
    tree_depths,
    tree_distances,
    uuas,
    uuas_by_arc_length,
)
from probing.tagging.baselines import random_bilm

log = logging.getLogger(__name__)

SyntaxProgress = Callable[[str, int, int], None]  # (what is being done, steps done, total steps)


# --------------------------------------------------------------------------------------------
# Results
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class StructuralScore(JsonDataclass):
    """One layer's structural probes on test. ``uuas`` and ``dspr`` (distance probe, rank
    ``distance_rank``), ``root_acc`` and ``nspr`` (depth probe, rank ``depth_rank``); the dev
    scores that chose the ranks (``dev_uuas``, ``dev_nspr``); ``seconds`` of training and scoring;
    ``uuas_by_arc_length``: UUAS per bin of the gold arc's linear length ("1", "2", "3-4", "5+")."""

    layer: int
    uuas: float
    dspr: float
    root_acc: float
    nspr: float
    distance_rank: int
    depth_rank: int
    dev_uuas: float
    dev_nspr: float
    seconds: float
    uuas_by_arc_length: dict = field(default_factory=dict)


@dataclass(frozen=True)
class StructuralResult(JsonDataclass):
    """Structural probes per layer for a model and for a random-initialised biLM of its shape.

    ``model`` / ``random_bilm``: one ``StructuralScore`` per layer (``random_bilm`` empty when left
    out); ``linear_chain_uuas``: the left-to-right chain's UUAS on test; ``n_sentences``: sentences
    per split used (train may be capped); ``ranks``: the ranks tried on dev; ``timings`` in seconds.
    ``nonsense``: the model's probes (trained on real sentences) scored on the Jabberwocky twins of
    the test sentences (``probing.syntax.jabberwocky``; empty when left out), ``random_bilm_nonsense``
    the random biLM's, ``nonsense_replaced``
    the share of test tokens replaced there; ``linear_chain_by_arc_length``: the chain's UUAS per
    arc-length bin (the same on both: the trees are the same).
    """

    model_name: str
    model: tuple[StructuralScore, ...]
    random_bilm: tuple[StructuralScore, ...]
    linear_chain_uuas: float
    n_sentences: dict
    ranks: tuple[int, ...]
    seed: int
    timings: dict = field(default_factory=dict)
    nonsense: tuple[StructuralScore, ...] = ()
    random_bilm_nonsense: tuple[StructuralScore, ...] = ()
    nonsense_replaced: float = 0.0
    linear_chain_by_arc_length: dict = field(default_factory=dict)
    treebank: str = "en_ewt"

    def best_layer(self, metric: str = "uuas") -> StructuralScore:
        """The model's layer with the highest ``metric`` (uuas, dspr, root_acc, nspr)."""
        return max(self.model, key=lambda s: getattr(s, metric))

    def table(self) -> str:
        test = "EWT" if self.treebank == "en_ewt" else get_treebank(self.treebank).title
        lines = [f"structural probes, {self.model_name} ({test} test; punctuation left out of UUAS)",
                 f"{'model':<12}{'layer':>6}{'UUAS':>8}{'DSpr':>8}{'root':>8}{'NSpr':>8}{'ranks':>10}"]
        for name, scores in (("model", self.model), ("random biLM", self.random_bilm)):
            for s in scores:
                lines.append(f"{name:<12}{s.layer:>6}{100 * s.uuas:>8.1f}{s.dspr:>8.3f}{100 * s.root_acc:>8.1f}"
                             f"{s.nspr:>8.3f}{f'{s.distance_rank}/{s.depth_rank}':>10}")
        lines.append(f"linear chain UUAS {100 * self.linear_chain_uuas:.1f}")
        if self.nonsense:
            lines += ["", JABBERWOCKY_SENTENCE,
                      f"{'layer':<14}{'UUAS real':>10}{'nonsense':>10}{'DSpr real':>11}{'nonsense':>10}"
                      + "".join(f"{'len ' + b:>14}" for b in ARC_BINS)]
            for name, reals, fakes in (("model", self.model, self.nonsense),
                                       ("random biLM", self.random_bilm, self.random_bilm_nonsense)):
                for real, fake in zip(reals, fakes):
                    lines.append(f"{name[:8] + ' ' + str(real.layer):<14}{100 * real.uuas:>10.1f}{100 * fake.uuas:>10.1f}"
                                 f"{real.dspr:>11.3f}{fake.dspr:>10.3f}" + "".join(
                                     f"{_pair(real.uuas_by_arc_length, fake.uuas_by_arc_length, b):>14}" for b in ARC_BINS))
            lines.append(f"{'chain':<14}{100 * self.linear_chain_uuas:>10.1f}{100 * self.linear_chain_uuas:>10.1f}"
                         f"{'':>21}" + "".join(f"{_pair(self.linear_chain_by_arc_length, {}, b):>14}" for b in ARC_BINS))
            lines.append(f"({100 * self.nonsense_replaced:.0f}% of the test tokens replaced; per arc length: "
                         "real / nonsense UUAS)")
        return "\n".join(lines)


def _pair(real: dict, fake: dict, name: str) -> str:
    if name not in real:
        return "-"
    return f"{100 * real[name]:.1f}" + (f" / {100 * fake[name]:.1f}" if name in fake else "")


JABBERWOCKY_SENTENCE = ("Syntax on nonsense (content words replaced by pseudo-words, trees kept): a probe that reads "
                        "structure keeps its UUAS; a drop is what it took from the words' meanings.")
ARC_BINS = tuple(name for name, _, _ in ARC_LENGTHS)


# --------------------------------------------------------------------------------------------
# Running the probes on EWT
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SyntaxConfig(JsonDataclass, strict=True):
    """Settings of the syntax probes (structural and edge probes).

    - ``train_sentences``: the first N EWT training sentences the probes learn from (None: all
      12,544); ``dev_sentences`` likewise for dev (rank / alpha choice). Test is always whole.
      4,000 by default: on elmo-mini's layer 2 the structural probes' test figures rise with the
      training sentences up to the whole split (UUAS 58.7 / 64.5 / 68.1 / 70.4 / 72.1 at 1,000 / 2,000 /
      4,000 / 8,000 / all; DSpr. and NSpr. within 0.03 of all of train's at 4,000) while their cost grows
      with them; docs/syntax.md has the curve (``bench/syntax_curve.py``).
    - ``ranks``: ranks of B tried on dev (the best dev UUAS / NSpr. is kept); ``max_epochs``,
      ``patience``, ``lr``, ``batch_size``: the structural probes' training.
    - ``random_bilm``: also probe a random-initialised biLM of the same shape.
    - ``edge_train_sentences``: the edge probes learn from the first N of those training
      sentences (their pair features are 3 x dim wide, so a fit costs several times a tagging
      probe's: on elmo-mini the arc probe's fit doubles from 1,000 to 2,000 sentences for +0.7
      points of accuracy); ``edge_alphas``: their L2 path, chosen on dev (None: the suite's
      ``SuiteConfig.alphas``).
    - ``batch_size_extract``: sentences per biLM batch when activations are extracted.
    - ``jabberwocky``: also score the model's structural probes on the Jabberwocky twins of the
      test sentences (``probing.syntax.jabberwocky``, seeded by the run's seed).
    - ``treebank``: the UD treebank whose gold trees the probes learn and are scored on: ``en_ewt``
      (UD English-EWT), or the code of a fetched treebank of the table
      (``python -m probing.data download ud:french`` fetches ``fr_gsd``).
    """

    train_sentences: int | None = 4000
    dev_sentences: int | None = 500
    ranks: tuple[int, ...] = (32, 128)
    max_epochs: int = 20
    patience: int = 2
    lr: float = 1e-3
    batch_size: int = 20
    random_bilm: bool = True
    batch_size_extract: int = 64
    edge_train_sentences: int | None = 1000
    edge_alphas: tuple[float, ...] | None = None
    jabberwocky: bool = True
    treebank: str = "en_ewt"

    def __post_init__(self) -> None:  # a language or ISO code means its treebank; a ValueError lists the table's
        object.__setattr__(self, "treebank", get_treebank(self.treebank).code)

    @property
    def dataset(self) -> str:
        """The dataset the activation caches are named by (``ud_english_ewt``, ``ud_fr_gsd``)."""
        return get_treebank(self.treebank).dataset


def load_trees(config: SyntaxConfig, data_root=None, limit: int | None = None) -> dict[str, list[DependencyTree]]:
    """The treebank's trees of train/dev/test with the config's caps (and ``limit`` on every split)."""
    def cap(a, b):
        values = [v for v in (a, b) if v is not None]
        return min(values) if values else None

    return {"train": read_treebank_trees(config.treebank, "train", data_root, cap(config.train_sentences, limit)),
            "dev": read_treebank_trees(config.treebank, "dev", data_root, cap(config.dev_sentences, limit)),
            "test": read_treebank_trees(config.treebank, "test", data_root, limit)}


def split_name(split: str, trees: Sequence[DependencyTree], full: int | None = None) -> str:
    """The activation-cache split name: "train", or "train-first-2000" for a capped split;
    ``full``: the whole split's sentences (default: UD English-EWT's)."""
    return split if len(trees) >= (_full_size(split) if full is None else full) else f"{split}-first-{len(trees)}"


def _full_size(split: str) -> int:
    return {"train": 12544, "dev": 2001, "test": 2077}[split]


def _whole(config: SyntaxConfig, split: str, data_root) -> int | None:
    """The sentences of the treebank's whole ``split`` (None for EWT, whose sizes are known)."""
    return None if config.treebank == "en_ewt" else len(read_treebank_trees(config.treebank, split, data_root))


def nonsense_split(config: SyntaxConfig, test: Sequence[DependencyTree], seed: int, data_root=None) -> str:
    """The activation-cache split name of the Jabberwocky twins of the ``test`` trees."""
    return f"{split_name('test', test, _whole(config, 'test', data_root))}-jabberwocky-seed{seed}"


def layer_vectors(cache, j: int) -> list[np.ndarray]:
    """Layer ``j`` of an activation cache cut into sentences: a list of (T_i, dim) float32."""
    flat = cache.layer(j)
    return [flat[cache.offsets[i]:cache.offsets[i + 1]] for i in range(cache.n_sentences)]


def extract_trees(model, trees: Mapping[str, list[DependencyTree]], cache_dir, config: SyntaxConfig,
                  progress: Callable[[str], None] | None = None, data_root=None,
                  counts: ProgressCallback | None = None) -> dict:
    """The activation caches of each split's sentences (``probing.engine.activations``: reused when
    cached). A capped split (the first N training sentences) is a view of the whole split's cache
    when one exists (the probing suite's POS task makes it), so it is not extracted again.
    ``counts(label, done, total, "sentences")``: the sentences embedded so far."""

    caches = {}
    for split, ts in trees.items():
        if progress:
            progress(f"activations of {split} ({len(ts)} sentences)")
        name = split_name(split, ts, _whole(config, split, data_root))
        within = None
        if name != split:
            within = (split, [list(t.tokens) for t in read_treebank_trees(config.treebank, split, data_root)])
        count = None if counts is None else (lambda d, t, s=split: counts(f"embedding {config.treebank} {s}", d, t,
                                                                          "sentences"))
        caches[split] = extract_activations(model, [list(t.tokens) for t in ts], config.dataset, name,
                                            cache_dir=cache_dir, batch_size=config.batch_size_extract, within=within,
                                            progress=count)
    return caches


def _select_probes(kinds: Sequence[str], vectors: Mapping[str, list[np.ndarray]],
                   trees: Mapping[str, list[DependencyTree]], targets: Mapping[str, Mapping[str, list[np.ndarray]]],
                   config: SyntaxConfig, seed: int, layer: int) -> dict[str, tuple[StructuralProbe, float]]:
    """Train one probe per kind of ``kinds`` and rank of ``config.ranks``, all together
    (``fit_jointly``); keep per kind the best on dev (UUAS for distance, NSpr. for depth).
    Returns kind -> (probe, its dev score)."""
    candidates = [StructuralProbe(kind, rank, config.lr, config.batch_size, config.max_epochs, config.patience,
                                  random_state=seed) for kind in kinds for rank in config.ranks]
    fit_jointly(candidates, vectors["train"], {k: targets[k]["train"] for k in kinds}, vectors["dev"],
                {k: targets[k]["dev"] for k in kinds})
    chosen: dict[str, tuple[StructuralProbe, float]] = {}
    for probe in candidates:
        pred = probe.predict(vectors["dev"])
        dev = uuas(pred, trees["dev"]) if probe.kind == "distance" else spearman_by_length(
            zip(pred, targets[probe.kind]["dev"]))
        dev = float(dev) if np.isfinite(dev) else -np.inf
        log.info("layer %d %s probe rank %d: dev %.4f (%d epochs)", layer, probe.kind, probe.rank, dev, probe.n_epochs_)
        if probe.kind not in chosen or dev > chosen[probe.kind][1]:
            chosen[probe.kind] = (probe, dev)
    return chosen


def _probe_path(cache_dir, model_sha: str, layer: int, kind: str, trees: Mapping[str, list[DependencyTree]],
                config: SyntaxConfig, seed: int) -> Path:
    """Where the chosen probe of (model, layer, kind, training data, settings, seed) is kept (.npz)."""

    settings = {k: v for k, v in config.to_dict().items()
                if k not in ("random_bilm", "batch_size_extract", "edge_train_sentences", "edge_alphas",
                             "jabberwocky")}
    if settings["treebank"] == "en_ewt":  # EWT's probes keep the keys they had before there were other treebanks
        del settings["treebank"]
    key = hashlib.sha256(json.dumps([PROBE_FORMAT, model_sha, layer, kind, seed, settings,
                                     {s: len(ts) for s, ts in trees.items() if s != "test"}]).encode()).hexdigest()
    root = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    return root / "structural" / f"{kind}-layer{layer}-{key[:24]}.npz"


PROBE_FORMAT = 2  # 2: trained together (fit_jointly), batch order from its own seeded stream


def _save_probe(path: Path, probe: StructuralProbe, dev: float) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez(tmp, B=probe.B_, dev=np.array(dev), rank=np.array(probe.rank), epochs=np.array(probe.n_epochs_))
    os.replace(tmp, path)


def _load_probe(path: Path, kind: str) -> tuple[StructuralProbe, float] | None:
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as data:
            probe = StructuralProbe(kind, int(data["rank"]))
            probe.B_, probe.n_epochs_ = data["B"].astype(np.float32), int(data["epochs"])
            return probe, float(data["dev"])
    except (OSError, KeyError, ValueError) as err:
        log.warning("ignoring a damaged structural-probe file %s (%s)", path, err)
        return None


def _fitted(kinds: Sequence[str], layer: int, model_sha: str, vectors, trees, targets, config: SyntaxConfig,
            seed: int, cache_dir) -> dict[str, tuple[StructuralProbe, float]]:
    """kind -> (the chosen probe, its dev score) for each of ``kinds``: from the probe cache, the
    missing ones trained together and cached."""
    paths = {kind: _probe_path(cache_dir, model_sha, layer, kind, trees, config, seed) for kind in kinds}
    found = {kind: _load_probe(path, kind) for kind, path in paths.items()}
    out = {kind: probe for kind, probe in found.items() if probe is not None}
    missing = [kind for kind in kinds if kind not in out]
    if missing:
        trained = _select_probes(missing, vectors, trees, targets, config, seed, layer)
        for kind, (probe, dev) in trained.items():
            _save_probe(paths[kind], probe, dev)
        out.update(trained)
    return out


def _score_layer(layer: int, vectors: Mapping[str, list[np.ndarray]], trees: Mapping[str, list[DependencyTree]],
                 targets: Mapping[str, Mapping[str, list[np.ndarray]]], config: SyntaxConfig, seed: int,
                 model_sha: str, cache_dir, nonsense: tuple[list[np.ndarray], list[DependencyTree]] | None = None
                 ) -> tuple[StructuralScore, StructuralScore | None]:
    """The layer's probes (trained or cached) scored on test, and on ``nonsense`` (the Jabberwocky
    test's vectors and trees: the same heads, so the same targets) when given."""
    start = time.perf_counter()
    probes = _fitted(PROBE_KINDS, layer, model_sha, vectors, trees, targets, config, seed, cache_dir)

    def score(test_vectors: list[np.ndarray], test_trees: list[DependencyTree]) -> StructuralScore:
        (dist, dev_uuas), (depth, dev_nspr) = probes["distance"], probes["depth"]
        dist_pred, depth_pred = dist.predict(test_vectors), depth.predict(test_vectors)
        return StructuralScore(
            layer=layer, uuas=uuas(dist_pred, test_trees),
            dspr=spearman_by_length(zip(dist_pred, targets["distance"]["test"])),
            root_acc=root_accuracy(depth_pred, test_trees),
            nspr=spearman_by_length(zip(depth_pred, targets["depth"]["test"])),
            distance_rank=int(dist.rank), depth_rank=int(depth.rank), dev_uuas=dev_uuas, dev_nspr=dev_nspr,
            seconds=time.perf_counter() - start, uuas_by_arc_length=uuas_by_arc_length(dist_pred, test_trees))

    return score(vectors["test"], trees["test"]), None if nonsense is None else score(*nonsense)


def nonsense_test(trees: Sequence[DependencyTree], seed: int, data_root=None,
                  treebank: str = "en_ewt") -> list[DependencyTree]:
    """The Jabberwocky twins of the test ``trees``; a pseudo-word is never a word form of the
    treebank (EWT unless ``treebank`` names another)."""
    return jabberwocky_trees(trees, seed, _treebank_words(None if data_root is None else str(data_root), treebank))


@functools.lru_cache(maxsize=4)
def _treebank_words(data_root: str | None, treebank: str) -> frozenset[str]:
    return real_words(*(read_treebank_trees(treebank, split, data_root) for split in ("train", "dev", "test")))


def tree_probe(model, layer: int, data_root=None, cache_dir=None, seed: int = 0, config: SyntaxConfig | None = None,
               progress: ProgressCallback | None = None) -> StructuralProbe:
    """The distance probe of ``model``'s ``layer`` (a ``BiLM``): the one ``run_structural`` trained
    with the same settings when it is cached, else trained now (rank chosen on dev) and cached.
    ``progress(label, done, total, unit)``: the sentences embedded, then the probe's training."""

    config = config or SyntaxConfig()
    trees = load_trees(config, data_root)
    trees = {"train": trees["train"], "dev": trees["dev"]}
    model_sha = model_identity(model)
    cached = stored_tree_probe(model, layer, data_root, cache_dir, seed, config, trees)
    if cached is not None:
        return cached
    caches = extract_trees(model, trees, cache_dir, config, data_root=data_root, counts=progress)
    vectors = {s: layer_vectors(c, layer) for s, c in caches.items()}
    targets = {"distance": {s: [tree_distances(t.heads) for t in ts] for s, ts in trees.items()}}
    if progress is not None:
        progress(f"training the probe on layer {layer}", 0, 1, "probes")
    return _fitted(("distance",), layer, model_sha, vectors, trees, targets, config, seed, cache_dir)["distance"][0]


def stored_tree_probe(model, layer: int, data_root=None, cache_dir=None, seed: int = 0,
                      config: SyntaxConfig | None = None, trees=None) -> StructuralProbe | None:
    """The probe :func:`tree_probe` would return when it is on disk already (nothing trained), else None."""
    config = config or SyntaxConfig()
    if trees is None:
        trees = load_trees(config, data_root)
        trees = {"train": trees["train"], "dev": trees["dev"]}
    cached = _load_probe(_probe_path(cache_dir, model_identity(model), layer, "distance", trees, config, seed),
                         "distance")
    return None if cached is None else cached[0]


def parse_with_probe(model, probe: StructuralProbe, tokens: Sequence[str], layer: int,
                     upos: Sequence[str] | None = None) -> tuple[np.ndarray, set[tuple[int, int]]]:
    """Predicted squared distances (T, T) of a sentence's tokens under ``probe`` on ``layer`` of
    ``model`` and the edges (i < j) of their minimum spanning tree (punctuation left out when
    ``upos`` is given)."""

    with torch.inference_mode():
        vectors = model(model_token_ids(model, [list(tokens)]).to(model.device)).layers[layer][0].cpu().numpy()
    dist = probe.predict([vectors])[0]
    keep = np.array([u != PUNCT_UPOS for u in upos]) if upos is not None else np.ones(len(tokens), dtype=bool)
    index = np.flatnonzero(keep)
    return dist, {(int(index[a]), int(index[b])) for a, b in mst_edges(dist[np.ix_(index, index)])}


def run_structural(model, layers: Sequence[int] | None = None, data_root=None, cache_dir=None, seed: int = 0,
                   limit: int | None = None, config: SyntaxConfig | None = None,
                   progress: SyntaxProgress | None = None) -> StructuralResult:
    """Distance and depth probes on every layer of ``model`` (a ``BiLM`` or a shipped name) and,
    with ``config.random_bilm``, of a random-initialised biLM of its shape (seeded by ``seed``).
    ``limit``: the first N sentences of every split (a quick slice). ``progress(label, done, total)``."""

    config = config or SyntaxConfig()
    started = time.perf_counter()
    if not isinstance(model, BiLM):
        model = load_bilm(model)
    n_out = model.config.n_output_layers
    layers = list(range(n_out)) if layers is None else sorted(set(int(j) for j in layers))
    if not layers or any(not 0 <= j < n_out for j in layers):
        raise ValueError(f"layers must be in 0..{n_out - 1} for this model, got {layers}")
    trees = load_trees(config, data_root, limit)
    targets = {"distance": {s: [tree_distances(t.heads) for t in ts] for s, ts in trees.items()},
               "depth": {s: [tree_depths(t.heads) for t in ts] for s, ts in trees.items()}}
    models = [("model", model)]
    if config.random_bilm:
        baseline = random_bilm(model.config, seed, getattr(model, "precision", "fp32")).to(model.device)
        models.append(("random_bilm", baseline))
    total = len(models) * (1 + len(layers))
    done = 0
    timings: dict[str, float] = {}
    scores: dict[str, list[StructuralScore]] = {}
    nonsense_trees = nonsense_test(trees["test"], seed, data_root, config.treebank) if config.jabberwocky else None
    for name, m in models:
        t0 = time.perf_counter()
        caches = extract_trees(m, trees, cache_dir, config,
                               lambda label: progress and progress(f"{name}: {label}", done, total), data_root)
        if nonsense_trees is not None:
            if progress:
                progress(f"{name}: activations of the Jabberwocky test ({len(nonsense_trees)} sentences)", done, total)
            caches["nonsense"] = extract_activations(
                m, [list(t.tokens) for t in nonsense_trees], config.dataset,
                nonsense_split(config, trees["test"], seed, data_root), cache_dir=cache_dir,
                batch_size=config.batch_size_extract)
        done += 1
        timings[f"{name}_extract"] = time.perf_counter() - t0
        scores[name], scores[f"{name}_nonsense"] = [], []
        for j in layers:
            if progress:
                progress(f"{name}: structural probes on layer {j}", done, total)
            vectors = {s: layer_vectors(c, j) for s, c in caches.items() if s != "nonsense"}
            nonsense = (layer_vectors(caches["nonsense"], j), nonsense_trees) if "nonsense" in caches else None
            real, fake = _score_layer(j, vectors, trees, targets, config, seed, model_identity(m), cache_dir, nonsense)
            scores[name].append(real)
            if fake is not None:
                scores[f"{name}_nonsense"].append(fake)
            done += 1
        for c in caches.values():
            c.close()
        timings[f"{name}_total"] = time.perf_counter() - t0
    if progress:
        progress("structural probes done", total, total)
    timings["total"] = time.perf_counter() - started
    return StructuralResult(str(getattr(model, "name", "") or "biLM"), tuple(scores["model"]),
                            tuple(scores.get("random_bilm", ())), linear_chain_uuas(trees["test"]),
                            {s: len(ts) for s, ts in trees.items()}, tuple(config.ranks), seed, timings,
                            nonsense=tuple(scores["model_nonsense"]),
                            random_bilm_nonsense=tuple(scores.get("random_bilm_nonsense", ())),
                            nonsense_replaced=replaced_share(trees["test"]) if nonsense_trees is not None else 0.0,
                            linear_chain_by_arc_length=uuas_by_arc_length(None, trees["test"]),
                            treebank=config.treebank)


__all__ = ["StructuralResult", "StructuralScore", "SyntaxConfig", "extract_trees",
           "layer_vectors", "load_trees", "nonsense_split", "nonsense_test", "parse_with_probe", "run_structural",
           "split_name", "tree_probe"]
