"""The lesson: the ELMo paper's story in five steps, each with the model's own numbers beside the paper's.

    python -m probing.report.lesson [--model elmo-mini] [--data-root ../shared] [--limit 200] [--json FILE]
    python -m probing.report.lesson --model data/models/elmo-mini --card data/models/elmo-mini

A teacher runs the steps in order, one click each on the Lesson page (``app_pages/lesson.py``), or all at
once here. Each step answers one question with numbers the chosen model computes now, sets the paper's
finding beside them (Peters et al., 2018, "Deep contextualized word representations", NAACL: its
tables cited), and says whether this model makes the point:

1. **Static vs contextual.** One word in twelve sentences: the character layer gives it one vector
   (cosine 1.000 between any two occurrences), the LSTM layers one per context.
2. **Senses by layer.** The shipped demo sets ("bank", "play", "bark": two noun senses, six sentences
   each): same-sense minus different-sense cosine per LSTM layer, its 95% interval and permutation p.
3. **Part of speech low, senses high.** A linear POS probe per layer (UD English-EWT, a slice) beside
   step 2's best sense layer: the paper finds POS best at layer 1 and word senses at layer 2.
4. **A probe against its control task.** The same probe on control labels (each word type a random
   tag; Hewitt & Liang, 2019): selectivity = task minus control accuracy, per layer.
5. **A confound found and fixed.** "play" as a theatre noun against "play" as a sport verb: its gap
   mixes sense with part of speech (read from the WordNet sense keys). The shipped set, both senses
   nouns, holds part of speech fixed: the gap that is left is the sense's.

Nothing here trains before it is asked: each step computes when it is called, and steps 3 and 4
share one probe run (``probing.tagging.suite``, its caches on disk).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from elmo_model.plumbing.resources import shipped_data
from probing.context.playground import DemoSet, explore_word, load_demo_set, parts_of_speech_by_sense

LESSON_DIR = shipped_data("lesson")
DEMO_WORDS = ("bank", "play", "bark")
CONFOUNDED_SET = "play_noun_verb"
ALPHA = 0.01  # a sense gap counts when p < ALPHA and its 95% interval lies above 0

PAPER = {
    "contextual": "Peters et al. (2018), Table 4: GloVe's neighbours of \"play\" are all sport (playing, game, "
                  "games, played, players, ...); the biLM's nearest SemCor sentences follow the sense of each "
                  "context (a baseball play; a Broadway play).",
    "senses": "Peters et al. (2018), Table 5: 1-NN word sense disambiguation (all words, Raganato et al.'s "
              "test sets) reaches F1 67.4 from the first LSTM layer and 69.0 from the second; WordNet's first "
              "sense scores 65.9.",
    "pos": "Peters et al. (2018), Table 6: a linear POS tagger (Penn Treebank) reaches 97.3% from the first "
           "LSTM layer and 96.8% from the second: syntax low, senses high (Table 5).",
    "control": "Hewitt & Liang (2019), \"Designing and Interpreting Probes with Control Tasks\": a probe that "
               "scores well may have memorised word types; a layer is credited with what its probe does beyond "
               "the control task (selectivity), not with its accuracy alone.",
    "confound": "A sense contrast whose senses differ in part of speech measures part of speech too: the ELMo "
                "paper's own Table 4 contrasts noun senses of \"play\" (a play in a game; a Broadway play).",
}


@dataclass
class LessonStep:
    """One step: its question, what this model shows (a sentence with its own numbers), what the paper
    reports, whether this model makes the paper's point (None: not measurable here), and the numbers."""

    key: str
    title: str
    question: str
    shows: str
    paper: str
    made: bool | None
    rows: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def _layer(j: int) -> str:
    return "layer 0 (characters)" if j == 0 else f"layer {j} (LSTM {j})"


