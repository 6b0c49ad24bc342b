"""How the probing suite trains and scores its probes (:class:`SuiteConfig`, JSON round-trip:
a saved config with a key this version does not know is refused, never half-read)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from probing.engine.envelope import JsonDataclass


#: what a run adds to its config in ``SuiteResult.config``: the layers probed and the precision the
#: probes' products ran in (not settings: a saved result's config is read back without them)
RUN_RECORD_KEYS = ("layers", "probe_products")


@dataclass(frozen=True)
class SuiteConfig(JsonDataclass, strict=True):
    """How the suite trains and scores its probes (defaults measured in bench/probe_suite.py).

    - ``alphas``: the L2 path ``fit_on_dev`` walks (strongest first; stops early on dev). On
      full EWT with a 512-d biLM, 1e-2 was never chosen (dev 1.5-3 points below 1e-3), and
      1e-4 was best on all three layers, so the default path is 1e-3 -> 1e-4.
    - ``max_iter``: L-BFGS iterations per fit (whitened features: ~30 reach the dev optimum);
      ``warm_max_iter`` for the warm-started fits along the path (15 scored within 0.1 point of
      30 on dev in our measurements).
    - ``preprocess``, ``shrinkage``: the probes' feature preprocessing (``probing.tagging.probes``).
    - ``mix_seeds``: how many seeds train the scalar-mix probe; ``mix_max_iter`` its iterations;
      ``mix_l2`` the pull of s_j towards the layer average (``ScalarMixProbe.mix_l2``). The mix
      is not convex and its loss is nearly flat along some mixes: different seeds can end at
      different s_j, which is what the spread over seeds reports.
    - ``halves``, ``control``, ``random_bilm``, ``mix``: which parts to run. The direction
      halves and the control task are trained at the alpha their layer's probe chose on dev
      (one fit each: Hewitt & Liang's "same probe"); the scalar mix at the best layer's alpha.
    - ``train_fraction``: share of each task's training sentences (evenly spaced) every probe is
      trained on; 1.0 (the default) trains on all of them, as the published figures do. Dev and
      test are never sampled, so the intervals stay over the whole test set. A quicker look
      samples (``--train-fraction``): the training split's extraction and the fits cost about that
      share; what it moves and saves is measured in docs/probe-results.md (*Time*).
    - ``random_bilm_train_fraction``: share of the training sentences (evenly spaced, counted on
      the whole training split) the random-biLM probes are trained on, taken from the sentences
      ``train_fraction`` kept; the model's own probe on the same subset is reported beside them.
      Its extraction costs as much as the model's own: this keeps the cold suite within its
      time budget.
    - ``n_bootstrap``, ``level``: bootstrap resamples and coverage of the intervals.
    - ``batch_size``, ``dtype``: activation extraction and storage.
    - ``precision``: the biLM's matrix products, "fp32", "bf16" or "auto" (bf16 where this
      machine's bf16 units pay; ``elmo_model.bilm.precision``). A run records what it resolved to, and
      its caches are kept apart from the other precision's.
    - ``probe_cache``: reuse cached probe results.
    """

    alphas: tuple[float, ...] = (1e-3, 1e-4)
    max_iter: int = 30
    warm_max_iter: int = 15
    preprocess: str = "whiten"
    shrinkage: float = 1e-2
    mix: bool = True
    mix_seeds: int = 3
    mix_max_iter: int = 30
    mix_l2: float = 0.0
    halves: bool = True
    control: bool = True
    random_bilm: bool = True
    train_fraction: float = 1.0
    random_bilm_train_fraction: float = 0.25
    n_bootstrap: int = 1000
    level: float = 0.95
    batch_size: int = 64
    dtype: str = "float32"
    probe_cache: bool = True
    precision: str = "auto"

    def __post_init__(self) -> None:
        for name in ("train_fraction", "random_bilm_train_fraction"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
                raise ValueError(f"{name} {value!r}: expected a share of the training sentences, in (0, 1]")

    def probe_key(self) -> dict:
        """The settings a probe's result depends on (the probe cache key)."""
        return {k: getattr(self, k) for k in ("alphas", "max_iter", "preprocess", "shrinkage",
                                              "mix_max_iter", "mix_l2", "n_bootstrap", "level")}


def add_train_fraction_argument(parser: argparse.ArgumentParser, default: float | None,
                                shown: float | None = None) -> None:
    """``--train-fraction F``: the share of each task's training sentences the probes train on
    (``default`` None: the caller resolves it, and the help says ``shown``)."""
    def share(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not 0 < value <= 1:
            raise argparse.ArgumentTypeError(f"expected a share of the training sentences in (0, 1], got {text!r}")
        return value

    parser.add_argument("--train-fraction", type=share, default=default, metavar="F",
                        help="train every probe on this share of each task's training sentences, evenly spaced; "
                             "dev and test are never sampled (1: all of them, as the published figures; "
                             f"default: {default if default is not None else shown})")
