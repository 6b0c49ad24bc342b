"""Tests for probing.tagging.probes (scikit-learn contract, whitening, scalar mix, the dev path) and
probing.tagging.baselines (trivial taggers, control tasks, random biLM)."""

import numpy as np
import pytest
import torch
from sklearn.utils.estimator_checks import check_estimator

from elmo_model import load_bilm
from probing.tagging.baselines import ControlTask, MajorityTagger, WordMajorityTagger, random_bilm, reference_numbers
from probing.tagging.probes import LinearProbe, ScalarMixProbe, fit_on_dev

pytestmark = pytest.mark.usefixtures("one_torch_thread")

# Checks that check_estimator reports but cannot run here, and why. Everything else must pass.
NOT_APPLICABLE = {
    # needs SCIPY_ARRAY_API=1 and an estimator that declares Array API support: the probes
    # convert every input to NumPy/torch float32 themselves and do not claim it
    "check_array_api_input",
}


@pytest.mark.parametrize("estimator", [LinearProbe(), LinearProbe(preprocess="standardize"),
                                       ScalarMixProbe(n_layers=1)], ids=repr)
def test_sklearn_estimator_checks(estimator):
    results = check_estimator(estimator, on_fail=None, on_skip=None)
    assert len(results) > 40
    failed = {r["check_name"]: str(r["exception"])[:200] for r in results if r["status"] == "failed"}
    skipped = {r["check_name"] for r in results if r["status"] == "skipped"}
    assert failed == {}
    assert skipped == NOT_APPLICABLE


def _blobs(n=600, d=6, k=4, seed=0, noise=1.0):
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 3, (k, d))
    y = rng.integers(0, k, n)
    X = centres[y] + rng.normal(0, noise, (n, d))
    # correlated, badly scaled columns: what whitening is for
    mixing = rng.normal(0, 1, (d, d)) @ np.diag(np.logspace(-2, 2, d))
    return (X @ mixing).astype(np.float32), np.array(["ABCDEFGH"[i] for i in y])


def test_linear_probe_learns_and_coef_is_the_model():
    X, y = _blobs()
    probe = LinearProbe(alpha=1e-4).fit(X[:400], y[:400])
    assert probe.score(X[400:], y[400:]) > 0.9
    assert list(probe.classes_) == ["A", "B", "C", "D"] and probe.coef_.shape == (4, 6)
    # coef_/intercept_ are the whitened model in the units of X
    manual = ((X.astype(np.float64) - probe.mean_) @ probe.transform_) @ probe.weights_.T + probe.bias_
    np.testing.assert_allclose(probe.decision_function(X), manual, rtol=1e-6, atol=1e-6)
    proba = probe.predict_proba(X)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0)
    np.testing.assert_array_equal(probe.classes_[proba.argmax(axis=1)], probe.predict(X))
    # deterministic
    again = LinearProbe(alpha=1e-4).fit(X[:400], y[:400])
    np.testing.assert_array_equal(again.coef_, probe.coef_)


def test_whitening_converges_where_standardising_does_not():
    # a few strong factors shared by every column, as in LSTM states: standardising leaves the
    # columns correlated and the loss badly conditioned; whitening removes that
    rng = np.random.default_rng(1)
    n, d, k = 3000, 30, 5
    y_index = rng.integers(0, k, n)
    X = rng.normal(0, 1, (k, d))[y_index] + rng.normal(0, 1.5, (n, d))
    X = (X + rng.normal(0, 1, (n, 3)) @ rng.normal(0, 20, (3, d))).astype(np.float32)
    y = np.array(["ABCDE"[i] for i in y_index])
    whitened = LinearProbe(alpha=1e-4, max_iter=1000, tol=1e-6).fit(X, y)
    standardized = LinearProbe(alpha=1e-4, max_iter=1000, tol=1e-6, preprocess="standardize").fit(X, y)
    assert 3 * whitened.n_iter_ < standardized.n_iter_
    short_w = LinearProbe(alpha=1e-4, max_iter=20).fit(X, y)
    short_s = LinearProbe(alpha=1e-4, max_iter=20, preprocess="standardize").fit(X, y)
    assert short_w.loss_ < whitened.loss_ * 1.01  # 20 iterations: converged
    assert short_w.score(X, y) > short_s.score(X, y) + 0.05


