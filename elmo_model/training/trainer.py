"""The biLM trainer: ``TrainConfig`` (every hyperparameter) and ``Trainer`` (one run directory).

The model is the architecture of ``elmo_model.bilm.modules`` (character CNN, highway, projection,
LSTM stacks with projection, clipping and skip connections), a forward and a backward language
model that share the token representation and one softmax, as in Peters et al. (2018). The
softmax is PyTorch's adaptive softmax (Grave et al. 2017): exact probabilities (so the training
loss is a true perplexity) at a small fraction of a full softmax's cost on a CPU.

Training examples are sentences (pieces of at most ``max_sentence_tokens`` tokens: the truncated
back-propagation window) with ``<S>``/``</S>`` around them, each starting from a zero LSTM state,
which is exactly how the workbench embeds text afterwards.

Everything lives in ``config.out``: ``train_config.json``, ``vocab.txt``, ``checkpoint.pt``
(written atomically every few minutes; a new ``Trainer`` on the same directory resumes exactly
where the last one stopped) and, after ``export()``, ``model/`` with ``options.json``,
``weights.hdf5``, ``vocab.txt``, ``softmax.npz`` and ``model_card.json``. SIGINT or SIGTERM stops
after the current step with a checkpoint.

The command line is ``python -m elmo_model.training.train`` (``elmo_model/training/train.py``); torchrun ranks run
``elmo_model.training.distributed.DistributedTrainer``, a subclass of ``Trainer``.

    from elmo_model.training.trainer import Trainer, TrainConfig
    trainer = Trainer(TrainConfig(train=["corpus.txt.gz"], out="runs/my-elmo", max_steps=1000))
    trainer.train()
    trainer.export()
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import signal
import time
from collections import Counter
from pathlib import Path
from typing import Callable, Iterator

import torch
from torch import nn
from tqdm import tqdm

from ..bilm import lstm_gradient, gradient_kernels
from ..bilm.precision import resolve_precision
from ..bilm.weights import file_checksum
from ..plumbing.io_safety import atomic_write_text, ensure_room, output_lock
from ..text.reader import TextFileError
from ..text.tokenizer import tokenize as project_tokenize
from .batch_workers import BatchWorkerError, StreamRecipe, default_batch_workers, made_in_workers, tokenizer_pickles
from .checkpoint import damaged_checkpoint, write_checkpoint
from .config import RESUMABLE_CHANGES, TrainConfig  # noqa: F401 (importable from here too)
from .export import check_finite_weights, model_card, write_model_files
from .language_model import EVAL_BATCH_TOKENS, LanguageModel, evaluate_perplexity, load_language_model  # noqa: F401
from .lm_data import LmBatch, batches, expand_inputs, prefetched, read_sentences, sentences_from_files
from .vocab import Vocabulary

log = logging.getLogger(__name__)


class NonFiniteLoss(ValueError):
    """The loss or the gradients became NaN or infinite; training stopped before the update."""


# ---- helpers ----------------------------------------------------------------------------------

def _default_tokenize() -> Callable[[str], list[list[str]]]:
    """The project's tokenizer (``elmo_model.text.tokenizer.tokenize``): text -> sentences of words."""
    return project_tokenize


def build_vocabulary(config: TrainConfig, tokenize: Callable, progress: bool = True) -> Vocabulary:
    """Count the first ``vocab_max_tokens`` training tokens (the stream order) and keep the top K."""
    counts: Counter = Counter()
    seen = 0
    with tqdm(total=config.vocab_max_tokens, unit="tok", desc="vocabulary", disable=not progress) as bar:
        for sentence in sentences_from_files(expand_inputs(config.train), tokenize, config.max_sentence_tokens):
            counts.update(sentence)
            seen += len(sentence)
            bar.update(len(sentence))
            if seen >= config.vocab_max_tokens:
                break
    vocab = Vocabulary.build(counts, config.vocab_size, config.vocab_min_count)
    covered = sum(c for w, c in counts.items() if w in vocab.index)
    log.info("vocabulary: %d words from %d tokens (%d types); coverage %.2f%%", len(vocab), seen, len(counts),
             100.0 * covered / max(1, seen))
    return vocab


