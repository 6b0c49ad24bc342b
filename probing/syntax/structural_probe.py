"""The structural probe of Hewitt & Manning (2019): a linear map B per layer whose squared
distances approximate tree distances (or whose squared norms approximate depths), trained alone
(``StructuralProbe.fit``) or several at once on the same batches (:func:`fit_jointly`).
:mod:`probing.syntax.structural` runs it on EWT."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import torch

log = logging.getLogger(__name__)

PROBE_KINDS = ("distance", "depth")


class StructuralProbe:
    """Hewitt & Manning (2019)'s structural probe: a linear map B (``rank`` x d).

    ``kind="distance"``: ``d_B(h_i, h_j) = ||B (h_i - h_j)||^2`` approximates the tree distance;
    ``kind="depth"``: ``||B h_i||^2`` approximates the depth. Trained with Adam (``lr``) on
    batches of ``batch_size`` sentences; the loss of a sentence of length T is
    ``sum |predicted - gold| / T^2`` over its pairs (``/ T`` over its tokens for depth). After each
    epoch the dev loss decides: the best B is kept, the learning rate is halved when the dev loss
    does not improve, and training stops after ``patience`` epochs without improvement or at
    ``max_epochs``. B starts uniform in [-0.05, 0.05], drawn from ``random_state``.

    Learned: ``B_`` (rank, d) float32, ``n_epochs_``, ``dev_loss_`` (best), ``train_loss_``.
    """

    def __init__(self, kind: str = "distance", rank: int = 64, lr: float = 1e-3, batch_size: int = 20,
                 max_epochs: int = 30, patience: int = 3, random_state: int | None = 0) -> None:
        self.kind = kind
        self.rank = rank
        self.lr = lr
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.patience = patience
        self.random_state = random_state

    # -- training -------------------------------------------------------------------------------
    def _forward(self, B: torch.Tensor, xb: torch.Tensor) -> torch.Tensor:
        return _predicted(self.kind, xb @ B.T)

    def fit(self, X: Sequence[np.ndarray], targets: Sequence[np.ndarray], X_dev: Sequence[np.ndarray] | None = None,
            targets_dev: Sequence[np.ndarray] | None = None) -> "StructuralProbe":
        """``X``: one (T_i, d) array per sentence; ``targets``: gold (T_i, T_i) distances or (T_i,)
        depths. Without a dev set the training loss decides when to stop."""
        fit_jointly([self], X, {self.kind: targets}, X_dev,
                    None if targets_dev is None else {self.kind: targets_dev})
        return self

    def predict(self, X: Sequence[np.ndarray]) -> list[np.ndarray]:
        """Predicted squared distances (T_i, T_i) or squared norms (T_i,), one array per sentence."""
        if not hasattr(self, "B_"):
            raise RuntimeError("this StructuralProbe is not fitted yet: call fit() first")
        B = torch.from_numpy(self.B_)
        out = []
        with torch.no_grad():
            for x in X:
                out.append(self._forward(B, torch.from_numpy(np.asarray(x, dtype=np.float32)).unsqueeze(0))[0].numpy())
        return out


def _predicted(kind: str, z: torch.Tensor) -> torch.Tensor:
    """Predicted squared depths (b, T) or squared distances (b, T, T) from projections z (b, T, rank)."""
    norms = (z * z).sum(-1)  # (b, T)
    if kind == "depth":
        return norms
    # ||z_i - z_j||^2 = |z_i|^2 + |z_j|^2 - 2 z_i.z_j: (b, T, T) instead of a (b, T, T, rank) difference
    return (norms.unsqueeze(2) + norms.unsqueeze(1) - 2.0 * z @ z.transpose(1, 2)).clamp_min(0.0)


@dataclass
class _Batch:
    """Sentences padded once for every epoch: vectors (b, T, d), gold targets per kind, lengths,
    the token mask (b, T) and the pair mask (b, T, T)."""

    x: torch.Tensor
    targets: dict[str, torch.Tensor]
    lengths: torch.Tensor
    valid: torch.Tensor
    pairs: torch.Tensor

    def loss(self, kind: str, pred: torch.Tensor) -> torch.Tensor:
        """The paper's L1 loss: per sentence over its pairs / T^2 (tokens / T for depth), mean over the batch."""
        gold = self.targets[kind]
        if kind == "depth":
            per = ((pred - gold).abs() * self.valid).sum(-1) / self.lengths
        else:
            per = ((pred - gold).abs() * self.pairs).sum((-1, -2)) / self.lengths ** 2
        return per.mean()


