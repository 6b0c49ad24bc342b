"""The lesson (probing/report/lesson.py, app_pages/lesson.py): each step computes from the model it
is given, the README and the pages say what the shipped model shows from its card, and the page runs
a step only when its button is pressed."""

import json
import re
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app_pages.model_choice import MODEL_ENV_VAR
from elmo_model import load_bilm
from probing.context.playground import load_demo_set
from probing.report import lesson

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def fixture_bilm(data_root):
    return load_bilm(data_root / "fixtures" / "bilm_tf")


def test_the_readme_says_what_the_shipped_model_shows_from_its_card():
    """The README's lines are the card's lesson, word for word: a new default with a new card
    changes them, and a README left behind fails here."""
    card = json.loads((ROOT / "data" / "models" / "elmo-mini" / "model_card.json").read_text(encoding="utf-8"))
    lines = lesson.card_summary(card)
    assert len(lines) == len(card["lesson"]["steps"]) == 5
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme[readme.index("## What elmo-mini can and cannot show"):]
    assert "\n".join(lines) in section
    assert card["lesson"]["command"] in section


def test_card_summary_picks_steps_and_is_empty_without_a_lesson():
    card = {"lesson": {"steps": [
        {"key": "pos", "title": "POS", "shows": "91%", "made": False},
        {"key": "control", "title": "Control", "shows": "39 points", "made": True}]}}
    assert lesson.card_summary(card, ("control",)) == ["- **Control** (shows it): 39 points"]
    assert lesson.card_summary({}) == []


def test_the_confound_set_differs_in_part_of_speech_and_the_demo_does_not():
    confounded = load_demo_set(lesson.CONFOUNDED_SET, folder=lesson.LESSON_DIR)
    assert lesson.sense_parts_of_speech(confounded) == {"theatre": {"noun"}, "sport": {"verb"}}
    assert lesson.sense_parts_of_speech(load_demo_set("play")) == {"theatre": {"noun"}, "game": {"noun"}}
    # the theatre sentences are the demo's: only the part of speech of the other sense changes
    demo = load_demo_set("play")
    assert [t for t, s in zip(confounded.texts, confounded.senses) if s == "theatre"] == \
        [t for t, s in zip(demo.texts, demo.senses) if s == "theatre"]
    assert all(re.search(r"\bplay\b", t) for t in confounded.texts)


def test_static_vs_contextual_reads_the_character_layer_as_static(fixture_bilm):
    step = lesson.static_vs_contextual(fixture_bilm)
    assert step.rows[0]["lowest"] == pytest.approx(1.0, abs=5e-4)  # the char CNN never sees the sentence
    assert all(r["mean cosine between occurrences"] < 1.0 for r in step.rows[1:])
    assert step.made == (min(r["mean cosine between occurrences"] for r in step.rows[1:]) < 0.99)


def test_the_sense_steps_verdicts_follow_their_rows(fixture_bilm):
    senses = lesson.senses_by_layer(fixture_bilm)
    separating = {r["set"] for r in senses.rows if r["separates"]}
    assert senses.made == (separating == set(lesson.DEMO_WORDS))
    assert all(r["separates"] == (r["p"] < lesson.ALPHA and float(r["95% interval"].split(" .. ")[0]) > 0)
               for r in senses.rows)
    confound = lesson.confound_found_and_fixed(fixture_bilm)
    top = lambda label: max(r["gap"] for r in confound.rows if r["set"].endswith(label))  # noqa: E731
    assert confound.made == (top("(verb)") > top("game (noun)"))


def test_the_probe_steps_on_a_slice(fixture_bilm, data_root, tmp_path, monkeypatch):
    monkeypatch.setenv("ELMO_WORKBENCH_CACHE", str(tmp_path))
    pos = lesson.pos_probe_run(fixture_bilm, data_root, limit=30)
    control = lesson.probe_against_control(pos)
    assert [r["layer"].split()[1] for r in control.rows] == ["0", "1", "2"]
    for row in control.rows:
        assert row["selectivity (points)"] == pytest.approx(row["POS accuracy"] - row["control accuracy"], abs=0.11)
    step = lesson.pos_against_senses(pos, lesson.senses_by_layer(fixture_bilm))
    assert len(step.rows) == 3 and step.made in (True, False)
    assert "POS is best at layer" in step.shows


