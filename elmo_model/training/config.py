"""``TrainConfig``: every hyperparameter of a training run, its checks, and which of them a resumed run may change."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

from ..bilm.config import (
    CharCnnConfig,
    ElmoConfig,
    LstmConfig,
    filters_problem,
    integer_problem,
    number_problem,
    show_value,
)
from ..plumbing.io_safety import atomic_write_text
from .lm_data import expand_inputs


@dataclass
class TrainConfig:
    """Every hyperparameter of a training run (saved as ``train_config.json``)."""

    train: list[str]
    valid: list[str] = field(default_factory=list)
    test: list[str] = field(default_factory=list)
    out: str = "runs/elmo"
    # vocabulary of the softmax
    vocab_size: int = 50_000
    vocab_min_count: int = 3
    vocab_max_tokens: int = 10_000_000
    # model
    char_embedding_dim: int = 16
    filters: list[list[int]] = field(default_factory=lambda: [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256]])
    n_highway: int = 2
    lstm_dim: int = 1024
    projection_dim: int = 256
    n_layers: int = 2
    cell_clip: float = 3.0
    proj_clip: float = 3.0
    use_skip_connections: bool = True
    softmax_cutoffs: list[int] = field(default_factory=lambda: [2_000, 10_000])
    softmax_div_value: float = 4.0
    # optimisation
    max_sentence_tokens: int = 50
    batch_tokens: int = 1_600
    dropout: float = 0.1
    learning_rate: float = 2e-3
    # cool-down: the rate falls linearly to cooldown_final_fraction x learning_rate over the last
    # cooldown_steps steps before max_steps (0: a constant rate). It may be decided or extended on a
    # resume ("warmup-stable-decay"): train at the constant rate, then rerun with the budget that ends it.
    cooldown_steps: int = 0
    cooldown_final_fraction: float = 0.0
    grad_clip: float = 1.0
    epochs: int = 1
    max_steps: int | None = None
    max_tokens: int | None = None
    max_hours: float | None = None
    seed: int = 0
    threads: int | None = None
    # hardware: "cpu", "cuda" (under torchrun each rank takes the GPU of its LOCAL_RANK); bf16
    # autocast applies on a GPU only (a CPU run stays in fp32 so it is bit-for-bit reproducible)
    device: str = "cpu"
    bf16: bool = True
    # the biLM's matrix products on a CPU: "fp32", "bf16" (bf16 operands, fp32 master weights, Adam
    # state, cell state and softmax/loss; elmo_model.bilm.precision) or "auto" (bf16 where this CPU's bf16
    # units make it faster). On a GPU --bf16 (autocast) decides instead.
    precision: str = "auto"
    # bookkeeping
    log_every: int = 25
    validate_every_minutes: float = 20.0
    checkpoint_every_minutes: float = 5.0
    valid_sentences: int = 2_000
    # batches made ahead by a background thread while a step runs (0: made between steps)
    prefetch_batches: int = 4
    # worker processes that tokenise and make the batches outside the trainer's interpreter (the same
    # batches in the same order; 0: the thread above). None: 0 on a CPU, min(4, cores - 1) on a GPU
    # (batch_workers.default_batch_workers). The single-process trainer only: torchrun ranks use the thread.
    batch_workers: int | None = None
    # padded tokens per batch of held-out perplexity (None: sized for the device, EVAL_BATCH_TOKENS)
    eval_batch_tokens: int | None = None

    def problems(self) -> list[str]:
        """What is wrong with the settings, as ``--flag value: expected ...`` lines (empty: none).
        Checked before any file is read or written."""
        out = []

        def need(name: str, ok: bool, expected: str) -> None:
            if not ok:
                out.append(f"--{name.replace('_', '-')} {getattr(self, name)}: expected {expected}")

        for name in ("batch_tokens", "max_sentence_tokens", "epochs", "log_every", "vocab_size", "lstm_dim",
                     "projection_dim", "n_layers", "char_embedding_dim", "valid_sentences"):
            need(name, isinstance(getattr(self, name), int) and getattr(self, name) >= 1, "an integer >= 1")
        need("prefetch_batches", isinstance(self.prefetch_batches, int) and self.prefetch_batches >= 0,
             "an integer >= 0")
        need("batch_workers", self.batch_workers is None or (isinstance(self.batch_workers, int)
                                                             and self.batch_workers >= 0), "an integer >= 0")
        for name in ("max_steps", "max_tokens", "eval_batch_tokens"):
            need(name, getattr(self, name) is None or getattr(self, name) >= 1, "an integer >= 1")
        need("max_hours", self.max_hours is None or (math.isfinite(self.max_hours) and self.max_hours > 0),
             "a positive number of hours")
        need("learning_rate", math.isfinite(self.learning_rate) and self.learning_rate > 0, "a positive number")
        need("dropout", 0.0 <= self.dropout < 1.0, "0 <= dropout < 1")
        need("cooldown_steps", self.cooldown_steps >= 0, "an integer >= 0")
        need("vocab_min_count", self.vocab_min_count >= 1, "an integer >= 1")
        for name in ("validate_every_minutes", "checkpoint_every_minutes", "grad_clip"):
            need(name, math.isfinite(getattr(self, name)) and getattr(self, name) >= 0, "a number >= 0")
        if self.threads is not None:
            need("threads", self.threads >= 1, "an integer >= 1")
        # the numbers that shape the model: the options file's rules (elmo_model.bilm.config), one place
        for name, problem in (("cell_clip", number_problem(self.cell_clip, 0, low_open=True)),
                              ("proj_clip", number_problem(self.proj_clip, 0, low_open=True)),
                              ("filters", filters_problem(self.filters)),
                              ("n_highway", integer_problem(self.n_highway, 0)),
                              ("softmax_div_value", number_problem(self.softmax_div_value, 1.0)),
                              ("cooldown_final_fraction", number_problem(self.cooldown_final_fraction, 0.0, 1.0)),
                              ("softmax_cutoffs", None if all(integer_problem(c) is None for c in self.softmax_cutoffs)
                               else "must be integers >= 1")):
            if problem:
                out.append(f"--{name.replace('_', '-')} {show_value(getattr(self, name))}: {problem}")
        return out

    def elmo_config(self) -> ElmoConfig:
        """The biLM's architecture."""
        return ElmoConfig(
            char_cnn=CharCnnConfig(embedding_dim=self.char_embedding_dim, filters=tuple(tuple(f) for f in self.filters),
                                   n_highway=self.n_highway),
            lstm=LstmConfig(dim=self.lstm_dim, projection_dim=self.projection_dim, n_layers=self.n_layers,
                            cell_clip=self.cell_clip, proj_clip=self.proj_clip,
                            use_skip_connections=self.use_skip_connections),
        )

    def to_json(self, path: Path) -> None:
        atomic_write_text(path, json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def from_json(cls, path: Path) -> "TrainConfig":
        return cls.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))

    @classmethod
    def from_dict(cls, data: dict) -> "TrainConfig":
        """Settings saved by any version: keys this version does not know are ignored."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

    def same_weights_as(self, other: "TrainConfig", free: tuple[str, ...] = (), compare_file=str) -> bool:
        """Whether ``other`` trains the same weights: every setting equal but the resumable ones
        (and ``free``), and the same training files (compared through ``compare_file``)."""
        return not self.differences(other, free, compare_file)

    def differences(self, other: "TrainConfig", free: tuple[str, ...] = (), compare_file=str) -> list[str]:
        """The settings that keep ``other`` from training the same weights, as ``name: this -> other``
        (the resumable ones and ``free`` apart; the training files compared through ``compare_file``)."""
        mine, theirs = asdict(self), asdict(other)
        out = [f"{name}: {mine[name]!r} -> {theirs[name]!r}" for name in mine
               if name not in RESUMABLE_CHANGES + free and mine[name] != theirs[name]]
        files = [[compare_file(p) for p in expand_inputs(c.train)] for c in (self, other)]
        if files[0] != files[1]:
            out.append(f"train: {self.train!r} -> {other.train!r}")
        return out


# settings a resumed run may change: budgets (with the cool-down that ends one) and bookkeeping, not the
# architecture, data order or optimiser settings
RESUMABLE_CHANGES = ("max_steps", "max_tokens", "max_hours", "cooldown_steps", "cooldown_final_fraction",
                     "train", "threads", "log_every",
                     "validate_every_minutes", "checkpoint_every_minutes", "valid_sentences", "device", "bf16", "precision",
                     "prefetch_batches", "batch_workers", "eval_batch_tokens")
