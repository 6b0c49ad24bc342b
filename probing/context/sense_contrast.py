"""Does a layer separate a word's senses? Same-sense against different-sense cosines, with a
bootstrap interval of the gap and a permutation test (what the Playground's verdict reads)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass
class SenseContrastTest:
    """Same-sense vs different-sense mean cosine per layer, with its uncertainty.

    Lists have one entry per output layer (L+1). ``gap = within - across``;
    ``gap_low``/``gap_high``: a 95% percentile bootstrap interval of the gap, resampling
    sentences; ``p_value``: one-sided permutation test of "the gap is no larger than with
    random labels" (labels shuffled across sentences, ``n_resamples`` times, add-one corrected).
    """

    within: list[float]
    across: list[float]
    gap: list[float]
    gap_low: list[float]
    gap_high: list[float]
    p_value: list[float]
    n_sentences: int
    n_senses: int
    n_same_pairs: int
    n_different_pairs: int
    n_resamples: int
    seed: int

    ALPHA = 0.05

    def separates(self, layer: int) -> bool:
        """True when ``layer``'s same-sense pairs are reliably closer: p < 0.05 and the
        interval of the gap above 0."""
        return self.p_value[layer] < self.ALPHA and self.gap_low[layer] > 0

    def verdict(self, layer_names: Sequence[str]) -> str:
        """One plain sentence on which layers separate the senses (layer 0 left out: one
        spelling gives one vector there, so its gap is 0 by construction)."""
        layers = range(1, len(self.gap))
        short = [name.split(" (")[0] for name in layer_names]
        good = [j for j in layers if self.separates(j)]
        weak = [j for j in layers if not self.separates(j) and (self.p_value[j] < self.ALPHA or self.gap_low[j] > 0)]
        n = f"{self.n_sentences} sentences, {self.n_senses} senses"
        if good:
            best = max(good, key=lambda j: self.gap[j])
            text = (f"On these {n}, same-sense pairs are reliably more similar than different-sense "
                    f"pairs at {', '.join(short[j] for j in good)} (largest gap at {short[best]}: "
                    f"{self.gap[best]:+.3f}, 95% interval {self.gap_low[best]:+.3f} to "
                    f"{self.gap_high[best]:+.3f}, permutation p = {self.p_value[best]:.3g}).")
        else:
            text = (f"On these {n}, the model does not separate the senses reliably: at no LSTM "
                    f"layer are same-sense pairs more similar than different-sense pairs by both "
                    f"checks (permutation p < {self.ALPHA} and a 95% interval of the gap above 0).")
        if weak:
            text += " Weak evidence only (one check passes, the other does not) at " + "; ".join(
                f"{short[j]}: gap {self.gap[j]:+.3f}, interval {self.gap_low[j]:+.3f} to "
                f"{self.gap_high[j]:+.3f}, p = {self.p_value[j]:.3g}" for j in weak) + "."
        return text

    def against_baseline(self, layer_names: Sequence[str], baseline: Sequence[float]) -> str:
        """The same and different-sense cosines read against the anisotropy baseline (one mean
        cosine per layer between random words in random sentences, e.g.
        ``probing.context.contextuality.anisotropy_baseline``), LSTM layers only, in plain sentences:
        how far above the baseline each kind of pair sits, and what share of the same-sense
        pairs' rise the senses account for."""
        if len(baseline) != len(self.gap):
            raise ValueError(f"the baseline has {len(baseline)} layers, the test {len(self.gap)}")
        short = [name.split(" (")[0] for name in layer_names]
        layers = range(1, len(self.gap))
        values = ", ".join(f"{short[j]} {baseline[j]:.3f}" for j in layers)
        parts = []
        for j in layers:
            rise_same, rise_diff = self.within[j] - baseline[j], self.across[j] - baseline[j]
            share = f" (the gap is {100 * self.gap[j] / rise_same:.1f}% of the same-sense rise)" if rise_same > 0 else ""
            parts.append(f"at {short[j]}, same-sense pairs {rise_same:+.3f} and different-sense pairs "
                         f"{rise_diff:+.3f}{share}")
        text = (f"Against the anisotropy baseline (the mean cosine of random words in random sentences: "
                f"{values}): " + "; ".join(parts) + ".")
        if not any(self.separates(j) for j in layers):
            text += (" Different-sense pairs sit above the baseline too: what makes the occurrences alike is "
                     "the word, not its sense." if all(self.across[j] > baseline[j] for j in layers) else "")
        return text


