"""Tests for probing.tagging.suite and probing.tagging.results: the whole suite end to end on the bilm-tf fixture
model and slices of EWT and CoNLL-2000, the JSON round trip, the probe cache and the CLI."""

import dataclasses
import json
import math

import numpy as np
import pytest

from elmo_model import load_bilm
from elmo_model.bilm.identity import model_identity
from elmo_model.bilm.precision import resolve_precision
from probing.tagging.results import SuiteResult
from probing.tagging.suite import main, run_suite
from probing.tagging.suite_config import SuiteConfig

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LIMIT = 150


@pytest.fixture(scope="module")
def model(data_root):
    return load_bilm(data_root / "fixtures/bilm_tf")


@pytest.fixture(scope="module")
def suite(model, data_root, tmp_path_factory):
    cache_dir = tmp_path_factory.mktemp("suite-cache")
    steps = []
    result = run_suite(model, ["pos", "chunk"], data_root=data_root, cache_dir=cache_dir, seed=0, limit=LIMIT,
                       progress=lambda label, done, total: steps.append((label, done, total)))
    return result, cache_dir, steps


def test_suite_structure(suite, model):
    result, _, steps = suite
    assert [t.task for t in result.tasks] == ["pos", "chunk"]
    precision = result.config["precision"]  # the default, "auto": bf16 where this CPU's bf16 units pay
    assert precision == resolve_precision("auto")
    with model.computing_in(precision):
        assert result.model_identity == model_identity(model)
    assert result.model_name == "bilm_tf"
    assert result.seeds["seed"] == 0 and result.seeds["mix"] == [0, 1, 2]
    assert {"torch", "numpy", "scikit-learn", "h5py"} <= set(result.versions)
    assert result.config["layers"] == [0, 1, 2] and result.limit == LIMIT
    assert result.timings["total"] > 0 and result.timings["extract"] > 0
    # progress: every step reported, ending at the total
    assert steps[-1][1] == steps[-1][2] and all(done <= total for _, done, total in steps)
    for task in result.tasks:
        assert task.n_sentences == {"train": LIMIT, "dev": LIMIT, "test": LIMIT}
        assert [r.layer for r in task.layers] == [0, 1, 2]
        assert [len(r.halves) for r in task.layers] == [0, 2, 2]
        assert [h.direction for h in task.layer(1).halves] == ["forward", "backward"]
        for r in task.layers:
            for p in (r.probe, r.control, *r.halves):
                assert p.test.low <= p.test.estimate <= p.test.high
                assert p.test.n_sentences == LIMIT and p.test.level == 0.95
                assert p.alpha in result.config["alphas"] and p.path
            assert r.selectivity == pytest.approx(r.probe.test_accuracy - r.control.test_accuracy)
            assert r.control.test.metric == "accuracy"
            assert r.probe.test.metric == task.metric
        assert task.best_layer.probe.dev_score == max(r.probe.dev_score for r in task.layers)


def test_suite_scores_make_sense(suite, data_root):
    result, _, _ = suite
    pos, chunk = result.task("pos"), result.task("chunk")
    assert pos.metric == "accuracy" and chunk.metric == "chunk_f1"
    for p in (pos.layer(0).probe, pos.layer(1).probe):
        assert p.test.estimate == pytest.approx(p.test_accuracy)  # POS: the metric is accuracy
    for task in (pos, chunk):
        b = task.baselines
        assert b.word_majority.estimate > b.majority.estimate
        # the fixture biLM is tiny and barely trained, but its best layer beats the majority class
        assert max(r.probe.test.estimate for r in task.layers) > b.majority.estimate + 0.2
    # the majority baseline, by hand
    from collections import Counter

    from probing.tagging.tasks import load_task

    train_tags = [t for s in load_task("pos", "train", root=data_root, limit=LIMIT) for t in s.tags]
    test_tags = [t for s in load_task("pos", "test", root=data_root, limit=LIMIT) for t in s.tags]
    majority = Counter(train_tags).most_common(1)[0][0]
    assert pos.baselines.majority.estimate == pytest.approx(np.mean(np.array(test_tags) == majority))


