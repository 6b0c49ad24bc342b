"""``Elmo``, ``batch_to_ids`` and ``ElmoEmbedder(options_file, weight_file)``: AllenNLP's interface
on the project's biLM (bilm-tf's fixture model)."""

from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from elmo_model import Elmo, ElmoEmbedder, batch_to_ids, load_bilm

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SENTENCES = [["The", "bank", "by", "the", "river", "."], ["Money", "in", "the", "bank"], ["Hi"]]


@pytest.fixture(scope="module")
def files(data_root):
    d = data_root / "fixtures" / "bilm_tf"
    return str(d / "options.json"), str(d / "lm_weights.hdf5")


def _mix(layers: np.ndarray, parameters: list[float], gamma: float) -> np.ndarray:
    """(L+1, T, D) mixed by softmax(parameters) and gamma, by hand."""
    w = np.exp(parameters) / np.exp(parameters).sum()
    return gamma * sum(w[j] * layers[j] for j in range(len(w)))


# ------------------------------------------------------------------------------------------ ids


def test_batch_to_ids_follows_allennlp_character_conventions():
    # AllenNLP's ELMoCharacterMapper: bow 258, eow 259, padding 260, bos 256, eos 257, then +1
    # for every id so that 0 is left for padded tokens; 50 characters a token
    ids = batch_to_ids([["a", "é", "<S>", "</S>"], ["x" * 60]])
    assert ids.dtype == torch.int64 and ids.shape == (2, 4, 50)
    assert ids[0, 0].tolist() == [259, 98, 260] + [261] * 47  # 'a' = 97
    assert ids[0, 1].tolist() == [259, 196, 170, 260] + [261] * 46  # UTF-8 c3 a9
    assert ids[0, 2].tolist() == [259, 257, 260] + [261] * 47  # <S>
    assert ids[0, 3].tolist() == [259, 258, 260] + [261] * 47  # </S>
    assert ids[1, 0].tolist() == [259] + [121] * 48 + [260]  # 60 bytes cut to 48: eow survives
    assert ids[1, 1:].eq(0).all()  # padded tokens are all zero
    with pytest.raises(TypeError, match="list of token lists"):
        batch_to_ids(["not", "tokenised"][0])


# ------------------------------------------------------------------------------------ Elmo


def test_elmo_without_dropout_equals_embedder_layers_mixed_by_the_same_weights(files):
    # Elmo computes in fp32 (as load_bilm); the embedder's default, "auto", is bf16 on a CPU with bf16 units
    per_sentence = ElmoEmbedder(*files, precision="fp32").embed_batch(SENTENCES)  # each (L+1, T_i, 2P)
    elmo = Elmo(*files, num_output_representations=2, dropout=0.0)
    chosen = [([0.3, -1.0, 0.5], 1.7), ([2.0, 0.0, -2.0], 0.4)]
    with torch.no_grad():
        for k, (parameters, gamma) in enumerate(chosen):
            mix = getattr(elmo, f"scalar_mix_{k}")
            mix.scalar_parameters.copy_(torch.tensor(parameters))
            mix.gamma.fill_(gamma)
    out = elmo(batch_to_ids(SENTENCES))
    assert set(out) == {"elmo_representations", "mask"}
    assert out["mask"].tolist() == [[True] * 6, [True] * 4 + [False] * 2, [True] + [False] * 5]
    assert len(out["elmo_representations"]) == 2
    for k, (parameters, gamma) in enumerate(chosen):
        representation = out["elmo_representations"][k].detach().numpy()
        assert representation.shape == (3, 6, elmo.get_output_dim()) == (3, 6, 32)
        for i, sentence in enumerate(SENTENCES):
            expected = _mix(per_sentence[i], parameters, gamma)
            np.testing.assert_allclose(representation[i, : len(sentence)], expected, atol=1e-6)
            assert not representation[i, len(sentence):].any()  # padding is zero


def test_elmo_keeps_sentence_boundaries_and_extra_dimensions_when_asked(files):
    ids = batch_to_ids(SENTENCES)
    plain = Elmo(*files, 1, dropout=0.0, scalar_mix_parameters=[0.0, 1.0, 2.0])
    kept = Elmo(*files, 1, dropout=0.0, keep_sentence_boundaries=True, scalar_mix_parameters=[0.0, 1.0, 2.0])
    with torch.no_grad():
        a, b = plain(ids), kept(ids)
        nested = plain(ids.unsqueeze(0).expand(2, -1, -1, -1))  # (2, B, T, 50)
    assert b["mask"].sum(dim=1).tolist() == [8, 6, 3]  # <S> + tokens + </S>
    assert b["elmo_representations"][0].shape == (3, 8, 32)
    torch.testing.assert_close(b["elmo_representations"][0][:, 1:7] * a["mask"].unsqueeze(-1),
                               a["elmo_representations"][0])
    assert nested["mask"].shape == (2, 3, 6) and nested["elmo_representations"][0].shape == (2, 3, 6, 32)
    torch.testing.assert_close(nested["elmo_representations"][0][1], a["elmo_representations"][0])