# ---- the training run -------------------------------------------------------------------------

class VocabularyChanged(ValueError):
    """The run's vocab.txt no longer matches its checkpoint."""


class Trainer:
    """One run in ``config.out``: resumes from ``checkpoint.pt`` when it exists.

    This is the single-process trainer. ``elmo_model.training.distributed.DistributedTrainer`` subclasses
    it for torchrun / DistributedDataParallel by overriding the few hooks marked "hook" below
    (set-up, one step, agreeing on when to stop, checkpointing); the loop itself is shared."""

    #: hook: this process logs, validates, checkpoints and exports (rank 0 under torchrun)
    is_main: bool = True

    def __init__(self, config: TrainConfig, tokenize: Callable | None = None, progress: bool = True,
                 init_from: str | Path | None = None, init_warmup_steps: int = 100) -> None:
        self.config = config
        self.tokenize = tokenize or _default_tokenize()
        self.progress = progress
        # an exported model to start from when ``out`` holds no checkpoint yet (see _initialise_from_export)
        self.init_from = Path(init_from) if init_from else None
        self.init_warmup_steps = init_warmup_steps
        problems = config.problems()
        if problems:
            raise ValueError("; ".join(problems))
        self.out = Path(config.out)
        if self.out.exists() and not self.out.is_dir():
            raise ValueError(f"--out {self.out}: is a file; give a run directory")
        self.out.mkdir(parents=True, exist_ok=True)
        self._stop_requested = False
        self._checkpoint_step: int | None = None  # the step of checkpoint.pt as this run last saw it
        if self.device.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"--device {config.device}: torch sees no GPU (torch.cuda.is_available() is False); "
                             "train with --device cpu or install a CUDA build of torch")
        if config.cooldown_steps and config.max_steps is None:
            raise ValueError("--cooldown-steps needs --max-steps: the cool-down ends the run at max_steps")
        if not 0.0 <= config.cooldown_final_fraction <= 1.0:
            raise ValueError(f"--cooldown-final-fraction {config.cooldown_final_fraction}: expected 0..1")
        if config.threads:
            torch.set_num_threads(config.threads)

    # -- state
    @property
    def device(self) -> torch.device:
        """Where the model and its batches live (``--device``)."""
        return torch.device(self.config.device)

    def _check_config(self, write: bool = True) -> None:
        """Refuse to resume ``out`` with a configuration that shapes the weights differently."""
        c = self.config
        saved = self.out / "train_config.json"
        if saved.exists():
            try:
                previous = TrainConfig.from_json(saved)
            except (ValueError, TypeError) as err:
                raise ValueError(f"{saved}: not readable ({err}); restore it, or use another --out") from None
            differ = previous.differences(c)
            if differ:
                changeable = [name for name in RESUMABLE_CHANGES if name != "train"]
                raise ValueError(f"{saved} holds a different configuration ({'; '.join(differ)}); "
                                 "resume with the same settings and "
                                 f"the same training files (only {', '.join(changeable)} may change) "
                                 "or use another --out")
        if write:
            c.to_json(saved)

    def _vocabulary(self) -> Vocabulary:
        """``out/vocab.txt``, built from the training text the first time."""
        vocab_path = self.out / "vocab.txt"
        if vocab_path.exists():
            return Vocabulary.load(vocab_path)
        if self.init_from is not None:  # the softmax rows belong to the exported model's words
            source = self.init_from / "vocab.txt"
            if not source.is_file():
                raise FileNotFoundError(f"--init-from {self.init_from}: no vocab.txt there (an exported model "
                                        "directory holds options.json, weights.hdf5, vocab.txt and softmax.npz)")
            vocab = Vocabulary.load(source)
            vocab.save(vocab_path)
            return vocab
        vocab = build_vocabulary(self.config, self.tokenize, self.progress)
        vocab.save(vocab_path)
        return vocab

    def _build_model(self) -> dict | None:
        """Model, optimizer and progress, from ``checkpoint.pt`` when there is one (returned, so
        that a subclass can restore more from it)."""
        c = self.config
        torch.manual_seed(c.seed)
        self.lm = LanguageModel(c.elmo_config(), len(self.vocab), c.softmax_cutoffs, c.softmax_div_value, c.dropout)
        if self.device.type != "cpu":
            self.lm.to(self.device)
        self.precision = resolve_precision(c.precision) if self.device.type == "cpu" else "fp32"
        self.lm.bilm.set_precision(self.precision)
        if self.precision != "fp32":
            log.info("training in %s: bf16 matrix products, fp32 weights, optimizer state and softmax", self.precision)
        # on a GPU one fused kernel updates every parameter (the per-tensor loop is hundreds of launches)
        self.optimizer = torch.optim.Adam(self.lm.parameters(), lr=c.learning_rate,
                                          fused=True if self.device.type == "cuda" else None)
        self.state = {"step": 0, "epoch": 0, "batches_in_epoch": 0, "tokens_seen": 0, "train_seconds": 0.0,
                      "loss_curve": [], "validation": []}
        checkpoint = self.out / "checkpoint.pt"
        if not checkpoint.exists():
            if self.init_from is not None:
                self._initialise_from_export(self.init_from)
            return None
        try:
            saved_state = torch.load(checkpoint, map_location="cpu", weights_only=True)
            self._check_vocabulary_fits(saved_state["model"])
            self.lm.load_state_dict(saved_state["model"])
            self.optimizer.load_state_dict(saved_state["optimizer"])
            torch.set_rng_state(saved_state["torch_rng"])
            self.state = saved_state["progress"]
        except VocabularyChanged as err:
            raise ValueError(str(err)) from None
        except Exception as err:  # truncated, overwritten, another file: torch raises many kinds
            raise damaged_checkpoint(checkpoint, err) from None
        self._checkpoint_step = self.state["step"]
        log.info("resuming from %s at step %d (%d tokens seen)", checkpoint, self.state["step"],
                 self.state["tokens_seen"])
        return saved_state

    def _check_vocabulary_fits(self, saved_model: dict) -> None:
        """A healthy checkpoint whose softmax has other shapes than the run's ``vocab.txt`` gives:
        the vocabulary file was edited or replaced, not the checkpoint damaged (:class:`VocabularyChanged`)."""
        ours = self.lm.state_dict()
        differ = [k for k in ours if k.startswith("softmax.") and k in saved_model
                  and tuple(saved_model[k].shape) != tuple(ours[k].shape)]
        if differ:
            raise VocabularyChanged(
                f"{self.out / 'vocab.txt'}: {len(self.vocab):,} words, but the checkpoint's softmax was trained "
                f"for another vocabulary ({differ[0]}: {tuple(saved_model[differ[0]].shape)} against "
                f"{tuple(ours[differ[0]].shape)}); vocab.txt was edited or replaced: restore it to resume "
                f"(the checkpoint is intact), or train into a fresh --out")

    def _initialise_from_export(self, directory: Path) -> None:
        """Start from an exported model (``options.json``, ``weights.hdf5``, ``softmax.npz``,
        ``vocab.txt``): its encoder and softmax weights, a fresh Adam whose learning rate warms up
        linearly over ``init_warmup_steps`` steps (its moment estimates are not exported).

        If the export's model card says it came from this same run (same weight-shaping settings
        and training files), the progress counters continue from the card, so the batch stream
        resumes after the last exported batch and the curves carry on: the way back after a lost
        checkpoint. Otherwise (another corpus: fine-tuning) the counters start at zero."""
        c = self.config
        try:
            exported, vocab = load_language_model(directory)
        except ValueError as err:  # load_bilm's, the softmax's: naming the damaged file
            raise ValueError(f"--init-from {directory}: {err}") from None
        except (OSError, KeyError, EOFError) as err:  # a missing file, ...
            raise ValueError(f"--init-from {directory}: not a loadable exported model ({type(err).__name__}: "
                             f"{str(err).splitlines()[0][:200] if str(err) else 'no detail'}); export it again "
                             "or give another model") from None
        if vocab.words != self.vocab.words:
            raise ValueError(f"--init-from {directory}: its vocab.txt differs from {self.out / 'vocab.txt'}; "
                             "use a fresh --out so the export's vocabulary is taken")
        expected, found = c.elmo_config().describe(), exported.bilm.config.describe()
        if expected != found or list(exported.softmax.cutoffs) != list(self.lm.softmax.cutoffs):
            raise ValueError(f"--init-from {directory}: the export's architecture {found} (softmax cutoffs "
                             f"{exported.softmax.cutoffs[:-1]}) differs from this run's {expected} "
                             f"({c.softmax_cutoffs}); pass the export's dimensions")
        self.lm.load_state_dict(exported.state_dict())
        card_path = directory / "model_card.json"
        card = json.loads(card_path.read_text(encoding="utf-8")) if card_path.is_file() else {}
        same_run = "train_config" in card and TrainConfig.from_dict(card["train_config"]).same_weights_as(
            c, free=("out", "valid", "test"), compare_file=lambda p: p.name)
        s = self.state
        if same_run:
            batches_in_epoch = card.get("batches_in_epoch", card["steps"] if card["epochs_completed"] == 0 else None)
            if batches_in_epoch is None:
                raise ValueError(f"{card_path} predates the batches_in_epoch field and is past its first epoch: "
                                 "the position in the batch stream is unknown")
            s.update(step=card["steps"], epoch=card["epochs_completed"], batches_in_epoch=batches_in_epoch,
                     tokens_seen=card["tokens_seen"], train_seconds=card["wall_time_hours"] * 3600,
                     loss_curve=list(card.get("training_loss_curve", [])),
                     validation=list(card.get("validation_curve", [])))
        s["warmup"] = {"start_step": s["step"], "steps": self.init_warmup_steps}
        s["initialised_from"] = {"directory": str(directory), "same_run": same_run, "step": s["step"],
                                 "tokens_seen": s["tokens_seen"]}
        torch.manual_seed(c.seed * 1_000_003 + 7919 * s["step"])  # dropout masks: the saved RNG is not exported
        log.info("initialised from %s (%s) at step %d, %d tokens seen; learning rate warms up over %d steps",
                 directory, "same run: counters continue" if same_run else "another run: counters start at 0",
                 s["step"], s["tokens_seen"], self.init_warmup_steps)

    def _learning_rate(self) -> float:
        """The rate of the next step: the configured one, ramped up linearly after a fresh optimizer
        on exported weights, and cooled down linearly over the last ``cooldown_steps`` steps."""
        c, step = self.config, self.state["step"]
        rate = c.learning_rate
        warmup = self.state.get("warmup")
        if warmup and warmup["steps"] > 0:
            rate *= min(1.0, (step - warmup["start_step"] + 1) / warmup["steps"])
        if c.cooldown_steps > 0:
            # steps left including this one: cooldown_steps at the first step of the cool-down (full rate)
            left = c.max_steps - step
            if left <= c.cooldown_steps:
                done = (c.cooldown_steps - left) / c.cooldown_steps
                rate *= 1.0 - (1.0 - c.cooldown_final_fraction) * done
        return rate

    def _check_training_text(self) -> None:
        """Refuse training files that hold no sentence (an empty file would train 0 steps); say so
        when the whole text is smaller than one batch (it trains, on very little)."""
        c = self.config
        files = expand_inputs(c.train)
        sentences = tokens = 0
        for sentence in sentences_from_files(files, self.tokenize, c.max_sentence_tokens):
            sentences, tokens = sentences + 1, tokens + len(sentence)
            if tokens >= c.batch_tokens:  # at least one full batch: not tiny, stop counting
                return
        if sentences == 0:
            raise ValueError(f"--train {' '.join(map(str, c.train))}: no text in {', '.join(map(str, files))}; "
                             "give files with one paragraph per line")
        log.warning("the training text is tiny: %d sentences, %d tokens, less than one batch of %d tokens; it "
                    "trains (one batch a pass), but a biLM learns little from so little text", sentences, tokens,
                    c.batch_tokens)

    def _setup(self) -> None:  # hook
        gradient_kernels.enable()  # thousands of steps: compiled kernels pay; each step waits for them (exact resume)
        self._check_training_text()
        self._check_config()
        self.vocab = self._vocabulary()
        self._build_model()

    def save_checkpoint(self) -> None:
        """Model, optimizer, RNG and progress, atomically."""
        payload = {"model": self.lm.state_dict(), "optimizer": self.optimizer.state_dict(),
                   "torch_rng": torch.get_rng_state(), "progress": self.state}
        write_checkpoint(payload, self.out / "checkpoint.pt", self._checkpoint_step)  # a failed write: one line
        self._checkpoint_step = self.state["step"]

    def _epoch_sentences(self, epoch: int) -> Iterator[list[str]]:  # noqa: ARG002 (same text every epoch)
        c = self.config
        return sentences_from_files(expand_inputs(c.train), self.tokenize, c.max_sentence_tokens)

    def _epoch_batches(self, epoch: int) -> Iterator[LmBatch]:  # hook
        c = self.config
        return batches(self._epoch_sentences(epoch), self.vocab, c.batch_tokens, seed=c.seed * 1000 + epoch)

    def _stream_recipe(self, epoch: int) -> StreamRecipe:
        """What decides epoch ``epoch``'s batches, for worker processes: ``_epoch_batches``'s stream."""
        c = self.config
        return StreamRecipe(tuple(str(p) for p in expand_inputs(c.train)), self.tokenize, c.max_sentence_tokens,
                            c.batch_tokens, c.seed * 1000 + epoch, tuple(self.vocab.words))

    def _batch_workers(self) -> int:  # hook
        """Worker processes for the batches (``--batch-workers``; by default 0 on a CPU, a few on a GPU).
        0 where the stream is not the recipe's (a subclass with its own ``_epoch_batches``) or where
        the tokenizer cannot reach a worker and none were asked for."""
        c, cls = self.config, type(self)
        own_stream = (cls._epoch_batches is not Trainer._epoch_batches
                      or cls._epoch_sentences is not Trainer._epoch_sentences)
        if c.batch_workers is None:
            workers = default_batch_workers(self.device.type)
            return workers if workers and not own_stream and tokenizer_pickles(self.tokenize) else 0
        if c.batch_workers and own_stream:
            log.warning("--batch-workers %d: %s makes its own batches; they are made by a thread", c.batch_workers,
                        cls.__name__)
            return 0
        if c.batch_workers and not tokenizer_pickles(self.tokenize):
            raise ValueError(f"--batch-workers {c.batch_workers}: the tokenizer {self.tokenize!r} cannot be sent "
                             "to a worker process (give a module-level function), or use --batch-workers 0")
        return c.batch_workers

    def _epoch_stream(self, epoch: int, skip: int) -> contextlib.AbstractContextManager[Iterator]:
        """Epoch ``epoch``'s batches, made ahead of the steps: by worker processes (the first ``skip``
        not made, None in their place) or by a thread (``--prefetch-batches``; 0: in line)."""
        c = self.config
        workers = self._batch_workers()
        if workers:
            self.batch_pipeline = f"{workers} worker process{'es' * (workers > 1)}"
            stream = made_in_workers(self._stream_recipe(epoch), workers, c.prefetch_batches, skip, self._pinned)
        else:
            self.batch_pipeline = "a background thread" if c.prefetch_batches else "in line, between steps"
            stream = prefetched(self._pinned(self._epoch_batches(epoch)), c.prefetch_batches)
        log.info("epoch %d: batches made by %s", epoch, self.batch_pipeline)
        return stream

    def _pinned(self, stream: Iterator) -> Iterator:
        """On a GPU, batches in page-locked memory (pinned by the batch thread), so that copying one
        to the GPU does not hold up the step; elsewhere the stream as it is."""
        if self.device.type != "cuda":
            return stream
        return (batch.pin_memory() if isinstance(batch, LmBatch) else batch for batch in stream)

    def _autocast(self) -> contextlib.AbstractContextManager:
        """bf16 autocast on a GPU when ``bf16`` is set; nothing at all on a CPU."""
        if self.device.type == "cuda" and self.config.bf16:
            return torch.autocast("cuda", dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def _step(self, batch: LmBatch) -> tuple[float, int]:  # hook
        """Forward, backward, clip and update on one batch -> (summed loss, predictions) for the
        logging window (mean loss per direction times predictions)."""
        c = self.config
        if self.device.type != "cpu":
            batch = batch.to(self.device)
        with self._autocast():
            fw_nll, bw_nll, n = self.lm(batch)
            loss = (fw_nll + bw_nll) / (2 * n)
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(self.lm.parameters(), c.grad_clip or math.inf)  # inf: measured only
        self._refuse_non_finite(grad_norm, loss)
        self.optimizer.step()
        return loss.item() * n, n

    def _refuse_non_finite(self, grad_norm: torch.Tensor, loss: torch.Tensor | None = None) -> None:
        """Stop before the optimizer step when the loss or the gradient norm is NaN or infinite:
        the weights stay as they were (finite), no checkpoint is written over the last one and
        nothing is exported. Under torchrun the gradient norm (the same on every rank after the
        all-reduce) decides, so every rank stops at the same step."""
        values = grad_norm.detach().float().reshape(1)
        if loss is not None:
            values = torch.cat([loss.detach().float().reshape(1), values])
        if bool(torch.isfinite(values).all()):
            return
        step = self.state["step"] + 1
        shown = ", ".join(f"{name} {float(v):g}" for name, v in zip(
            ("loss", "gradient norm") if loss is not None else ("gradient norm",), values.tolist()))
        checkpoint = self.out / "checkpoint.pt"
        kept = (f"{checkpoint} (step {self._checkpoint_step}) is kept" if checkpoint.is_file()
                and self._checkpoint_step is not None else "no checkpoint had been written yet")
        raise NonFiniteLoss(f"step {step}: not finite ({shown}); stopped before updating the weights, "
                            f"nothing exported, {kept}. Lower --learning-rate, or check --cell-clip, "
                            "--proj-clip and --grad-clip, and train into a new --out")

    def _agree(self, reason: str | None, validate: bool, checkpoint: bool) -> tuple[str | None, bool, bool]:  # hook
        """Under torchrun every rank must take the same branch (they meet in collectives); one
        process simply follows its own clock and signals."""
        return reason, validate, checkpoint

    def _should_stop(self, elapsed: float) -> str | None:
        c, s = self.config, self.state
        if self._stop_requested:
            return "interrupted"
        if c.max_steps is not None and s["step"] >= c.max_steps:
            return "max_steps"
        if c.max_tokens is not None and s["tokens_seen"] >= c.max_tokens:
            return "max_tokens"
        if c.max_hours is not None and elapsed >= c.max_hours * 3600:
            return "max_hours"
        return None

    def _request_stop(self, signum, frame) -> None:  # noqa: ARG002
        log.warning("signal %d: stopping after this step", signum)
        self._stop_requested = True

    def validate(self) -> dict | None:
        c = self.config
        if not c.valid:
            return None
        if not hasattr(self, "_valid_sentences"):
            self._valid_sentences = read_sentences(c.valid, self.tokenize, c.max_sentence_tokens, c.valid_sentences)
        result = evaluate_perplexity(self.lm, self._valid_sentences, self.vocab, c.eval_batch_tokens)
        result.update(step=self.state["step"], tokens_seen=self.state["tokens_seen"])
        self.state["validation"].append(result)
        log.info("validation at step %d: forward ppl %.1f, backward ppl %.1f", result["step"], result["forward"],
                 result["backward"])
        return result

    def train(self) -> str:
        """Run until a budget or the epochs end; returns why it stopped ("finished", "max_hours", ...).
        One trainer per run directory: a second one on the same ``out`` stops with ``OutputBusy``."""
        with self._run_directory_lock():
            return self._train()

    def _run_directory_lock(self) -> contextlib.AbstractContextManager:  # hook
        """Held for the whole run: ``OUT/train.lock`` (``io_safety.output_lock``)."""
        return output_lock(self.out / "train", what="run directory")

    def _train(self) -> str:
        self._setup()
        c, s = self.config, self.state
        previous_handlers = {sig: signal.signal(sig, self._request_stop) for sig in (signal.SIGINT, signal.SIGTERM)}
        self.lm.train()
        start = time.monotonic() - s["train_seconds"]
        last_checkpoint = last_validation = time.monotonic()
        bar = tqdm(total=c.max_tokens, initial=s["tokens_seen"], unit="tok", desc="training",
                   disable=not (self.progress and self.is_main), smoothing=0.05)
        # the logging window's sums live in the checkpoint, so a resumed run logs the same losses
        window = s.setdefault("log_window", {"loss": 0.0, "n": 0})
        window_loss, window_n, window_tokens, window_start = window["loss"], window["n"], 0, time.monotonic()
        reason, _, _ = self._agree(self._should_stop(time.monotonic() - start), False, False)
        ahead = contextlib.ExitStack()  # the batch-making threads (lm_data.prefetched), stopped on any exit
        try:
            while reason is None and s["epoch"] < c.epochs:
                skip = s["batches_in_epoch"]
                stream = self._epoch_stream(s["epoch"], skip)
                for index, batch in enumerate(ahead.enter_context(stream)):
                    if index < skip:  # replaying the deterministic stream up to where we stopped
                        if self._stop_requested:  # nothing trained yet: the checkpoint stays as it was
                            reason = "interrupted"
                            break
                        continue
                    for group in self.optimizer.param_groups:
                        group["lr"] = self._learning_rate()
                    loss_sum, n = self._step(batch)
                    s["step"] += 1
                    s["batches_in_epoch"] += 1
                    s["tokens_seen"] += batch.n_tokens
                    window_loss += loss_sum
                    window_n += n
                    window_tokens += batch.n_tokens
                    bar.update(batch.n_tokens)
                    if s["step"] % c.log_every == 0:
                        mean = window_loss / window_n
                        rate = window_tokens / max(1e-9, time.monotonic() - window_start)
                        s["loss_curve"].append({"step": s["step"], "tokens_seen": s["tokens_seen"], "loss": mean,
                                                "tokens_per_second": rate})
                        ppl = math.exp(min(mean, 700.0))  # a diverging loss must not end the run in exp()
                        bar.set_postfix(loss=f"{mean:.3f}", ppl=f"{ppl:.1f}", tok_s=f"{rate:.0f}")
                        window_loss, window_n, window_tokens, window_start = 0.0, 0, 0, time.monotonic()
                    s["log_window"] = {"loss": window_loss, "n": window_n}
                    now = time.monotonic()
                    s["train_seconds"] = now - start
                    reason, due_validation, due_checkpoint = self._agree(
                        self._should_stop(s["train_seconds"]), now - last_validation >= c.validate_every_minutes * 60,
                        now - last_checkpoint >= c.checkpoint_every_minutes * 60)
                    if due_validation:
                        if self.is_main:
                            self.validate()
                        last_validation = time.monotonic()
                    if due_checkpoint:
                        self.save_checkpoint()
                        last_checkpoint = time.monotonic()
                    if reason:
                        break
                else:
                    s["epoch"] += 1
                    s["batches_in_epoch"] = 0
            ahead.close()
            reason = reason or "finished"
            if reason == "finished" and s["step"] == 0:
                raise ValueError(f"--train {' '.join(map(str, c.train))}: not one training batch "
                                 "(no sentence fits); nothing trained, nothing exported")
            s["train_seconds"] = time.monotonic() - start
            self.save_checkpoint()
        except (TextFileError, BatchWorkerError):  # a line that is not UTF-8 deep in the corpus, a worker
            # that died: keep the steps trained so far
            if s["step"]:
                self.save_checkpoint()
            raise
        finally:
            ahead.close()
            bar.close()
            lstm_gradient.release_workspace()  # the time loops' kept buffers: hundreds of MB a process keeps no more
            for sig, handler in previous_handlers.items():
                signal.signal(sig, handler)
        log.info("stopped (%s) at step %d after %d tokens", reason, s["step"], s["tokens_seen"])
        return reason

    # -- export
    def _held_out_perplexities(self, evaluate_test: bool) -> dict:
        """The model card's perplexities: the last validation's (or one now), and each test
        file's in fp32 unless ``evaluate_test`` is False."""
        c = self.config
        perplexities = {}
        if c.valid:
            perplexities["valid"] = self.state["validation"][-1] if self.state["validation"] else self.validate()
        if evaluate_test and c.test:
            self.lm.bilm.set_precision("fp32")  # the model card's figures come from the fp32 reference
            try:
                for path in expand_inputs(c.test):
                    sentences = read_sentences([path], self.tokenize, c.max_sentence_tokens)
                    perplexities[path.name] = evaluate_perplexity(self.lm, sentences, self.vocab, c.eval_batch_tokens)
                    log.info("%s: forward ppl %.1f, backward ppl %.1f", path.name,
                             perplexities[path.name]["forward"], perplexities[path.name]["backward"])
            finally:
                self.lm.bilm.set_precision(getattr(self, "precision", "fp32"))
        return perplexities

    def export(self, directory: Path | None = None, evaluate_test: bool = True) -> Path:
        """Write ``options.json``, ``weights.hdf5``, ``vocab.txt``, ``softmax.npz`` and
        ``model_card.json`` into ``directory`` (default ``<out>/model``), holding the folder's lock
        (``DIR.lock``) throughout: a second export into it meanwhile, from another process or
        thread, is refused (``OutputBusy``) instead of mixing its files with these."""
        if not hasattr(self, "lm"):
            self._setup()
        check_finite_weights(self.lm, self.out, self.state["step"])
        directory = Path(directory or self.out / "model")
        directory.parent.mkdir(parents=True, exist_ok=True)  # for DIR.lock
        with output_lock(directory, what="export folder", reentrant=True):  # re-entrant: the command's claim
            return self._export_into(directory, evaluate_test)

    def _export_into(self, directory: Path, evaluate_test: bool) -> Path:
        c, s = self.config, self.state
        directory.mkdir(parents=True, exist_ok=True)
        # room for the weights and the softmax (and the files they replace) before any is written
        ensure_room(directory / "weights.hdf5", 2 * sum(p.numel() * p.element_size() for p in self.lm.parameters()),
                    f"{self.out / 'checkpoint.pt'} (step {s['step']}) is kept: rerun the same command once there "
                    "is room to export it")
        self.lm.eval()
        if self.device.type != "cpu":  # the weight writers read numpy arrays
            self.lm.to("cpu")
        elmo_config = write_model_files(self.lm, self.vocab, c, s["tokens_seen"], directory)
        perplexities = self._held_out_perplexities(evaluate_test)
        card = model_card(directory.name, self.lm, self.vocab, c, s, elmo_config,
                          getattr(self, "precision", "fp32"), perplexities, file_checksum(directory / "weights.hdf5"))
        atomic_write_text(directory / "model_card.json", json.dumps(card, indent=1) + "\n")
        log.info("exported to %s", directory)
        return directory