def static_vs_contextual(model, word: str = "bank") -> LessonStep:
    """Step 1: the mean cosine between a word's occurrences in the demo set, per layer."""
    demo = load_demo_set(word)
    result = explore_word(model, list(demo.texts), demo.word, senses=list(demo.senses))
    n = result.similarity.shape[1]
    rows = []
    for j in range(result.similarity.shape[0]):
        pairs = [float(result.similarity[j, a, b]) for a in range(n) for b in range(a + 1, n)]
        rows.append({"layer": _layer(j), "mean cosine between occurrences": round(sum(pairs) / len(pairs), 3),
                     "lowest": round(min(pairs), 3)})
    static = rows[0]["lowest"] >= 0.9995
    lstm = min(r["mean cosine between occurrences"] for r in rows[1:])
    shows = (f"\"{word}\" in {n} sentences: the character layer gives every occurrence the same vector (lowest "
             f"cosine {rows[0]['lowest']:.3f}); the LSTM layers give one per context (mean cosine down to {lstm:.3f}).")
    return LessonStep("contextual", "Static vs contextual", f"Does \"{word}\" get one vector, or one per sentence?",
                      shows, PAPER["contextual"], static and lstm < 0.99, rows)


def _gap_rows(demo: DemoSet, model, label: str) -> tuple[list[dict], int | None]:
    """One row per LSTM layer of a labelled set's sense contrast; and the layer where it separates
    best (p < ALPHA, interval above 0; None where no layer does)."""
    result = explore_word(model, list(demo.texts), demo.word, senses=list(demo.senses))
    test = result.sense_contrast_test()
    rows, best = [], None
    for j in range(1, len(test.gap)):
        separates = test.p_value[j] < ALPHA and test.gap_low[j] > 0
        rows.append({"set": label, "layer": _layer(j), "same sense": round(test.within[j], 3),
                     "different senses": round(test.across[j], 3), "gap": round(test.gap[j], 3),
                     "95% interval": f"{test.gap_low[j]:+.3f} .. {test.gap_high[j]:+.3f}",
                     "p": round(test.p_value[j], 4), "separates": separates})
        if separates and (best is None or test.gap[j] > test.gap[best]):
            best = j
    return rows, best


def senses_by_layer(model, words: Sequence[str] = DEMO_WORDS) -> LessonStep:
    """Step 2: each demo set's sense gap per LSTM layer."""
    rows, separated = [], {}
    for word in words:
        word_rows, best = _gap_rows(load_demo_set(word), model, word)
        rows += word_rows
        separated[word] = best
    made = [w for w, best in separated.items() if best is not None]
    best_layers = sorted({best for best in separated.values() if best is not None})
    shows = (f"{len(made)} of {len(words)} demo words separate their senses at an LSTM layer (p < {ALPHA}, "
             f"interval above 0)" + (f": {', '.join(made)}, best at layer {'/'.join(map(str, best_layers))}."
                                     if made else "."))
    return LessonStep("senses", "Senses by layer", "Are two uses of one sense closer than uses of two senses?",
                      shows, PAPER["senses"], len(made) == len(words), rows)


def pos_probe_run(model, data_root: str | Path | None, limit: int | None, progress: Callable | None = None):
    """The one probe run steps 3 and 4 share: POS (PTB tags) at every layer with its control task."""
    from probing.tagging.suite import SuiteConfig, run_suite  # lazy: sklearn loads when a probe runs

    config = SuiteConfig(control=True, random_bilm=False, halves=False, mix=False,
                         precision=getattr(model, "precision", "auto"))
    return run_suite(model, ["pos"], data_root=data_root, limit=limit, progress=progress, config=config).tasks[0]


