"""MDL, conditional and amnesic probing against cases whose answer is known."""

import dataclasses
import numpy as np
import pytest

from elmo_model.plumbing.resources import shipped_data
from elmo_model.training.language_model import evaluate_perplexity, load_language_model
from probing.information.amnesic import NullspaceProjection, inlp, lm_cross_entropy, random_projection
from probing.information.conditional import conditional_information, heldout_bits
from probing.information.mdl import OnlineCode, block_ends, online_codelength
from probing.information.results import InformationResult
from probing.information.run import InformationConfig, run_information
from probing.tagging.probes import LinearProbe

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _linear_labels(n: int, d: int, k: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian X (n, d) and labels = argmax of a random linear map: a linear function of X."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d)).astype(np.float32)
    W = rng.standard_normal((d, k))
    return X, np.array([f"c{i}" for i in np.argmax(X @ W, axis=1)])


def test_block_ends_follow_the_papers_fractions():
    assert block_ends(10_000) == [10, 20, 40, 80, 160, 320, 625, 1250, 2500, 5000, 10_000]
    assert block_ends(100)[0] == 1 and block_ends(100)[-1] == 100  # tiny blocks merge, none is empty
    with pytest.raises(ValueError, match="at least 2"):
        block_ends(1)


def test_mdl_linear_labels_get_a_short_code_and_random_labels_a_uniform_one():
    X, y = _linear_labels(3000, 16, 4, seed=0)
    linear = online_codelength(X, y, random_state=0)
    shuffled = online_codelength(X, np.random.default_rng(1).permutation(y), random_state=0)
    assert linear.uniform_bits == pytest.approx(3000 * np.log2(4))
    assert linear.online_bits == pytest.approx(sum(linear.block_bits))
    assert linear.compression > 3.0  # learnt from few examples
    assert 0.85 < shuffled.compression < 1.05  # nothing to learn: about the uniform code
    assert linear.final_accuracy > 0.9 and shuffled.final_accuracy < 0.4
    again = online_codelength(X, y, random_state=0)  # seeded: the same code
    assert again == linear
    assert OnlineCode.from_dict(linear.to_dict()) == linear


def test_inlp_removes_a_one_direction_property_in_one_iteration_and_stays_orthogonal():
    rng = np.random.default_rng(0)
    X = rng.standard_normal((2000, 12)).astype(np.float32)
    w = rng.standard_normal(12)
    y = np.where(X @ w > 0, "a", "b")
    result = inlp(X[:1500], y[:1500], X[1500:], y[1500:], max_iterations=10, random_state=0)
    assert result.dev_accuracies[0] > 0.95
    # two classes read from one direction: the first removal takes nearly all of it (the estimated
    # direction is a little off w, so a second may take the rest)
    assert result.dev_accuracies[1] < 0.6
    assert result.reached_majority and result.n_iterations <= 2
    assert result.projection.rank == result.n_iterations
    P = result.projection.matrix()
    np.testing.assert_allclose(P @ P, P, atol=1e-10)
    np.testing.assert_allclose(P, P.T, atol=1e-12)
    for direction in result.projection.directions:  # orthogonal to every removed direction
        np.testing.assert_allclose(P @ direction, 0.0, atol=1e-10)
    cosine = abs(result.projection.directions[0] @ w) / np.linalg.norm(w)
    assert cosine > 0.95  # the direction removed is the one the labels are read from


def test_inlp_on_several_classes_reaches_majority_within_the_expected_iterations():
    X, y = _linear_labels(3000, 20, 4, seed=2)  # labels read through a 4-class linear map: rank 3
    result = inlp(X[:2400], y[:2400], X[2400:], y[2400:], max_iterations=10, random_state=0)
    assert result.reached_majority
    assert result.n_iterations <= 2
    assert result.dev_accuracies[-1] <= result.majority + result.tolerance
    B = result.projection.directions
    np.testing.assert_allclose(B @ B.T, np.eye(len(B)), atol=1e-8)
    projected = result.projection.apply(X)
    np.testing.assert_allclose(projected @ B.T, 0.0, atol=1e-4)


def test_inlp_checks_a_raw_probe_at_majority_with_a_whitened_one():
    """A label read from a direction of tiny variance: a raw probe (L2 on raw weights) cannot use
    it and sits at the majority level from the start; the whitened check sees it, so INLP removes it."""
    rng = np.random.default_rng(3)
    X = rng.standard_normal((2000, 6)).astype(np.float32)
    X[:, 5] *= 3e-3
    y = np.where(X[:, 5] > 0, "a", "b")

    def whitened_accuracy(projection):  # a fresh probe as the amnesic measurement trains it
        probe = LinearProbe(alpha=1e-3, max_iter=50).fit(projection.apply(X[:1500]), y[:1500])
        return float(np.mean(probe.predict(projection.apply(X[1500:])) == y[1500:]))

    unchecked = inlp(X[:1500], y[:1500], X[1500:], y[1500:], tolerance=0.05, check=None)
    assert unchecked.reached_majority and unchecked.n_iterations == 0  # fooled by the first probe
    assert whitened_accuracy(unchecked.projection) > 0.85  # the property is all there
    checked = inlp(X[:1500], y[:1500], X[1500:], y[1500:], tolerance=0.05)
    assert checked.dev_accuracies[0] > 0.85 and checked.reached_majority and 1 <= checked.n_iterations <= 3
    assert max(abs(checked.projection.directions[:, 5])) > 0.95  # the tiny direction is among those removed
    assert whitened_accuracy(checked.projection) < 0.6


def test_random_projection_is_seeded_orthonormal_and_of_the_asked_rank():
    a, b = random_projection(10, 3, seed=4), random_projection(10, 3, seed=4)
    np.testing.assert_array_equal(a.directions, b.directions)
    np.testing.assert_allclose(a.directions @ a.directions.T, np.eye(3), atol=1e-12)
    assert np.linalg.matrix_rank(a.matrix()) == 7
    assert NullspaceProjection(np.zeros((0, 5))).apply(np.ones((2, 5))).tolist() == np.ones((2, 5)).tolist()
    with pytest.raises(ValueError, match="rank"):
        random_projection(4, 5)
    X = np.random.default_rng(5).standard_normal((7, 10))
    kept = a.kept()  # the coordinates the probes read: the same vectors, no residue along the removed ones
    np.testing.assert_allclose(kept @ kept.T, np.eye(7), atol=1e-10)
    np.testing.assert_allclose(kept @ a.directions.T, 0.0, atol=1e-10)
    np.testing.assert_allclose(a.coordinates(X) @ kept, a.apply(X), atol=1e-5)
    assert random_projection(10, 10, seed=4).coordinates(X).shape == (7, 0)


def _conditional_data(seed: int):
    """Layer 0 sees a half of the label's signal; "added" carries the other half."""
    rng = np.random.default_rng(seed)
    n, d = 3600, 8
    base = rng.standard_normal((n, d)).astype(np.float32)
    added = rng.standard_normal((n, d)).astype(np.float32)
    score = base[:, 0] + added[:, 0] * 1.5
    y = np.where(score > 0, "x", "y")
    splits = {"train": slice(0, 2400), "dev": slice(2400, 3000), "test": slice(3000, 3600)}
    sentence_of = np.repeat(np.arange(60), 10)  # 600 test tokens in 60 "sentences"
    return ({s: base[r] for s, r in splits.items()}, {s: added[r] for s, r in splits.items()},
            {s: y[r] for s, r in splits.items()}, sentence_of)


def test_conditional_information_is_zero_for_a_copy_of_layer_0_and_positive_for_new_signal():
    base, added, y, sentence_of = _conditional_data(0)
    copy = conditional_information(base, base, y, sentence_of, layer_index=1, seed=0, n_resamples=300)
    assert abs(copy.conditional.estimate) < 0.01
    assert copy.conditional.low <= 0.0 <= copy.conditional.high + 1e-9
    new = conditional_information(base, added, y, sentence_of, layer_index=2, seed=0, n_resamples=300)
    assert new.conditional.low > 0.1  # the added half of the signal: well above zero
    assert new.conditional.estimate == pytest.approx(new.baseline_bits - new.joint_bits)
    assert 0.9 < new.label_entropy < 1.05  # two balanced labels: ~1 bit (a cross-entropy on test)
    assert new.accuracies["joint"] > new.accuracies["baseline"]
    base_bits = heldout_bits(base, y, seed=0)
    reused = conditional_information(base, added, y, sentence_of, layer_index=2, seed=0, n_resamples=300,
                                     base_bits=base_bits)
    assert reused.conditional == new.conditional
    assert type(new).from_dict(new.to_dict()) == new


def test_lm_cross_entropy_is_the_models_perplexity_and_rises_when_the_top_layer_loses_directions():
    lm, vocab = load_language_model(shipped_data("models", "elmo-mini"))
    sentences = [["The", "cat", "sat", "on", "the", "mat", "."], ["It", "was", "raining", "."], ["Yes", "."]]
    plain = lm_cross_entropy(lm, vocab, sentences, batch_sentences=2)
    perplexity = evaluate_perplexity(lm, sentences, vocab)
    assert plain["n_predictions"] == perplexity["n_predictions"] == 7 + 4 + 2 + 3
    assert 2 ** plain["forward"] == pytest.approx(perplexity["forward"], rel=1e-4)
    assert 2 ** plain["backward"] == pytest.approx(perplexity["backward"], rel=1e-4)
    half = lm.bilm.config.lstm.projection_dim
    erased = lm_cross_entropy(lm, vocab, sentences, {"forward": NullspaceProjection(np.eye(half))})
    assert erased["backward"] == pytest.approx(plain["backward"])
    assert erased["forward"] > plain["forward"] + 1.0  # no state at all: the forward LM loses bits
    with pytest.raises(ValueError, match="per direction"):
        lm_cross_entropy(lm, vocab, sentences, {"both": NullspaceProjection(np.eye(half))})


@pytest.fixture(scope="module")
def fixture_result(data_root, tmp_path_factory):
    """The three methods on the bilm-tf fixture model, two tasks, small slices."""
    config = InformationConfig(train_limit=40, eval_limit=20, inlp_iterations=3, n_bootstrap=100, lm_sentences=5)
    calls = []
    result = run_information(data_root / "fixtures/bilm_tf", ["pos", "chunk"], config=config, data_root=data_root,
                             cache_dir=tmp_path_factory.mktemp("information-cache"), seed=0,
                             progress=lambda *args: calls.append(args))
    return result, calls


def test_run_information_measures_every_method_per_layer_and_round_trips(fixture_result, tmp_path):
    result, calls = fixture_result
    assert [t.task for t in result.tasks] == ["pos", "chunk"]
    assert calls[-1][1] == calls[-1][2]  # the progress count ends at its total
    for task in result.tasks:
        assert task.n_sentences == {"train": 40, "dev": 20, "test": 20}
        assert [c.layer for c in task.codes] == [0, 1, 2] and all(c.control is not None for c in task.codes)
        for code in task.codes:
            assert code.task.n_examples == task.n_tokens["train"] and code.task.online_bits > 0
        assert [c.layer for c in task.conditional] == [1, 2]
        assert [a.layer for a in task.amnesic] == [0, 1, 2]
        for layer in task.amnesic:
            assert layer.iterations <= 3 and set(layer.task_accuracy) == {"original", "amnesic", "random"}
            assert list(layer.other_tasks) == [t.task for t in result.tasks if t is not task]
            assert layer.lm is None  # the fixture model has no softmax, and the result says so
        assert "softmax" in task.amnesic[-1].lm_note
    path = tmp_path / "information.json"
    result.to_json(path)
    assert InformationResult.from_json(path) == result
    assert "MDL layer 1" in result.table()
    with pytest.raises(ValueError, match="information-probes result"):
        InformationResult.from_dict({**result.to_dict(), "format": "something else"})


def test_the_report_blocks_and_figures_of_the_information_probes(fixture_result):
    from probing.figures import amnesic_figure, conditional_figure, mdl_figure
    from probing.report.blocks import information_blocks
    from probing.report.elements import ReportFigure

    result, _ = fixture_result
    pos = result.task("pos")
    mdl = mdl_figure(pos, result.model_name)
    assert [trace.name for trace in mdl.data][:2] == ["task labels", "task labels"]
    assert mdl.data[0].y[1] == pytest.approx(pos.codes[1].task.online_bits / 1000)
    conditional = conditional_figure(pos)
    assert list(conditional.data[0].y) == pytest.approx([c.conditional.estimate for c in pos.conditional])
    amnesic = amnesic_figure(pos)
    drop = [100 * (a.task_accuracy["original"] - a.task_accuracy["amnesic"]) for a in pos.amnesic]
    assert list(amnesic.data[0].y) == pytest.approx(drop)
    blocks = information_blocks(result)
    figures = [b.name for b in blocks if isinstance(b, ReportFigure)]
    assert figures == ["mdl-pos", "mdl-chunk", "conditional-pos", "conditional-chunk", "amnesic-pos", "amnesic-chunk"]


def test_run_information_refuses_bad_requests_in_one_line(data_root):
    with pytest.raises(ValueError, match="unknown or no tasks"):
        run_information(data_root / "fixtures/bilm_tf", ["nope"], data_root=data_root)
    with pytest.raises(ValueError, match="layers must be in 0..2"):
        run_information(data_root / "fixtures/bilm_tf", ["pos"], layers=[5], data_root=data_root)
    with pytest.raises(ValueError, match="unknown or no methods"):
        InformationConfig(methods=("mdl", "accuracy"))


def test_compare_puts_two_models_information_side_by_side(fixture_result):
    from probing.report.elements import _Table
    from probing.report.compare import compare_blocks
    from probing.report.config import ReportConfig, ReportResult

    result, _ = fixture_result

    def report(name):
        return ReportResult(model_name=name, model_identity=name * 4, model_config={}, tasks=["pos", "chunk"],
                            words=[], seed=0, limit=None, config=ReportConfig(), settings={}, created="",
                            versions={}, timings={}, information=result)

    tables = [b for b in compare_blocks(report("a"), report("b")) if isinstance(b, _Table)]
    side_by_side = [t for t in tables if "compression a" in t.headers]
    assert len(side_by_side) == 2  # pos and chunk
    pos = result.task("pos")
    row = side_by_side[0].rows[1]  # layer 1: each figure twice, A then B
    assert row[0] == "layer 1" and row[1] == row[2] == f"{pos.codes[1].task.compression:.2f}×"
    assert row[5] == row[6] == f"{pos.conditional[0].conditional.estimate:.3f}"


def test_lexical_sample_splits_pool_the_words_by_sense_through_the_probes_cache(data_root, tmp_path):
    from elmo_model import load_bilm
    from probing.senses.lexical_sample import lexical_sample_features, lexical_sample_splits, read_lexical_sample

    model = load_bilm(data_root / "fixtures/bilm_tf")
    splits = lexical_sample_splits(model, data_root, words=("hard", "serve"), max_instances=50, seed=0,
                                   cache_dir=tmp_path)
    assert {s: len(instances) for s, (instances, _) in splits.items()} == {"train": 60, "dev": 20, "test": 20}
    hard = read_lexical_sample("hard", data_root, max_instances=50, seed=0)
    features = lexical_sample_features(model, hard, "hard", cache_dir=tmp_path)  # the lexical-sample probe's vectors
    seen = []
    for instances, vectors in splits.values():
        assert vectors.shape[:2] == (3, len(instances)) and vectors.dtype == np.float32
        for k, instance in enumerate(instances):
            if instance in hard:
                row = hard.index(instance)
                seen.append(row)
                np.testing.assert_array_equal(vectors[:, k], features[:, row])
    assert sorted(seen) == list(range(50))  # every context of "hard" in exactly one split
    train_senses = {i.sense for i in splits["train"][0]}
    assert {i.sense for i in hard if sum(j.sense == i.sense for j in hard) >= 5} <= train_senses  # stratified
    with pytest.raises(ValueError, match="three positive shares"):
        lexical_sample_splits(model, data_root, words=("hard",), fractions=(0.5, 0.5))


def test_run_information_on_the_lexical_sample_beside_pos(data_root, tmp_path):
    from probing.information.cli import main

    config = InformationConfig(train_limit=30, eval_limit=20, inlp_iterations=3, n_bootstrap=100, lm_sentences=5,
                               lexsample_words=("hard", "serve"), lexsample_instances=50)
    result = run_information(data_root / "fixtures/bilm_tf", ["pos", "lexsample"], config=config, data_root=data_root,
                             cache_dir=tmp_path, seed=0)
    lex = result.task("lexsample")
    assert lex.n_sentences == lex.n_tokens == {"train": 60, "dev": 20, "test": 20}  # one target token a context
    assert [c.layer for c in lex.codes] == [0, 1, 2]
    for code in lex.codes:  # the senses of both words, pooled; control labels beside them
        assert code.task.n_examples == 60 and code.task.n_classes >= 5 and code.control is not None
    assert [c.layer for c in lex.conditional] == [1, 2]
    assert [a.layer for a in lex.amnesic] == [0, 1, 2]
    assert list(lex.amnesic[0].other_tasks) == ["pos"]
    assert list(result.task("pos").amnesic[0].other_tasks) == ["lexsample"]
    assert "lexsample: 60 training tokens" in result.table()
    with pytest.raises(ValueError, match="lexsample_instances"):
        InformationConfig(lexsample_instances=5)
    with pytest.raises(SystemExit) as refused:
        main(["--tasks", "lexsample", "--lexsample-instances", "5"])
    assert refused.value.code == 2


def test_mdl_on_one_class_is_refused_in_one_line_not_infinite_compression():
    X = np.random.default_rng(0).normal(size=(40, 3))
    with pytest.raises(ValueError, match="1 class: an online code") as err:
        online_codelength(X, np.zeros(40, dtype=int))
    assert "\n" not in str(err.value)
    assert online_codelength(X, np.arange(40) % 2).compression < float("inf")  # two classes: a finite ratio


def test_inlp_on_a_constant_layer_is_one_line_not_an_overflow():
    X = np.ones((30, 4))
    y = np.arange(30) % 3
    with pytest.raises(ValueError, match="no variance") as err:
        inlp(X, y, X[:10], y[:10])
    assert "\n" not in str(err.value)
    bad = np.random.default_rng(0).normal(size=(30, 4))
    bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        inlp(bad, y, bad[:10], y[:10])


def test_a_rerun_reads_each_tasks_results_back_and_a_changed_setting_computes_again(data_root, tmp_path, monkeypatch):
    """The report's warm rerun: the same model, sentences, settings and seed read every task's
    result back from the cache (no method runs), equal to the first run's; another setting or
    another seed is computed afresh; the cache can be turned off."""
    from probing.information import run as information_run

    config = InformationConfig(methods=("mdl", "conditional"), train_limit=30, eval_limit=15, n_bootstrap=50)
    model = data_root / "fixtures/bilm_tf"
    first = run_information(model, ["pos"], config=config, data_root=data_root, cache_dir=tmp_path, seed=0)
    computed = []
    real = information_run._task_information
    monkeypatch.setattr(information_run, "_task_information",
                        lambda runner, item, *rest: computed.append((item.task, runner.seed)) or real(runner, item, *rest))
    calls = []
    again = run_information(model, ["pos"], config=config, data_root=data_root, cache_dir=tmp_path, seed=0,
                            progress=lambda *args: calls.append(args))
    assert computed == [] and again.tasks == first.tasks
    assert calls[-1][1] == calls[-1][2]  # the progress count still ends at its total
    run_information(model, ["pos"], config=config, data_root=data_root, cache_dir=tmp_path, seed=1)
    run_information(model, ["pos"], config=dataclasses.replace(config, mdl_alpha=1e-2), data_root=data_root,
                    cache_dir=tmp_path, seed=0)
    run_information(model, ["pos"], config=dataclasses.replace(config, result_cache=False), data_root=data_root,
                    cache_dir=tmp_path, seed=0)
    assert computed == [("pos", 1), ("pos", 0), ("pos", 0)]
