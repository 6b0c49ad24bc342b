"""Train a small part-of-speech tagger on UD English-EWT with ``Elmo`` as its embedder.

The biLM is frozen; what learns is ELMo's scalar mix (s_j and gamma) and a softmax layer over
the mixed vectors (optionally a small BiLSTM in between). This is the usual way AllenNLP code
used ELMo, and the same code runs after changing one import::

    from elmo_model import Elmo, batch_to_ids     # was: from allennlp.modules.elmo import ...

Run (data root holding ud_english_ewt/, e.g. after `python -m probing.data download ud_english_ewt`)::

    python examples/train_tagger.py --model elmo-mini --train-sentences 2000 --epochs 3
    python examples/train_tagger.py --options-file options.json --weight-file weights.hdf5

It prints the dev accuracy and the learned mix weights, and with ``--output`` writes them as JSON.
"""

from __future__ import annotations

import argparse
import json
import logging
import random
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import nn
from tqdm import tqdm

if __package__ is None and not any((Path(p) / "elmo_model").is_dir() for p in sys.path if p):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout, not installed

from elmo_model import Elmo, batch_to_ids  # noqa: E402
from elmo_model.models.published import MODEL_HELP  # noqa: E402
from elmo_model.models.registry import resolve_model  # noqa: E402
from elmo_model.plumbing.io_safety import atomic_write_text  # noqa: E402
from probing.data import DatasetMissing  # noqa: E402
from probing.tagging.tasks import read_ewt  # noqa: E402

log = logging.getLogger("train_tagger")