def _padded_batches(X: Sequence[np.ndarray], targets: Mapping[str, Sequence[np.ndarray]], batch_size: int
                    ) -> list[_Batch]:
    """``X`` in batches of ``batch_size`` sentences of similar lengths (sorted, stable), padded."""
    order = np.argsort([len(x) for x in X], kind="stable")
    batches = []
    for start in range(0, len(order), batch_size):
        index = order[start:start + batch_size]
        lengths = torch.tensor([len(X[i]) for i in index])
        T, d = int(lengths.max()), X[index[0]].shape[1]
        x = torch.zeros(len(index), T, d)
        gold = {kind: torch.zeros((len(index), T, T) if kind == "distance" else (len(index), T)) for kind in targets}
        for row, i in enumerate(index):
            x[row, : len(X[i])] = torch.from_numpy(np.asarray(X[i], dtype=np.float32))
            for kind, ts in targets.items():
                t = torch.from_numpy(np.asarray(ts[i], dtype=np.float32))
                if kind == "distance":
                    gold[kind][row, : len(t), : len(t)] = t
                else:
                    gold[kind][row, : len(t)] = t
        valid = torch.arange(T).unsqueeze(0) < lengths.unsqueeze(1)
        batches.append(_Batch(x, gold, lengths.float(), valid, valid.unsqueeze(2) & valid.unsqueeze(1)))
    return batches


def _check_joint_fit(probes: list[StructuralProbe], X: Sequence[np.ndarray],
                     targets: Mapping[str, Sequence[np.ndarray]], X_dev: Sequence[np.ndarray] | None,
                     targets_dev: Mapping[str, Sequence[np.ndarray]] | None) -> list[str]:
    """The kinds of ``probes``, sorted; ValueError unless they can train together on these
    sentences (known kinds, one batch size, one target of each kind per sentence, train and dev)."""
    if not probes:
        raise ValueError("fit_jointly needs at least one probe")
    for p in probes:
        if p.kind not in PROBE_KINDS:
            raise ValueError(f"kind must be one of {PROBE_KINDS}, got {p.kind!r}")
    if len({p.batch_size for p in probes}) != 1:
        raise ValueError(f"probes trained together share a batch size, got {sorted({p.batch_size for p in probes})}")
    kinds = sorted({p.kind for p in probes})
    for kind in kinds:
        if kind not in targets or not X or len(X) != len(targets[kind]):
            raise ValueError(f"need one {kind} target per sentence and at least one: {len(X)} sentences, "
                             f"{len(targets.get(kind, ()))} targets")
    if X_dev is not None and (targets_dev is None or any(kind not in targets_dev or len(targets_dev[kind]) != len(X_dev)
                                                         for kind in kinds)):
        raise ValueError("need one dev target of each kind per dev sentence")
    return kinds


