"""Does a biLM separate word senses? The same-minus-different-sense cosine gap of the app's demo sets
and of a held-out set, per layer, with the Playground's own statistics.

    python bench/sense_gaps.py                                   # the shipped default (elmo-mini)
    python bench/sense_gaps.py --model runs/elmo-mini-2-export   # an export
    python bench/sense_gaps.py --checkpoint runs/elmo-mini-2/checkpoint.pt   # a training run, as it stands
    python bench/sense_gaps.py --json gaps.json                  # the figures as JSON too

Two checks, each printed as one line saying met or NOT met:

1. The demo sets (``data/demo/*.json``: bank, play, bark; both senses nouns): at some LSTM layer the
   same-sense pairs are more similar than the different-sense pairs with a permutation p < 0.01 and
   a 95% bootstrap interval of the gap above 0 (``PlaygroundResult.sense_contrast_test``: sentences
   are the unit, 2,000 resamples, seed 0).
2. The held-out set (``data/eval/senses_heldout.json``: six nouns, two senses, 4 sentences a sense,
   never used in training or by the app): the gap at the best LSTM layer is at least 0.05 for
   every word.

A checkpoint is read without stopping its run: the biLM's weights are taken from the trainer's
``checkpoint.pt`` and its shape from the run's ``train_config.json`` (the model card's tokens seen
from the checkpoint's progress).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

HELDOUT = ROOT / "data" / "eval" / "senses_heldout.json"
DEMO_P = 0.01  # the demo check's permutation threshold (stricter than the Playground's 0.05)
HELDOUT_GAP = 0.05  # the held-out check's smallest gap at the best LSTM layer


def load_checkpoint_bilm(checkpoint: Path):
    """The biLM of a trainer's ``checkpoint.pt`` (its run folder's ``train_config.json`` gives the shape),
    and the tokens the run had seen."""
    import torch

    from elmo_model.bilm.modules import BiLM
    from elmo_model.training.config import TrainConfig

    run = checkpoint.parent
    config_path = run / "train_config.json"
    if not config_path.is_file():
        raise SystemExit(f"error: {checkpoint}: no train_config.json beside it; give a trainer's checkpoint.pt")
    config = TrainConfig.from_json(config_path)
    payload = torch.load(checkpoint, map_location="cpu", weights_only=False)
    state = {k[len("bilm."):]: v for k, v in payload["model"].items() if k.startswith("bilm.")}
    model = BiLM(config.elmo_config())
    model.load_state_dict(state)
    model.eval()
    model.name = f"{run.name} step {payload['progress']['step']}"
    return model, int(payload["progress"]["tokens_seen"])


def gap_table(model, word: str, texts: list[str], senses: list[str], resamples: int) -> dict:
    from probing.context.playground import explore_word

    result = explore_word(model, texts, word, senses=senses)
    test = result.sense_contrast_test(n_resamples=resamples, seed=0)
    if test is None:
        raise SystemExit(f"error: {word}: no sense contrast ({result.contrast_missing_reason()})")
    return {"within": test.within, "across": test.across, "gap": test.gap, "gap_low": test.gap_low,
            "gap_high": test.gap_high, "p_value": test.p_value, "sentences": test.n_sentences}


def measure(model, resamples: int = 2000) -> dict:
    """The demo sets' and the held-out set's tables, and the two checks."""
    from probing.context.playground import demo_set_names, load_demo_set

    demos = {}
    for name in demo_set_names():
        demo = load_demo_set(name)
        demos[name] = gap_table(model, demo.word, list(demo.texts), list(demo.senses), resamples)
    heldout = {}
    for entry in json.loads(HELDOUT.read_text(encoding="utf-8"))["words"]:
        texts = [s["text"] for s in entry["sentences"]]
        senses = [s["sense"] for s in entry["sentences"]]
        heldout[entry["word"]] = gap_table(model, entry["word"], texts, senses, resamples)
    lstm = range(1, len(next(iter(demos.values()))["gap"]))

    def demo_layers(t: dict) -> list[int]:
        return [j for j in lstm if t["p_value"][j] < DEMO_P and t["gap_low"][j] > 0]

    demo_met = {name: demo_layers(t) for name, t in demos.items()}
    best = {word: max(t["gap"][j] for j in lstm) for word, t in heldout.items()}
    return {"demo": demos, "heldout": heldout, "demo_separating_layers": demo_met, "heldout_best_gap": best,
            "demo_met": all(demo_met.values()), "heldout_met": all(g >= HELDOUT_GAP for g in best.values())}


def report(figures: dict) -> str:
    lines = []
    for title, tables in (("demo sets (data/demo)", figures["demo"]), ("held-out set", figures["heldout"])):
        lines.append(f"{title}: same / different sense cosine, gap [95% interval], permutation p, per layer")
        for word, t in tables.items():
            cells = [f"L{j} {t['within'][j]:.3f}/{t['across'][j]:.3f} {t['gap'][j]:+.3f} "
                     f"[{t['gap_low'][j]:+.3f}, {t['gap_high'][j]:+.3f}] p={t['p_value'][j]:.4f}"
                     for j in range(1, len(t["gap"]))]
            lines.append(f"  {word:<7} " + " | ".join(cells))
    sep = figures["demo_separating_layers"]
    lines.append(("met" if figures["demo_met"] else "NOT met") + f": demo sets separate at an LSTM layer (p < {DEMO_P}, "
                 "interval above 0): " + ", ".join(f"{w} {v or 'none'}" for w, v in sep.items()))
    best = figures["heldout_best_gap"]
    lines.append(("met" if figures["heldout_met"] else "NOT met") + f": held-out gap >= {HELDOUT_GAP} at the best "
                 "LSTM layer for every word: " + ", ".join(f"{w} {g:+.3f}" for w, g in best.items()))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--model", default="elmo-mini", help="a model name or folder (default: elmo-mini)")
    source.add_argument("--checkpoint", type=Path, help="a trainer's checkpoint.pt, read while its run goes on")
    parser.add_argument("--resamples", type=int, default=2000, help="permutations and bootstrap draws (2000)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: beside a training run)")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)

    import torch

    torch.set_num_threads(args.threads)
    tokens = None
    if args.checkpoint is not None:
        if not args.checkpoint.is_file():
            parser.error(f"--checkpoint {args.checkpoint}: not a file")
        model, tokens = load_checkpoint_bilm(args.checkpoint)
        name = str(args.checkpoint)
    else:
        from elmo_model.models.registry import load_bilm

        model, name = load_bilm(args.model), args.model
        card = Path(getattr(model, "source", "") or ".").parent / "model_card.json"
        if card.is_file():
            tokens = json.loads(card.read_text(encoding="utf-8")).get("tokens_seen")
    figures = measure(model, args.resamples)
    figures.update({"model": name, "tokens_seen": tokens})
    print(f"{name}" + (f" ({tokens / 1e6:.2f}M tokens seen)" if tokens else ""))
    print(report(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
