"""Measure what a trained biLM's model card reports, and write it into ``model_card.json``.

    python -m elmo_model.training.model_card data/models/elmo-mini

- Held-out perplexity of the biLM on the card's test files, forward and backward (exact: the
  adaptive softmax is normalised), recomputed from the exported files.
- The same for an interpolated Kneser-Ney trigram trained on the same training tokens (the first
  ``tokens_seen`` tokens of the trainer's own sentence stream) with the same vocabulary, and the
  ratio biLM / trigram.
- Contextualisation: cosine similarity of a word's two occurrences in sentence pairs from
  ``data/demo/`` per layer (1.0 at layer 0 by construction).

Both models score the same sentences (the trainer's 50-token pieces) with the same convention:
``</S>`` (forward) / ``<S>`` (backward) predicted, ``<UNK>`` a word.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import fields
from pathlib import Path
from typing import Callable

import numpy as np

from ..plumbing.flags import EXIT_CODES, add_quiet_argument
from ..bilm.precision import precision_line
from ..embedding import ElmoEmbedder
from ..plumbing.commands import error_exit, run_command
from ..plumbing.io_safety import atomic_write_text, check_output_dir
from ..plumbing.progress import log_through_bars
from ..plumbing.resources import shipped_data
from ..text.tokenizer import tokenize as default_tokenize
from .kneser_ney import fit_bidirectional
from .lm_data import expand_inputs, read_sentences, sentences_from_files
from .trainer import TrainConfig, evaluate_perplexity, load_language_model
from ..models.registry import load_bilm

log = logging.getLogger(__name__)


def training_sentences_seen(config: TrainConfig, tokens_seen: int, tokenize: Callable) -> list[list[str]]:
    """The trainer's sentence stream up to ``tokens_seen`` tokens. (Its batches shuffle within
    buffers of 4,096 sentences, so the last buffer may differ by a few sentences.)"""
    out, seen = [], 0
    for sentence in sentences_from_files(expand_inputs(config.train), tokenize, config.max_sentence_tokens):
        if seen >= tokens_seen:
            break
        out.append(sentence)
        seen += len(sentence)
    return out


def perplexity_table(model_dir: str | Path, tokenize: Callable | None = None, progress: bool = True) -> dict:
    """biLM vs Kneser-Ney trigram perplexities on the card's test files."""
    tokenize = tokenize or default_tokenize
    model_dir = Path(model_dir)
    card = json.loads((model_dir / "model_card.json").read_text(encoding="utf-8"))
    known = {f.name for f in fields(TrainConfig)}
    config = TrainConfig(**{k: v for k, v in card["train_config"].items() if k in known})
    lm, vocab = load_language_model(model_dir)
    started = time.monotonic()
    train_sentences = training_sentences_seen(config, card["tokens_seen"], tokenize)
    n_train = sum(len(s) for s in train_sentences)
    log.info("fitting the Kneser-Ney trigram on %d training tokens", n_train)
    kn_forward, kn_backward = fit_bidirectional(train_sentences, vocab.words)
    del train_sentences
    rows = {}
    for path in expand_inputs(config.test):
        sentences = read_sentences([path], tokenize, config.max_sentence_tokens)
        bilm = evaluate_perplexity(lm, sentences, vocab)
        kn_f, kn_b = kn_forward.perplexity(sentences), kn_backward.perplexity(sentences)
        if kn_f.n_tokens != bilm["n_predictions"]:
            raise AssertionError(f"{path.name}: the two models scored different token counts")
        rows[path.name] = {
            "n_predictions": bilm["n_predictions"],
            "bilm": {"forward": bilm["forward"], "backward": bilm["backward"]},
            "kneser_ney_trigram": {"forward": kn_f.perplexity, "backward": kn_b.perplexity},
            "ratio": {"forward": bilm["forward"] / kn_f.perplexity, "backward": bilm["backward"] / kn_b.perplexity},
        }
        log.info("%s: biLM %.1f / %.1f, trigram %.1f / %.1f", path.name, bilm["forward"], bilm["backward"],
                 kn_f.perplexity, kn_b.perplexity)
    return {"test_files": rows, "trigram_training_tokens": n_train, "seconds": time.monotonic() - started,
            "command": f"python -m elmo_model.training.model_card {model_dir}"}


DEMO_DIR = shipped_data("demo")


def contextualisation_table(model_dir: str | Path, demo_dir: Path = DEMO_DIR, tokenize: Callable | None = None) -> list[dict]:
    """For each demo word (``data/demo/*.json``: 6 sentences for each of two senses), with the biLM
    in folder ``model_dir`` (a folder even where it is named like a shipped model): the mean
    cosine similarity of its occurrences per layer, over pairs of the same sense and over pairs
    of different senses, and for the first river/money-style pair alone."""
    tokenize = tokenize or default_tokenize
    embedder = ElmoEmbedder(load_bilm(Path(model_dir).resolve()))  # a folder, never a name (names.py)
    rows = []
    for path in sorted(demo_dir.glob("*.json")):
        demo = json.loads(path.read_text(encoding="utf-8"))
        word, vectors, senses, texts = demo["word"], [], [], []
        for item in demo["sentences"]:
            tokens = [t for sentence in tokenize(item["text"]) for t in sentence]
            index = tokens.index(word)
            v = embedder.embed_sentence(tokens)[:, index]  # (L+1, 2P)
            vectors.append(v / np.linalg.norm(v, axis=-1, keepdims=True))
            senses.append(item["sense"])
            texts.append(item["text"])
        v = np.stack(vectors)  # (N, L+1, 2P), unit length
        cos = np.einsum("ajd,bjd->jab", v, v)  # (L+1, N, N)
        same = np.array([[a == b for b in senses] for a in senses])
        off_diagonal = ~np.eye(len(senses), dtype=bool)
        a = 0
        b = senses.index(next(s for s in senses if s != senses[0]))
        rows.append({
            "word": word, "senses": sorted(set(senses)), "n_sentences": len(senses),
            "same_sense_mean_cosine": [round(float(c[same & off_diagonal].mean()), 4) for c in cos],
            "different_sense_mean_cosine": [round(float(c[~same].mean()), 4) for c in cos],
            "example_pair": {"sentences": [texts[a], texts[b]], "senses": [senses[a], senses[b]],
                             "cosine_per_layer": [round(float(c[a, b]), 4) for c in cos]},
        })
    return rows


