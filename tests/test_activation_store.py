"""Tests for probing.engine.store: vectors computed once serve every later request for the same
sentences, whatever the requester calls them. The biLM's work is counted with a forward hook on
the real model (sentences in each batch it runs), not by mocking the extraction."""

import numpy as np
import pytest

from elmo_model import load_bilm
from probing.engine.activations import extract_activations
from probing.tagging.tasks import load_task

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def model(data_root):
    return load_bilm(data_root / "fixtures/bilm_tf")


@pytest.fixture(scope="module")
def sentences(data_root):
    return [list(s.tokens) for s in load_task("pos", "dev", root=data_root, limit=40)]


@pytest.fixture
def embedded(model):
    """A list that grows by the batch size of every forward pass of ``model``."""
    counts: list[int] = []
    handle = model.register_forward_hook(lambda _m, args, _out: counts.append(int(args[0].shape[0])))
    yield counts
    handle.remove()


def test_same_sentences_under_another_name_or_a_prefix_are_not_embedded_again(model, sentences, tmp_path, embedded):
    whole = extract_activations(model, sentences[:30], "ud_english_ewt", "dev-first-30", cache_dir=tmp_path)
    assert sum(embedded) == 30
    files = sorted(tmp_path.rglob("*.h5"))
    same = extract_activations(model, sentences[:30], "ud_english_ewt", "dev", cache_dir=tmp_path)
    prefix = extract_activations(model, sentences[:12], "ud_english_ewt", "train-first-12", cache_dir=tmp_path)
    assert sum(embedded) == 30 and sorted(tmp_path.rglob("*.h5")) == files  # nothing run, nothing written
    assert same.path == prefix.path == whole.path and prefix.n_sentences == 12
    np.testing.assert_array_equal(same.layer(2), whole.layer(2))
    np.testing.assert_array_equal(prefix.layer(1), whole.layer(1)[:prefix.n_tokens])
    assert same.split == "dev" and prefix.name != whole.name  # each named as its own extraction would be


def test_a_float32_cache_serves_float16_exactly_and_not_the_other_way(model, sentences, tmp_path, embedded):
    extract_activations(model, sentences[:20], "ud_english_ewt", "dev", cache_dir=tmp_path / "a")
    served = extract_activations(model, sentences[:20], "ud_english_ewt", "dev", cache_dir=tmp_path / "a",
                                 dtype="float16")
    assert sum(embedded) == 20 and served.dtype == "float16"
    own = extract_activations(model, sentences[:20], "ud_english_ewt", "dev", cache_dir=tmp_path / "b",
                              dtype="float16")
    assert sum(embedded) == 40
    for j in range(3):  # rounded on read exactly as the writer rounds
        np.testing.assert_array_equal(served.layer(j), own.layer(j))
    extract_activations(model, sentences[:20], "ud_english_ewt", "dev", cache_dir=tmp_path / "b")
    assert sum(embedded) == 60  # float16 vectors never stand in for float32 ones


def test_a_larger_request_embeds_only_what_an_earlier_one_did_not(model, sentences, tmp_path, embedded):
    small = extract_activations(model, sentences[:15], "ud_english_ewt", "dev", cache_dir=tmp_path, batch_size=4)
    assert sum(embedded) == 15
    large = extract_activations(model, sentences[:40], "ud_english_ewt", "dev-first-40", cache_dir=tmp_path,
                                batch_size=4)
    assert sum(embedded) == 15 + 25 and large.path != small.path and large.n_sentences == 40
    np.testing.assert_array_equal(large.layer(2)[:small.n_tokens], small.layer(2))
    fresh = extract_activations(model, sentences[:40], "ud_english_ewt", "dev", cache_dir=tmp_path / "fresh",
                                batch_size=4)
    for j in range(3):  # other batches: equal up to float rounding
        np.testing.assert_allclose(large.layer(j), fresh.layer(j), rtol=0, atol=1e-5)


def test_the_syntax_probe_reuses_the_scalar_mix_explorers_sentences(model, data_root, tmp_path, embedded):
    """Two pages, their own backends, their own split names (``train`` vs ``train-first-60``):
    the structural probe embeds only the training sentences the explorer did not."""
    from probing.syntax.structural import SyntaxConfig, tree_probe
    from probing.tagging.scalar_mix import load_mix_task

    load_mix_task(model, "pos", data_root=data_root, cache_dir=tmp_path, limit=40)
    assert sum(embedded) == 3 * 40  # train, dev, test
    config = SyntaxConfig(train_sentences=60, dev_sentences=40, ranks=(4,), max_epochs=1, random_bilm=False)
    tree_probe(model, 1, data_root, cache_dir=tmp_path, config=config)
    assert sum(embedded) == 3 * 40 + 20  # dev's 40 and train's first 40 came from the explorer's caches
    load_mix_task(model, "upos", data_root=data_root, cache_dir=tmp_path, limit=30)
    assert sum(embedded) == 3 * 40 + 20  # the same EWT sentences under another task: nothing run


def test_a_lemma_index_holds_what_the_whole_index_knows_of_the_lemma(model, data_root, tmp_path, embedded):
    from probing.senses.semcor_index import (
        build_lemma_index,
        build_semcor_index,
        semcor_sentences,
    )

    slice_ = semcor_sentences(data_root, 80)
    holding = [s for s in slice_ if any(i.lemma == "vote" for i in s.instances)]
    assert 0 < len(holding) < len(slice_) // 4
    small = build_lemma_index(model, ["Vote"], data_root, semcor_limit=80, cache_dir=tmp_path / "lemma")
    assert sum(embedded) == len(holding)  # only the lemma's sentences were embedded
    whole = build_semcor_index(model, data_root, semcor_limit=80, cache_dir=tmp_path / "whole")
    rows, whole_rows = small.lemma_rows("vote"), whole.lemma_rows("vote")
    assert len(rows) == len(whole_rows) > 0
    for a, b in zip(rows, whole_rows):
        x, y = small.instance(int(a)), whole.instance(int(b))
        assert (x.instance_id, x.sense_keys, x.start, x.end) == (y.instance_id, y.sense_keys, y.start, y.end)
        assert small.sentence_text(x.sentence) == whole.sentence_text(y.sentence)
    for j in range(whole.n_layers):  # float16 storage; other batches change at most the last bits
        np.testing.assert_allclose(small.vectors(j, rows), whole.vectors(j, whole_rows), rtol=0, atol=2e-3)
    # once the whole index is built, it is the answer (nothing embedded); a lemma SemCor lacks: None
    before = sum(embedded)
    assert build_lemma_index(model, ["vote"], data_root, semcor_limit=80, cache_dir=tmp_path / "whole").path == whole.path
    assert build_lemma_index(model, ["no_such_lemma"], data_root, semcor_limit=80, cache_dir=tmp_path) is None
    assert sum(embedded) == before
