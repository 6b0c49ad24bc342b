"""Tests for probing.senses.corpora on the real Raganato framework files and WordNet 3.0 (data root)."""

import os
from pathlib import Path

import pytest

from probing.senses import corpora as w

ROOT = Path(os.environ.get("ELMO_WORKBENCH_DATA", Path(__file__).resolve().parents[2] / "shared"))


@pytest.fixture(scope="module", autouse=True)
def _wordnet_from_root(data_root):
    # missing data fails here (through the data_root fixture), it is never skipped
    assert data_root.resolve() == ROOT.resolve()
    w.wordnet(ROOT)  # NLTK keeps one reader: load it from this root before any lookup


@pytest.fixture(scope="module")
def senseval2():
    return w.read_wsd_corpus("senseval2", root=ROOT)


@pytest.mark.parametrize("name, n_instances", [
    ("senseval2", 2282), ("senseval3", 1850), ("semeval2007", 455),
    ("semeval2013", 1644), ("semeval2015", 1022), ("ALL", 7253),
])
def test_evaluation_set_instance_counts(name, n_instances):
    sentences = w.read_wsd_corpus(name, root=ROOT)
    instances = [i for _s, i in w.iter_instances(sentences)]
    assert len(instances) == n_instances
    assert len({i.instance_id for i in instances}) == n_instances
    assert all(i.sense_keys for i in instances)  # every instance has a gold line
    assert {i.pos for i in instances} <= set(w.WSD_POS)


def test_first_instance_and_multiple_gold_keys(senseval2):
    first = senseval2[0]
    assert first.sentence_id == "d000.s000"
    assert first.tokens[:3] == ("The", "art", "of")
    art = first.instances[0]
    assert art.instance_id == "d000.s000.t000"
    assert (art.lemma, art.pos, art.span) == ("art", "NOUN", (1, 2))
    assert art.sense_keys == {"art%1:09:00::"}
    peculiar = first.instances[2]
    assert peculiar.sense_keys == {
        "peculiar%5:00:00:specific:00", "peculiar%5:00:00:characteristic:00"}


def test_multiword_instance_is_split_into_words(senseval2):
    sentence = next(s for s in senseval2 if s.sentence_id == "d000.s010")
    inst = next(i for i in sentence.instances if i.instance_id == "d000.s010.t000")
    assert inst.lemma == "belong_to"
    assert inst.end - inst.start == 2
    assert sentence.words_of(inst) == ("belong", "to")
    assert all(" " not in t and t for t in sentence.tokens)


def test_semcor_limited_gzip_read():
    sentences = w.read_wsd_corpus("semcor", root=ROOT, limit_sentences=5)
    assert len(sentences) == 5
    first = sentences[0]
    jury = first.instances[0]
    assert (jury.lemma, jury.span) == ("group", (1, 5))
    assert first.words_of(jury) == ("Fulton", "County", "Grand", "Jury")
    took = next(i for i in first.instances if i.lemma == "take_place")
    assert first.words_of(took) == ("took", "place")
    assert took.sense_keys and all(k.startswith("take_place%2:") for k in took.sense_keys)
    # spans tile the words in order without overlap
    ends = [(i.start, i.end) for i in first.instances]
    assert all(a[1] <= b[0] for a, b in zip(ends, ends[1:]))


def test_read_wsd_corpora_prefixes_ids_like_all():
    four = w.read_wsd_corpora(w.PETERS_2018_TEST_SETS, root=ROOT)
    all_ids = set(w.gold_keys(w.read_wsd_corpus("ALL", root=ROOT)))
    four_gold = w.gold_keys(four)
    assert len(four_gold) == 6798
    assert set(four_gold) <= all_ids


def test_unknown_corpus_and_missing_root(tmp_path):
    with pytest.raises(ValueError, match="unknown WSD corpus"):
        w.read_wsd_corpus("senseval9", root=ROOT)
    with pytest.raises(FileNotFoundError, match="probing.data download"):
        w.read_wsd_corpus("senseval2", root=tmp_path)


def test_scorer_hand_made():
    gold = {"a": {"x%1"}, "b": {"y%1", "y%2"}, "c": {"z%1"}, "d": {"q%1"}}
    pred = {"a": "x%1", "b": "y%2", "c": "z%9"}  # d unanswered; b hits its second gold key
    score = w.wsd_f1(gold, pred)
    assert (score.n_correct, score.n_answered, score.n_total) == (2, 3, 4)
    assert score.precision == pytest.approx(2 / 3)
    assert score.recall == pytest.approx(2 / 4)
    assert score.f1 == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))
    assert w.WsdScore.from_dict(score.to_dict()) == score
    assert w.wsd_f1(gold, {}).f1 == 0.0
    with pytest.raises(ValueError, match="not in the gold"):
        w.wsd_f1(gold, {"zzz": "x%1"})


def test_wordnet_first_sense_and_gloss():
    keys = w.candidate_senses("bank", "NOUN")
    assert len(keys) == 10 and all(k.startswith("bank%1:") for k in keys)
    assert w.first_sense("bank", "n") == keys[0] == "bank%1:17:01::"
    assert "sloping land" in w.gloss(w.first_sense("bank", "NOUN"))
    assert w.gloss("bank%1:14:00::").startswith("a financial institution")
    assert w.sense_key_to_synset("art%1:06:00::").name() == "art.n.01"
    # satellite adjectives and multiword lemmas use the same keys as Raganato's gold files
    assert "peculiar%5:00:00:specific:00" in w.candidate_senses("peculiar", "ADJ")
    assert w.first_sense("take place", "VERB") == w.first_sense("take_place", "v")
    assert w.first_sense("qwertyuiop", "NOUN") is None
    with pytest.raises(KeyError, match="nosuchword"):
        w.gloss("nosuchword%1:06:00::")
    with pytest.raises(ValueError, match="part of speech"):
        w.candidate_senses("bank", "PRON")


def test_first_sense_baseline_matches_published(senseval2):
    # Raganato et al. (2017) WN 1st sense: senseval2 66.8; Peters et al. (2018) four sets 65.9
    score = w.wsd_f1(w.gold_keys(senseval2), w.first_sense_predictions(senseval2))
    assert score.n_correct == 1524 and round(100 * score.f1, 1) == 66.8
    four = w.read_wsd_corpora(w.PETERS_2018_TEST_SETS, root=ROOT)
    assert round(100 * w.wsd_f1(w.gold_keys(four), w.first_sense_predictions(four)).f1, 1) == 65.9
    assert w.unresolved_gold_keys(senseval2) == {}


def test_lemma_occurrences_in_semcor():
    occurrences = w.lemma_occurrences("bank", "NOUN", root=ROOT)
    assert len(occurrences) == 37
    keys = {k for o in occurrences for k in o.sense_keys}
    assert {"bank%1:14:00::", "bank%1:17:01::"} <= keys  # the money and the river senses
    for o in occurrences[:5]:
        assert o.instance.lemma == "bank" and o.instance.pos == "NOUN"
        assert o.tokens[o.span[0]].lower().startswith("bank")
    assert len(w.lemma_occurrences("play", "v", root=ROOT)) == 243
    assert len(w.lemma_occurrences("play", root=ROOT)) > 243  # nouns too
    took = w.lemma_occurrences("take place", root=ROOT)
    assert took and all(o.span[1] - o.span[0] == 2 for o in took)
    assert w.lemma_occurrences("qwertyuiop", root=ROOT) == ()
