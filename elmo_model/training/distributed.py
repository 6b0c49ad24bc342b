"""The trainer on several processes or machines: torchrun + DistributedDataParallel.

    torchrun --nproc_per_node 2 -m elmo_model.training.train --train 'corpus/*.txt.gz' --out runs/my-elmo
    torchrun --nnodes 2 --node_rank 0 --nproc_per_node 8 --rdzv_backend c10d \\
        --rdzv_endpoint HOST:29500 -m elmo_model.training.train --device cuda ...   # one line per node

``python -m elmo_model.training.train`` notices torchrun (``WORLD_SIZE`` > 1) and hands the run to
``DistributedTrainer``; without torchrun nothing here is used and the single-process trainer runs
exactly as before.

How the work is split, and why the result equals a one-process run
------------------------------------------------------------------
Every rank walks the same deterministic, seeded stream of *global* batches
(``lm_data.sentence_groups``: the very batches one process would train on) and materialises only
its share of each: the sentences ``rank, rank + N, rank + 2N, ...`` of the length-sorted batch,
so shares are balanced in length (the shard is a function of rank, world size and seed). Each rank
scales its summed negative log-likelihood by ``N / (2 * predictions in the global batch)``; DDP
averages gradients over the N ranks, so the averaged gradient is exactly the gradient of the
global batch's mean loss, i.e. what one process computes (up to the order of float additions).
Gradient clipping and Adam then see identical gradients on every rank. With ``dropout`` > 0
each rank draws its own masks, so the run is equivalent in distribution, not bit for bit.

The softmax is PyTorch's adaptive softmax: exact, with no sampled negatives, so there is nothing
random in the loss that ranks could disagree on (the "consistent negatives" concern of a sampled
softmax does not arise). Tail clusters that no target in a rank's share needs get no gradient on
that rank, hence ``find_unused_parameters=True``.

Cost of this choice: every rank tokenises the whole stream, in its prefetching thread (pre-tokenised
shards would remove it; ``--batch-workers`` is the single-process trainer's and is not used here)
but builds character ids and runs the model on its share only. A global batch with fewer sentences than ranks gives the ranks left over one placeholder
sentence with weight 0, so that every rank still joins the gradient all-reduce.

One job per run directory: rank 0 takes ``OUT/train.lock`` (as the single-process trainer does)
for the whole job and tells every rank whether it got it, before any rank reads or writes the
directory; a second job's ranks then all stop (exit code 2), rank 0 saying why in one line.
Rank 0 alone validates, logs (the others log warnings only), writes ``checkpoint.pt`` (fsynced,
then renamed into place) and exports.
All ranks agree every step, in one tiny all-reduce, on whether to stop (a budget, or SIGTERM /
Ctrl-C on any rank), validate or checkpoint, so no rank is left waiting in a collective. The
checkpoint holds the model and optimizer (identical on every rank) plus every rank's RNG state;
rerunning the same torchrun command with the same N resumes exactly. ``--out`` must be a directory
every node can read (a shared filesystem), since all ranks load the checkpoint and vocabulary.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from dataclasses import dataclass
from typing import Callable, Iterator, Sequence

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from ..plumbing.io_safety import OutputBusy
from .checkpoint import write_checkpoint
from .lm_data import make_batch, sentence_groups
from .trainer import TrainConfig, Trainer
from .vocab import Vocabulary

log = logging.getLogger(__name__)

# stop reasons in increasing priority (the all-reduce takes the maximum over ranks)
_STOP_REASONS = (None, "max_steps", "max_tokens", "max_hours", "interrupted")



@contextlib.contextmanager
def claimed_by_rank_zero(claim: Callable[[], contextlib.AbstractContextManager], is_main: bool):
    """``claim()`` (an output lock) taken by rank 0 and held for the block, its answer broadcast to
    every rank: a busy output stops rank 0 with ``OutputBusy`` (its one message) and the others with
    ``ReportedByRankZero`` (silent), before any of them goes on. A collective: every rank calls it."""
    with contextlib.ExitStack() as held:
        problem = None
        if is_main:
            try:
                held.enter_context(claim())
            except OutputBusy as err:
                problem = str(err)
        message = [problem]
        dist.broadcast_object_list(message, src=0)
        if message[0] is not None:
            raise OutputBusy(message[0]) if is_main else ReportedByRankZero(message[0])
        yield

class ReportedByRankZero(ValueError):
    """A problem every rank stops for and rank 0 reports: the other ranks exit without repeating it."""


@dataclass(frozen=True)
class DistributedContext:
    """Where this process sits in a torchrun job (from torchrun's environment variables)."""

    rank: int
    world_size: int
    local_rank: int

    @classmethod
    def from_environment(cls) -> "DistributedContext":
        """Read ``RANK``, ``WORLD_SIZE`` and ``LOCAL_RANK`` as torchrun sets them."""
        try:
            return cls(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", "0")))
        except KeyError as err:
            raise ValueError(f"{err.args[0]} is not set: start distributed training with "
                             "`torchrun --nproc_per_node N -m elmo_model.training.train ...`") from None

    @property
    def is_main(self) -> bool:
        return self.rank == 0


def launched_by_torchrun() -> bool:
    """True inside a torchrun job of more than one process."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def shutdown() -> None:
    """Leave the process group if this process joined one (no-op otherwise)."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


@dataclass
class ShardedBatch:
    """One rank's share of a global batch. ``sentences``: this rank's sentences; ``weight``: 1, or
    0 for a placeholder share (the global batch had fewer sentences than ranks); ``n_tokens`` and
    ``n_predictions`` (per direction) count the whole global batch, so progress, budgets and the
    loss normalisation are the ones a single process would use."""

    sentences: list[list[str]]
    weight: float
    n_tokens: int
    n_predictions: int


def share_of(group: Sequence[list[str]], rank: int, world_size: int) -> ShardedBatch:
    """Rank ``rank``'s share of a length-sorted global batch: every ``world_size``-th sentence
    (balanced lengths). A global batch has ``len(s) + 1`` predictions per sentence and direction."""
    if not group:
        raise ValueError("empty global batch")
    mine = list(group[rank::world_size])
    weight = 1.0
    if not mine:
        mine, weight = [list(group[0])], 0.0
    return ShardedBatch(mine, weight, sum(len(s) for s in group), sum(len(s) + 1 for s in group))


class DistributedTrainer(Trainer):
    """``Trainer`` on one rank of a torchrun job (see the module docstring for the contract)."""

    def __init__(self, config: TrainConfig, context: DistributedContext, tokenize: Callable | None = None,
                 progress: bool = True, **init) -> None:
        self.context = context
        self.is_main = context.is_main
        if config.device.startswith("cuda"):
            if not torch.cuda.is_available():
                raise ValueError("--device cuda but torch sees no GPU (torch.cuda.is_available() is False)")
            self._device = torch.device("cuda", context.local_rank)
            torch.cuda.set_device(self._device)
            backend = "nccl"
        else:
            self._device = torch.device(config.device)
            backend = "gloo"
        if not self.is_main:  # rank 0 alone logs
            logging.getLogger("elmo_model").setLevel(logging.WARNING)
        if not dist.is_initialized():
            dist.init_process_group(backend, rank=context.rank, world_size=context.world_size)
        # small control tensors travel on the backend's device (NCCL needs them on the GPU)
        self._control_device = self._device if backend == "nccl" else torch.device("cpu")
        super().__init__(config, tokenize, progress, **init)  # init: init_from / init_warmup_steps
        log.info("rank %d of %d (%s, %s)", context.rank, context.world_size, backend, self._device)

    @property
    def device(self) -> torch.device:
        return self._device

    # -- set-up: rank 0 writes the run directory, everyone reads it
    def _setup(self) -> None:
        problem = None
        if self.is_main:
            try:
                self._check_config()
                self.vocab = self._vocabulary()
            except (ValueError, FileNotFoundError) as err:
                problem = str(err)
        message = [problem]
        dist.broadcast_object_list(message, src=0)  # also the barrier: vocab.txt exists after it
        if message[0] is not None:
            raise ValueError(message[0]) if self.is_main else ReportedByRankZero(message[0])
        if not self.is_main:
            self._check_config(write=False)
            self.vocab = Vocabulary.load(self.out / "vocab.txt")
        saved = self._build_model()
        rank, world = self.context.rank, self.context.world_size
        if saved is None:
            # same initial weights everywhere (seeded in _build_model); each rank its own dropout masks
            torch.manual_seed(self.config.seed * 1_000_003 + rank)
        elif saved.get("world_size") == world:
            torch.set_rng_state(saved["torch_rng_per_rank"][rank])
            if "cuda_rng_per_rank" in saved and self.device.type == "cuda":
                torch.cuda.set_rng_state(saved["cuda_rng_per_rank"][rank], self.device)
        else:
            log.warning("checkpoint written by %s ranks, resuming on %d: the batch stream continues exactly, "
                        "dropout masks do not", saved.get("world_size", 1), world)
            torch.manual_seed(self.config.seed * 1_000_003 + rank + 7919 * self.state["step"])
        self.ddp = DistributedDataParallel(self.lm, device_ids=[self.device.index] if self.device.type == "cuda" else None,
                                           find_unused_parameters=True)

    @contextlib.contextmanager
    def _run_directory_lock(self):
        """Rank 0 holds ``OUT/train.lock`` for the job and broadcasts whether it got it, so every
        rank of a second job on the same directory stops before touching it (the lock file lives
        on rank 0's machine only; the broadcast carries it to the others)."""
        with claimed_by_rank_zero(super()._run_directory_lock, self.is_main):
            yield

    # -- the data: every rank walks the global stream, keeps its share
    def _batch_workers(self) -> int:
        """0: a rank makes its share's batches in its step and tokenises in its thread (the ranks are
        processes already); ``--batch-workers`` applies to the single-process trainer."""
        if self.config.batch_workers:
            log.warning("--batch-workers %d: not under torchrun; each rank tokenises in a thread",
                        self.config.batch_workers)
        return 0

    def _epoch_batches(self, epoch: int) -> Iterator[ShardedBatch]:  # type: ignore[override]
        c = self.config
        for group in sentence_groups(self._epoch_sentences(epoch), c.batch_tokens, seed=c.seed * 1000 + epoch):
            yield share_of(group, self.context.rank, self.context.world_size)

    def _step(self, batch: ShardedBatch) -> tuple[float, int]:  # type: ignore[override]
        c, world = self.config, self.context.world_size
        local = make_batch(batch.sentences, self.vocab)
        if self.device.type != "cpu":
            local = local.to(self.device)
        with self._autocast():
            fw_nll, bw_nll, _ = self.ddp(local)
            nll = fw_nll + bw_nll
            # DDP averages over ranks: x world / (2 N_global) makes it the global batch's mean loss
            loss = nll * (batch.weight * world / (2 * batch.n_predictions))
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(self.lm.parameters(), c.grad_clip or math.inf)  # inf: measured only
        self._refuse_non_finite(grad_norm)  # the all-reduced gradients: every rank stops at the same step
        self.optimizer.step()
        total = (nll.detach().float() * (batch.weight / 2)).reshape(1).to(self._control_device)
        dist.all_reduce(total)
        return float(total), batch.n_predictions

    def _agree(self, reason: str | None, validate: bool, checkpoint: bool) -> tuple[str | None, bool, bool]:
        flags = torch.tensor([_STOP_REASONS.index(reason), int(validate), int(checkpoint)], dtype=torch.int64,
                             device=self._control_device)
        dist.all_reduce(flags, op=dist.ReduceOp.MAX)
        code, validate_any, checkpoint_any = (int(x) for x in flags.tolist())
        return _STOP_REASONS[code], bool(validate_any), bool(checkpoint_any)

    def save_checkpoint(self) -> None:
        """Collective: every rank contributes its RNG state; rank 0 writes the file."""
        world = self.context.world_size
        rng_states: list = [None] * world
        dist.all_gather_object(rng_states, torch.get_rng_state())
        cuda_states: list = [None] * world
        if self.device.type == "cuda":
            dist.all_gather_object(cuda_states, torch.cuda.get_rng_state(self.device).cpu())
        if self.is_main:
            payload = {"model": self.lm.state_dict(), "optimizer": self.optimizer.state_dict(),
                       "torch_rng": rng_states[0], "torch_rng_per_rank": rng_states, "world_size": world,
                       "progress": self.state}
            if self.device.type == "cuda":
                payload["cuda_rng_per_rank"] = cuda_states
            write_checkpoint(payload, self.out / "checkpoint.pt", self._checkpoint_step)
        dist.barrier()  # nobody reads or rewrites the run directory before the file is in place
        self._checkpoint_step = self.state["step"]


def trainer_for_environment(config: TrainConfig, tokenize: Callable | None = None,
                            progress: bool = True, **init) -> DistributedTrainer:
    """The trainer for this torchrun rank (joins the process group); ``init`` as ``Trainer``'s
    ``init_from`` / ``init_warmup_steps``."""
    return DistributedTrainer(config, DistributedContext.from_environment(), tokenize, progress, **init)