def test_suite_mix_and_baselines(suite, model):
    result, _, _ = suite
    for task in result.tasks:
        mix = task.mix
        assert mix.layers == (0, 1, 2) and mix.seeds == (0, 1, 2) and len(mix.probes) == 3
        assert math.isclose(sum(mix.weights_mean), 1.0, abs_tol=1e-6)
        for p in mix.probes:
            assert len(p.mix_weights) == 3 and math.isclose(sum(p.mix_weights), 1.0, abs_tol=1e-6)
            assert p.gamma is not None and p.layer is None
        assert np.allclose(mix.weights_mean, np.mean([p.mix_weights for p in mix.probes], axis=0))
        assert np.allclose(mix.weights_std, np.std([p.mix_weights for p in mix.probes], axis=0))
        b = task.baselines
        assert [p.layer for p in b.random_bilm] == [0, 1, 2] == [p.layer for p in b.same_data]
        assert 0 < b.random_bilm_train_tokens < task.n_tokens["train"]
        assert all(p.n_train_tokens == b.random_bilm_train_tokens for p in (*b.random_bilm, *b.same_data))
        # a random biLM is a different model: its layers score differently from the trained ones
        assert [p.test.estimate for p in b.random_bilm] != [p.test.estimate for p in b.same_data]
    pos_refs = result.task("pos").baselines.reference
    assert {(r.system, r.layer, r.value) for r in pos_refs} >= {("biLM", 1, 0.973), ("biLM", 2, 0.968)}
    assert all("PTB" in r.note for r in pos_refs)
    assert result.task("chunk").baselines.reference == ()


def test_json_round_trip(suite, tmp_path):
    result, _, _ = suite
    path = tmp_path / "out" / "results.json"
    text = result.to_json(path)
    assert path.read_text() == text and not list(path.parent.glob("*.tmp"))
    assert SuiteResult.from_json(path) == result
    assert SuiteResult.from_json(text) == result
    assert json.loads(text)["format"] == "elmo-workbench/probe-suite"
    with pytest.raises(ValueError, match="not a probe-suite result"):
        SuiteResult.from_json('{"format": "something else"}')
    with pytest.raises(FileNotFoundError):
        SuiteResult.from_json(tmp_path / "missing.json")
    table = result.table()
    assert "layer 1 forward" in table and "s_j over layers [0, 1, 2]" in table and "97.3" in table


def test_rerun_uses_the_caches_and_is_deterministic(suite, model, data_root):
    result, cache_dir, _ = suite
    again = run_suite(model, ["pos", "chunk"], data_root=data_root, cache_dir=cache_dir, seed=0, limit=LIMIT)
    assert again.tasks[0].layers == result.tasks[0].layers and again.tasks[1].mix == result.tasks[1].mix
    assert again.timings["total"] < result.timings["total"] / 3
    assert "extract" in again.timings and "probe_layer" not in again.timings  # nothing retrained
    # retraining without the probe cache gives the same numbers (same seed)
    config = SuiteConfig(probe_cache=False, random_bilm=False, mix=False, halves=False)
    fresh = run_suite(model, ["pos"], layers=[1], data_root=data_root, cache_dir=cache_dir, seed=0,
                      limit=LIMIT, config=config)
    assert fresh.task("pos").layer(1).probe.test == result.task("pos").layer(1).probe.test
    assert fresh.task("pos").layer(1).control.test == result.task("pos").layer(1).control.test


def test_a_layer_is_whitened_once_for_its_probe_alpha_path_and_control(model, data_root, tmp_path, monkeypatch):
    import probing.tagging.probes as probes

    calls = []
    real = probes._preprocessing
    monkeypatch.setattr(probes, "_preprocessing", lambda *a, **k: calls.append(a[0].shape) or real(*a, **k))
    config = SuiteConfig(random_bilm=False, mix=False, halves=False, probe_cache=False, alphas=(1e-2, 1e-3))
    result = run_suite(model, ["pos"], layers=[0, 1], data_root=data_root, cache_dir=tmp_path, seed=0, limit=60,
                       config=config)
    n_train = result.task("pos").layer(0).probe.n_train_tokens
    assert calls == [(n_train, calls[0][1])] * 2  # one per layer: not per alpha, not again for the control

    calls.clear()  # the scalar mix's seeds take the layers' whitening from their probes
    config = dataclasses.replace(config, mix=True, mix_seeds=2)
    result = run_suite(model, ["pos"], layers=[0, 1], data_root=data_root, cache_dir=tmp_path / "mix", seed=0,
                       limit=60, config=config)
    assert calls == [(n_train, calls[0][1])] * 2 and len(result.task("pos").mix.probes) == 2


