"""Tree metrics on hand-made trees, the structural probe on a planted tree metric, EWT trees."""

from __future__ import annotations

import io

import numpy as np
import pytest

from probing.syntax.structural_probe import StructuralProbe, fit_jointly
from probing.syntax.trees import (
    DependencyTree,
    gold_edges,
    linear_chain_uuas,
    mst_edges,
    parse_conllu_trees,
    read_ewt_trees,
    root_accuracy,
    spearman_by_length,
    tree_depths,
    tree_distances,
    uuas,
    uuas_counts,
)

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny tensors: a second thread only waits

# "The cat sat on the mat ." : sat is the root; The->cat, cat->sat, on->mat, the->mat, mat->sat, .->sat
HEADS = (1, 2, -1, 5, 5, 2, 2)
TREE = DependencyTree(("The", "cat", "sat", "on", "the", "mat", "."), HEADS,
                      ("det", "nsubj", "root", "case", "det", "obl", "punct"),
                      ("DET", "NOUN", "VERB", "ADP", "DET", "NOUN", "PUNCT"))


def test_tree_distances_and_depths_on_a_hand_made_tree():
    d = tree_distances(HEADS)
    assert d.shape == (7, 7) and (d == d.T).all() and (np.diag(d) == 0).all()
    assert d[0, 1] == 1 and d[0, 2] == 2 and d[0, 5] == 3 and d[3, 4] == 2 and d[0, 3] == 4
    assert tree_depths(HEADS).tolist() == [2, 1, 0, 2, 2, 1, 1]


def _bfs_distances(heads):
    """Path lengths by breadth-first search from every token: the definition, slowly."""
    n = len(heads)
    neighbours = [[] for _ in range(n)]
    for i, h in enumerate(heads):
        if h >= 0:
            neighbours[i].append(h)
            neighbours[h].append(i)
    out = np.zeros((n, n), dtype=np.int64)
    for start in range(n):
        seen, frontier, step = {start}, [start], 0
        while frontier:
            for i in frontier:
                out[start, i] = step
            frontier = [j for i in frontier for j in neighbours[i] if j not in seen]
            seen.update(frontier)
            step += 1
    return out


def test_tree_distances_match_a_graph_search_on_random_trees_and_reject_non_trees():
    rng = np.random.default_rng(1)
    for _ in range(200):
        n = int(rng.integers(1, 40))
        order = rng.permutation(n)  # a random tree whose root is anywhere
        heads = [-1] * n
        for k in range(1, n):
            heads[order[k]] = int(order[rng.integers(0, k)])
        np.testing.assert_array_equal(tree_distances(heads), _bfs_distances(heads))
    for bad in ([0, -1], [1, 0], [-1, -1], [-1, 5], [1, 2, 1, -1]):  # self-loop, no root, two roots, range, cycle
        with pytest.raises(ValueError, match="do not connect every token"):
            tree_distances(bad)


def test_mst_of_gold_distances_is_the_tree_and_uuas_ignores_punctuation():
    d = tree_distances(HEADS)
    arcs = {(min(i, h), max(i, h)) for i, h in enumerate(HEADS) if h >= 0}
    assert mst_edges(d) == arcs
    assert gold_edges(TREE) == arcs - {(2, 6)}  # the full stop's arc is left out
    assert uuas_counts(d, TREE) == (5, 5)
    # a chain: The-cat, cat-sat, sat-on, on-the, the-mat (punctuation skipped): 3 of 5 gold arcs
    chain = np.abs(np.subtract.outer(np.arange(7), np.arange(7))).astype(float)
    assert uuas_counts(chain, TREE) == (3, 5)
    assert linear_chain_uuas([TREE]) == pytest.approx(3 / 5)
    assert uuas([d, chain], [TREE, TREE]) == pytest.approx(8 / 10)


def test_spearman_by_length_and_root_accuracy():
    d = tree_distances(HEADS).astype(float)
    assert spearman_by_length([(d, d)]) == pytest.approx(1.0)
    assert spearman_by_length([(-d, d)]) == pytest.approx(-1.0)
    depth = tree_depths(HEADS).astype(float)
    assert spearman_by_length([(depth, depth)]) == pytest.approx(1.0)
    assert np.isnan(spearman_by_length([(d[:3, :3], d[:3, :3])]))  # length 3 is outside 5-50
    assert root_accuracy([depth], [TREE]) == 1.0
    wrong = depth.copy()
    wrong[1] = -1.0
    assert root_accuracy([wrong], [TREE]) == 0.0


def test_conllu_heads_are_zero_based_and_multiword_lines_skipped():
    text = ("# sent_id = x\n"
            "1-2\tdon't\t_\t_\t_\t_\t_\t_\t_\t_\n"
            "1\tdo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_\n"
            "2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_\n"
            "3\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_\n\n")
    (tree,) = parse_conllu_trees(io.StringIO(text))
    assert tree.tokens == ("do", "n't", "go") and tree.heads == (2, 2, -1) and tree.sent_id == "x"
    with pytest.raises(ValueError, match="not a tree"):
        list(parse_conllu_trees(io.StringIO(text.replace("\t0\troot", "\t1\troot"))))
    with pytest.raises(ValueError, match=r"bad\.conllu:4: HEAD column is '_'"):
        list(parse_conllu_trees(io.StringIO(text.replace("\t3\tadvmod", "\t_\tadvmod")), "bad.conllu"))