def test_fixed_scalar_mix_parameters_are_not_trained(files):
    elmo = Elmo(*files, 1, scalar_mix_parameters=[1.0, 0.0, -1.0])
    assert not any(p.requires_grad for p in elmo.parameters())
    torch.testing.assert_close(elmo.scalar_mix_0.weights, torch.softmax(torch.tensor([1.0, 0.0, -1.0]), 0))
    with pytest.raises(ValueError, match="3 layers"):
        Elmo(*files, 1, scalar_mix_parameters=[1.0, 0.0])


def test_gradients_reach_the_mix_and_with_requires_grad_the_bilm(files):
    ids = batch_to_ids(SENTENCES)
    frozen = Elmo(*files, 2, dropout=0.0)
    (frozen(ids)["elmo_representations"][1] ** 2).sum().backward()
    assert frozen.scalar_mix_1.scalar_parameters.grad.abs().sum() > 0
    assert frozen.scalar_mix_1.gamma.grad.abs() > 0
    assert frozen.scalar_mix_0.scalar_parameters.grad is None  # only the mix that was used
    assert all(p.grad is None and not p.requires_grad for p in frozen.bilm.parameters())

    tuned = Elmo(*files, 1, dropout=0.0, requires_grad=True, do_layer_norm=True)
    (tuned(ids)["elmo_representations"][0] ** 2).sum().backward()
    assert tuned.scalar_mix_0.scalar_parameters.grad.abs().sum() > 0
    for name in ("token_embedder.char_embedding.weight", "forward_lstm.layers.1.state_linear.weight",
                 "backward_lstm.layers.0.input_linear.weight"):
        assert dict(tuned.bilm.named_parameters())[name].grad.abs().sum() > 0, name


def test_dropout_only_in_training_mode(files):
    ids = batch_to_ids(SENTENCES)
    elmo = Elmo(*files, 1, dropout=0.5)
    reference = Elmo(*files, 1, dropout=0.0)
    with torch.no_grad():
        expected = reference(ids)["elmo_representations"][0]
        elmo.eval()
        torch.testing.assert_close(elmo(ids)["elmo_representations"][0], expected)
        elmo.train()
        dropped = elmo(ids)["elmo_representations"][0]
    live = expected != 0
    zeroed = (dropped == 0) & live
    assert 0.3 < zeroed.sum() / live.sum() < 0.7
    torch.testing.assert_close(dropped[live & ~zeroed], 2 * expected[live & ~zeroed])


def test_stateless_by_default_stateful_carries_the_state(files):
    ids = batch_to_ids(SENTENCES)
    stateless = Elmo(*files, 1, dropout=0.0)
    stateful = Elmo(*files, 1, dropout=0.0, stateful=True)
    with torch.no_grad():
        first, again = stateless(ids), stateless(ids)
        carried_first, carried_again = stateful(ids), stateful(ids)
        stateful.reset_states()
        after_reset = stateful(ids)
    representation = lambda out: out["elmo_representations"][0]  # noqa: E731
    torch.testing.assert_close(representation(first), representation(again))
    torch.testing.assert_close(representation(carried_first), representation(first))
    assert (representation(carried_again) - representation(first)).abs().max() > 1e-4
    torch.testing.assert_close(representation(after_reset), representation(first))


def test_cached_vocabulary_gives_the_vectors_of_the_characters(files):
    vocab = ["@@PADDING@@"] + sorted({w for s in SENTENCES for w in s})
    word_ids = torch.tensor([[vocab.index(w) for w in s] + [0] * (6 - len(s)) for s in SENTENCES])
    cached = Elmo(*files, 1, dropout=0.0, vocab_to_cache=vocab)
    with torch.no_grad():
        from_words = cached(batch_to_ids(SENTENCES), word_ids)
        from_chars = cached(batch_to_ids(SENTENCES))
    torch.testing.assert_close(from_words["elmo_representations"][0], from_chars["elmo_representations"][0])
    assert torch.equal(from_words["mask"], from_chars["mask"])
    with pytest.raises(IndexError, match="vocab_to_cache has"):
        cached(batch_to_ids(SENTENCES), word_ids + len(vocab))