def pos_against_senses(pos_task, senses: LessonStep) -> LessonStep:
    """Step 3: the best POS layer (layer 1 counts when its interval reaches the best layer's score)
    beside the layer where the senses separate best (step 2)."""
    layers = {r.layer: r.probe.test for r in pos_task.layers}
    best_pos = max(layers, key=lambda j: layers[j].estimate)
    pos_low = 1 in layers and layers[1].high >= layers[best_pos].estimate
    gaps = [r for r in senses.rows if r["separates"]] or senses.rows
    best_sense_row = max(gaps, key=lambda r: r["gap"]) if gaps else None
    sense_layer = int(best_sense_row["layer"].split()[1]) if best_sense_row else None
    rows = [{"layer": _layer(j), "POS accuracy": round(100 * t.estimate, 1),
             "95% interval": f"{100 * t.low:.1f} .. {100 * t.high:.1f}"} for j, t in sorted(layers.items())]
    shows = (f"POS is best at layer {best_pos} ({100 * layers[best_pos].estimate:.1f}%"
             + (f"; layer 1 {100 * layers[1].estimate:.1f}%, within its interval" if pos_low and best_pos != 1 else "")
             + f"); the senses' largest gap is at layer {sense_layer}.")
    made = pos_low and sense_layer == 2 and layers[best_pos].estimate >= 0.95
    return LessonStep("pos", "Part of speech low, senses high",
                      "Which layer knows part of speech, and which knows word senses?", shows, PAPER["pos"], made, rows)


def probe_against_control(pos_task) -> LessonStep:
    """Step 4: task and control accuracy and selectivity, per layer."""
    rows = [{"layer": _layer(r.layer), "POS accuracy": round(100 * r.probe.test_accuracy, 1),
             "control accuracy": round(100 * r.control.test_accuracy, 1),
             "selectivity (points)": round(100 * r.selectivity, 1)} for r in pos_task.layers
            if r.control.kind == "control"]
    best = max(rows, key=lambda r: r["selectivity (points)"])
    highest = max(rows, key=lambda r: r["POS accuracy"])
    shows = (f"The most accurate layer is {highest['layer']} ({highest['POS accuracy']}%); the most selective is "
             f"{best['layer']} ({best['selectivity (points)']} points above its control task's "
             f"{best['control accuracy']}%).")
    made = all(r["selectivity (points)"] > 0 for r in rows)
    return LessonStep("control", "A probe against its control task",
                      "How much of a probe's accuracy is the layer's, not the probe's memory?", shows,
                      PAPER["control"], made, rows)


def sense_parts_of_speech(demo: DemoSet) -> dict[str, set[str]]:
    """Sense name -> the parts of speech its WordNet sense keys give (``play%2:33:00::`` is a verb)."""
    return parts_of_speech_by_sense(demo.senses, demo.sense_keys or (None,) * len(demo.senses))


def confound_found_and_fixed(model) -> LessonStep:
    """Step 5: the noun-vs-verb "play" set beside the shipped noun-vs-noun set."""
    confounded = load_demo_set(CONFOUNDED_SET, folder=LESSON_DIR)
    fixed = load_demo_set("play")
    rows_c, _ = _gap_rows(confounded, model, "theatre (noun) vs sport (verb)")
    rows_f, _ = _gap_rows(fixed, model, "theatre (noun) vs game (noun)")
    pos = sense_parts_of_speech(confounded)
    top_c = max(rows_c, key=lambda r: r["gap"])
    top_f = max(rows_f, key=lambda r: r["gap"])
    kinds = ", ".join(f"{sense}: {'/'.join(sorted(parts))}" for sense, parts in pos.items())
    shows = (f"Senses that differ in part of speech ({kinds}) "
             f"give a gap of {top_c['gap']:+.3f} at {top_c['layer']}; with part of speech held fixed (two noun senses) "
             f"the gap is {top_f['gap']:+.3f} at {top_f['layer']}: "
             + ("most of the first gap was part of speech." if top_f["gap"] < top_c["gap"] / 2 else
                "part of speech added " f"{top_c['gap'] - top_f['gap']:+.3f}."))
    return LessonStep("confound", "A confound found and fixed",
                      "Is a sense gap about senses, or about part of speech?", shows, PAPER["confound"],
                      top_c["gap"] > top_f["gap"], rows_c + rows_f)


