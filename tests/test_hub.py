"""``from elmo_model import hub``: TF Hub's ELMo module, checked against ``ElmoEmbedder`` on the same biLM."""

from pathlib import Path

import numpy as np
import pytest
import torch

from elmo_model import ElmoEmbedder, hub
from elmo_model.hub import HubTensor, model_for_handle

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SENTENCES = ["the cat is on the mat", "dogs  are in the fog", "bank"]
TOKENS = [["the", "cat", "is", "on", "the", "mat"], ["dogs", "are", "in", "the", "fog"], ["bank"]]


@pytest.fixture(scope="module", params=["elmo-mini", "fixture"])
def module(request, data_root):
    handle = "elmo-mini" if request.param == "elmo-mini" else str(data_root / "fixtures" / "bilm_tf")
    return hub.Module(handle)


def test_default_signature_outputs_are_the_embedder_layers(module):
    out = module(SENTENCES, signature="default", as_dict=True)
    assert list(out) == ["word_emb", "lstm_outputs1", "lstm_outputs2", "elmo", "default"]
    layers, mask = ElmoEmbedder(module.bilm).batch_to_embeddings(TOKENS)  # (B, 3, T, 2P), (B, T)
    projection = module.bilm.config.lstm.projection_dim
    batch, width = 3, 6
    assert out["word_emb"].shape == (batch, width, projection)
    for name in ("lstm_outputs1", "lstm_outputs2", "elmo"):
        assert out[name].shape == (batch, width, 2 * projection)
    assert out["default"].shape == (batch, 2 * projection)
    assert torch.equal(out["word_emb"], layers[:, 0, :, :projection])
    assert torch.equal(out["word_emb"], layers[:, 0, :, projection:])  # layer 0 is [x; x]: word_emb is x once
    assert torch.equal(out["lstm_outputs1"], layers[:, 1])
    assert torch.equal(out["lstm_outputs2"], layers[:, 2])
    # w = 0, gamma = 1 at the start: the mean of the three layers
    torch.testing.assert_close(out["elmo"].as_subclass(torch.Tensor), layers.mean(dim=1), rtol=1e-6, atol=1e-6)
    lengths = mask.sum(dim=1, keepdim=True)
    masked_mean = (out["elmo"] * mask.unsqueeze(-1)).sum(dim=1) / lengths
    torch.testing.assert_close(out["default"].as_subclass(torch.Tensor), masked_mean.as_subclass(torch.Tensor))
    for name in ("word_emb", "lstm_outputs1", "lstm_outputs2", "elmo"):  # zeros past each sentence's end
        assert not out[name][1, 5:].any() and not out[name][2, 1:].any() and out[name][2, 0].any()


def test_tokens_signature_equals_default_and_pads_to_the_given_width(module):
    tokens = np.array([row + [""] * (8 - len(row)) for row in TOKENS])
    lengths = np.array([len(row) for row in TOKENS])
    out = module(inputs={"tokens": tokens, "sequence_len": lengths}, signature="tokens", as_dict=True)  # TF1's call
    reference = module(np.array(SENTENCES), as_dict=True)  # a NumPy array of str works as a list does
    assert out["elmo"].shape[:2] == (3, 8)  # the width of "tokens", as TF Hub gave it
    for name in ("word_emb", "lstm_outputs1", "lstm_outputs2", "elmo"):
        assert torch.equal(out[name][:, :6], reference[name]) and not out[name][:, 6:].any()
    assert torch.equal(out["default"], reference["default"])
    # only the first sequence_len tokens count: what lies past them in the row is ignored
    shorter = module({"tokens": tokens, "sequence_len": np.array([2, 5, 1])}, signature="tokens", as_dict=True)
    alone = module(["the cat"], as_dict=True)
    torch.testing.assert_close(shorter["default"][0], alone["default"][0], rtol=1e-5, atol=1e-6)
    assert not shorter["elmo"][0, 2:].any()


def test_as_dict_false_gives_default_and_numpy_shape_work_as_in_the_tutorials(module):
    default = module(SENTENCES)  # signature="default", as_dict=False
    assert isinstance(default, HubTensor) and tuple(default.shape) == (3, module.bilm.config.output_dim)
    assert torch.equal(default, module(SENTENCES, as_dict=True)["default"])
    assert isinstance(default.numpy(), np.ndarray) and default.numpy().shape == tuple(default.shape)
    as_bytes = module(np.array([s.encode() for s in SENTENCES]))  # TF string tensors' .numpy() gives bytes
    assert torch.equal(as_bytes, default)
    from_signature = module.signatures["default"](SENTENCES)  # TF2's hub.load(...).signatures["default"]
    assert torch.equal(from_signature["elmo"], module(SENTENCES, as_dict=True)["elmo"])


