"""The part-of-speech tagger behind the Playground's guard (probing.tagging.pos_tagger): its accuracy on
EWT's dev file, the readings a lesson relies on, and the guard it drives on typed sentences."""

import pytest
from streamlit.testing.v1 import AppTest

from probing.tagging.pos_tagger import ewt_upos, tagged_confound, tagger_for

ROOT = __import__("pathlib").Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tagger(data_root):
    return tagger_for(data_root)


def test_the_tagger_reads_ewts_dev_file_about_nine_words_in_ten_right(tagger, data_root):
    right = total = 0
    for words, gold in ewt_upos(data_root, "dev"):
        right += sum(a == b for a, b in zip(tagger.tag(words), gold))
        total += len(gold)
    assert total == 25147 and right / total >= 0.91, right / total  # measured: 0.919


def test_the_readings_a_lesson_relies_on(tagger):
    assert tagger.tag("We saw a play at the theatre .".split())[3] == "NOUN"
    assert tagger.tag("They play football on Sundays .".split())[1] == "VERB"
    assert tagger.tag("The bank of the river was steep .".split())[1] == "NOUN"
    assert tagger.tag([]) == [] and len(tagger.tag(["Zyzzogeton"])) == 1  # an unseen word still gets a tag


def test_a_data_root_without_ewt_has_no_tagger(tmp_path):
    assert tagger_for(tmp_path) is None and tagger_for(None) is None


def test_the_guard_needs_each_sense_mostly_of_one_part_of_speech():
    senses = ["theatre"] * 4 + ["sport"] * 4
    warning = tagged_confound(senses, ["NOUN"] * 4 + ["VERB"] * 3 + ["NOUN"])
    assert "theatre: noun, 4 of 4" in warning and "sport: verb, 3 of 4" in warning
    assert tagged_confound(senses, ["NOUN"] * 4 + ["VERB", "VERB", "NOUN", "NOUN"]) is None  # sport: 2 of 4
    assert tagged_confound(senses, ["NOUN"] * 3 + ["PROPN"] + ["NOUN"] * 4) is None  # both nouns
    assert tagged_confound(["theatre"] * 4, ["NOUN"] * 4) is None


def test_the_playground_names_the_confound_a_tagger_finds_in_typed_sentences(data_root, tmp_path, monkeypatch):
    """Labels that say nothing of part of speech, senses that follow it all the same."""
    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(data_root))
    monkeypatch.setenv("ELMO_WORKBENCH_CACHE", str(tmp_path))
    monkeypatch.setenv("ELMO_WORKBENCH_MODEL", str(data_root / "fixtures" / "bilm_tf"))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=120).run()
    at.text_input(key="pg_word").set_value("play")
    at.text_area(key="pg_text").set_value(
        "We saw a play at the theatre . | theatre\nThe play opened on Broadway . | theatre\n"
        "They play football on Sundays . | sport\nKids play chess after school . | sport").run()
    assert not at.exception, [e.value for e in at.exception]
    warnings = [w.value for w in at.warning if "as a tagger reads each occurrence" in w.value]
    assert len(warnings) == 1, [w.value for w in at.warning]
    at.text_area(key="pg_text").set_value(
        "We saw a play at the theatre . | theatre\nThe play opened on Broadway . | theatre\n"
        "The play of light on water . | movement\nA play of colours in the sky . | movement").run()
    assert not [w for w in at.warning if "as a tagger reads" in w.value]