def model_problem(model_dir: str | Path) -> str | None:
    """What makes an exported model unusable for the card's measurements, in one line naming the
    file (options or weights out of range or not finite, a card whose train_config breaks the
    trainer's rules); None when it loads and its card's settings are valid."""
    model_dir = Path(model_dir)
    card_path = model_dir / "model_card.json"
    try:
        load_bilm(model_dir.resolve())  # options.json's numbers, every weight finite; a folder, never a name
        card = json.loads(card_path.read_text(encoding="utf-8"))
        settings = card.get("train_config") if isinstance(card, dict) else None
        if not isinstance(settings, dict):
            return f"{card_path}: no train_config object; restore the card from the export"
        known = {f.name for f in fields(TrainConfig)}
        problems = TrainConfig(**{k: v for k, v in settings.items() if k in known}).problems()
    except (ValueError, TypeError) as err:
        return str(err)
    return f"{card_path}: train_config: {'; '.join(problems)}" if problems else None


def update_card(model_dir: str | Path, section: str, value) -> None:
    """Set one key of ``model_card.json`` (atomically)."""
    path = Path(model_dir) / "model_card.json"
    card = json.loads(path.read_text(encoding="utf-8"))
    card[section] = value
    atomic_write_text(path, json.dumps(card, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m elmo_model.training.model_card", description=__doc__,
                                     epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model_dir", type=Path,
                        help="an exported model directory (from python -m elmo_model.training.train)")
    parser.add_argument("--skip-perplexity", action="store_true", help="only the contextualisation table")
    add_quiet_argument(parser)
    args = parser.parse_args(argv)
    card = args.model_dir / "model_card.json"
    if not card.is_file():
        print(f"error: {args.model_dir}: not an exported model directory (no model_card.json); the trainer "
              f"exports one to <run>/model (python -m elmo_model.training.train --out <run>)", file=sys.stderr)
        return 2
    try:
        json.loads(card.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as err:
        print(f"error: {card}: not readable JSON ({err}); restore it from the export", file=sys.stderr)
        return 2
    try:  # the tables go into the card: a folder that cannot be written is found before they are measured
        check_output_dir(args.model_dir, flag="", what="model folder (its model_card.json receives the tables)")
    except ValueError as err:
        return error_exit(err)
    problem = model_problem(args.model_dir)
    if problem:
        return error_exit(problem)
    log_through_bars(args.quiet, fmt="%(asctime)s %(levelname)s %(name)s: %(message)s")
    return run_command(lambda: _measure_and_print(args), lambda _: None, errors=(ValueError, FileNotFoundError),
                       kept=lambda: f"{card} keeps the tables finished before the interrupt (each is written when it "
                                    "is done); rerun the same command to measure again")


def _measure_and_print(args: argparse.Namespace) -> None:
    print(precision_line(load_bilm(args.model_dir.resolve())), flush=True)  # what the tables below run
    if not args.skip_perplexity:
        table = perplexity_table(args.model_dir, progress=not args.quiet)
        update_card(args.model_dir, "perplexity_vs_trigram", table)
        print(f"{'file':<26}{'biLM fw':>9}{'biLM bw':>9}{'KN3 fw':>9}{'KN3 bw':>9}{'ratio fw':>10}{'ratio bw':>10}")
        for name, row in table["test_files"].items():
            print(f"{name:<26}{row['bilm']['forward']:>9.1f}{row['bilm']['backward']:>9.1f}"
                  f"{row['kneser_ney_trigram']['forward']:>9.1f}{row['kneser_ney_trigram']['backward']:>9.1f}"
                  f"{row['ratio']['forward']:>10.3f}{row['ratio']['backward']:>10.3f}")
    rows = contextualisation_table(args.model_dir)
    update_card(args.model_dir, "contextualisation", rows)
    n_layers = len(rows[0]["same_sense_mean_cosine"])
    print(f"\nmean cosine similarity of a word's occurrences ({rows[0]['n_sentences']} demo sentences a word)")
    print(f"{'word':<7}{'pairs':<16}" + "".join(f"{'layer ' + str(j):>9}" for j in range(n_layers)))
    for row in rows:
        for label, key in (("same sense", "same_sense_mean_cosine"), ("different sense", "different_sense_mean_cosine")):
            print(f"{row['word']:<7}{label:<16}" + "".join(f"{c:>9.3f}" for c in row[key]))


if __name__ == "__main__":
    sys.exit(main())
