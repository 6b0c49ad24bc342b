"""The language model a biLM is trained as: the biLM plus one adaptive softmax for both directions; held-out perplexity; loading an export with its softmax."""

from __future__ import annotations

import math
import zipfile
import zlib
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from torch import nn

from ..bilm.config import ElmoConfig
from ..bilm.modules import BiLM
from ..models.registry import load_bilm
from .lm_data import LmBatch, make_batch
from .vocab import Vocabulary


class LanguageModel(nn.Module):
    """The biLM encoder plus the softmax shared by the forward and backward language models."""

    def __init__(self, elmo_config: ElmoConfig, vocab_size: int, cutoffs: Sequence[int], div_value: float,
                 dropout: float = 0.0) -> None:
        super().__init__()
        self.bilm = BiLM(elmo_config)
        cutoffs = [c for c in cutoffs if c < vocab_size - 1] or [max(1, vocab_size // 2)]  # tiny vocabularies
        self.softmax = nn.AdaptiveLogSoftmaxWithLoss(elmo_config.lstm.projection_dim, vocab_size, cutoffs,
                                                     div_value=div_value)
        self.dropout = nn.Dropout(dropout)
        for stack in (self.bilm.forward_lstm, self.bilm.backward_lstm):
            stack.dropout.p = dropout

    def forward(self, batch: LmBatch) -> tuple[torch.Tensor, torch.Tensor, int]:
        """-> (forward NLL sum, backward NLL sum, number of predictions per direction). The forward
        LM at position t predicts t+1 (ending with ``</S>``), the backward LM predicts t-1 (ending
        with ``<S>``): n+1 predictions per sentence of n tokens in each direction."""
        mask, ids = batch.mask, batch.word_ids
        tokens = self.dropout(self.bilm.token_embedder(batch.char_ids) * mask.unsqueeze(-1))
        fw, bw, _ = self.bilm.encode(tokens, mask)
        target_mask = mask[:, 1:]
        fw_hidden = self.dropout(fw[-1])[:, :-1][target_mask]
        bw_hidden = self.dropout(bw[-1])[:, 1:][target_mask]
        fw_nll = self._nll(fw_hidden, ids[:, 1:][target_mask])
        bw_nll = self._nll(bw_hidden, ids[:, :-1][target_mask])
        return fw_nll, bw_nll, int(target_mask.sum())

    def _nll(self, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        """Summed negative log-likelihood of ``targets`` (N,) given ``hidden`` (N, P). Under
        autocast (bf16 on a GPU) the softmax runs in fp32: the adaptive softmax's output buffer
        takes its input's dtype while log_softmax autocasts to fp32, and a bf16 sum over thousands
        of predictions would round the loss. Without autocast (every CPU run) nothing changes."""
        if torch.is_autocast_enabled(hidden.device.type):
            with torch.autocast(hidden.device.type, enabled=False):
                return -self.softmax(hidden.float(), targets).output.sum()
        return -self.softmax(hidden, targets).output.sum()


#: padded tokens per batch of held-out perplexity, by device type: a CPU's caches favour small
#: batches, a GPU wants enough work per launch (270,000 predictions took 24 s on one in 64-sentence batches)
EVAL_BATCH_TOKENS = {"cpu": 4_000, "cuda": 64_000}


@torch.no_grad()
def evaluate_perplexity(lm: LanguageModel, sentences: Sequence[Sequence[str]], vocab: Vocabulary,
                        batch_tokens: int | None = None) -> dict:
    """Forward and backward perplexity (exact: the adaptive softmax is normalised) over sentences;
    ``</S>`` (forward) and ``<S>`` (backward) count as predicted tokens, ``<UNK>`` is a word.
    Sentences go in order of length, in batches of at most ``batch_tokens`` padded tokens (None:
    ``EVAL_BATCH_TOKENS`` for the model's device); each sentence's loss does not depend on its batch."""
    was_training = lm.training
    lm.eval()
    device = next(lm.parameters()).device
    limit = batch_tokens or EVAL_BATCH_TOKENS.get(device.type, EVAL_BATCH_TOKENS["cuda"])
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    groups, group = [], []
    for i in order:  # ascending lengths: the newest sentence is the longest of its group
        if group and (len(sentences[i]) + 2) * (len(group) + 1) > limit:
            groups.append(group)
            group = []
        group.append(i)
    if group:
        groups.append(group)
    fw_sums, bw_sums = [], []
    n = 0
    for group in groups:
        batch = make_batch([sentences[i] for i in group], vocab)
        if device.type != "cpu":
            batch = batch.to(device)
        fw, bw, count = lm(batch)
        fw_sums.append(fw)  # read after the loop: no wait for the device between batches
        bw_sums.append(bw)
        n += count
    fw_total = sum(float(x) for x in fw_sums)
    bw_total = sum(float(x) for x in bw_sums)
    lm.train(was_training)
    if n == 0:
        return {"forward": float("nan"), "backward": float("nan"), "n_predictions": 0}
    return {"forward": math.exp(fw_total / n), "backward": math.exp(bw_total / n), "n_predictions": n,
            "n_sentences": len(sentences)}


def load_language_model(directory: str | Path) -> tuple[LanguageModel, Vocabulary]:
    """An exported model directory (with ``softmax.npz``) -> the full language model, for
    perplexity evaluation. The directory is a folder, never a model name: an export to
    ``elmo-mini`` in the working directory loads that folder's biLM, not the shipped one. A
    damaged ``softmax.npz`` (cut short, arrays missing or of other shapes) is a ``ValueError``
    naming it."""
    directory = Path(directory)
    bilm = load_bilm(directory.resolve())  # absolute: a path, by elmo_model.models.names' rule
    vocab = Vocabulary.load(directory / "vocab.txt")
    path = directory / "softmax.npz"
    try:
        with np.load(path, allow_pickle=False) as f:
            arrays = {k: f[k] for k in f.files}
        lm = LanguageModel(bilm.config, len(vocab), [int(x) for x in arrays.pop("cutoffs")],
                           float(arrays.pop("div_value")))
        lm.softmax.load_state_dict({k: torch.from_numpy(v) for k, v in arrays.items()})
    except FileNotFoundError:
        raise
    except (OSError, KeyError, EOFError, ValueError, RuntimeError, zipfile.BadZipFile, zlib.error) as err:
        detail = str(err).strip().splitlines()  # cut short, not a zip, an array missing or of other shapes
        raise ValueError(f"{path}: damaged, not the softmax of this export ({type(err).__name__}: "
                         f"{detail[0][:200] if detail else 'no detail'}); export the model again") from None
    lm.bilm = bilm
    lm.eval()
    return lm, vocab