def run_lesson(model, data_root: str | Path | None = None, limit: int | None = 200,
               progress: Callable | None = None) -> list[LessonStep]:
    """Every step in order (``progress(label, done, total)`` during the probe run)."""
    senses = senses_by_layer(model)
    pos_task = pos_probe_run(model, data_root, limit, progress)
    return [static_vs_contextual(model), senses, pos_against_senses(pos_task, senses),
            probe_against_control(pos_task), confound_found_and_fixed(model)]


def as_markdown(steps: Sequence[LessonStep], model_name: str) -> str:
    """The lesson as a teacher's handout."""
    out = [f"# The lesson on {model_name}", ""]
    for k, step in enumerate(steps, 1):
        verdict = {True: "this model makes the point", False: "this model does NOT make the point",
                   None: "not measured"}[step.made]
        out += [f"## {k}. {step.title}", "", f"*{step.question}*", "", f"**{model_name}:** {step.shows} ({verdict})",
                "", f"**The paper:** {step.paper}", ""]
        if step.rows:
            keys = list(step.rows[0])
            out += ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
            out += ["| " + " | ".join(str(r.get(k, "")) for k in keys) + " |" for r in step.rows]
            out.append("")
    return "\n".join(out)


CARD_SECTION = "lesson"


def write_to_card(model_dir: str | Path, steps: Sequence[LessonStep], limit: int | None) -> None:
    """Put the steps into ``model_dir/model_card.json`` under ``"lesson"``, with the command that
    measured them: the README's and the pages' "what this model can show" read them from there."""
    from elmo_model.plumbing.io_safety import atomic_write_text

    path = Path(model_dir) / "model_card.json"
    card = json.loads(path.read_text(encoding="utf-8"))
    card[CARD_SECTION] = {"command": f"python -m probing.report.lesson --model {model_dir} --limit {limit or 0} "
                                     f"--card {model_dir}",
                          "steps": [step.to_dict() for step in steps]}
    atomic_write_text(path, json.dumps(card, indent=1) + "\n")  # as the card writer writes it


def card_summary(card: dict, keys: Sequence[str] | None = None) -> list[str]:
    """One markdown line a step of the card's lesson (``keys``: only those steps), in order: whether
    the model makes the paper's point and its own numbers. Empty when the card has no lesson."""
    lines = []
    for step in card.get(CARD_SECTION, {}).get("steps", []):
        if keys is None or step["key"] in keys:
            mark = {True: "shows it", False: "does not show it", None: "not measured"}[step["made"]]
            lines.append(f"- **{step['title']}** ({mark}): {step['shows']}")
    return lines


def main(argv: list[str] | None = None) -> int:
    from elmo_model.models.registry import load_bilm
    from elmo_model.plumbing.progress import TerminalProgress

    parser = argparse.ArgumentParser(prog="python -m probing.report.lesson", description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="elmo-mini", help="a shipped name or a model folder (default: elmo-mini)")
    parser.add_argument("--data-root", default=None, help="where UD English-EWT is (default: the data root)")
    parser.add_argument("--limit", type=int, default=200,
                        help="sentences a split for the POS probe and its control (default: 200; 0: all)")
    parser.add_argument("--json", type=Path, default=None, help="also write the steps here as JSON")
    parser.add_argument("--card", type=Path, default=None, metavar="MODEL_DIR",
                        help="also write the steps into MODEL_DIR/model_card.json (the folder of --model): "
                             "what the README and the pages say the model can show")
    args = parser.parse_args(argv)
    try:
        model = load_bilm(args.model)
    except (OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    with TerminalProgress("the lesson's probe", single=True, unit="step", width=60) as bar:
        steps = run_lesson(model, args.data_root, args.limit or None, bar.steps)
    print(as_markdown(steps, str(getattr(model, "name", "") or args.model)))
    if args.card:
        write_to_card(args.card, steps, args.limit or None)
    if args.json:
        args.json.write_text(json.dumps([s.to_dict() for s in steps], indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