def test_one_conllu_reader_gives_the_tagging_and_the_tree_columns():
    from probing.tagging.tasks import parse_conllu, read_conllu

    text = ("# sent_id = y\n"
            "1\tGo\tgo\tVERB\tVB\t_\t0\troot\t_\t_\n"
            "2\thome\thome\tADV\tRB\t_\t1\tobl:npmod\t_\t_\n\n")
    (sentence,) = read_conllu(io.StringIO(text))
    assert sentence.heads == ("0", "1") and sentence.deprels == ("root", "obl:npmod")
    assert sentence.lines == (2, 3) and sentence.xpos == ("VB", "RB")
    (tree,) = parse_conllu_trees(io.StringIO(text))
    (tagged,) = parse_conllu(io.StringIO(text))
    assert tagged == ("y", list(tree.tokens), list(tree.upos), ["VB", "RB"])
    assert tree.heads == (-1, 0) and tree.relations == sentence.deprels


def test_ewt_trees_match_the_tagging_reader(data_root):
    from probing.tagging.tasks import read_ewt

    trees = read_ewt_trees("dev", data_root, limit=50)
    tagged = read_ewt("dev", root=data_root, limit=50)
    assert [t.tokens for t in trees] == [s.tokens for s in tagged]
    assert all(tree_depths(t.heads).min() == 0 for t in trees)
    assert all(uuas_counts(tree_distances(t.heads), t)[0] == uuas_counts(tree_distances(t.heads), t)[1]
               for t in trees)


def _planted(n_sentences: int, rng: np.random.Generator, m: int = 12, noise_dims: int = 20):
    """Sentences whose vectors hide a tree metric in a random linear image of m dims, next to
    noise_dims dims of loud noise: ||A^+ (x_i - x_j)||^2 is exactly the tree distance."""
    A = rng.normal(size=(m, 24))
    trees, X = [], []
    for _ in range(n_sentences):
        n = int(rng.integers(5, m + 1))
        heads = [-1] + [int(rng.integers(0, i)) for i in range(1, n)]
        edges = np.linalg.qr(rng.normal(size=(m, m)))[0][:n]  # an orthonormal vector per arc
        Z = np.zeros((n, m))
        for i in range(n):
            j = i
            while heads[j] >= 0:
                Z[i] += edges[j]
                j = heads[j]
        X.append(np.hstack([Z @ A, 3.0 * rng.normal(size=(n, noise_dims))]).astype(np.float32))
        trees.append(DependencyTree(tuple(f"w{i}" for i in range(n)), tuple(heads), ("dep",) * n, ("X",) * n))
    return X, trees


def test_structural_probe_recovers_a_planted_tree_metric():
    rng = np.random.default_rng(0)
    X, trees = _planted(150, rng)
    D = [tree_distances(t.heads) for t in trees]
    train, test = slice(0, 120), slice(120, 150)
    probe = StructuralProbe("distance", rank=16, lr=2e-2, max_epochs=25, patience=3, random_state=0)
    probe.fit(X[train], D[train], X[test][:20], D[test][:20])
    pred = probe.predict(X[test])
    raw = [((x[:, None] - x[None]) ** 2).sum(-1) for x in X[test]]
    assert uuas(pred, trees[test]) > 0.9 > uuas(raw, trees[test]) + 0.3
    assert spearman_by_length(zip(pred, D[test])) > 0.9
    depth = StructuralProbe("depth", rank=16, lr=2e-2, max_epochs=25, random_state=0)
    # depth is ||z_i||^2 only relative to the root; centre each sentence on its root first
    Xr = [x - x[t.root] for x, t in zip(X, trees)]
    depth.fit(Xr[train], [tree_depths(t.heads) for t in trees[train]])
    assert root_accuracy(depth.predict(Xr[test]), trees[test]) > 0.9


def test_probes_trained_together_learn_what_each_learns_alone():
    rng = np.random.default_rng(2)
    X, trees = _planted(80, rng)
    D = [tree_distances(t.heads) for t in trees]
    depths = [tree_depths(t.heads) for t in trees]
    train, dev = slice(0, 60), slice(60, 80)

    def probes():
        return [StructuralProbe("distance", rank=8, lr=2e-2, max_epochs=6, patience=2, random_state=0),
                StructuralProbe("distance", rank=16, lr=2e-2, max_epochs=6, patience=2, random_state=0),
                StructuralProbe("depth", rank=8, lr=2e-2, max_epochs=4, patience=2, random_state=0)]

    together = fit_jointly(probes(), X[train], {"distance": D[train], "depth": depths[train]}, X[dev],
                           {"distance": D[dev], "depth": depths[dev]})
    for joint, alone in zip(together, probes()):
        alone.fit(X[train], D[train] if alone.kind == "distance" else depths[train], X[dev],
                  D[dev] if alone.kind == "distance" else depths[dev])
        # the same updates; only the order of float32 sums in the shared projection differs
        assert joint.n_epochs_ == alone.n_epochs_ <= alone.max_epochs
        np.testing.assert_allclose(joint.B_, alone.B_, rtol=0, atol=1e-4)
        assert joint.dev_loss_ == pytest.approx(alone.dev_loss_, rel=1e-4)
    assert together[2].n_epochs_ == 4  # its own max_epochs: it stopped while the others went on
    with pytest.raises(ValueError, match="batch size"):
        fit_jointly([StructuralProbe(batch_size=10), StructuralProbe(batch_size=20)], X[train], {"distance": D[train]})
    with pytest.raises(ValueError, match="depth target"):
        fit_jointly([StructuralProbe("depth")], X[train], {"distance": D[train]})