def fit_jointly(probes: Sequence[StructuralProbe], X: Sequence[np.ndarray], targets: Mapping[str, Sequence[np.ndarray]],
                X_dev: Sequence[np.ndarray] | None = None,
                targets_dev: Mapping[str, Sequence[np.ndarray]] | None = None) -> list[StructuralProbe]:
    """Train several structural probes on the same sentences at once; returns them, fitted.

    ``probes``: of any kinds and ranks, with one ``batch_size``; ``targets`` / ``targets_dev``: for
    each of their kinds, the gold distances (T_i, T_i) or depths (T_i,) of every sentence (without
    a dev set the training sentences decide when to stop). Each batch is padded once and projected
    by one matrix product for all the probes, while each probe keeps its own B (drawn from its
    ``random_state``), Adam state, learning-rate halving and early stopping, as in ``fit`` alone;
    the batch order is shuffled each epoch from the first probe's ``random_state``. A batch of 20
    sentences is little arithmetic and much per-step overhead, so training distance and depth at
    two ranks together costs a fraction of four separate fits.
    """
    probes = list(probes)
    kinds = _check_joint_fit(probes, X, targets, X_dev, targets_dev)
    if X_dev is None:
        X_dev, targets_dev = X, targets
    d = X[0].shape[1]
    batches = _padded_batches(X, {k: targets[k] for k in kinds}, probes[0].batch_size)
    dev_batches = _padded_batches(X_dev, {k: targets_dev[k] for k in kinds}, probes[0].batch_size)
    seed = probes[0].random_state
    shuffle = np.random.default_rng(None if seed is None else [seed, 1])
    B = [torch.tensor(np.random.default_rng(p.random_state).uniform(-0.05, 0.05, (int(p.rank), d)),
                      dtype=torch.float32, requires_grad=True) for p in probes]
    optimizer = torch.optim.Adam([{"params": [b], "lr": p.lr} for b, p in zip(B, probes)])
    best = [b.detach().clone() for b in B]
    best_dev = [math.inf] * len(probes)
    stale = [0] * len(probes)
    epochs = [0] * len(probes)
    train_loss = [math.nan] * len(probes)
    active = list(range(len(probes)))

    def losses(batch: _Batch, which: list[int]) -> list[torch.Tensor]:
        """Each probe's loss on ``batch``: one projection for all of them, split by columns."""
        joint = B[which[0]] if len(which) == 1 else torch.cat([B[k] for k in which])
        z = batch.x @ joint.T  # (b, T, sum of ranks)
        out, start = [], 0
        for k in which:
            rank = B[k].shape[0]
            out.append(batch.loss(probes[k].kind, _predicted(probes[k].kind, z[..., start:start + rank])))
            start += rank
        return out

    while active:
        running = dict.fromkeys(active, 0.0)
        for i in shuffle.permutation(len(batches)):
            batch = batches[i]
            per_probe = losses(batch, active)
            optimizer.zero_grad()
            torch.stack(per_probe).sum().backward()  # each B's gradient is its own probe's
            optimizer.step()
            for k, loss in zip(active, per_probe):
                running[k] += float(loss.detach()) * len(batch.lengths)
        dev = dict.fromkeys(active, 0.0)
        with torch.no_grad():
            for batch in dev_batches:
                for k, loss in zip(active, losses(batch, active)):
                    dev[k] += float(loss) * len(batch.lengths)
        for k in list(active):
            p = probes[k]
            epochs[k] += 1
            train_loss[k] = running[k] / len(X)
            dev_loss = dev[k] / max(1, len(X_dev))
            log.debug("%s probe rank %d epoch %d: train %.4f dev %.4f", p.kind, p.rank, epochs[k], train_loss[k],
                      dev_loss)
            if dev_loss < best_dev[k] - 1e-4:
                best[k], best_dev[k], stale[k] = B[k].detach().clone(), dev_loss, 0
            else:
                stale[k] += 1
                optimizer.param_groups[k]["lr"] *= 0.5
            if stale[k] >= p.patience or epochs[k] >= p.max_epochs:
                active.remove(k)  # no longer in the loss: no gradient, so Adam leaves its B alone
    for k, p in enumerate(probes):
        p.B_ = best[k].numpy()
        p.dev_loss_, p.train_loss_, p.n_epochs_ = float(best_dev[k]), float(train_loss[k]), epochs[k]
    return probes
