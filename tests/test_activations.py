"""Tests for probing.engine.activations: the hdf5 activation cache, on the bilm-tf fixture model and
real EWT sentences."""

import logging
import os

import h5py
import numpy as np
import pytest
import torch

from elmo_model import BiLM, load_bilm
from probing.engine.activations import (
    ActivationCache,
    ActivationCacheError,
    default_cache_dir,
    extract_activations,
    model_identity,
    open_cache,
    tokens_digest,
)
from probing.tagging.tasks import load_task

pytestmark = pytest.mark.usefixtures("one_torch_thread")

FIXTURE_MODEL = "fixtures/bilm_tf"


@pytest.fixture(scope="module")
def model(data_root):
    return load_bilm(data_root / FIXTURE_MODEL)


@pytest.fixture(scope="module")
def sentences(data_root):
    return [list(s.tokens) for s in load_task("pos", "dev", root=data_root, limit=90)]


@pytest.fixture(scope="module")
def reference(model, sentences):
    """ElmoEmbedder's output for the same sentences, batches of 4 (windows of 128 sentences)."""
    from elmo_model.corpus.embedder import ElmoEmbedder

    embedder = ElmoEmbedder(model, batch_size=4)
    out = list(embedder.embed_sentences(sentences, batch_size=4))
    model.stateful = False
    return out


class Interrupt(Exception):
    pass


def interrupt_after(n_sentences):
    calls = []

    def progress(done, total):
        calls.append((done, total))
        if done >= n_sentences:
            raise Interrupt(f"killed at {done}/{total}")

    return progress, calls


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("ELMO_WORKBENCH_CACHE", str(tmp_path / "acts"))
    assert default_cache_dir() == tmp_path / "acts"
    monkeypatch.delenv("ELMO_WORKBENCH_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_dir() == tmp_path / "xdg" / "elmo-workbench" / "activations"


def test_equals_embedder_output(model, sentences, reference, tmp_path):
    calls = []
    cache = extract_activations(model, sentences, "ud_english_ewt", "dev", cache_dir=tmp_path,
                                batch_size=4, progress=lambda d, t: calls.append((d, t)))
    assert isinstance(cache, ActivationCache)
    lengths = [len(s) for s in sentences]
    assert (cache.n_layers, cache.dim, cache.n_sentences, cache.n_tokens) == (3, 32, 90, sum(lengths))
    np.testing.assert_array_equal(cache.offsets, np.concatenate([[0], np.cumsum(lengths)]))
    for i, expected in enumerate(reference):
        got = cache.sentence(i)
        assert got.dtype == np.float32 and got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)
    flat = np.concatenate(reference, axis=1)  # (L+1, n_tokens, dim)
    for j in range(3):
        np.testing.assert_array_equal(cache.layer(j), flat[j])
        np.testing.assert_array_equal(cache.layer_half(j, "forward"), flat[j, :, :16])
        np.testing.assert_array_equal(cache.layer_half(j, "backward"), flat[j, :, 16:])
        starts, pieces = zip(*cache.iter_chunks(j, chunk_tokens=500))
        assert starts == tuple(range(0, cache.n_tokens, 500))
        np.testing.assert_array_equal(np.concatenate(pieces), flat[j])
    assert calls[0] == (0, 90) and calls[-1] == (90, 90) and len(calls) == 1 + 23  # per batch
    # warm: the same file, no model call
    before = os.path.getmtime(cache.path)
    again = extract_activations(model, sentences, "ud_english_ewt", "dev", cache_dir=tmp_path, batch_size=4)
    assert again.path == cache.path and os.path.getmtime(cache.path) == before
    with pytest.raises(IndexError):
        cache.layer(3)
    with pytest.raises(ValueError, match="direction"):
        cache.layer_half(1, "left")


