"""How the syntax probes' test figures and cost grow with the training sentences they learn from.

    OMP_NUM_THREADS=1 python bench/syntax_curve.py --model elmo-mini --sizes 1000 2000 4000 8000 0
    python bench/syntax_curve.py --model /work/shared/fixtures/bilm_tf --sizes 50 100 --limit 100  # quick

For every size N (0: the whole EWT training split, 12,544 sentences) and every layer asked for,
trains on the first N training sentences, choosing on dev exactly as the report does:

- the structural distance and depth probes (``probing.syntax.structural``: every rank of ``--ranks`` trained,
  the best dev UUAS / NSpr. kept), scored on test: UUAS, DSpr., root accuracy, NSpr.;
- the edge probes ``arc`` and ``label`` (``probing.syntax.edges``: the suite's ``LinearProbe`` along
  ``--alphas``, the best dev accuracy kept), scored on test (accuracy, no interval).

Activations of the whole train/dev/test splits are extracted once (the same caches as the
report's: train, dev and test of ``ud_english_ewt``) and sliced. Prints one line per (N, layer,
probe) with the test figure, the chosen rank/alpha, wall-clock and CPU seconds, and writes them
as JSON to ``--out`` (written to a temporary file, then renamed). The random biLM is left out: it
costs the same per fit.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

import numpy as np  # noqa: E402

from elmo_model import load_bilm  # noqa: E402
from elmo_model.plumbing.io_safety import atomic_write_text  # noqa: E402
from probing.syntax.edges import edge_items, pair_features  # noqa: E402
from probing.syntax.structural import SyntaxConfig, _select_probes, extract_trees, layer_vectors, load_trees  # noqa: E402
from probing.syntax.trees import root_accuracy, spearman_by_length, tree_depths, tree_distances, uuas  # noqa: E402
from probing.tagging.probes import LinearProbe, fit_on_dev  # noqa: E402
from probing.tagging.suite_config import SuiteConfig  # noqa: E402


class Clock:
    """Wall-clock and CPU seconds (this process, every thread) since it was made."""

    def __init__(self) -> None:
        self.wall, self.cpu = time.perf_counter(), time.process_time()

    def read(self) -> tuple[float, float]:
        return time.perf_counter() - self.wall, time.process_time() - self.cpu


def structural_rows(vectors, trees, n, layer, config, seed):
    """Both probes of one layer on the first ``n`` training sentences, trained together as the
    report trains them (so the time is of both kinds and every rank: the same on both rows)."""
    targets = {"distance": {s: [tree_distances(t.heads) for t in ts] for s, ts in trees.items()},
               "depth": {s: [tree_depths(t.heads) for t in ts] for s, ts in trees.items()}}
    clock = Clock()
    chosen = _select_probes(("distance", "depth"), {**vectors, "train": vectors["train"][:n]},
                            {**trees, "train": trees["train"][:n]},
                            {kind: {**t, "train": t["train"][:n]} for kind, t in targets.items()}, config, seed, layer)
    wall, cpu = clock.read()
    rows = []
    for kind, (probe, dev) in chosen.items():
        pred = probe.predict(vectors["test"])
        if kind == "distance":
            figures = {"uuas": uuas(pred, trees["test"]),
                       "dspr": spearman_by_length(zip(pred, targets["distance"]["test"]))}
        else:
            figures = {"root_acc": root_accuracy(pred, trees["test"]),
                       "nspr": spearman_by_length(zip(pred, targets["depth"]["test"]))}
        rows.append({"probe": kind, "layer": layer, "train_sentences": n, "rank": int(probe.rank), "dev": dev,
                     "epochs": int(probe.n_epochs_), "wall_s": wall, "cpu_s": cpu, **figures})
    return rows


def edge_rows(caches, trees, n, layer, alphas, suite, seed):
    rows = []
    for task in ("arc", "label"):
        data = {s: edge_items(ts[:n] if s == "train" else ts, task, seed) for s, ts in trees.items()}
        X = {s: pair_features(caches[s].layer(layer), d[1], d[2]) for s, d in data.items()}
        y = {s: np.array([tag for sent in d[0] for tag in sent.tags]) for s, d in data.items()}
        clock = Clock()
        base = LinearProbe(max_iter=suite.max_iter, preprocess=suite.preprocess, shrinkage=suite.shrinkage,
                           random_state=seed)
        probe, path = fit_on_dev(base, X["train"], y["train"], lambda p: float(np.mean(p.predict(X["dev"]) == y["dev"])),
                                 alphas, warm_max_iter=suite.warm_max_iter)
        wall, cpu = clock.read()
        best = max(path, key=lambda p: p.dev_score)
        rows.append({"probe": task, "layer": layer, "train_sentences": n, "alpha": best.alpha,
                     "dev": best.dev_score, "path": [[p.alpha, p.dev_score] for p in path],
                     "accuracy": float(np.mean(probe.predict(X["test"]) == y["test"])),
                     "train_items": int(len(y["train"])), "wall_s": wall, "cpu_s": cpu})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="elmo-mini", help="a shipped model name or a model directory")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 2000, 4000, 8000, 0],
                        help="training sentences (0: the whole split)")
    parser.add_argument("--layers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--ranks", type=int, nargs="+", default=list(SyntaxConfig().ranks))
    parser.add_argument("--alphas", type=float, nargs="+", default=list(SuiteConfig().alphas))
    parser.add_argument("--dev-sentences", type=int, default=0, help="dev sentences for the choices (0: all)")
    parser.add_argument("--probes", nargs="+", default=["structural", "edges"], choices=["structural", "edges"])
    parser.add_argument("--limit", type=int, default=None, help="the first N sentences of every split (a quick check)")
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--data-root", type=Path, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=PROJECT / "runs" / "syntax_curve.json")
    args = parser.parse_args(argv)

    config = SyntaxConfig(train_sentences=None, dev_sentences=args.dev_sentences or None,
                          ranks=tuple(args.ranks), random_bilm=False)
    model = load_bilm(args.model)
    trees = load_trees(config, args.data_root, args.limit)
    clock = Clock()
    caches = extract_trees(model, trees, args.cache_dir, config, progress=lambda label: print(label, flush=True))
    wall, cpu = clock.read()
    print(f"activations: {wall:.0f} s wall, {cpu:.0f} s CPU; load {os.getloadavg()}", flush=True)
    rows: list[dict] = []
    sizes = [n if n > 0 else len(trees["train"]) for n in args.sizes]
    for n in sizes:
        for layer in args.layers:
            before = len(rows)
            if "structural" in args.probes:
                vectors = {s: layer_vectors(c, layer) for s, c in caches.items()}
                rows += structural_rows(vectors, trees, n, layer, config, args.seed)
            if "edges" in args.probes:
                rows += edge_rows(caches, trees, n, layer, tuple(args.alphas), SuiteConfig(), args.seed)
            for r in rows[before:]:
                figure = {k: round(v, 4) for k, v in r.items() if k in ("uuas", "dspr", "root_acc", "nspr", "accuracy")}
                print(f"N={n:>6} layer {layer} {r['probe']:<9} {figure} rank/alpha "
                      f"{r.get('rank', r.get('alpha'))} {r['wall_s']:.0f} s wall {r['cpu_s']:.0f} s CPU "
                      f"load {os.getloadavg()[0]:.1f}", flush=True)
            atomic_write_text(args.out, json.dumps({"model": args.model, "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