def test_warm_start_needs_fewer_iterations():
    X, y = _blobs(n=1500, d=12, k=4, seed=2)
    cold = LinearProbe(alpha=1e-4, max_iter=300, tol=1e-6).fit(X, y)
    warm = LinearProbe(alpha=1e-3, max_iter=300, tol=1e-6, warm_start=True).fit(X, y)
    warm.set_params(alpha=1e-4).fit(X, y)
    assert warm.n_iter_ < cold.n_iter_
    np.testing.assert_allclose(warm.loss_, cold.loss_, rtol=1e-3)


def test_scalar_mix_finds_the_informative_layer():
    X, y = _blobs(n=900, d=5, k=3, seed=3, noise=1.5)
    rng = np.random.default_rng(4)
    noise_layers = [rng.normal(0, 1, X.shape).astype(np.float32) for _ in range(2)]
    stacked = np.concatenate([noise_layers[0], X, noise_layers[1]], axis=1)  # informative: layer 1
    fits = [ScalarMixProbe(n_layers=3, alpha=1e-3, random_state=s).fit(stacked[:600], y[:600]) for s in (0, 1, 2)]
    for probe in fits:
        np.testing.assert_allclose(probe.mix_weights_.sum(), 1.0)
        assert probe.mix_weights_.argmax() == 1 and probe.mix_weights_[1] > 0.6
        assert probe.score(stacked[600:], y[600:]) > 0.85
        assert probe.coef_.shape == (3, 15) and probe.transform_.shape == (3, 5, 5)
    # different seeds start differently but agree on s_j
    assert not np.array_equal(fits[0].scalar_parameters_, fits[1].scalar_parameters_)
    assert np.ptp([p.mix_weights_[1] for p in fits]) < 0.1
    # mix_l2 pulls s towards the average of the layers
    pulled = ScalarMixProbe(n_layers=3, alpha=1e-3, mix_l2=10.0, random_state=0).fit(stacked[:600], y[:600])
    assert np.ptp(pulled.mix_weights_) < 0.05 < np.ptp(fits[0].mix_weights_)
    # coef_ is the equivalent linear model: gamma * sum_j s_j z_j W^T + b
    p = fits[0]
    z = [((stacked[:, 5 * j:5 * (j + 1)].astype(np.float64) - p.mean_[5 * j:5 * (j + 1)]) @ p.transform_[j])
         for j in range(3)]
    manual = p.gamma_ * sum(p.mix_weights_[j] * z[j] for j in range(3)) @ p.weights_.T + p.bias_
    np.testing.assert_allclose(p.decision_function(stacked), manual, rtol=1e-6, atol=1e-6)


def test_scalar_mix_rejects_a_bad_layout_and_accepts_a_head():
    X, y = _blobs(n=200, d=4, k=3, seed=5)
    with pytest.raises(ValueError, match="not a multiple of n_layers=3"):
        ScalarMixProbe(n_layers=3).fit(X, y)
    head = LinearProbe().fit(X[:, :2], y)
    probe = ScalarMixProbe(n_layers=2, max_iter=5).fit(X, y, init_head=(head.weights_, head.bias_))
    assert probe.score(X, y) > 0.5
    with pytest.raises(ValueError, match="init_head"):
        ScalarMixProbe(n_layers=2).fit(X, y, init_head=(head.weights_[:, :1], head.bias_))