def sense_contrast_test(similarity: np.ndarray, occurrences: Sequence[tuple[int, int]], senses: Sequence[str | None],
                        contrast: dict[str, list[float]], n_resamples: int = 2000, seed: int = 0) -> SenseContrastTest:
    """The gap between ``contrast``'s same-sense and different-sense mean cosines, per layer,
    with its uncertainty. ``similarity``: (L+1, N, N) cosines between the N ``occurrences``
    ((context, token) pairs); ``senses[k]``: context k's label or None; ``contrast``: what
    ``PlaygroundResult.sense_contrast`` gives for them. Sentences, not pairs, are resampled."""
    rng = np.random.default_rng(seed)
    keep = [i for i, (k, _) in enumerate(occurrences) if senses[k] is not None]
    contexts = [occurrences[i][0] for i in keep]
    sim = similarity[:, keep][:, :, keep]  # (L+1, M, M)
    context_ids = sorted(set(contexts))
    label_of = {k: senses[k] for k in context_ids}
    names = sorted(set(label_of.values()))
    code = np.array([names.index(label_of[k]) for k in contexts])
    where = np.array([context_ids.index(k) for k in contexts])  # occurrence -> context slot
    upper = np.triu(np.ones((len(keep), len(keep)), dtype=bool), k=1)

    def gap(labels_of_occurrence: np.ndarray, pair_mask: np.ndarray, s: np.ndarray) -> np.ndarray | None:
        same = (labels_of_occurrence[:, None] == labels_of_occurrence[None, :]) & pair_mask
        diff = (labels_of_occurrence[:, None] != labels_of_occurrence[None, :]) & pair_mask
        if not same.any() or not diff.any():
            return None
        return s[:, same].mean(axis=1) - s[:, diff].mean(axis=1)

    observed = np.asarray(contrast["within"]) - np.asarray(contrast["across"])
    context_codes = np.array([names.index(label_of[k]) for k in context_ids])
    exceed = np.zeros(len(observed))
    counted = 0
    for _ in range(n_resamples):
        shuffled = rng.permutation(context_codes)[where]
        g = gap(shuffled, upper, sim)
        if g is not None:
            exceed += g >= observed - 1e-12
            counted += 1
    p_value = (1.0 + exceed) / (1.0 + counted)

    boot = []
    for _ in range(n_resamples):
        drawn = rng.integers(0, len(context_ids), len(context_ids))
        members = np.concatenate([np.flatnonzero(where == c) for c in drawn])
        copy = np.concatenate([np.full(int((where == c).sum()), t) for t, c in enumerate(drawn)])
        # pairs of two different draws; a sentence drawn twice is not compared with itself
        mask = np.triu(copy[:, None] != copy[None, :], k=1) & (members[:, None] != members[None, :])
        g = gap(code[members], mask, sim[:, members][:, :, members])
        if g is not None:
            boot.append(g)
    boot = np.array(boot) if boot else np.full((1, len(observed)), np.nan)
    low, high = np.nanpercentile(boot, [2.5, 97.5], axis=0)
    same_pairs = int(((code[:, None] == code[None, :]) & upper).sum())
    return SenseContrastTest(
        within=list(contrast["within"]), across=list(contrast["across"]), gap=observed.tolist(),
        gap_low=low.tolist(), gap_high=high.tolist(), p_value=p_value.tolist(),
        n_sentences=len(context_ids), n_senses=len(names), n_same_pairs=same_pairs,
        n_different_pairs=int(upper.sum()) - same_pairs, n_resamples=n_resamples, seed=seed)
