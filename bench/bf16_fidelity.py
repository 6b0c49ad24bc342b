"""What bf16 costs in fidelity: bf16 vs fp32 vectors, probes and 1-NN WSD, in one run.

    python bench/bf16_fidelity.py                       # elmo-mini: vectors on EWT dev, probes, WSD
    python bench/bf16_fidelity.py --full-size --sentences 300 --no-probes --no-wsd
    python bench/bf16_fidelity.py --model ../shared/fixtures/bilm_tf --sentences 20 --limit 20 --semcor-limit 50

1. Vectors: every layer of every token of the UD English-EWT dev set (or its first
   ``--sentences``), fp32 vs bf16: max |difference|, mean and minimum cosine, per layer.
2. Probes (``--no-probes`` to skip): the suite's POS (EWT XPOS) and chunking (CoNLL-2000) linear
   probes per layer, trained and scored on fp32 activations and on bf16 activations (no control
   task, halves, mix or random biLM): each bf16 score beside the fp32 score's 95% bootstrap interval.
3. WSD (``--no-wsd`` to skip): 1-NN WSD per layer on SemCor sense centroids (the first
   ``--semcor-limit`` sentences in both precisions), F1 on the four test sets, with a 95% Wilson
   interval on the fp32 figure (instances as independent trials).

bf16 is the real thing where this CPU's bf16 units pay (``elmo_model.bilm.precision.bf16_support``);
elsewhere it is emulated (``bf16-emulated``: the same roundings of operands and products with
fp32 arithmetic; tests/test_precision.py checks it equals the bf16 kernels), because PyTorch's
reference bf16 kernels on such a CPU are hundreds of times slower than fp32. Caches go under
``--cache-dir`` (default: the user cache), so a rerun only recomputes what changed.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.bilm_throughput import FULL_SIZE, model_from_options  # noqa: E402
from elmo_model.bilm.char_ids import batch_to_char_ids  # noqa: E402
from elmo_model.bilm.precision import EMULATED_BF16, bf16_support  # noqa: E402
from elmo_model.models.registry import load_bilm  # noqa: E402
from probing.senses.wsd import FOUR_SETS, evaluate_wsd  # noqa: E402
from probing.tagging.suite import run_suite  # noqa: E402
from probing.tagging.suite_config import SuiteConfig  # noqa: E402
from probing.tagging.tasks import load_task  # noqa: E402


def ewt_dev_sentences(data_root: Path | None, limit: int | None) -> list[list[str]]:
    return [list(s.tokens) for s in load_task("pos", "dev", data_root=data_root, limit=limit)]


def vector_fidelity(model, sentences: list[list[str]], bf16: str, batch_size: int = 32) -> list[dict]:
    """Per layer: max |fp32 - bf16|, mean and min cosine over every token."""
    n_layers = model.config.n_output_layers
    max_abs, cos_sum, cos_min, n = [0.0] * n_layers, [0.0] * n_layers, [1.0] * n_layers, 0
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i]))
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            ids = batch_to_char_ids([sentences[i] for i in order[start : start + batch_size]])
            model.set_precision("fp32")
            reference = model(ids)
            model.set_precision(bf16)
            rounded = model(ids)
            mask = reference.mask
            for j, (a, b) in enumerate(zip(reference.layers, rounded.layers)):
                a, b = a[mask], b[mask]
                cos = torch.nn.functional.cosine_similarity(a, b, dim=-1)
                max_abs[j] = max(max_abs[j], float((a - b).abs().max()))
                cos_sum[j] += float(cos.sum())
                cos_min[j] = min(cos_min[j], float(cos.min()))
            n += int(mask.sum())
    model.set_precision("fp32")
    return [{"layer": j, "max_abs": max_abs[j], "mean_cos": cos_sum[j] / n, "min_cos": cos_min[j], "tokens": n}
            for j in range(n_layers)]


def full_size_random_model():
    model = model_from_options(FULL_SIZE)
    model.name = "full-size ELMo shape (random weights)"
    return model


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return 100 * (centre - half), 100 * (centre + half)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="elmo-mini", help="shipped name or model directory (default: %(default)s)")
    parser.add_argument("--full-size", action="store_true", help="the full-size ELMo shape with random weights instead")
    parser.add_argument("--sentences", type=int, default=None, help="first N EWT dev sentences (default: all)")
    parser.add_argument("--limit", type=int, default=None,
                        help="first N sentences of every split the probes read (default: all)")
    parser.add_argument("--no-probes", action="store_true")
    parser.add_argument("--no-wsd", action="store_true")
    parser.add_argument("--semcor-limit", type=int, default=10_000, help="SemCor sentences for the WSD index")
    parser.add_argument("--data-root", type=Path, default=None)
    parser.add_argument("--cache-dir", type=Path, default=None)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    support = bf16_support()
    bf16 = "bf16" if support.usable else EMULATED_BF16
    print(f"bf16 here: {support.reason}; measuring with {bf16}")
    model = full_size_random_model() if args.full_size else load_bilm(args.model)
    print(f"model: {getattr(model, 'name', args.model)}")

    started = time.perf_counter()
    rows = vector_fidelity(model, ewt_dev_sentences(args.data_root, args.sentences), bf16)
    print(f"\n1. vectors, EWT dev ({rows[0]['tokens']} tokens, {time.perf_counter() - started:.0f} s)")
    print(f"{'layer':>5}{'max |diff|':>12}{'mean cos':>11}{'min cos':>10}")
    for r in rows:
        print(f"{r['layer']:>5}{r['max_abs']:>12.4f}{r['mean_cos']:>11.6f}{r['min_cos']:>10.5f}")

    if not args.no_probes:
        results = {}
        for precision in ("fp32", bf16):
            config = SuiteConfig(precision=precision, control=False, halves=False, mix=False, random_bilm=False)
            start = time.perf_counter()
            results[precision] = run_suite(model, ["pos", "chunk"], data_root=args.data_root,
                                           cache_dir=args.cache_dir, limit=args.limit, config=config)
            print(f"suite in {precision}: {time.perf_counter() - start:.0f} s")
        print("\n2. probes (test set; fp32 estimate [95% bootstrap interval] vs bf16)")
        print(f"{'task':>6}{'layer':>6}{'fp32':>8}{'interval':>18}{'bf16':>8}{'inside':>8}")
        for a, b in zip(results["fp32"].tasks, results[bf16].tasks):
            for la, lb in zip(a.layers, b.layers):
                t, e = la.probe.test, 100 * lb.probe.test.estimate
                inside = 100 * t.low <= e <= 100 * t.high
                print(f"{a.task:>6}{la.layer:>6}{100 * t.estimate:>8.2f}   [{100 * t.low:6.2f}, {100 * t.high:6.2f}]"
                      f"{e:>8.2f}{'yes' if inside else 'NO':>8}")
        model.set_precision("fp32")

    if not args.no_wsd:
        out = {}
        for precision in ("fp32", bf16):
            model.set_precision(precision)
            start = time.perf_counter()
            out[precision] = evaluate_wsd(model, args.data_root, semcor_limit=args.semcor_limit,
                                          cache_dir=args.cache_dir, mix_weights=None)
            print(f"WSD in {precision}: {time.perf_counter() - start:.0f} s")
        model.set_precision("fp32")
        print(f"\n3. 1-NN WSD, four test sets, SemCor index of {args.semcor_limit} sentences "
              "(fp32 F1 [95% Wilson interval] vs bf16)")
        print(f"{'row':>10}{'fp32':>8}{'interval':>18}{'bf16':>8}{'inside':>8}")
        for ra, rb in zip(out["fp32"].rows, out[bf16].rows):
            score = ra.scores[FOUR_SETS]
            low, high = wilson(score.n_correct, score.n_total)
            e = rb.f1(FOUR_SETS)
            print(f"{ra.representation:>10}{ra.f1(FOUR_SETS):>8.2f}   [{low:6.2f}, {high:6.2f}]{e:>8.2f}"
                  f"{'yes' if low <= e <= high else 'NO':>8}")
    print(f"\ntotal {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