def test_key_separates_slices_models_modes_dtypes(model, sentences, tmp_path):
    a = extract_activations(model, sentences[:10], "ud_english_ewt", "dev", cache_dir=tmp_path)
    b = extract_activations(model, sentences[:11], "ud_english_ewt", "dev", cache_dir=tmp_path)
    c = extract_activations(model, sentences[:10], "ud_english_ewt", "test", cache_dir=tmp_path)
    d = extract_activations(model, sentences[:10], "ud_english_ewt", "dev", cache_dir=tmp_path, stateful=True)
    torch.manual_seed(3)
    random_model = BiLM(model.config).eval()
    e = extract_activations(random_model, sentences[:10], "ud_english_ewt", "dev", cache_dir=tmp_path)
    paths = {x.path for x in (a, b, d, e)}
    assert len(paths) == 4 and all(p.parent.parent == tmp_path for p in paths)
    # the same sentences under another split name are the same vectors: served by a's file, under c's own name
    assert c.path == a.path and c.name != a.name and c.split == "test"
    np.testing.assert_array_equal(c.layer(1), a.layer(1))
    assert a.model_identity == model_identity(model) and e.model_identity == model_identity(random_model)
    assert e.model_identity != a.model_identity
    assert tokens_digest([["a", "b"]]) != tokens_digest([["a b"]]) != tokens_digest([["a"], ["b"]])
    assert not np.array_equal(a.layer(1), e.layer(1))


def test_killed_extraction_resumes_identically(model, sentences, reference, tmp_path, caplog):
    progress, calls = interrupt_after(40)  # batch 1: windows of 32 sentences; 32 are kept
    with pytest.raises(Interrupt):
        extract_activations(model, sentences, "ud_english_ewt", "dev", cache_dir=tmp_path,
                            batch_size=1, progress=progress)
    [partial] = list(tmp_path.rglob("*.partial"))
    assert not list(tmp_path.rglob("*.h5"))  # nothing that reads as complete
    with h5py.File(partial, "r") as f:
        assert not f.attrs["complete"] and int(f["done"][...].sum()) == 32  # one window of 32
    resumed = []
    with caplog.at_level(logging.INFO, logger="probing.engine.activations"):
        cache = extract_activations(model, sentences, "ud_english_ewt", "dev", cache_dir=tmp_path,
                                    batch_size=1, progress=lambda d, t: resumed.append(d))
    assert resumed[0] == 32 and resumed[-1] == 90 and len(resumed) == 1 + 58
    assert "resuming" in caplog.text
    assert not partial.exists()
    fresh = extract_activations(model, sentences, "ud_english_ewt", "dev", cache_dir=tmp_path / "fresh",
                                batch_size=1)
    for j in range(3):
        np.testing.assert_array_equal(cache.layer(j), fresh.layer(j))
    np.testing.assert_allclose(cache.layer(2), np.concatenate(reference, axis=1)[2], atol=1e-5)


def test_stateful_matches_embedder_and_resumes(model, sentences, tmp_path):
    from elmo_model.corpus.embedder import ElmoEmbedder

    model.reset_states()
    expected = list(ElmoEmbedder(model, batch_size=2, stateful=True).embed_sentences(sentences, batch_size=2))
    model.stateful = False
    model.reset_states()
    stateless = extract_activations(model, sentences, "ud_english_ewt", "dev", cache_dir=tmp_path,
                                    batch_size=2)
    progress, _ = interrupt_after(70)  # windows of 64 sentences: the state after 64 is saved
    with pytest.raises(Interrupt):
        extract_activations(model, sentences, "ud_english_ewt", "dev", cache_dir=tmp_path,
                            stateful=True, batch_size=2, progress=progress)
    assert model.stateful is False  # the model is left as it was found
    cache = extract_activations(model, sentences, "ud_english_ewt", "dev", cache_dir=tmp_path,
                                stateful=True, batch_size=2)
    assert cache.mode == "stateful" and cache.path != stateless.path
    for i in range(len(sentences)):
        np.testing.assert_array_equal(cache.sentence(i), expected[i])
    # the carried state matters: later sentences differ from the stateless vectors
    assert not np.allclose(cache.sentence(80), stateless.sentence(80))


