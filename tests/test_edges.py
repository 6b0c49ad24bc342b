"""Edge probes on gold arcs: the items, and the regularisation chosen on dev along the suite's path."""

from __future__ import annotations

import numpy as np
import pytest

from probing.syntax.edges import HEAD, NOT_HEAD, edge_items, run_edges
from probing.syntax.structural import SyntaxConfig
from probing.syntax.trees import read_ewt_trees
from probing.tagging.suite_config import SuiteConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_arc_items_pair_each_dependent_with_its_head_and_one_other_word(data_root):
    trees = read_ewt_trees("dev", data_root, limit=30)
    items, left, right, sentence_of = edge_items(trees, "arc", seed=0)
    labels = np.array([tag for s in items for tag in s.tags])
    offsets = np.cumsum([0] + [len(t) for t in trees])
    heads = np.concatenate([np.where(np.array(t.heads) >= 0, np.array(t.heads) + offsets[k], -1)
                            for k, t in enumerate(trees)])
    assert (heads[left[labels == HEAD]] == right[labels == HEAD]).all()
    assert (heads[left[labels == NOT_HEAD]] != right[labels == NOT_HEAD]).all()
    assert (left != right).all() and (offsets[sentence_of] <= right).all() and (right < offsets[sentence_of + 1]).all()
    _, lleft, _, _ = edge_items(trees, "label", seed=0)
    assert len(lleft) == sum(len(t) - 1 for t in trees)  # one item per non-root token


def test_edge_probes_choose_alpha_on_dev_along_the_suite_path(data_root, tmp_path):
    suite = SuiteConfig(alphas=(1e-2, 1e-3), n_bootstrap=50)
    result = run_edges(data_root / "fixtures/bilm_tf", tasks=("label",), layers=[1], data_root=data_root,
                       cache_dir=tmp_path, limit=20, config=SyntaxConfig(random_bilm=False), suite_config=suite)
    (layer,) = result.task("label").layers
    assert [p.alpha for p in layer.probe.path][0] == 1e-2  # the path starts at the strongest alpha
    assert layer.probe.alpha in (1e-2, 1e-3) and layer.control.alpha == layer.probe.alpha
    assert layer.probe.dev_score == max(p.dev_score for p in layer.probe.path)
    fixed = run_edges(data_root / "fixtures/bilm_tf", tasks=("label",), layers=[1], data_root=data_root,
                      cache_dir=tmp_path, limit=20, config=SyntaxConfig(random_bilm=False, edge_alphas=(1e-3,)),
                      suite_config=suite)
    assert [p.alpha for p in fixed.task("label").layers[0].probe.path] == [1e-3]
    assert SyntaxConfig.from_dict(SyntaxConfig().to_dict()) == SyntaxConfig()
    assert SyntaxConfig.from_dict(SyntaxConfig(edge_alphas=(1e-4,)).to_dict()).edge_alphas == (1e-4,)


def test_the_arc_probe_is_scored_on_the_jabberwocky_test_with_the_same_fit(data_root, tmp_path):
    suite = SuiteConfig(alphas=(1e-2, 1e-3), n_bootstrap=50)
    result = run_edges(data_root / "fixtures/bilm_tf", tasks=("arc",), layers=[0, 1], data_root=data_root,
                       cache_dir=tmp_path, limit=20, config=SyntaxConfig(random_bilm=False), suite_config=suite)
    for layer in result.task("arc").layers:
        real, nonsense = layer.probe, layer.nonsense
        same = [(q.alpha, q.dev_score, q.n_iter) for q in real.path]
        assert nonsense is not None and nonsense.alpha == real.alpha
        assert [(q.alpha, q.dev_score, q.n_iter) for q in nonsense.path] == same
        # the same training sentences and alpha path: the same fit, so the same dev score; only the test differs
        assert nonsense.dev_score == real.dev_score and 0.0 <= nonsense.test.estimate <= 1.0
    assert "nonsense" in result.table()
    assert any(layer.nonsense.test.estimate != layer.probe.test.estimate for layer in result.task("arc").layers)
    plain = run_edges(data_root / "fixtures/bilm_tf", tasks=("arc",), layers=[1], data_root=data_root,
                      cache_dir=tmp_path, limit=20, config=SyntaxConfig(random_bilm=False, jabberwocky=False),
                      suite_config=suite)
    assert plain.task("arc").layers[0].nonsense is None