def test_control_labels_depend_on_the_seed(model, data_root, tmp_path):
    config = SuiteConfig(random_bilm=False, mix=False, halves=False, alphas=(1e-3,))
    runs = [run_suite(model, ["pos"], layers=[0], data_root=data_root, cache_dir=tmp_path, seed=s, limit=60,
                      config=config) for s in (0, 0, 1)]
    controls = [r.task("pos").layer(0).control for r in runs]
    assert controls[0].test == controls[1].test
    assert controls[0].test_accuracy != controls[2].test_accuracy


def test_bad_arguments(model, data_root, tmp_path):
    with pytest.raises(ValueError, match="unknown or no tasks"):
        run_suite(model, ["ner"], data_root=data_root, cache_dir=tmp_path)
    with pytest.raises(ValueError, match=r"layers must be in 0\.\.2"):
        run_suite(model, ["pos"], layers=[3], data_root=data_root, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="unknown SuiteConfig keys"):
        SuiteConfig.from_dict({"alpha": 1})
    assert SuiteConfig.from_dict(SuiteConfig().to_dict()) == SuiteConfig()


def test_cli(data_root, tmp_path, capsys):
    out = tmp_path / "r.json"
    code = main(["--model", str(data_root / "fixtures/bilm_tf"), "--tasks", "pos", "--layers", "1",
                 "--limit", "40", "--data-root", str(data_root), "--cache-dir", str(tmp_path / "c"),
                 "--no-random-bilm", "--mix-seeds", "0", "--out", str(out), "--quiet"])
    printed = capsys.readouterr().out
    assert code == 0 and "layer 1" in printed and "word-conditional majority" in printed
    loaded = SuiteResult.from_json(out)
    assert loaded.task("pos").mix is None and [r.layer for r in loaded.task("pos").layers] == [1]
    assert main(["--model", str(tmp_path / "nowhere"), "--tasks", "pos", "--quiet"]) == 2
    assert "error:" in capsys.readouterr().err


def test_the_suite_computes_in_its_precision_and_leaves_the_callers_model_as_it_was(data_root, tmp_path):
    from elmo_model.bilm.precision import EMULATED_BF16

    model = load_bilm(data_root / "fixtures/bilm_tf")
    config = SuiteConfig(control=False, random_bilm=False, halves=False, mix=False, n_bootstrap=20,
                         precision=EMULATED_BF16)
    result = run_suite(model, ["pos"], layers=[1], data_root=data_root, cache_dir=tmp_path, limit=20, config=config)
    assert model.precision == "fp32"  # the app's cached model keeps the sidebar's precision
    assert result.config["precision"] == EMULATED_BF16 and result.model_identity != model_identity(model)
    with model.computing_in(EMULATED_BF16):
        assert result.model_identity == model_identity(model)


def test_a_linear_probe_chooses_alpha_on_the_dev_features_and_frees_them_before_the_test_split(tmp_path):
    """``linear_probe`` scores each alpha on ``X("dev")`` (here the dev features carry the label with the
    opposite sign, so a probe scored on them scores ~0 while it gets the test split right), and the train
    and dev features are gone before ``X("test")`` is read (one split's features in memory at a time)."""
    import gc
    import weakref

    from probing.tagging.runner import _Runner, _Split
    from probing.tagging.tasks import TaggedSentence

    rng = np.random.default_rng(0)
    splits, y = {}, {}
    for name, n in (("train", 60), ("dev", 20), ("test", 20)):
        tags = rng.choice(["A", "B"], size=(n, 5))
        splits[name] = _Split(name, [TaggedSentence(tuple(f"w{i}" for i in range(5)), tuple(t), sent_id=f"{name}#{k}")
                                     for k, t in enumerate(tags)])
        y[name] = splits[name].tags
    sign = {"train": 1.0, "dev": -1.0, "test": 1.0}
    alive: dict[str, weakref.ref] = {}

    def X(split: str) -> np.ndarray:
        if split == "test":
            gc.collect()
            alive["at test"] = {name: ref() is not None for name, ref in alive.items()}
        signal = np.where(y[split] == "A", 1.0, -1.0)[:, None] * sign[split]
        features = np.hstack([signal, rng.normal(scale=0.1, size=(len(signal), 3))]).astype(np.float32)
        alive[split] = weakref.ref(features)
        return features

    runner = _Runner(SuiteConfig(probe_cache=False, n_bootstrap=50), seed=0, cache_dir=tmp_path, progress=None,
                     total_steps=1)
    score = runner.linear_probe("layer 0", "layer", 0, None, X, y, splits, "accuracy", {"task": "synthetic"})
    assert score.dev_score < 0.1 and score.test_accuracy > 0.9  # dev: the flipped features; test: right
    assert alive["at test"] == {"train": False, "dev": False}