def test_elmo_takes_a_loaded_bilm_and_names_bad_arguments(files, data_root, tmp_path):
    model = load_bilm(data_root / "fixtures" / "bilm_tf")
    elmo = Elmo(None, None, 1, module=model)
    assert elmo.bilm is model
    with pytest.raises(ValueError, match="options_file=None"):
        Elmo(*files, 1, module=model)
    with pytest.raises(ValueError, match="missing.json"):
        Elmo(str(tmp_path / "missing.json"), files[1], 1)


# ---------------------------------------------------------------------------- ElmoEmbedder


def test_embedder_takes_allennlp_arguments_by_position_and_keyword(files, data_root):
    by_dir = ElmoEmbedder(data_root / "fixtures" / "bilm_tf").embed_sentence(SENTENCES[0])
    by_position = ElmoEmbedder(files[0], files[1], -1).embed_sentence(SENTENCES[0])
    by_keyword = ElmoEmbedder(options_file=files[0], weight_file=files[1], cuda_device=-1).embed_sentence(SENTENCES[0])
    assert by_dir.shape == (3, 6, 32)
    np.testing.assert_array_equal(by_position, by_dir)
    np.testing.assert_array_equal(by_keyword, by_dir)
    stateful = ElmoEmbedder(*files, stateful=True)
    assert stateful.model.stateful and not ElmoEmbedder(*files).model.stateful
    with pytest.raises(ValueError, match="weight_file"):
        ElmoEmbedder(options_file=files[0])


def test_embedder_command_takes_allennlp_file_flags(files, data_root, tmp_path):
    from elmo_model.corpus.embedder import main

    (tmp_path / "in.txt").write_text("The bank by the river .\nMoney in the bank\n")
    assert main([str(tmp_path / "in.txt"), str(tmp_path / "a.hdf5"), "--model", str(data_root / "fixtures" / "bilm_tf"),
                 "--top"]) == 0
    assert main([str(tmp_path / "in.txt"), str(tmp_path / "b.hdf5"), "--top", "--options-file", files[0],
                 "--weight-file", files[1], "--cuda-device", "-1"]) == 0
    with h5py.File(tmp_path / "a.hdf5", "r") as a, h5py.File(tmp_path / "b.hdf5", "r") as b:
        assert a["1"].shape == (4, 32)
        for key in ("0", "1"):
            np.testing.assert_array_equal(a[key][...], b[key][...])
    with pytest.raises(SystemExit) as exit_:
        main([str(tmp_path / "in.txt"), str(tmp_path / "c.hdf5"), "--options-file", files[0]])
    assert exit_.value.code == 2


# ------------------------------------------------------------------ AllenNLP's numbers, habits


@pytest.fixture
def bf16_machine(monkeypatch):
    """A machine whose bf16 units pay, whatever this one has: "auto" then means bf16."""
    from elmo_model.bilm import precision as P

    monkeypatch.setattr(P, "bf16_support", lambda device="cpu": P.Bf16Support(True, ("amx_bf16",), "simulated"))


def _replay_worst(embedder: ElmoEmbedder, fixture: Path) -> float:
    """bilm-tf's own test through the embedder: batch i = the i-th sentence of each list, in
    order, stateful; the largest difference of the top layer from bilm-tf's outputs."""
    import json

    lists = json.loads((fixture / "lm_embeddings_sentences.json").read_text())
    worst = 0.0
    for i in range(10):
        batch = [lists[k][i].split() for k in range(3)]
        for k, array in enumerate(embedder.embed_batch(batch)):
            with h5py.File(fixture / f"lm_embeddings_{k}.hdf5", "r") as f:
                expected = np.concatenate([f[str(i)][0], f[str(i)][1]], axis=-1)
            worst = max(worst, float(np.abs(array[-1] - expected).max()))
    return worst


def test_the_drop_in_gives_allennlps_numbers_by_default(data_root, bf16_machine):
    """ElmoEmbedder with no precision argument is fp32 even where bf16 pays, and replays
    bilm-tf's stateful test within 1e-6; "auto" is one argument away and is bf16 there."""
    fixture = data_root / "fixtures" / "bilm_tf"
    embedder = ElmoEmbedder(fixture, stateful=True)
    assert embedder.model.precision == "fp32"
    assert _replay_worst(embedder, fixture) <= 1e-6
    assert ElmoEmbedder(fixture, precision="auto").model.precision == "bf16"
    assert Elmo(str(fixture), 1).bilm.precision == "fp32"
    assert Elmo(str(fixture), 1, precision="auto").bilm.precision == "bf16"