def test_scalar_mix_takes_each_layers_whitening_from_outside_and_trains_the_same():
    X, y = _blobs(n=300, d=4, k=3, seed=8)
    stacked = np.concatenate([X, X[:, ::-1] + 0.5], axis=1)
    plain = ScalarMixProbe(n_layers=2, max_iter=15, random_state=1).fit(stacked, y)
    given = [LinearProbe().preprocessing_of(stacked[:, :4]), LinearProbe().preprocessing_of(stacked[:, 4:])]
    shared = ScalarMixProbe(n_layers=2, max_iter=15, random_state=1).fit(stacked, y, preprocessing=given)
    np.testing.assert_array_equal(plain.coef_, shared.coef_)  # a layer's own probe whitens it the same
    np.testing.assert_array_equal(plain.mix_weights_, shared.mix_weights_)
    with pytest.raises(ValueError, match="preprocessing must be 2 pairs"):
        ScalarMixProbe(n_layers=2).fit(stacked, y, preprocessing=given[:1])


@pytest.mark.parametrize("estimator", [LinearProbe(max_iter=7), ScalarMixProbe(n_layers=2, max_iter=7)], ids=repr)
def test_the_final_loss_is_the_objective_at_the_fitted_parameters(estimator):
    """loss_ comes from L-BFGS's last evaluation where that was at the final parameters: it must be
    the training objective recomputed from the fitted model."""
    X, y = _blobs(n=400, d=6, k=3, seed=9)
    probe = estimator.set_params(alpha=1e-2).fit(X, y)
    scores = probe.decision_function(X)
    scores -= scores.max(axis=1, keepdims=True)
    log_p = scores - np.log(np.exp(scores).sum(axis=1, keepdims=True))
    penalty = (probe.weights_ ** 2).sum() + (probe.gamma_ ** 2 if hasattr(probe, "gamma_") else 0.0)
    objective = -log_p[np.arange(len(y)), np.searchsorted(probe.classes_, y)].mean() + 0.5 * 1e-2 * penalty
    assert probe.loss_ == pytest.approx(objective, rel=1e-5)