def test_the_lesson_page_runs_a_step_only_when_asked(data_root, tmp_path, monkeypatch):
    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(data_root))
    monkeypatch.setenv("ELMO_WORKBENCH_CACHE", str(tmp_path))
    monkeypatch.setenv(MODEL_ENV_VAR, str(data_root / "fixtures" / "bilm_tf"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
    at.switch_page("app_pages/lesson.py")
    at.run()
    assert at.title[0].value == "Lesson"
    assert not [m for m in at.markdown if m.value.startswith("**This model:**")]  # nothing computed yet
    buttons = [b for b in at.button if b.label == "Run this step"]
    assert len(buttons) == 5
    buttons[0].click().run()
    shown = [m.value for m in at.markdown if m.value.startswith("**This model:**")]
    assert len(shown) == 1 and "character layer" in shown[0]
    assert not at.exception and not at.error


def test_a_sense_contrast_that_follows_part_of_speech_is_named():
    from probing.context.playground import part_of_speech, part_of_speech_confound

    assert part_of_speech("play%2:33:00::") == "verb" and part_of_speech("river (Noun)") == "noun"
    assert part_of_speech("river") is None
    senses = ["theatre", "theatre", "sport", "sport"]
    warning = part_of_speech_confound(senses, ["play%1:10:01::"] * 2 + ["play%2:33:00::"] * 2)
    assert "theatre: noun" in warning and "sport: verb" in warning
    assert part_of_speech_confound(senses, ["play%1:10:01::"] * 2 + ["play%1:28:00::"] * 2) is None  # both nouns
    # a sentence whose key is unknown does not hide the confound the others show
    assert part_of_speech_confound(senses, ["play%1:10:01::", None, "play%2:33:00::", None]) is not None
    assert part_of_speech_confound(senses, [None] * 4) is None  # nothing known: nothing claimed


def test_the_playground_warns_of_a_part_of_speech_confound_and_offers_the_shipped_set(data_root, tmp_path,
                                                                                     monkeypatch):
    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(data_root))
    monkeypatch.setenv("ELMO_WORKBENCH_CACHE", str(tmp_path))
    monkeypatch.setenv(MODEL_ENV_VAR, str(data_root / "fixtures" / "bilm_tf"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    at.text_input(key="pg_word").set_value("play")
    at.text_area(key="pg_text").set_value(
        "We saw a play at the theatre. | theatre (noun)\nThe play opened on Broadway. | theatre (noun)\n"
        "They play football on Sundays. | sport (verb)\nKids play chess after school. | sport (verb)").run()
    warnings = [w.value for w in at.warning if "differ in part of speech" in w.value]
    assert len(warnings) == 1, [w.value for w in at.warning]
    [button] = [b for b in at.button if b.key == "pg_pos_fixed"]
    button.click().run()
    assert at.session_state.pg_demo == "play" and at.session_state.pg_text == load_demo_set("play").text
    assert not [w for w in at.warning if "differ in part of speech" in w.value]


def test_a_sense_contrast_that_follows_the_words_spelling_is_named():
    from probing.context.playground import word_form_confound

    senses = ["money", "money", "river", "river"]
    warning = word_form_confound(senses, ["Bank", "Bank", "bank", "bank"])
    assert "money: 'Bank'" in warning and "river: 'bank'" in warning and "layer 0" in warning
    assert word_form_confound(senses, ["bank"] * 4) is None  # one spelling: nothing to say
    assert word_form_confound(senses, ["Bank", "bank", "bank", "bank"]) is None  # a sense with both spellings
    assert word_form_confound(["money", None, "river", None], ["Bank", "x", "bank", "y"]) is not None
    assert word_form_confound(["money", "money"], ["Bank", "bank"]) is None  # one sense


def test_the_playground_warns_when_the_senses_follow_the_spelling(data_root, tmp_path, monkeypatch):
    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(data_root))
    monkeypatch.setenv("ELMO_WORKBENCH_CACHE", str(tmp_path))
    monkeypatch.setenv(MODEL_ENV_VAR, str(data_root / "fixtures" / "bilm_tf"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    at.text_input(key="pg_word").set_value("bank")
    at.text_area(key="pg_text").set_value(
        "Bank of England raised rates. | money\nBank clerks count money. | money\n"
        "We sat on the bank of the river. | river\nThe river bank was muddy. | river").run()
    assert len([w for w in at.warning if "differ in word form" in w.value]) == 1, [w.value for w in at.warning]
    at.text_area(key="pg_text").set_value(
        "The bank raised rates. | money\nThe bank clerks count money. | money\n"
        "We sat on the bank of the river. | river\nThe river bank was muddy. | river").run()
    assert not [w for w in at.warning if "differ in word form" in w.value]


def test_projections_mark_word_forms_with_a_shape_each():
    """"banks" and "bank" get their own marker shape, named in the key and in every hover, so a
    cluster of one form is not read as a sense."""
    from probing.figures.senses import FORM_SYMBOLS, projection_figure
    from probing.senses.projections import LayerProjection, ProjectionPoint, ProjectionResult

    points = [ProjectionPoint("semcor", f"The {w} was steep .", 4, 4 + len(w), w, sense, None)
              for w, sense in [("bank", "a"), ("bank", "b"), ("banks", "a"), ("bank", "a")]]
    layers = [LayerProjection(j, [[float(i), float(j)] for i in range(4)], None, [0.6, 0.3], 4, False, None, None, None)
              for j in range(2)]
    fig = projection_figure(ProjectionResult("bank", None, "m", 0, points, layers, {"a": "x", "b": "y"}),
                            methods=("pca",)).to_dict()
    keys = [t for t in fig["data"] if t["name"].startswith("shape: word form")]
    assert [(t["name"], t["marker"]["symbol"]) for t in keys] == [("shape: word form 'bank'", FORM_SYMBOLS[0]),
                                                                  ("shape: word form 'banks'", FORM_SYMBOLS[1])]
    sense_a = [t for t in fig["data"] if t["name"].startswith("a") and t["xaxis"] == "x"][0]
    assert list(sense_a["marker"]["symbol"]) == [FORM_SYMBOLS[0], FORM_SYMBOLS[1], FORM_SYMBOLS[0]]
    assert "form 'banks'" in sense_a["text"][1]


def _layers(scores):
    """LayerProjections with within-SemCor 1-NN accuracies ``scores`` (layer 0 first), n = 200, majority 0.6."""
    from probing.senses.projections import LayerProjection

    return [LayerProjection(j, [], None, [0.5, 0.2], 10, False, None, None, None, semcor_loo_1nn_accuracy=a,
                            semcor_majority_baseline=0.6, semcor_n=200) for j, a in enumerate(scores)]


def test_a_projection_verdict_is_stated_against_layer_0_as_well_as_the_majority_sense():
    from probing.figures.app import projection_verdict
    from probing.senses.projections import ProjectionResult

    def verdict(scores):
        return projection_verdict(ProjectionResult("bank", None, "m", 0, [], _layers(scores), {}))

    ok, text = verdict([0.75, 0.75, 0.76])  # the LSTM layers beat the majority, but not the static layer
    assert not ok and "layer 0" in text and "75%" in text and "beats the majority sense" in text
    ok, text = verdict([0.62, 0.66, 0.85])
    assert ok and "layer(s) 2 score higher" in text
    ok, text = verdict([0.6, 0.6, 0.61])
    assert not ok and "no LSTM layer" in text
    assert verdict([None, None, None]) is None


def test_the_playground_and_probes_pages_say_what_the_model_shows_from_its_card(data_root, tmp_path, monkeypatch):
    """On elmo-mini the two pages open with the card's lesson lines for their steps, word for word."""
    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(data_root))
    monkeypatch.setenv("ELMO_WORKBENCH_CACHE", str(tmp_path))
    monkeypatch.setenv(MODEL_ENV_VAR, "elmo-mini")
    card = json.loads((ROOT / "data" / "models" / "elmo-mini" / "model_card.json").read_text(encoding="utf-8"))
    for page, keys in (("app_pages/playground.py", ("contextual", "senses", "confound")),
                       ("app_pages/probes.py", ("pos", "control"))):
        at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120)
        at.switch_page(page)
        at.run()
        [expander] = [e for e in at.expander if e.label.startswith("What elmo") and "can show" in e.label]
        assert expander.markdown[0].value == "\n".join(lesson.card_summary(card, keys)), page