def _damage(path, how):
    size = path.stat().st_size
    if how == "truncated":
        with open(path, "r+b") as f:
            f.truncate(size // 2)
    else:  # flip bytes in the middle of the activation data
        with open(path, "r+b") as f:
            f.seek(size // 2)
            block = f.read(64)
            f.seek(size // 2)
            f.write(bytes(b ^ 0xFF for b in block))


@pytest.mark.parametrize("how", ["truncated", "flipped"])
def test_corrupted_cache_is_detected_and_rebuilt(model, sentences, tmp_path, caplog, how):
    cache = extract_activations(model, sentences[:40], "ud_english_ewt", "dev", cache_dir=tmp_path)
    expected = [cache.layer(j) for j in range(3)]
    cache.close()
    _damage(cache.path, how)
    with pytest.raises(ActivationCacheError):
        open_cache(cache.path)
    with caplog.at_level(logging.WARNING, logger="probing.engine.activations"):
        rebuilt = extract_activations(model, sentences[:40], "ud_english_ewt", "dev", cache_dir=tmp_path)
    assert "damaged activation cache" in caplog.text
    assert rebuilt.path == cache.path
    for j in range(3):
        np.testing.assert_array_equal(rebuilt.layer(j), expected[j])
    open_cache(rebuilt.path)  # verifies cleanly now


def test_damaged_partial_file_starts_over(model, sentences, tmp_path, caplog):
    progress, _ = interrupt_after(35)
    with pytest.raises(Interrupt):
        extract_activations(model, sentences[:60], "ud_english_ewt", "dev", cache_dir=tmp_path,
                            batch_size=1, progress=progress)
    [partial] = list(tmp_path.rglob("*.partial"))
    partial.write_bytes(b"not hdf5 at all")
    with caplog.at_level(logging.WARNING, logger="probing.engine.activations"):
        cache = extract_activations(model, sentences[:60], "ud_english_ewt", "dev", cache_dir=tmp_path,
                                    batch_size=1)
    assert "starting over" in caplog.text and cache.n_sentences == 60


def test_float16_storage(model, sentences, tmp_path):
    half = extract_activations(model, sentences, "ud_english_ewt", "dev", cache_dir=tmp_path, dtype="float16")
    full = extract_activations(model, sentences, "ud_english_ewt", "dev", cache_dir=tmp_path)
    assert half.path != full.path and half.dtype == "float16"  # float16 never stands in for float32
    with h5py.File(half.path, "r") as f:
        assert f["activations"].dtype == np.float16
    assert half.path.stat().st_size < 0.6 * full.path.stat().st_size
    for j in range(3):
        layer = half.layer(j)
        assert layer.dtype == np.float32
        np.testing.assert_array_equal(layer, full.layer(j).astype(np.float16).astype(np.float32))
    # the other way, a float32 file serves float16, rounded on read as the float16 file was written
    half.path.unlink()
    served = extract_activations(model, sentences, "ud_english_ewt", "dev-again", cache_dir=tmp_path, dtype="float16")
    assert served.path == full.path and served.dtype == "float16"
    for j in range(3):
        np.testing.assert_array_equal(served.layer(j), full.layer(j).astype(np.float16).astype(np.float32))
    with pytest.raises(ValueError, match="dtype"):
        extract_activations(model, sentences, "ud_english_ewt", "dev", cache_dir=tmp_path, dtype="int8")


def test_rejects_bad_sentences(model, tmp_path):
    with pytest.raises(TypeError, match="sentence 1"):
        extract_activations(model, [["a"], "not tokens"], "x", "dev", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="no sentences"):
        extract_activations(model, [], "x", "dev", cache_dir=tmp_path)


def test_a_slice_is_a_view_of_the_whole_split_when_that_is_cached(model, sentences, tmp_path):
    whole = extract_activations(model, sentences[:30], "ud_english_ewt", "dev", cache_dir=tmp_path)
    files = sorted(tmp_path.rglob("*.h5"))
    view = extract_activations(model, sentences[:12], "ud_english_ewt", "dev-first-12", cache_dir=tmp_path,
                               within=("dev", sentences[:30]))
    assert sorted(tmp_path.rglob("*.h5")) == files  # nothing extracted, nothing written
    assert view.path == whole.path and view.n_sentences == 12 and view.n_tokens == whole.offsets[12]
    for j in range(whole.n_layers):
        np.testing.assert_array_equal(view.layer(j), whole.layer(j)[:view.n_tokens])
        np.testing.assert_array_equal(view.layer_half(j, "backward"), whole.layer_half(j, "backward")[:view.n_tokens])
    np.testing.assert_array_equal(view.sentence(11), whole.sentence(11))
    with pytest.raises(IndexError):
        view.sentence(12)
    assert view.tokens_digest == tokens_digest(sentences[:12]) and view.split == "dev-first-12"
    # keys built from the view name it as its own extraction would be named
    own = extract_activations(model, sentences[:12], "ud_english_ewt", "dev-first-12", cache_dir=tmp_path / "apart")
    assert own.path != whole.path and view.name == own.path.name
    np.testing.assert_allclose(view.layer(2), own.layer(2), rtol=0, atol=1e-5)


def test_a_slice_is_extracted_when_the_whole_is_not_cached_or_does_not_start_with_it(model, sentences, tmp_path):
    alone = extract_activations(model, sentences[:5], "ud_english_ewt", "dev-first-5", cache_dir=tmp_path,
                                within=("dev", sentences[:30]))
    assert alone.n_sentences == 5 and alone.name == alone.path.name and "first_5" in alone.path.name
    extract_activations(model, sentences[:30], "ud_english_ewt", "dev", cache_dir=tmp_path)
    other = extract_activations(model, sentences[1:6], "ud_english_ewt", "dev-other-5", cache_dir=tmp_path,
                                within=("dev", sentences[:30]))  # not a prefix of the whole
    assert other.name == other.path.name and "other_5" in other.path.name
    with pytest.raises(ValueError, match="first 31 sentences"):
        ActivationCache(other.path.parent / extract_activations(
            model, sentences[:30], "ud_english_ewt", "dev", cache_dir=tmp_path).path.name, first=31)


def test_nan_in_a_cached_file_is_named_in_one_line_when_a_probe_reads_it(data_root, model, sentences, tmp_path,
                                                                          capsys):
    """NaN written into a complete cache (its checksums rewritten with it): the suite handed it to
    scikit-learn, whose advice was an imputer, naming no file. Now the read stops, naming the file,
    the count and how to rebuild it: one line from the suite (a ValueError, as its errors are)."""
    from probing.tagging.suite import main as suite_main

    cache = extract_activations(model, sentences[:8], "ud_english_ewt", "dev", cache_dir=tmp_path)
    cache.close()
    with h5py.File(cache.path, "r+") as f:
        f["activations"][1, 3, :2] = [np.nan, np.inf]
    reread = ActivationCache(cache.path)
    np.testing.assert_array_equal(reread.layer(0), cache.layer(0))  # a clean layer reads as before
    with pytest.raises(ActivationCacheError) as caught:  # NonFiniteActivations
        reread.layer(1)
    assert isinstance(caught.value, ValueError) and "\n" not in str(caught.value)
    assert str(caught.value).startswith(f"{cache.path}: 2 of the ") and "delete it and rerun" in str(caught.value)

    argv = ["--model", str(data_root / FIXTURE_MODEL), "--tasks", "pos", "--limit", "8", "--layers", "1",
            "--mix-seeds", "0", "--no-random-bilm", "--quiet", "--cache-dir", str(tmp_path / "suite")]
    assert suite_main(argv) == 0
    for path in (tmp_path / "suite").rglob("*train*.h5"):
        with h5py.File(path, "r+") as f:
            f["activations"][1, 0, 0] = np.nan
    capsys.readouterr()
    assert suite_main([*argv, "--no-probe-cache"]) == 2
    [line] = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert "train" in line and ".h5: 1 of the" in line and "NaN or infinite" in line and "imputer" not in line, line


def test_a_cache_written_under_the_earlier_attribute_name_reads_its_model_identity(model, sentences, tmp_path):
    """Caches written before the rename carry ``model_checksum``; it is read as the model's identity."""
    import h5py

    from probing.engine.cache_file import open_cache

    cache = extract_activations(model, sentences[:4], "ud_english_ewt", "dev", cache_dir=tmp_path)
    path, identity = cache.path, cache.model_identity
    cache.close()
    with h5py.File(path, "r+") as f:
        f.attrs["model_checksum"] = f.attrs["model_identity"]
        del f.attrs["model_identity"]
    old = open_cache(path, verify=False)
    assert old.model_identity == identity != "None"
    old.close()