@pytest.mark.parametrize("k", [2, 12, 20, 22, 23, 49])
def test_the_padded_logits_are_f_linear_and_its_gradients(k):
    from probing.tagging.probes import _Logits, _padded_classes

    assert _padded_classes(k) == {2: 2, 12: 12, 20: 20, 22: 24, 23: 24, 49: 49}[k]  # a multiple of 8 where faster
    gen = torch.Generator().manual_seed(k)
    X = torch.randn(300, 16, generator=gen)
    E = torch.randn(k, 16, generator=gen, requires_grad=True)
    c = torch.randn(k, generator=gen, requires_grad=True)
    target = torch.randint(0, k, (300,), generator=gen)
    ours = _Logits.apply(X, E, c)
    torch.nn.functional.cross_entropy(ours, target).backward()
    grads = E.grad.clone(), c.grad.clone()
    E.grad, c.grad = None, None
    theirs = torch.nn.functional.linear(X, E, c)
    torch.nn.functional.cross_entropy(theirs, target).backward()
    assert ours.shape == (300, k)
    torch.testing.assert_close(ours, theirs, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(grads[0], E.grad, rtol=1e-6, atol=1e-7)
    torch.testing.assert_close(grads[1], c.grad, rtol=1e-6, atol=1e-7)


def test_fit_on_dev_walks_the_path_and_stops_early():
    X, y = _blobs(n=300, d=4, k=3, seed=6)
    scores = iter([0.5, 0.7, 0.6, 0.9])  # the 4th alpha would be best, but the path stops at the 3rd
    seen = []

    def dev_score(probe):
        seen.append(probe.alpha)
        return next(scores)

    original = LinearProbe(max_iter=10)
    best, path = fit_on_dev(original, X, y, dev_score, alphas=[1e-4, 1e-2, 1e-3, 1e-5])
    assert seen == [1e-2, 1e-3, 1e-4] and [p.alpha for p in path] == seen
    assert best.alpha == 1e-3 and best.warm_start is False
    assert [p.dev_score for p in path] == [0.5, 0.7, 0.6] and all(p.n_iter > 0 for p in path)
    assert not hasattr(original, "coef_")  # the template is not fitted
    with pytest.raises(ValueError):
        fit_on_dev(original, X, y, dev_score, alphas=[])



def test_whitening_is_computed_once_for_an_alpha_path_and_can_be_passed_in(monkeypatch):
    import probing.tagging.probes as probes

    X, y = _blobs(n=400, d=6, k=2, seed=7)
    plain = LinearProbe(max_iter=20).fit(X, y)
    given = LinearProbe(max_iter=20).fit(X, y, preprocessing=LinearProbe().preprocessing_of(X))
    np.testing.assert_array_equal(plain.coef_, given.coef_)  # the same arithmetic, computed elsewhere
    with pytest.raises(ValueError, match="preprocessing must be"):
        LinearProbe().fit(X, y, preprocessing=LinearProbe().preprocessing_of(X[:, :5]))

    calls = []
    real = probes._preprocessing
    monkeypatch.setattr(probes, "_preprocessing", lambda *a, **k: calls.append(1) or real(*a, **k))
    best, path = fit_on_dev(LinearProbe(max_iter=10), X, y, lambda p: -p.alpha, alphas=[1e-4, 1e-2, 1e-3])
    assert len(path) == 3 and len(calls) == 1  # three fits would whiten three times
    fit_on_dev(LinearProbe(max_iter=10), X, y, lambda p: -p.alpha, alphas=[1e-2],
               preprocessing=LinearProbe().preprocessing_of(X))
    assert len(calls) == 2  # only preprocessing_of itself


def test_two_class_probe_learns_the_same_as_before_its_faster_gradient():
    """The loss uses F.linear (gradient G.T @ X); the model must be the plain softmax regression:
    its gradient at the optimum vanishes when computed the textbook way."""
    X, y = _blobs(n=500, d=8, k=2, seed=8)
    probe = LinearProbe(alpha=1e-2, max_iter=200, tol=1e-9, preprocess="none").fit(X, y)
    W = torch.tensor(probe.weights_, requires_grad=True)
    b = torch.tensor(probe.bias_, requires_grad=True)
    Xt = torch.tensor(X, dtype=torch.float64)
    yt = torch.tensor(np.searchsorted(probe.classes_, y))
    loss = torch.nn.functional.cross_entropy(Xt @ W.T + b, yt) + 0.5 * 1e-2 * (W * W).sum()
    loss.backward()
    assert float(W.grad.abs().max()) < 1e-3 and float(b.grad.abs().max()) < 1e-3


# --------------------------------------------------------------------------------------------
# Baselines
# --------------------------------------------------------------------------------------------


def test_majority_and_word_majority_taggers():
    words = ["the", "dog", "runs", "the", "runs", "runs", "The"]
    tags = ["DT", "NN", "VBZ", "DT", "NNS", "VBZ", "DT"]
    assert MajorityTagger().fit(words, tags).predict(["x", "y"]).tolist() == ["DT", "DT"]
    # ties go to the label that sorts first
    assert MajorityTagger().fit(["a", "b"], ["Y", "X"]).label_ == "X"
    tagger = WordMajorityTagger().fit(words, tags)
    assert tagger.predict(["runs", "dog", "cat", "The"]).tolist() == ["VBZ", "NN", "DT", "DT"]
    assert WordMajorityTagger(lowercase=True).fit(["The", "the"], ["DT", "NN"]).predict(["THE"]).tolist() == ["DT"]
    with pytest.raises(ValueError):
        WordMajorityTagger().fit(["a"], [])


def test_control_task_is_per_type_seeded_and_follows_the_distribution():
    labels = ["NN"] * 60 + ["VB"] * 30 + ["DT"] * 10
    control = ControlTask(seed=7).fit(labels)
    words = [f"w{i}" for i in range(6000)]
    drawn = control.labels(words)
    # one label per type, the same in any split and whatever other words are present
    assert control.labels(["w5", "w5", "w17"]).tolist() == [drawn[5], drawn[5], drawn[17]]
    assert ControlTask(seed=7).fit(["DT"] * 10 + ["VB"] * 30 + ["NN"] * 60).labels(words[:50]).tolist() == drawn[:50].tolist()
    # deterministic per seed, different across seeds
    assert ControlTask(seed=8).fit(labels).labels(words).tolist() != drawn.tolist()
    # drawn from the label distribution
    frequencies = {t: np.mean(drawn == t) for t in ("NN", "VB", "DT")}
    assert frequencies["NN"] == pytest.approx(0.6, abs=0.03)
    assert frequencies["VB"] == pytest.approx(0.3, abs=0.03)
    assert frequencies["DT"] == pytest.approx(0.1, abs=0.03)


def test_random_bilm_is_seeded_and_leaves_the_global_rng(data_root):
    config = load_bilm(data_root / "fixtures/bilm_tf").config
    torch.manual_seed(123)
    expected_next = torch.rand(1)
    torch.manual_seed(123)
    a = random_bilm(config, seed=0)
    assert torch.equal(torch.rand(1), expected_next)
    b, c = random_bilm(config, seed=0), random_bilm(config, seed=1)
    assert a.checksum == b.checksum != c.checksum
    assert a.config == config and not a.training


def test_reference_numbers():
    pos = {(r.system, r.layer): r for r in reference_numbers("pos")}
    assert pos[("biLM", 1)].value == 0.973 and pos[("biLM", 2)].value == 0.968
    assert "PTB WSJ" in pos[("biLM", 1)].note
    assert reference_numbers("chunk") == []


def test_bf16_products_learn_what_fp32_learns_on_features_far_from_zero():
    """The probes' products in bf16 (the suite's choice on a CPU with bf16 units): X is centred
    before it is rounded, so features whose mean is 200 times their spread (bf16 keeps 8 bits:
    rounded uncentred, such a column loses its signal) give the fp32 probe's predictions."""
    X, y = _blobs(n=900, d=6, k=4, seed=5, noise=1.5)
    X = X / X.std(axis=0) + 200.0 * np.sign(np.arange(6) - 2.5).astype(np.float32)
    fp32 = LinearProbe(alpha=1e-3, max_iter=60).fit(X[:600], y[:600])
    bf16 = LinearProbe(alpha=1e-3, max_iter=60, precision="bf16").fit(X[:600], y[:600])
    assert fp32.score(X[600:], y[600:]) > 0.85
    assert np.mean(fp32.predict(X) == bf16.predict(X)) >= 0.99
    assert abs(fp32.loss_ - bf16.loss_) < 0.01 * fp32.loss_
    mix32 = ScalarMixProbe(n_layers=2, alpha=1e-3, random_state=0).fit(np.concatenate([X, X[::-1]], 1)[:600], y[:600])
    mix16 = ScalarMixProbe(n_layers=2, alpha=1e-3, random_state=0, precision="bf16").fit(
        np.concatenate([X, X[::-1]], 1)[:600], y[:600])
    np.testing.assert_allclose(mix16.mix_weights_, mix32.mix_weights_, atol=0.02)
    with pytest.raises(ValueError, match="precision"):
        LinearProbe(precision="fp16").fit(X, y)


def test_the_suite_runs_its_probes_in_bf16_only_where_the_cpu_has_the_units(monkeypatch, tmp_path):
    from elmo_model.bilm import precision as precision_module
    from probing.tagging import runner as runner_module
    from probing.tagging.suite_config import SuiteConfig

    def runner(precision, usable):
        monkeypatch.setattr(runner_module, "bf16_support", lambda device: precision_module.Bf16Support(usable, "", ""))
        return runner_module._Runner(SuiteConfig(precision=precision), 0, tmp_path, None, 1)

    assert runner("bf16", True).products == "bf16"
    assert runner("bf16", False).products == "fp32"  # a GPU's bf16 biLM on a CPU without the units
    assert runner("fp32", True).products == "fp32"
    assert runner("fp32", True).probe_key == SuiteConfig(precision="fp32").probe_key()  # fp32 keys as before
    assert runner("bf16", True).probe_key != runner("bf16", False).probe_key
