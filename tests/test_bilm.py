"""The biLM against the original implementation's outputs, and its invariants."""

import re
import json
import shutil

import h5py
import numpy as np
import pytest
import torch

from elmo_model import ElmoConfig, ElmoEmbedder, ScalarMix, load_bilm
from elmo_model.bilm.char_ids import batch_to_char_ids, word_to_char_ids
from elmo_model.bilm.modules import BiLM
from elmo_model.bilm.weights import (check_weight_shapes, expected_shapes, load_weights, save_weights,
                                     state_to_hdf5_arrays)


@pytest.fixture(scope="module")
def fixture_dir(data_root):
    return data_root / "fixtures" / "bilm_tf"


@pytest.fixture(scope="module")
def fixture_model(fixture_dir):
    return load_bilm(fixture_dir)


def test_matches_bilm_tf_outputs_stateful_replay(fixture_dir):
    """bilm-tf's own test: batch i = the i-th sentence of each list, stateful, in order."""
    model = load_bilm(fixture_dir)
    model.stateful = True
    lists = json.loads((fixture_dir / "lm_embeddings_sentences.json").read_text())
    expected = [h5py.File(fixture_dir / f"lm_embeddings_{k}.hdf5", "r") for k in range(3)]
    worst, compared = 0.0, 0
    with torch.no_grad():
        for i in range(10):
            batch = [lists[k][i].split() for k in range(3)]
            top = model(batch_to_char_ids(batch)).layers[-1].numpy()
            for k, sentence in enumerate(batch):
                e = expected[k][str(i)][...]
                e = np.concatenate([e[0], e[1]], axis=-1)  # (T, 2P): [forward; backward]
                assert e.shape == (len(sentence), 32)
                worst = max(worst, float(np.abs(top[k, : len(sentence)] - e).max()))
                compared += 1
    assert compared == 30
    assert worst <= 1e-5, f"max abs difference {worst}"


def test_stateless_mode_does_not_depend_on_batch(fixture_model):
    embedder = ElmoEmbedder(fixture_model)
    rng = np.random.default_rng(0)
    words = "the bank river money play theatre sport bark dog tree a of and to in".split()
    others = [[str(w) for w in rng.choice(words, size=rng.integers(1, 30))] for _ in range(8 * 20)]
    target = ["The", "bank", "by", "the", "river", "was", "steep", "."]
    alone = embedder.embed_sentence(target)
    in_batch = embedder.embed_batch(others[:3] + [target] + others[3:7])[3]
    for b in range(20):  # 20 other batches first; the model must not remember them
        embedder.embed_batch(others[8 * b : 8 * b + 8])
    after = embedder.embed_sentence(target)
    assert alone.shape == (3, len(target), 32)
    assert np.abs(alone - in_batch).max() <= 1e-6
    assert np.abs(alone - after).max() == 0.0


def test_stateful_mode_carries_state(fixture_dir):
    embedder = ElmoEmbedder(fixture_dir, stateful=True)
    s = ["A", "sentence", "."]
    first, second = embedder.embed_sentence(s), embedder.embed_sentence(s)
    assert np.abs(first[0] - second[0]).max() == 0.0  # layer 0 has no state
    assert np.abs(first[1:] - second[1:]).max() > 1e-3
    embedder.model.reset_states()
    assert np.abs(embedder.embed_sentence(s) - first).max() == 0.0


def test_layer_zero_is_the_token_vector_twice(fixture_model):
    v = ElmoEmbedder(fixture_model).embed_sentence(["bank", "bank"])
    np.testing.assert_array_equal(v[0, :, :16], v[0, :, 16:])
    np.testing.assert_array_equal(v[0, 0], v[0, 1])  # context-independent
    assert np.abs(v[1, 0] - v[1, 1]).max() > 1e-4  # contextual


def test_keep_boundaries(fixture_model):
    with torch.no_grad():
        out = fixture_model(batch_to_char_ids([["a", "b"], ["c"]]), keep_boundaries=True)
    assert out.layers[0].shape == (2, 4, 32)
    assert out.mask.tolist() == [[True, True, True, True], [True, True, True, False]]


