"""One learned-s_j-per-lemma path for the app and the report (``probing.tagging.scalar_mix.lemma_mixes``):
the report's SemCor-then-demo source gives exactly what the app's SemCor and demo sources give,
and its per-lemma cache is read back instead of refitting. bilm-tf fixture model, the first 300
SemCor sentences ("say": 48 occurrences, 2 senses; "bank": 5)."""

import pytest

import probing.senses.word_senses as word_senses
from elmo_model import load_bilm
from probing.senses.wsd import build_semcor_index
from probing.tagging.scalar_mix import lemma_mixes

pytestmark = pytest.mark.usefixtures("one_torch_thread")

FIT = dict(seeds=(0,), folds=2, steps=60)


@pytest.fixture(scope="module")
def model(data_root):
    return load_bilm(data_root / "fixtures/bilm_tf")


@pytest.fixture(scope="module")
def index(model, data_root, tmp_path_factory):
    return build_semcor_index(model, data_root, limit_sentences=300, cache_dir=tmp_path_factory.mktemp("semcor"))


def test_auto_is_semcor_then_the_demo_sentences(model, index, data_root):
    auto = lemma_mixes(model, ["say", "bank", "quokka", ("bank", "NOUN")], source="auto", index=index,
                       root=data_root, **FIT)
    semcor = lemma_mixes(model, ["say"], source="semcor", index=index, root=data_root, **FIT)
    demo = lemma_mixes(model, ["bank"], source="demo", index=index, root=data_root, **FIT)
    assert [r.lemma for r in auto.results] == ["say", "bank"]
    assert auto.results[0].to_json() == semcor.results[0].to_json()  # SemCor can fit "say"
    fallback, shipped = auto.results[1], demo.results[0]  # SemCor has 5 "bank": the demo sentences
    assert fallback.source == shipped.source == "sentences"
    assert fallback.weights_mean == shipped.weights_mean and fallback.layer_accuracy_mean == shipped.layer_accuracy_mean
    assert fallback.notes[0].startswith("SemCor (300 sentences): only 5 labelled occurrence(s)")
    assert fallback.notes[1:] == shipped.notes
    # no demo set, or a part of speech the demo sets do not have: SemCor's reason, named
    assert set(auto.refused) == {"quokka", "bank (NOUN)"}
    assert auto.refused["quokka"].startswith("SemCor (300 sentences): only 0 labelled occurrence(s)")
    assert auto.refused["bank (NOUN)"].startswith("SemCor (300 sentences): only")
    with pytest.raises(ValueError, match="needs a SemCor index"):
        lemma_mixes(model, ["bank"], source="auto", root=data_root)


def test_the_per_lemma_cache_is_read_back(model, index, data_root, tmp_path, monkeypatch):
    fits = []
    real = word_senses.learn_word_senses
    monkeypatch.setattr(word_senses, "learn_word_senses", lambda *a, **k: fits.append(a) or real(*a, **k))
    options = dict(index=index, root=data_root, cache=True, cache_dir=tmp_path, **FIT)
    first = lemma_mixes(model, ["say", "quokka"], source="auto", **options)
    n_fits = len(fits)
    assert n_fits >= 1 and len(list((tmp_path / "word_senses").glob("*.json"))) == 2
    again = lemma_mixes(model, ["say", "quokka"], source="auto", **options)
    assert len(fits) == n_fits and again.to_json() == first.to_json()
    # another source or another setting is another entry, not a hit
    lemma_mixes(model, ["say"], source="semcor", **options)
    lemma_mixes(model, ["say"], source="auto", **{**options, "steps": 61})
    assert len(fits) == n_fits + 2
    demo = lemma_mixes(model, ["bank"], source="demo", root=data_root, cache=True, cache_dir=tmp_path, **FIT)
    assert demo.results and len(list((tmp_path / "word_senses").glob("*.json"))) == 5