def test_the_embed_command_is_fp32_unless_asked(data_root, tmp_path, bf16_machine, capsys):
    from elmo_model.corpus.embedder import main

    (tmp_path / "in.txt").write_text("The bank by the river .\n")
    model = str(data_root / "fixtures" / "bilm_tf")
    assert main([str(tmp_path / "in.txt"), str(tmp_path / "a.hdf5"), "--model", model]) == 0
    assert "precision fp32" in capsys.readouterr().out
    assert main([str(tmp_path / "in.txt"), str(tmp_path / "b.hdf5"), "--model", model, "--precision", "auto"]) == 0
    assert "precision bf16" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "7.5e-3" in " ".join(capsys.readouterr().out.split())


def test_elmo_takes_a_name_or_folder_where_allennlp_takes_options_file(files, data_root):
    fixture = str(data_root / "fixtures" / "bilm_tf")
    ids = batch_to_ids(SENTENCES)
    reference = Elmo(*files, 2, dropout=0.0)
    by_folder = Elmo(fixture, 2, dropout=0.0)
    by_keyword = Elmo(fixture, num_output_representations=2, dropout=0.0)
    with torch.no_grad():
        expected = reference(ids)["elmo_representations"][1]
        torch.testing.assert_close(by_folder(ids)["elmo_representations"][1], expected)
        torch.testing.assert_close(by_keyword(ids)["elmo_representations"][1], expected)
    assert Elmo("elmo-mini", 1).get_output_dim() == 512
    with pytest.raises(ValueError, match="by keyword"):
        Elmo(fixture, 2, 1)


def test_allennlps_urls_mean_the_published_name(data_root):
    base = "https://s3-us-west-2.amazonaws.com/allennlp/models/elmo/2x4096_512_2048cnn_2xhighway/"
    options = base + "elmo_2x4096_512_2048cnn_2xhighway_options.json"
    weights = base + "elmo_2x4096_512_2048cnn_2xhighway_weights.hdf5"
    for make in (lambda: ElmoEmbedder(options, weights), lambda: Elmo(options, weights, 1)):
        with pytest.raises(ValueError) as info:
            make()
        message = str(info.value)
        assert "'elmo-original'" in message and "not downloaded" in message
        assert message.endswith("download elmo-original") and "\n" not in message
    with pytest.raises(ValueError, match="no published ELMo"):
        ElmoEmbedder("https://example.org/other_options.json")


def test_embed_file_takes_an_open_file_and_forget_sentences(data_root, tmp_path):
    embedder = ElmoEmbedder(data_root / "fixtures" / "bilm_tf")
    text = tmp_path / "in.txt"
    text.write_text("The bank by the river .\nMoney in the bank\n")
    embedder.embed_file(text, tmp_path / "by_path.hdf5")
    with open(text) as handle:
        embedder.embed_file(handle, tmp_path / "by_file.hdf5")
    with open(text, "rb") as handle:  # AllenNLP positional order: ..., batch_size, forget_sentences
        embedder.embed_file(handle, tmp_path / "forgot.hdf5", "all", 2, True)
    with h5py.File(tmp_path / "by_path.hdf5", "r") as a, h5py.File(tmp_path / "by_file.hdf5", "r") as b, \
            h5py.File(tmp_path / "forgot.hdf5", "r") as c:
        assert "sentence_to_index" in b and "sentence_to_index" not in c
        assert b["sentence_to_index"][()] == a["sentence_to_index"][()]
        for key in ("0", "1"):
            np.testing.assert_array_equal(a[key][...], b[key][...])
            np.testing.assert_array_equal(a[key][...], c[key][...])
    with open(text) as handle, pytest.raises(ValueError, match="input"):
        embedder.embed_file(handle, text)  # the output would replace the input
    (tmp_path / "bad.txt").write_bytes(b"fine\n\xff\n")
    with open(tmp_path / "bad.txt", "rb") as handle, pytest.raises(ValueError, match="bad.txt:2"):
        embedder.embed_file(handle, tmp_path / "bad.hdf5")


# ------------------------------------------------------------------------ the Embedding Projector


def _read_tsv(path: Path) -> list[list[str]]:
    return [line.split("\t") for line in path.read_text(encoding="utf-8").splitlines()]