# ---- character ids --------------------------------------------------------------------------

def test_char_ids_ascii():
    ids = word_to_char_ids("cat")
    assert ids.shape == (50,)
    assert ids[:5].tolist() == [259, ord("c") + 1, ord("a") + 1, ord("t") + 1, 260]
    assert set(ids[5:].tolist()) == {261}


def test_char_ids_multibyte_utf8():
    for word in ("é", "中", "😀"):
        encoded = list(word.encode("utf-8"))
        ids = word_to_char_ids(word)
        assert ids[1 : 1 + len(encoded)].tolist() == [b + 1 for b in encoded]
        assert ids[1 + len(encoded)] == 260


def test_char_ids_long_token_keeps_end_of_word():
    ids = word_to_char_ids("x" * 60)
    assert ids[0] == 259 and ids[49] == 260
    assert ids[1:49].tolist() == [ord("x") + 1] * 48


def test_char_ids_boundaries_and_empty_batch():
    assert word_to_char_ids("<S>")[:4].tolist() == [259, 257, 260, 261]
    assert word_to_char_ids("</S>")[:4].tolist() == [259, 258, 260, 261]
    assert tuple(batch_to_char_ids([]).shape) == (0, 0, 50)
    assert tuple(batch_to_char_ids([[]]).shape) == (1, 0, 50)
    padded = batch_to_char_ids([["a", "b"], ["c"]])
    assert padded[1, 1].abs().sum() == 0


# ---- bad and odd input ----------------------------------------------------------------------

def test_empty_inputs(fixture_model):
    embedder = ElmoEmbedder(fixture_model)
    assert list(embedder.embed_sentences([])) == []
    assert embedder.embed_sentence([]).shape == (3, 0, 32)
    with pytest.raises(TypeError):
        embedder.embed_sentence("a string")


def test_very_long_sentence(fixture_model):
    v = ElmoEmbedder(fixture_model).embed_sentence(["word"] * 2000)
    assert v.shape == (3, 2000, 32) and np.isfinite(v).all()


def test_embed_sentences_keeps_input_order(fixture_model):
    embedder = ElmoEmbedder(fixture_model, batch_size=2)
    sentences = [["a"] * n for n in (5, 1, 3, 2, 4)]
    for s, v in zip(sentences, embedder.embed_sentences(sentences)):
        assert v.shape[1] == len(s)
        np.testing.assert_allclose(v, embedder.embed_sentence(s), atol=1e-6)


def _copy_fixture(fixture_dir, tmp_path):
    shutil.copy(fixture_dir / "options.json", tmp_path / "options.json")
    shutil.copy(fixture_dir / "lm_weights.hdf5", tmp_path / "weights.hdf5")
    return tmp_path


def test_missing_weight_file(tmp_path, fixture_dir):
    shutil.copy(fixture_dir / "options.json", tmp_path / "options.json")
    with pytest.raises(ValueError, match="no weight file"):
        load_bilm(tmp_path)
    with pytest.raises(ValueError, match="no such shipped model"):
        load_bilm(tmp_path / "nowhere")


