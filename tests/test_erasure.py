"""LEACE and the mean projection (probing/information/erasure.py): against the authors' code and
the published closed form, and known answers beside INLP."""

import numpy as np
import pytest
import torch
from concept_erasure import LeaceFitter

from probing.information.amnesic import NullspaceProjection, inlp
from probing.information.erasure import leace, mean_projection, mean_squared_change
from probing.tagging.probes import LinearProbe

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _correlated(n: int, d: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """X (n, d) with correlated directions (a random mixing, covariance condition about 1e6) and
    an offset, labels the argmax of a random k-class linear map of X."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)) @ rng.standard_normal((d, d)) + 3.0
    return X, np.argmax(X @ rng.standard_normal((d, k)), axis=1)


def _probe_accuracy(X_train, y_train, X_dev, y_dev) -> float:
    """A fresh whitened probe, as the amnesic measurement trains it."""
    probe = LinearProbe(alpha=1e-3, max_iter=50).fit(X_train.astype(np.float32), y_train)
    return float(np.mean(probe.predict(X_dev.astype(np.float32)) == y_dev))


def _cross_covariance(X: np.ndarray, y: np.ndarray) -> float:
    Z = (y[:, None] == np.unique(y)[None, :]).astype(np.float64)
    return float(np.abs((X - X.mean(axis=0)).T @ (Z - Z.mean(axis=0)) / len(X)).max())


def test_leace_is_the_authors_eraser_and_the_published_closed_form():
    X, y = _correlated(3000, 24, 4, seed=0)
    eraser = leace(X, y)
    assert eraser.rank == 3  # k - 1
    ours = eraser.apply(X)
    # concept-erasure's LeaceFitter with the paper's plain estimator: no covariance shrinkage, no
    # trace constraint, singular values of W Sigma_XZ cut only at rounding (its default, 0.01,
    # leaves weak correlations in place)
    Z = np.eye(4)[y]
    reference = LeaceFitter.fit(torch.from_numpy(X), torch.from_numpy(Z), shrinkage=False, constrain_cov_trace=False,
                                svd_tol=1e-10).eraser
    # measured: 2.1e-13, on vectors up to 27 in size (the two eigendecompositions round differently,
    # amplified by the covariance's condition number); 1e-12 leaves room for another BLAS
    np.testing.assert_allclose(ours, reference(torch.from_numpy(X)).numpy(), rtol=0, atol=1e-12)

    # the closed form as published, by another route: W from pinv of the symmetric square root, P
    # as M M^+, r(x) = x - W^+ P W (x - mu)
    centred = X - X.mean(axis=0)
    values, vectors = np.linalg.eigh(centred.T @ centred / len(X))
    W = np.linalg.pinv((vectors * np.sqrt(values)) @ vectors.T)
    M = W @ centred.T @ (Z - Z.mean(axis=0)) / len(X)
    P = M @ np.linalg.pinv(M, rcond=1e-10)
    published = X - centred @ (np.linalg.pinv(W) @ P @ W).T
    np.testing.assert_allclose(ours, published, rtol=0, atol=1e-12)  # measured: 2.0e-13

    assert _cross_covariance(ours, y) < 1e-12  # no linear correlation with the labels is left
    Q = eraser.matrix()
    np.testing.assert_allclose(Q @ Q, Q, atol=1e-10)  # an (oblique) projection
    assert ours.dtype == np.float64 and eraser.apply(X.astype(np.float32)).dtype == np.float32


def test_mean_projection_is_the_orthogonal_projection_out_of_the_class_mean_differences():
    X, y = _correlated(3000, 24, 4, seed=1)
    projection = mean_projection(X, y)
    assert isinstance(projection, NullspaceProjection) and projection.rank == 3
    B = projection.directions
    np.testing.assert_allclose(B @ B.T, np.eye(3), atol=1e-12)
    differences = np.stack([X[y == c].mean(axis=0) for c in range(4)]) - X.mean(axis=0)
    np.testing.assert_allclose(differences @ projection.matrix(), 0.0, atol=1e-9)
    assert _cross_covariance(projection.apply(X), y) < 1e-10
    # concept-erasure's "orth" method is the same projection (without its re-centring on mu)
    reference = LeaceFitter.fit(torch.from_numpy(X), torch.from_numpy(np.eye(4)[y]), method="orth", affine=False,
                                svd_tol=1e-10).eraser
    np.testing.assert_allclose(projection.apply(X), reference(torch.from_numpy(X)).numpy(), rtol=0,
                               atol=1e-12)  # measured: 5.0e-14


def test_a_one_direction_label_is_erased_by_each_method_to_the_majority_level():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((4000, 16)) @ rng.standard_normal((16, 16))
    w = rng.standard_normal(16)
    y = np.where(X @ w > 0.3, "a", "b")
    train, dev = slice(0, 3000), slice(3000, None)
    majority = float(np.mean(y[dev] == max(set(y[train]), key=list(y[train]).count)))
    before = _probe_accuracy(X[train], y[train], X[dev], y[dev])
    assert before > 0.95
    # INLP as the amnesic runs call it (up to 40 rounds): on correlated directions each probe's
    # direction leaves part of the label to the next, so it takes 11 rounds here, one direction each
    result = inlp(X[train], y[train], X[dev], y[dev], max_iterations=40, random_state=0)
    assert result.reached_majority and result.n_iterations == 11
    erased = {"leace": leace(X[train], y[train]).apply,
              "mean": mean_projection(X[train], y[train]).apply,
              "inlp": result.projection.apply}
    after = {name: _probe_accuracy(apply(X[train]), y[train], apply(X[dev]), y[dev]) for name, apply in erased.items()}
    for name, accuracy in after.items():  # measured: 0.504 each (majority 0.504; before 0.991)
        assert accuracy <= majority + 0.02, (name, accuracy, majority)
    # the least change of the three (LEACE is the least-squares eraser; INLP and the mean
    # projection are orthogonal, and the directions of X are correlated). Measured: leace 32.9,
    # mean 35.6, inlp 126.0 (11 directions against 1)
    change = {name: mean_squared_change(X[train], apply(X[train])) for name, apply in erased.items()}
    assert change["leace"] <= change["mean"] and change["leace"] <= change["inlp"], change


def test_erasing_one_label_leaves_an_independent_one_readable():
    rng = np.random.default_rng(3)
    X = rng.standard_normal((4000, 10))
    a = np.where(X[:, 0] > 0, "a+", "a-")
    b = np.where(X[:, 1] + 0.5 * rng.standard_normal(4000) > 0, "b+", "b-")  # noisy: about 85%, not 100%
    train, dev = slice(0, 3000), slice(3000, None)
    before = _probe_accuracy(X[train], b[train], X[dev], b[dev])
    assert 0.8 < before < 0.95  # measured: 0.870; after each erasure of a: 0.869, and a's probe 0.497
    for fitted in (leace(X[train], a[train]), mean_projection(X[train], a[train])):
        A = fitted.apply(X)
        assert _probe_accuracy(A[train], a[train], A[dev], a[dev]) < 0.56
        assert abs(_probe_accuracy(A[train], b[train], A[dev], b[dev]) - before) <= 0.02
    projection = inlp(X[train], a[train], X[dev], a[dev], max_iterations=10, random_state=0).projection
    A = projection.apply(X)
    assert abs(_probe_accuracy(A[train], b[train], A[dev], b[dev]) - before) <= 0.02


def test_leace_whitens_a_rank_deficient_covariance_on_its_support():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((500, 8))
    X[:, 6] = 2.0  # a constant dimension
    X[:, 7] = X[:, 0] - X[:, 1]  # one that copies others
    y = np.where(X[:, 0] + X[:, 2] > 0, "a", "b")
    eraser = leace(X, y)
    erased = eraser.apply(X)
    assert eraser.rank == 1 and np.isfinite(erased).all()
    assert _cross_covariance(erased, y) < 1e-12
    np.testing.assert_allclose(erased[:, 6], 2.0, atol=1e-12)  # nothing moves where nothing varies
    reference = LeaceFitter.fit(torch.from_numpy(X), torch.from_numpy(np.eye(2)[(y == "b").astype(int)]),
                                shrinkage=False, constrain_cov_trace=False, svd_tol=1e-10).eraser
    np.testing.assert_allclose(erased, reference(torch.from_numpy(X)).numpy(), rtol=0, atol=1e-12)  # measured: 1.2e-14
    wide = leace(X[:5], y[:5])  # fewer vectors than dimensions
    assert _cross_covariance(wide.apply(X[:5]), y[:5]) < 1e-12


@pytest.mark.parametrize("method", [leace, mean_projection])
def test_erasure_refuses_bad_input_in_one_line(method):
    X = np.random.default_rng(5).standard_normal((50, 4))
    with pytest.raises(ValueError, match="at least 2 classes to erase, got 1") as one_class:
        method(X, np.array(["a"] * 50))
    X_bad = X.copy()
    X_bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN or infinite") as non_finite:
        method(X_bad, np.array(["a", "b"] * 25))
    with pytest.raises(ValueError, match="one label per row") as mismatch:
        method(X, np.array(["a", "b"] * 20))
    for error in (one_class, non_finite, mismatch):
        assert "\n" not in str(error.value)
    if method is leace:
        with pytest.raises(ValueError, match="no variance"):
            leace(np.ones((50, 4)), np.array(["a", "b"] * 25))


def _split(X, y, n_train, n_dev):
    return ({"train": X[:n_train], "dev": X[n_train:n_train + n_dev], "test": X[n_train + n_dev:]},
            {"train": y[:n_train], "dev": y[n_train:n_train + n_dev], "test": y[n_train + n_dev:]})


def _accuracy(X, y, scale=None):
    return _probe_accuracy(X["train"], y["train"], X["test"], y["test"])


def test_every_method_erases_a_one_direction_label_to_majority_and_leace_moves_least():
    """Known answers: the label is the sign of one direction of correlated vectors; LEACE, the mean
    projection and INLP each bring a fresh probe down to the majority label's accuracy, the random
    projection of the same rank does not, and LEACE moves the vectors no more than INLP."""
    from probing.information.erasure_comparison import ERASURE_METHODS, compare_erasures

    rng = np.random.default_rng(0)
    X = rng.standard_normal((1500, 12)) @ rng.standard_normal((12, 12))
    y = (X @ rng.standard_normal(12) > 0).astype(int)
    Xs, ys = _split(X, y, 900, 300)
    layer = compare_erasures(1, Xs, ys, [], _accuracy, {"max_iterations": 10, "tolerance": 0.02, "alpha": 1e-3,
                                                         "max_iter": 50}, seed=0)
    assert [o.method for o in layer.outcomes] == list(ERASURE_METHODS)
    assert layer.original > 0.95
    for outcome in layer.outcomes:
        assert outcome.task_accuracy <= layer.majority + 0.05, outcome
    assert layer.outcome("leace").rank == layer.outcome("mean projection").rank == 1
    for method in ("leace", "mean projection"):  # one random direction keeps the label
        assert layer.outcome(method).random_accuracy > 0.8, layer.outcome(method)
    # INLP's probes go on finding the label in directions correlated with it: it takes more
    assert layer.outcome("inlp").rank >= 1
    assert layer.outcome("leace").mean_squared_change <= layer.outcome("inlp").mean_squared_change + 1e-9


def test_erasing_one_label_leaves_a_label_on_other_directions_within_its_interval():
    """Two labels on orthogonal, uncorrelated directions: erasing the first leaves the second's probe
    within its 95% interval (Wilson, on the test split), for every method."""
    from probing.figures.app import wilson_interval
    from probing.information.erasure_comparison import compare_erasures

    rng = np.random.default_rng(1)
    X = rng.standard_normal((1500, 8))
    first, second = (X[:, 0] > 0).astype(int), (X[:, 1] > 0).astype(int)
    Xs, y1 = _split(X, first, 900, 300)
    _, y2 = _split(X, second, 900, 300)
    layer = compare_erasures(1, Xs, y1, [("second", Xs, y2)], _accuracy,
                             {"max_iterations": 10, "tolerance": 0.02, "alpha": 1e-3, "max_iter": 50}, seed=0)
    before = layer.other_original["second"]
    low, high = wilson_interval(before, len(y2["test"]))
    for outcome in layer.outcomes:
        assert low <= outcome.other_tasks["second"]["after"] <= high, (outcome.method, before, outcome.other_tasks)


def test_the_erasure_comparison_on_elmo_mini_measures_the_language_models_damage(data_root, tmp_path):
    """``--methods erasure`` on the shipped model (it carries its softmax): three methods per layer,
    the LM's loss at the top layer for each and its random control, a JSON round trip and the table."""
    from probing.information.results import InformationResult
    from probing.information.run import InformationConfig, run_information

    config = InformationConfig(methods=("erasure",), train_limit=40, eval_limit=20, inlp_iterations=3, lm_sentences=5)
    result = run_information("elmo-mini", ["pos", "chunk"], layers=[0, 2], config=config, data_root=data_root,
                             cache_dir=tmp_path, seed=0)
    for task in result.tasks:
        assert [e.layer for e in task.erasure] == [0, 2] and not task.amnesic and not task.codes
        top = task.erasure[-1]
        assert top.lm_original is not None and task.erasure[0].lm_original is None
        for outcome in top.outcomes:
            assert outcome.lm["after"] >= top.lm_original - 0.05 and outcome.lm["random"] > 0
            assert list(outcome.other_tasks) == [t.task for t in result.tasks if t is not task]
            assert outcome.rank >= 1 and outcome.mean_squared_change > 0
    assert InformationResult.from_json(result.to_json()) == result
    assert "leace" in result.table() and "mean projection" in result.table()
    from probing.report.blocks import information_blocks  # the report's section (probing.report --erasure)
    from probing.report.elements import ReportFigure

    names = [b.name for b in information_blocks(result) if isinstance(b, ReportFigure)]
    assert names == ["erasure-pos", "erasure-chunk"]


def test_the_beyond_accuracy_page_compares_the_three_erasers_on_every_layer(data_root, tmp_path, monkeypatch):
    """The page's erasure method runs every layer with the task's partner for the damage, and draws
    one chart of all layers (a trace per method) and a table of every layer and method."""
    from streamlit.testing.v1 import AppTest

    from app_pages.model_choice import MODEL_ENV_VAR
    from pathlib import Path

    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(data_root))
    monkeypatch.setenv("ELMO_WORKBENCH_CACHE", str(tmp_path))
    monkeypatch.setenv(MODEL_ENV_VAR, str(data_root / "fixtures" / "bilm_tf"))
    at = AppTest.from_file(str(Path(__file__).resolve().parents[1] / "app.py"), default_timeout=300)
    at.session_state["in_method"] = "erasure"
    at.session_state["in_train"] = 100
    at.switch_page("app_pages/information.py")
    at.run()
    [button] = [b for b in at.button if b.label == "Measure"]
    button.click().run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    import json
    [chart] = [json.loads(c.proto.spec) for c in at.get("plotly_chart")]
    names = {t["name"] for t in chart["data"] if t.get("name")}
    assert {"leace", "mean projection", "inlp"} <= names
    leace = next(t for t in chart["data"] if t.get("name") == "leace")
    assert len(leace["x"]) == 3  # every layer of the fixture model
    rows = at.dataframe[0].value
    assert sorted(set(rows["method"])) == ["inlp", "leace", "mean projection"] and set(rows["layer"]) == {0, 1, 2}
    assert "chunk lost (points)" in rows.columns