def test_trainable_mixing_scalars_receive_gradients_and_the_bilm_stays_frozen():
    module = hub.Module("elmo-mini", trainable=True)
    out = module(SENTENCES, as_dict=True)
    assert out["elmo"].requires_grad and out["elmo"].numpy().shape == tuple(out["elmo"].shape)
    out["default"].pow(2).sum().backward()
    weights, gamma = module.mix.scalar_parameters, module.mix.gamma
    assert weights.grad is not None and weights.grad.abs().sum() > 0 and gamma.grad.abs() > 0
    assert all(p.grad is None and not p.requires_grad for p in module.bilm.parameters())
    assert {id(v) for v in module.variables} == {id(weights), id(gamma)}
    before = module(SENTENCES, as_dict=True)["elmo"].detach().clone()
    optimizer = torch.optim.SGD(module.variables, lr=0.5)
    optimizer.step()
    assert not torch.equal(module(SENTENCES, as_dict=True)["elmo"], before)
    frozen = hub.Module(module.bilm)
    assert not any(p.requires_grad for p in frozen.mix.parameters())
    assert not frozen(SENTENCES, as_dict=True)["elmo"].requires_grad


@pytest.mark.parametrize("handle", ["https://tfhub.dev/google/elmo/1", "https://tfhub.dev/google/elmo/2",
                                    "https://tfhub.dev/google/elmo/3", "tfhub.dev/google/elmo/3/",
                                    "https://tfhub.dev/google/elmo/2?tf-hub-format=compressed",
                                    "https://www.kaggle.com/models/google/elmo/tensorFlow1/elmo/3",
                                    "https://www.kaggle.com/models/google/elmo/frameworks/TensorFlow1/variations/elmo/"
                                    "versions/2"])
def test_tf_hub_handles_mean_elmo_original(handle):
    assert model_for_handle(handle) == "elmo-original"


def test_a_name_or_a_folder_is_kept_and_other_hub_handles_are_refused(data_root):
    assert model_for_handle("elmo-mini") == "elmo-mini"
    folder = data_root / "fixtures" / "bilm_tf"
    assert model_for_handle(folder) == folder
    with pytest.raises(ValueError, match="only TF Hub's ELMo"):
        model_for_handle("https://tfhub.dev/google/universal-sentence-encoder/4")


def test_a_handle_not_downloaded_names_the_download_command(tmp_path):
    with pytest.raises(ValueError) as caught:
        hub.load("https://tfhub.dev/google/elmo/3", data_root=tmp_path)
    message = str(caught.value)
    assert "\n" not in message and "elmo-original" in message
    assert "python -m probing.data download elmo-original" in message  # into the models home, read by name


def test_bad_inputs_get_one_line_naming_the_signature(module):
    with pytest.raises(ValueError, match="got one string"):
        module("the cat is on the mat")
    with pytest.raises(ValueError, match="1-D"):
        module([["the", "cat"]])
    with pytest.raises(ValueError, match="sequence_len"):
        module({"tokens": [["a", "b"]], "sequence_len": [3]}, signature="tokens")
    with pytest.raises(ValueError, match="keys 'tokens' and 'sequence_len'"):
        module({"tokens": [["a"]]}, signature="tokens")
    with pytest.raises(ValueError, match="signature 'word_emb'"):
        module(SENTENCES, signature="word_emb")
    empty = module(["", ""], as_dict=True)  # sentences without a token: zeros, no division by zero
    assert empty["elmo"].shape[:2] == (2, 0) and not empty["default"].any()


def test_the_module_imports_as_tutorials_write_it():
    import elmo_model.hub as by_path
    assert by_path is hub and Path(hub.__file__).name == "hub.py"


def test_token_lists_and_missing_values_are_refused_not_embedded_as_their_printed_form(module):
    """Token lists of unequal length given to 'default' (NumPy makes them a 1-D array of lists) were
    embedded as "['the'," ...; a None or NaN sentence or token as the word "None" / "nan"."""
    with pytest.raises(ValueError, match="token list.*signature 'tokens'"):
        module([["the", "bank"], ["a", "river", "bank"]])
    for missing in (None, float("nan")):
        with pytest.raises(ValueError, match="sentence 1 is .*not a string"):
            module(["the bank", missing])
        tokens = np.array([["the", "bank"], ["a", missing]], dtype=object)
        with pytest.raises(ValueError, match="token 1 of row 1 is .*not a string"):
            module({"tokens": tokens, "sequence_len": [2, 2]}, signature="tokens")
    np.testing.assert_array_equal(module(["the bank"]).numpy(), module([b"the bank"]).numpy())  # bytes are text


def test_a_callers_bilm_keeps_its_gradients_and_its_mode(data_root):
    """hub.Module(bilm) on a BiLM the caller is fine-tuning: its requires_grad and train mode stay the
    caller's (they were set to False and eval, unsaid); the module's own forward still runs without
    dropout or gradients, and a model loaded by name is frozen as TF Hub's is."""
    from elmo_model.models.registry import load_bilm

    bilm = load_bilm(data_root / "fixtures" / "bilm_tf").train()
    module = hub.Module(bilm)
    assert bilm.training and all(p.requires_grad for p in bilm.parameters())
    first = module(["the bank of the river"]).numpy()
    assert bilm.training  # restored after the forward
    np.testing.assert_array_equal(first, module(["the bank of the river"]).numpy())  # no dropout inside
    owned = hub.Module(str(data_root / "fixtures" / "bilm_tf"))
    assert not owned.bilm.training and not any(p.requires_grad for p in owned.bilm.parameters())