class ElmoTagger(nn.Module):
    """Character ids (B, T, 50) -> tag scores (B, T, n_tags): Elmo (one learned mix) -> dropout
    -> [BiLSTM] -> linear."""

    def __init__(self, options_file: str | Path, weight_file: str | Path, n_tags: int,
                 dropout: float = 0.5, lstm_hidden: int = 0) -> None:
        super().__init__()
        self.elmo = Elmo(options_file, weight_file, num_output_representations=1, dropout=dropout)
        width = self.elmo.get_output_dim()
        self.lstm = nn.LSTM(width, lstm_hidden, batch_first=True, bidirectional=True) if lstm_hidden else None
        self.output = nn.Linear(2 * lstm_hidden if lstm_hidden else width, n_tags)

    def forward(self, char_ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """char_ids (B, T, 50) -> scores (B, T, n_tags), mask (B, T)."""
        out = self.elmo(char_ids)
        x, mask = out["elmo_representations"][0], out["mask"]
        if self.lstm is not None:
            lengths = mask.sum(dim=1).cpu()
            packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
            x, _ = self.lstm(packed)
            x, _ = nn.utils.rnn.pad_packed_sequence(x, batch_first=True, total_length=mask.shape[1])
        return self.output(x), mask


@dataclass
class TaggerResult:
    """What a run measured. ``mix_weights``: the learned s_j (softmax), token layer first."""

    dev_accuracy: float
    dev_tokens: int
    train_sentences: int
    train_tokens: int
    epochs: int
    epoch_losses: list[float]
    mix_weights: list[float]
    gamma: float
    seconds: float


def _batches(items: list, batch_size: int, rng: random.Random | None) -> list[list]:
    """Batches of sentences of similar length (little padding for the biLM to run over): in a
    shuffled order, each pool of 32 batches is sorted by length; batch order shuffled too.
    Without ``rng``, simply sorted by length."""
    order = list(range(len(items)))
    if rng is not None:
        rng.shuffle(order)
    pool = 32 * batch_size if rng is not None else len(order)
    batches = []
    for start in range(0, len(order), pool):
        chunk = sorted(order[start : start + pool], key=lambda i: len(items[i]))
        batches += [[items[i] for i in chunk[k : k + batch_size]] for k in range(0, len(chunk), batch_size)]
    if rng is not None:
        rng.shuffle(batches)
    return batches


def _tag_ids(batch, tag_index: dict[str, int], steps: int) -> torch.Tensor:
    ids = torch.full((len(batch), steps), -100, dtype=torch.long)  # -100: ignored by the loss
    for i, sentence in enumerate(batch):
        ids[i, : len(sentence.tags)] = torch.tensor([tag_index.get(t, -100) for t in sentence.tags])
    return ids


def evaluate(tagger: ElmoTagger, sentences: list, tag_index: dict[str, int], batch_size: int = 64) -> tuple[float, int]:
    """Token accuracy on ``sentences`` -> (accuracy, tokens). Tags unseen in training count as errors."""
    tagger.eval()
    correct = total = 0
    with torch.no_grad():
        for batch in _batches(sentences, batch_size, None):
            scores, mask = tagger(batch_to_ids([list(s.tokens) for s in batch]))
            gold = _tag_ids(batch, tag_index, scores.shape[1])
            predicted = scores.argmax(dim=-1)
            correct += int(((predicted == gold) & mask).sum())
            total += int(mask.sum())
    return correct / max(total, 1), total


def train_tagger(train: list, dev: list, options_file: str | Path, weight_file: str | Path, epochs: int = 3,
                 batch_size: int = 32, lr: float = 3e-3, dropout: float = 0.5, lstm_hidden: int = 0,
                 seed: int = 0, progress: bool = False) -> tuple[ElmoTagger, TaggerResult]:
    """Train on ``train`` (sentences with ``.tokens`` and ``.tags``), score on ``dev``.
    Same seed, same numbers."""
    started = time.perf_counter()
    torch.manual_seed(seed)
    rng = random.Random(seed)
    tags = sorted({t for s in train for t in s.tags})
    tag_index = {t: i for i, t in enumerate(tags)}
    tagger = ElmoTagger(options_file, weight_file, len(tags), dropout, lstm_hidden)
    trainable = [p for p in tagger.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(trainable, lr=lr)
    loss_fn = nn.CrossEntropyLoss(ignore_index=-100)
    losses = []
    for epoch in range(epochs):
        tagger.train()
        batches = _batches(train, batch_size, rng)
        if progress:
            batches = tqdm(batches, desc=f"epoch {epoch + 1}/{epochs}", unit="batch")
        total_loss = 0.0
        for batch in batches:
            scores, _ = tagger(batch_to_ids([list(s.tokens) for s in batch]))
            loss = loss_fn(scores.reshape(-1, len(tags)), _tag_ids(batch, tag_index, scores.shape[1]).reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total_loss += loss.item() * len(batch)
        losses.append(total_loss / len(train))
        log.info("epoch %d: mean training loss %.4f", epoch + 1, losses[-1])
    accuracy, dev_tokens = evaluate(tagger, dev, tag_index)
    mix = tagger.elmo.scalar_mix_0
    result = TaggerResult(accuracy, dev_tokens, len(train), sum(len(s) for s in train), epochs, losses,
                          [round(float(w), 4) for w in mix.weights.detach()], round(mix.gamma.item(), 4),
                          round(time.perf_counter() - started, 1))
    return tagger, result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Train a POS tagger on UD English-EWT with a frozen ELMo biLM and a learned scalar mix "
                    "(elmo_model.Elmo, AllenNLP's interface); print its dev accuracy.")
    parser.add_argument("--model", default="elmo-mini",
                        help=MODEL_HELP + " (default: %(default)s)")
    parser.add_argument("--options-file", help="options.json (with --weight-file, instead of --model)")
    parser.add_argument("--weight-file", help="hdf5 weights (with --options-file)")
    parser.add_argument("--data-root", help="data root holding ud_english_ewt/ (default: $ELMO_WORKBENCH_DATA)")
    parser.add_argument("--tagset", choices=("upos", "xpos"), default="upos", help="UD tags or PTB tags (default: %(default)s)")
    parser.add_argument("--train-sentences", type=int, help="use the first N training sentences (default: all 12,544)")
    parser.add_argument("--dev-sentences", type=int, help="score the first N dev sentences (default: all 2,001)")
    parser.add_argument("--epochs", type=int, default=3, help="passes over the training sentences (default: %(default)s)")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per step (default: %(default)s)")
    parser.add_argument("--lr", type=float, default=3e-3, help="Adam learning rate (default: %(default)s)")
    parser.add_argument("--dropout", type=float, default=0.5, help="dropout on the ELMo vectors (default: %(default)s)")
    parser.add_argument("--lstm-hidden", type=int, default=0,
                        help="units of a BiLSTM between ELMo and the softmax, each direction; 0: none (default)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default: %(default)s)")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    parser.add_argument("--output", type=Path, help="write the result as JSON here")
    args = parser.parse_args(argv)
    if (args.options_file is None) != (args.weight_file is None):
        parser.error("--options-file and --weight-file go together")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if args.threads:
        torch.set_num_threads(args.threads)

    try:
        if args.options_file:
            options_file, weight_file = args.options_file, args.weight_file
        else:
            files = resolve_model(args.model)
            options_file, weight_file = files.options, files.weights
        train = read_ewt("train", args.tagset, args.data_root, args.train_sentences)
        dev = read_ewt("dev", args.tagset, args.data_root, args.dev_sentences)
        _, result = train_tagger(train, dev, options_file, weight_file, args.epochs, args.batch_size, args.lr,
                                 args.dropout, args.lstm_hidden, args.seed, progress=True)
    except (ValueError, DatasetMissing) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(f"EWT dev {args.tagset.upper()} accuracy {100 * result.dev_accuracy:.2f}% on {result.dev_tokens:,} tokens "
          f"({result.train_sentences:,} training sentences, {result.epochs} epochs, {result.seconds:.0f} s); "
          f"mix weights {result.mix_weights}, gamma {result.gamma}")
    if args.output:
        atomic_write_text(args.output, json.dumps(asdict(result), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