def test_truncated_weight_file(tmp_path, fixture_dir):
    d = _copy_fixture(fixture_dir, tmp_path)
    data = (d / "weights.hdf5").read_bytes()
    (d / "weights.hdf5").write_bytes(data[: len(data) // 2])
    with pytest.raises(ValueError, match="weights.hdf5"):
        load_bilm(d)


def test_wrongly_shaped_dataset_is_named(tmp_path, fixture_dir):
    d = _copy_fixture(fixture_dir, tmp_path)
    with h5py.File(d / "weights.hdf5", "a") as f:
        del f["CNN_proj/W_proj"]
        f.create_dataset("CNN_proj/W_proj", data=np.zeros((124, 17), np.float32))
    with pytest.raises(ValueError, match=r"CNN_proj/W_proj.*\(124, 17\).*\(124, 16\)"):
        load_bilm(d)


def test_options_that_do_not_match_the_weights(tmp_path, fixture_dir):
    d = _copy_fixture(fixture_dir, tmp_path)
    options = json.loads((d / "options.json").read_text())
    options["lstm"]["dim"] = 128
    (d / "options.json").write_text(json.dumps(options))
    with pytest.raises(ValueError, match=r"W_0.*\(32, 256\).*\(32, 512\)"):
        load_bilm(d)
    (d / "options.json").write_text("{not json")
    with pytest.raises(ValueError, match="options.json"):
        load_bilm(d)


def test_reading_every_value_finds_what_the_shapes_do_not(tmp_path, fixture_dir):
    """check_weight_shapes reads metadata only, unless told to read every dataset to its end: then
    it names the first dataset (in the layout's order) holding NaN, by the name it is given, and
    reports each dataset read on the progress callback (the check a download runs)."""
    d = _copy_fixture(fixture_dir, tmp_path)
    config = ElmoConfig.from_json(d / "options.json")
    seen = []
    check_weight_shapes(config, d / "weights.hdf5", read_values=True, progress=lambda *args: seen.append(args))
    assert seen == [("checking weights", k, len(expected_shapes(config)), "dataset")
                    for k in range(1, len(expected_shapes(config)) + 1)]
    with h5py.File(d / "weights.hdf5", "r+") as f:
        f["RNN_1/RNN/MultiRNNCell/Cell0/LSTMCell/B"][3] = np.inf
        f["CNN_proj/b_proj"][0] = np.nan
    check_weight_shapes(config, d / "weights.hdf5")  # every shape is still right
    with pytest.raises(ValueError) as err:
        check_weight_shapes(config, d / "weights.hdf5", read_values=True, name="published.hdf5")
    assert str(err.value) == "published.hdf5: dataset 'CNN_proj/b_proj' contains NaN or infinite values"


# ---- weight I/O -----------------------------------------------------------------------------

def test_read_write_read_is_exact(tmp_path, fixture_dir, fixture_model):
    save_weights(fixture_model, tmp_path / "weights.hdf5")
    with h5py.File(fixture_dir / "lm_weights.hdf5", "r") as original, h5py.File(tmp_path / "weights.hdf5", "r") as copy:
        for name in expected_shapes(fixture_model.config):
            np.testing.assert_array_equal(original[name][...], copy[name][...], err_msg=name)
    again = BiLM(fixture_model.config)
    load_weights(again, tmp_path / "weights.hdf5")
    for (name, a), b in zip(fixture_model.state_dict().items(), again.state_dict().values()):
        assert torch.equal(a, b), name


def test_config_round_trip(fixture_dir, tmp_path):
    config = ElmoConfig.from_json(fixture_dir / "options.json")
    config.to_json(tmp_path / "options.json")
    assert ElmoConfig.from_json(tmp_path / "options.json") == config
    assert config.lstm.use_skip_connections is False and config.char_cnn.n_filters == 124


def test_random_model_writes_every_dataset(tmp_path):
    config = ElmoConfig.from_options({
        "char_cnn": {"embedding": {"dim": 4}, "filters": [[1, 4], [2, 4]], "n_highway": 1, "activation": "tanh"},
        "lstm": {"dim": 8, "projection_dim": 4, "n_layers": 3, "cell_clip": 3, "proj_clip": 3, "use_skip_connections": True}})
    model = BiLM(config)
    arrays = state_to_hdf5_arrays(model)
    assert {k: v.shape for k, v in arrays.items()} == expected_shapes(config)
    save_weights(model, tmp_path / "w.hdf5")
    again = BiLM(config)
    load_weights(again, tmp_path / "w.hdf5")
    x = batch_to_char_ids([["skip", "connections", "work"]])
    with torch.no_grad():
        for a, b in zip(model(x).layers, again(x).layers):
            assert torch.equal(a, b)


# ---- scalar mix -----------------------------------------------------------------------------

def test_scalar_mix_weights_and_errors():
    mix = ScalarMix(3, initial_scalar_parameters=[0.0, 0.0, float(np.log(2.0))])
    layers = [torch.full((2, 4), float(v)) for v in (1.0, 2.0, 3.0)]
    np.testing.assert_allclose(mix.weights.detach().numpy(), [0.25, 0.25, 0.5], rtol=1e-6)
    np.testing.assert_allclose(mix(layers).detach().numpy(), np.full((2, 4), 2.25), rtol=1e-6)
    with pytest.raises(ValueError, match="expects 3 layers, got 2"):
        mix(layers[:2])
    with pytest.raises(ValueError, match="same shape"):
        mix([layers[0], layers[1], torch.zeros(2, 5)])


def test_scalar_mix_layer_norm_ignores_padding():
    mix = ScalarMix(2, do_layer_norm=True)
    h = torch.randn(1, 3, 4)
    padded = torch.cat([h, torch.full((1, 2, 4), 100.0)], dim=1)
    mask = torch.tensor([[True, True, True, False, False]])
    out = mix([padded, padded], mask)
    ref = mix([h, h], torch.ones(1, 3, dtype=torch.bool))
    torch.testing.assert_close(out[:, :3], ref)


# ---- the allennlp-elmo file layout ----------------------------------------------------------

def test_embed_file_layout_and_resume(tmp_path, fixture_model):
    text = tmp_path / "in.txt"
    text.write_text("The bank was closed .\nShe sat on the bank .\nPlay it again\n")
    embedder = ElmoEmbedder(fixture_model, batch_size=1)
    out = embedder.embed_file(text, tmp_path / "out.hdf5", "all")
    with h5py.File(out, "r") as f:
        assert f["0"].shape == (3, 5, 32) and f["2"].shape == (3, 3, 32)
        index = json.loads(f["sentence_to_index"][()])
        assert index["Play it again"] == "2"
        full = f["1"][...]
        f0 = f["0"][...]
    # a partial file that does not say which job it belongs to (zeros for sentence 0) is discarded
    partial = tmp_path / "again.hdf5.partial"
    with h5py.File(partial, "w") as f:
        f.create_dataset("0", data=np.zeros((3, 5, 32), np.float32))
    seen = []
    embedder.embed_file(text, tmp_path / "again.hdf5", "all", progress=lambda d, t: seen.append(d))
    assert seen[0] == 0 and seen[-1] == 3 and not partial.exists()
    with h5py.File(tmp_path / "again.hdf5", "r") as f:
        np.testing.assert_array_equal(f["0"][...], f0)
    with h5py.File(tmp_path / "again.hdf5", "r") as f:
        np.testing.assert_array_equal(f["1"][...], full)
    top = embedder.embed_file(text, tmp_path / "top.hdf5", "top")
    with h5py.File(top, "r") as f:
        np.testing.assert_array_equal(f["1"][...], full[-1])
    (tmp_path / "bad.txt").write_text("fine line\n\n")
    with pytest.raises(ValueError, match="bad.txt:2: empty line"):
        embedder.embed_file(tmp_path / "bad.txt", tmp_path / "bad.hdf5")


def test_directions_side_by_side_give_the_same_outputs_and_states(fixture_dir, monkeypatch):
    """BiLM.parallel_directions (inference with 2+ threads: one thread per direction) changes
    nothing in the outputs, the carried-over states or the caller's thread count."""
    from elmo_model.bilm import modules

    monkeypatch.setattr(modules, "_PARALLEL_MIN_CELLS_X_PROJECTION", 0)  # the fixture is tiny
    calls = []
    run_two = modules._run_two_at_once
    monkeypatch.setattr(modules, "_run_two_at_once", lambda *a: calls.append(1) or run_two(*a))
    batches = [[["The", "bank", "was", "closed", "."], ["Rivers", "flow"], ["a"]],
               [["Money", "in", "the", "bank", "grows", "slowly", "."], ["Yes"]]]
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        runs = {}
        for parallel in (True, False):
            model = load_bilm(fixture_dir)
            model.stateful, model.parallel_directions = True, parallel
            with torch.inference_mode():
                outs = [model(batch_to_char_ids(b)).layers for b in batches]
            runs[parallel] = (outs, model._states)
            assert torch.get_num_threads() == 2
            assert len(calls) == 2  # two batches side by side in the first pass, none in the second
        for a, b in zip(runs[True][0], runs[False][0]):
            for x, y in zip(a, b):
                assert torch.equal(x, y)
        for direction in ("forward", "backward"):
            for (h1, c1), (h2, c2) in zip(runs[True][1][direction], runs[False][1][direction]):
                assert torch.equal(h1, h2) and torch.equal(c1, c2)

        broken = load_bilm(fixture_dir)
        broken.backward_lstm.layers[0].state_linear.weight.data = torch.zeros(3, 3)  # wrong shape
        with torch.no_grad(), pytest.raises(RuntimeError):
            broken(batch_to_char_ids(batches[0]))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(threads)


def test_in_bf16_the_directions_go_side_by_side_only_from_batch_32(fixture_dir, monkeypatch):
    """Below batch 32 a bf16 step is bound by reading its weights, and one direction's layer at a
    time stays in the CPU's cache where two do not: bf16 batches under 32 run the directions in
    turn, larger ones side by side; fp32 goes side by side at any batch."""
    from elmo_model.bilm import modules

    monkeypatch.setattr(modules, "_PARALLEL_MIN_CELLS_X_PROJECTION", 0)  # the fixture is tiny
    calls = []
    run_two = modules._run_two_at_once
    monkeypatch.setattr(modules, "_run_two_at_once", lambda *a: calls.append(1) or run_two(*a))
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        seen = {}
        for precision in ("fp32", "bf16"):
            model = load_bilm(fixture_dir, precision)
            for batch in (1, 31, 32):
                calls.clear()
                with torch.inference_mode():
                    model(batch_to_char_ids([["the", "bank"]] * batch))
                seen[model.precision, batch] = bool(calls)
    finally:
        torch.set_num_threads(threads)
    assert seen[("fp32", 1)] and seen[("fp32", 31)] and seen[("fp32", 32)]
    if ("bf16", 1) in seen:  # a CPU without bf16 units runs fp32 for "bf16" (checked above)
        assert not seen[("bf16", 1)] and not seen[("bf16", 31)] and seen[("bf16", 32)]


def test_character_ids_the_network_would_misread_are_refused_in_one_line_before_any_work(data_root):
    """Another width ran (vectors off by up to 0.43), an empty batch failed in a reshape, ids outside
    the table in an IndexError from inside torch, floats were cast: each is one line now."""
    from elmo_model.bilm.char_ids import batch_to_char_ids
    from elmo_model.models.registry import load_bilm

    model = load_bilm(data_root / "fixtures" / "bilm_tf")
    ids = batch_to_char_ids([["the", "bank"]])
    model(ids)  # the ids batch_to_char_ids makes run
    cases = {"(batch, tokens, 50)": ids[..., :40], "integer ids": ids.float(), "no sentence": ids[:0], "lie in 0..261": ids + 300,
             "values -1..": torch.full((1, 2, 50), -1, dtype=torch.long)}
    for expected, bad in cases.items():
        with pytest.raises(ValueError, match=re.escape(expected)) as err:
            model(bad)
        assert "\n" not in str(err.value)
    with pytest.raises(TypeError, match="batch_to_char_ids"):
        model([[1, 2, 3]])


def test_batch_to_char_ids_refuses_strings_and_tokens_that_are_not_str():
    from elmo_model.bilm.char_ids import batch_to_char_ids

    with pytest.raises(TypeError, match="lists of tokens"):
        batch_to_char_ids(["the bank"])
    with pytest.raises(TypeError, match="sentence 0, token 1: 7 is a int"):
        batch_to_char_ids([["the", 7]])
    assert batch_to_char_ids([]).shape == (0, 0, 50)
