"""AllenNLP's ELMo pipelines on the drop-in: a sentence classifier on mean-pooled
``elmo_representations`` with the ``mask``, and a tagger with two output representations and a
CRF (``pytorch-crf``), each trained a few steps through the drop-in's scalar mixes."""

import pytest
import torch
from torch import nn
from torchcrf import CRF

from elmo_model import Elmo, batch_to_ids
from elmo_model.models.registry import resolve_model

pytestmark = pytest.mark.usefixtures("one_torch_thread")

SENTENCES = [["the", "river", "bank", "flooded"], ["she", "sat", "on", "the", "bank"],
             ["the", "bank", "raised", "rates"], ["he", "paid", "the", "bank", "back", "today"]]
LABELS = torch.tensor([0, 0, 1, 1])  # river or money
TAGS = {"the": 0, "river": 1, "bank": 1, "flooded": 2, "she": 3, "sat": 2, "on": 4, "raised": 2, "rates": 1,
        "he": 3, "paid": 2, "back": 4, "today": 1}  # DET, NOUN, VERB, PRON, ADP/ADV


def model_files() -> tuple[str, str]:
    """elmo-mini's options.json and weights.hdf5, as AllenNLP's code names a model: two paths."""
    files = resolve_model("elmo-mini")
    return str(files.options), str(files.weights)


class SentenceClassifier(nn.Module):
    """ELMo (one mix) -> the mean over each sentence's real tokens (the mask) -> a linear layer."""

    def __init__(self, options: str, weights: str, n_classes: int) -> None:
        super().__init__()
        self.elmo = Elmo(options, weights, 1, dropout=0.0)
        self.out = nn.Linear(self.elmo.get_output_dim(), n_classes)

    def forward(self, character_ids: torch.Tensor) -> torch.Tensor:
        result = self.elmo(character_ids)
        vectors, mask = result["elmo_representations"][0], result["mask"].unsqueeze(-1).float()
        pooled = (vectors * mask).sum(dim=1) / mask.sum(dim=1)  # (B, 2P)
        return self.out(pooled)


class CrfTagger(nn.Module):
    """Two ELMo mixes: one into a biLSTM, the other beside its output; a CRF over the emissions."""

    def __init__(self, options: str, weights: str, n_tags: int, hidden: int = 8) -> None:
        super().__init__()
        self.elmo = Elmo(options, weights, 2, dropout=0.0)
        width = self.elmo.get_output_dim()
        self.encoder = nn.LSTM(width, hidden, batch_first=True, bidirectional=True)
        self.emit = nn.Linear(2 * hidden + width, n_tags)
        self.crf = CRF(n_tags, batch_first=True)

    def emissions(self, character_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        result = self.elmo(character_ids)
        into, beside = result["elmo_representations"]
        encoded, _ = self.encoder(into)
        return self.emit(torch.cat([encoded, beside], dim=-1)), result["mask"]

    def loss(self, character_ids: torch.Tensor, tags: torch.Tensor) -> torch.Tensor:
        scores, mask = self.emissions(character_ids)
        return -self.crf(scores, tags, mask=mask, reduction="mean")

    def decode(self, character_ids: torch.Tensor) -> list[list[int]]:
        scores, mask = self.emissions(character_ids)
        return self.crf.decode(scores, mask=mask)


def mix_parameters(elmo: Elmo) -> list[torch.Tensor]:
    return [p for name, p in elmo.named_parameters() if name.startswith("scalar_mix_")]


def test_a_sentence_classifier_on_mean_pooled_representations_learns():
    torch.manual_seed(0)
    classifier = SentenceClassifier(*model_files(), n_classes=2)
    frozen = {k: v.clone() for k, v in classifier.elmo.bilm.state_dict().items()}
    mixes = [p.detach().clone() for p in mix_parameters(classifier.elmo)]
    optimizer = torch.optim.Adam([p for p in classifier.parameters() if p.requires_grad], lr=0.05)
    ids = batch_to_ids(SENTENCES)
    losses = []
    for _ in range(12):
        loss = nn.functional.cross_entropy(classifier(ids), LABELS)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    assert (classifier(ids).argmax(dim=1) == LABELS).all()
    assert any(not torch.equal(before, after) for before, after in zip(mixes, mix_parameters(classifier.elmo)))
    for name, tensor in classifier.elmo.bilm.state_dict().items():
        assert torch.equal(tensor, frozen[name]), name
    # the mask keeps padding out of the mean: a sentence scores the same alone as beside a longer one
    alone = classifier(batch_to_ids(SENTENCES[:1]))
    torch.testing.assert_close(alone, classifier(ids)[:1], rtol=1e-4, atol=1e-5)


def test_a_crf_tagger_on_two_representations_learns_through_both_mixes():
    torch.manual_seed(0)
    tagger = CrfTagger(*model_files(), n_tags=5)
    ids = batch_to_ids(SENTENCES)
    width = ids.shape[1]
    tags = torch.tensor([[TAGS[w] for w in s] + [0] * (width - len(s)) for s in SENTENCES])
    optimizer = torch.optim.Adam([p for p in tagger.parameters() if p.requires_grad], lr=0.05)
    mixes = [p.detach().clone() for p in mix_parameters(tagger.elmo)]
    assert len(mixes) == 4  # two mixes: weights and gamma each
    losses = []
    for _ in range(15):
        loss = tagger.loss(ids, tags)
        optimizer.zero_grad()
        loss.backward()
        for p in mix_parameters(tagger.elmo):
            assert p.grad is not None and torch.isfinite(p.grad).all()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    for before, after in zip(mixes[0::2], mix_parameters(tagger.elmo)[0::2]):  # both mixes' s_j moved
        assert not torch.equal(before, after)
    paths = tagger.decode(ids)
    assert [len(p) for p in paths] == [len(s) for s in SENTENCES]
    gold = [[TAGS[w] for w in s] for s in SENTENCES]
    correct = sum(a == b for path, truth in zip(paths, gold) for a, b in zip(path, truth))
    assert correct / sum(map(len, gold)) > 0.8