def test_embed_writes_the_projectors_files(data_root, tmp_path, capsys):
    """--projector: one tensors.tsv a layer (a row a token, 2P numbers), metadata.tsv with a
    header and a row a token, and a projector_config.pbtxt naming each layer's pair."""
    from elmo_model.corpus.embedder import main

    text = tmp_path / "in.txt"
    text.write_text("The bank by the river .\nMoney\tin the bank\n")
    folder = tmp_path / "projector"
    assert main([str(text), str(tmp_path / "out.hdf5"), "--model", str(data_root / "fixtures" / "bilm_tf"),
                 "--projector", str(folder)]) == 0
    assert sorted(p.name for p in folder.iterdir()) == ["layer0_tensors.tsv", "layer1_tensors.tsv",
                                                        "layer2_tensors.tsv", "metadata.tsv",
                                                        "projector_config.pbtxt"]
    metadata = _read_tsv(folder / "metadata.tsv")
    assert metadata[0] == ["token", "sentence", "text"]
    assert metadata[1] == ["The", "1", "The bank by the river ."] and metadata[7] == ["Money", "2", "Money in the bank"]
    assert len(metadata) == 1 + 10
    with h5py.File(tmp_path / "out.hdf5", "r") as f:
        expected = np.concatenate([f["0"][...], f["1"][...]], axis=1)  # (3, 10, 32)
    for layer in range(3):
        rows = np.array(_read_tsv(folder / f"layer{layer}_tensors.tsv"), dtype=np.float32)
        assert rows.shape == (10, 32)
        np.testing.assert_allclose(rows, expected[layer], rtol=1e-5, atol=1e-6)
    config = (folder / "projector_config.pbtxt").read_text()
    assert config.count("embeddings {") == 3 and 'tensor_path: "layer2_tensors.tsv"' in config
    assert config.count('metadata_path: "metadata.tsv"') == 3
    assert main([str(text), str(tmp_path / "out2.hdf5"), "--projector", str(text)]) == 2  # a file, not a folder
    assert "--projector" in capsys.readouterr().err


def test_projector_files_take_sense_labels(tmp_path):
    from elmo_model.corpus.projector import write_projector

    vectors = [np.ones((5, 4), dtype=np.float32), np.zeros((2, 4), dtype=np.float32)]  # (T, 2P): one layer
    written = write_projector(tmp_path / "p", [["a", "bank", "of", "the", "river"], ["the", "bank"]], vectors,
                              senses=[[None, "bank%1:17:01::", None, None, None], [None, "bank%1:14:00::"]])
    assert [p.name for p in written] == ["tensors.tsv", "metadata.tsv", "projector_config.pbtxt"]
    metadata = _read_tsv(tmp_path / "p" / "metadata.tsv")
    assert metadata[0] == ["token", "sentence", "text", "sense"] and metadata[2][-1] == "bank%1:17:01::"
    assert metadata[1][-1] == "" and len(metadata) == 8
    with pytest.raises(ValueError, match="3 tokens"):
        write_projector(tmp_path / "q", [["a", "b", "c"]], [np.ones((5, 4))])
    assert list((tmp_path / "q").iterdir()) == []  # nothing half-written


def test_a_projector_rerun_leaves_no_earlier_tensors_and_a_busy_folder_is_refused(tmp_path):
    """An all-layers run, then a one-layer run (--top) into the same folder: the earlier run's
    layerN_tensors.tsv are gone (beside the new metadata.tsv they would load as its rows); the
    user's other files stay. A second writer while one holds the folder is refused in one line."""
    from elmo_model.corpus.projector import write_projector
    from elmo_model.plumbing.io_safety import OutputBusy, output_lock

    folder = tmp_path / "p"
    sentences = [["the", "bank"], ["a", "river", "bank"]]
    write_projector(folder, sentences, [np.ones((3, 2, 4)), np.ones((3, 3, 4))])
    assert sorted(p.name for p in folder.glob("*tensors.tsv")) == [f"layer{j}_tensors.tsv" for j in range(3)]
    (folder / "my_notes.tsv").write_text("mine\n")
    write_projector(folder, sentences, [np.ones((2, 4)), np.ones((3, 4))])
    assert sorted(p.name for p in folder.iterdir()) == ["metadata.tsv", "my_notes.tsv", "projector_config.pbtxt",
                                                         "tensors.tsv"]
    with output_lock(folder, what="Projector folder"):
        with pytest.raises(OutputBusy, match="Projector folder"):
            write_projector(folder, sentences, [np.ones((2, 4)), np.ones((3, 4))])
