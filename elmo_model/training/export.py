"""A trained run as a model folder: ``options.json``, ``weights.hdf5``, ``vocab.txt``,
``softmax.npz`` (the adaptive softmax, which ``load_language_model`` reads back) and the model
card's facts (architecture, corpus, curves, machine, commit). ``Trainer.export`` writes them."""

from __future__ import annotations

import os
import platform
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from ..bilm.config import ElmoConfig
from ..bilm.weights import save_weights
from ..plumbing.io_safety import atomic_output
from .config import TrainConfig
from .language_model import LanguageModel
from .lm_data import expand_inputs
from .vocab import Vocabulary


def git_commit() -> str | None:
    """The project's git commit (None outside a checkout)."""
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], cwd=Path(__file__).resolve().parent, capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def machine_description() -> dict:
    return {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(), "torch": torch.__version__, "threads": torch.get_num_threads()}


def check_finite_weights(lm: LanguageModel, out: Path, step: int) -> None:
    """Refuse to export weights holding NaN or infinite values (one line naming the tensor)."""
    for name, tensor in lm.state_dict().items():
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            bad = int((~torch.isfinite(tensor)).sum())
            raise ValueError(f"{out}: the weights hold {bad:,} non-finite values ({name}, step "
                             f"{step}); nothing exported. Train into a new --out with a lower "
                             "--learning-rate, or restore an earlier checkpoint.pt")


def write_model_files(lm: LanguageModel, vocab: Vocabulary, config: TrainConfig, tokens_seen: int,
                      directory: Path) -> ElmoConfig:
    """``options.json`` (with bilm-tf's extra keys), ``weights.hdf5``, ``vocab.txt`` and
    ``softmax.npz`` of ``lm`` (on the CPU) in ``directory``; returns the architecture written."""
    elmo_config = config.elmo_config()
    extra = {"bidirectional": True, "dropout": config.dropout, "n_tokens_vocab": len(vocab),
             "unroll_steps": config.max_sentence_tokens, "n_train_tokens": tokens_seen}
    ElmoConfig(elmo_config.char_cnn, elmo_config.lstm, extra).to_json(directory / "options.json")
    save_weights(lm.bilm, directory / "weights.hdf5")
    vocab.save(directory / "vocab.txt")
    softmax = {k: v.detach().cpu().numpy() for k, v in lm.softmax.state_dict().items()}
    with atomic_output(directory / "softmax.npz", suffix=".npz") as tmp:
        np.savez_compressed(tmp, cutoffs=np.array(lm.softmax.cutoffs[:-1]),
                            div_value=np.array(config.softmax_div_value), **softmax)
    return elmo_config


def model_card(name: str, lm: LanguageModel, vocab: Vocabulary, config: TrainConfig, state: dict,
               elmo_config: ElmoConfig, precision: str, perplexities: dict, weights_sha256: str) -> dict:
    """The model card of an exported run (``model_card.json``): ``state`` is the trainer's
    (steps, tokens, curves); ``weights_sha256`` the exported weights' checksum, which
    ``load_bilm`` checks."""
    s, files = state, expand_inputs(config.train)
    return {
        "name": name,
        "architecture": elmo_config.describe(),
        "parameters": {"encoder": sum(p.numel() for p in lm.bilm.parameters()),
                       "softmax": sum(p.numel() for p in lm.softmax.parameters())},
        "corpus": {"train": [{"file": p.name, "bytes": p.stat().st_size} for p in files],
                   "valid": [str(Path(p).name) for p in config.valid], "test": [str(Path(p).name) for p in config.test]},
        "vocabulary_size": len(vocab),
        "weights_sha256": weights_sha256,  # checked by load_bilm
        "tokens_seen": s["tokens_seen"], "steps": s["step"], "batches_in_epoch": s["batches_in_epoch"],
        "epochs": s["epoch"] + (s["batches_in_epoch"] > 0) * 0.0,
        "epochs_completed": s["epoch"],
        "wall_time_hours": s["train_seconds"] / 3600,
        "machine": machine_description(),
        "training_precision": precision,
        "train_config": asdict(config), "seed": config.seed,
        "held_out_perplexity": perplexities,
        "validation_curve": s["validation"],
        "training_loss_curve": s["loss_curve"],
        **({"initialised_from": s["initialised_from"]} if "initialised_from" in s else {}),
        "git_commit": git_commit(),
        "exported_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
