"""Context attribution: a toy encoder where one word is all that matters, and the fixture biLM."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
import torch

from probing.context.attribution import AttributionResult, attribute_context, gradient_x_input, leave_one_out

pytestmark = pytest.mark.usefixtures("one_torch_thread")


class OneWordMatters:
    """Layer 0 = x; layer 1 = x_i + 2 x_k for every token i, where k is where "river" stands:
    "river" is the only context any vector depends on."""

    def embed(self, tokens):
        rows = [np.random.default_rng(int(hashlib.sha256(t.encode()).hexdigest()[:8], 16)).normal(size=8)
                for t in tokens]
        return torch.tensor(np.array(rows), dtype=torch.float32)

    def contextualize(self, x, tokens):
        mask = torch.tensor([[1.0 if t == "river" else 0.0] for t in tokens])
        return [x, x + 2.0 * (mask * x).sum(0, keepdim=True)]


SENTENCE = "we pulled the canoe onto the bank of the river".split()
REFERENCE = "money at the bank".split()


def test_leave_one_out_finds_the_one_word_that_matters():
    loo = leave_one_out(OneWordMatters(), SENTENCE, 6)
    assert loo.shape == (2, 10) and np.isnan(loo[:, 6]).all()
    others = [k for k in range(10) if k not in (6, 9)]
    assert np.allclose(loo[0, others + [9]], 0.0, atol=1e-6)  # layer 0 has no context
    assert np.allclose(loo[1, others], 0.0, atol=1e-6)
    assert loo[1, 9] > 0.01


def test_gradient_x_input_finds_the_one_word_that_matters():
    scores, sims = gradient_x_input(OneWordMatters(), SENTENCE, 6, REFERENCE, 3)
    others = [k for k in range(9) if k != 6]
    assert np.allclose(scores[:, others], 0.0, atol=1e-6)
    assert scores[0, 9] == 0.0 and abs(scores[1, 9]) > 1e-3
    assert sims[0] == pytest.approx(1.0, abs=1e-6)  # the same word, no context at layer 0
    assert sims[1] < 0.99  # "river" moves it away from the money bank


def test_bilm_attribution_round_trips_and_layer0_is_context_free(data_root):
    from elmo_model import load_bilm

    model = load_bilm(data_root / "fixtures/bilm_tf")
    result = attribute_context(model, "the bank of the river", "bank", reference="money in the bank")
    assert result.target == 1 and result.reference_target == 3
    assert result.leave_one_out.shape == result.gradient_x_input.shape == (3, 5)
    assert np.allclose(result.leave_one_out[0, [0, 2, 3, 4]], 0.0, atol=1e-6)
    assert (result.leave_one_out[1:, [0, 2, 3, 4]] > 0).all()  # the LSTM layers see the context
    assert AttributionResult.from_json(result.to_json()) == result
    assert len(result.top_words(k=2)[2]) == 2
    with pytest.raises(ValueError, match="'canoe' is not among"):
        attribute_context(model, "the bank of the river", "canoe")
