"""The static-embedding file (probing.context.static): written atomically with a content checksum, read
back only when it matches, and every bad file or argument named in one line."""

import json
import zipfile

import numpy as np
import pytest

from elmo_model.plumbing.io_safety import OutputBusy, output_lock
from probing.context.static import (
    DEFAULT_WORD2VEC,
    Word2VecConfig,
    load_word2vec,
    main,
    static_baselines,
    train_word2vec,
)
from probing.context.static_embedding import TRAIN_COMMAND, StaticEmbedding


def small(tmp_path):
    emb = StaticEmbedding(["bank", "river", "money"], np.array([[1.0, 0.5], [0.0, 1.0], [1.0, -0.25]]),
                          name="small", lowercase=True, meta={"kind": "test", "config": {"seed": 3}})
    return emb, emb.save(tmp_path / "small.npz")


def rewrite(path, **changes):
    """Write the file again with some arrays replaced, as an editor with numpy would."""
    with np.load(path, allow_pickle=False) as data:
        arrays = {k: data[k] for k in data.files}
    arrays.update(changes)
    np.savez_compressed(path, **arrays)


def test_the_shipped_file_records_its_content_checksum(caplog):
    with np.load(DEFAULT_WORD2VEC, allow_pickle=False) as data:
        meta = json.loads(str(data["meta"]))
    assert len(meta["content_sha256"]) == 64
    with caplog.at_level("WARNING"):
        shipped = load_word2vec()
    assert "checksum" not in caplog.text and len(shipped) > 30_000


def test_save_is_atomic_and_leaves_nothing_else(tmp_path):
    emb, path = small(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["small.npz"]
    with np.load(path, allow_pickle=False) as data:
        assert json.loads(str(data["meta"]))["content_sha256"]
    back = StaticEmbedding.load(path)
    assert back.words == emb.words and back.meta["config"] == {"seed": 3}
    # saving what was loaded gives the same checksum (the checksum is not part of what it covers)
    again = back.save(tmp_path / "again.npz")
    with np.load(path) as a, np.load(again) as b:
        assert json.loads(str(a["meta"]))["content_sha256"] == json.loads(str(b["meta"]))["content_sha256"]


@pytest.mark.parametrize("edit", ["vectors", "words", "meta"])
def test_an_edited_file_is_refused_with_the_way_out(tmp_path, edit):
    _emb, path = small(tmp_path)
    with np.load(path, allow_pickle=False) as data:
        vectors, meta = data["vectors"], json.loads(str(data["meta"]))
    if edit == "vectors":
        vectors = vectors.copy()
        vectors[1, 0] += 1
        rewrite(path, vectors=vectors)
    elif edit == "words":
        rewrite(path, words=np.array(["bank", "money", "river"]))
    else:
        meta["config"]["seed"] = 4  # vectors that no longer belong to the config recorded with them
        rewrite(path, meta=np.array(json.dumps(meta)))
    with pytest.raises(ValueError, match="do not match the content_sha256") as err:
        StaticEmbedding.load(path)
    assert str(path) in str(err.value) and TRAIN_COMMAND in str(err.value) and "\n" not in str(err.value)


def test_damaged_and_foreign_files_get_one_line(tmp_path):
    _emb, path = small(tmp_path)
    data = path.read_bytes()
    cases = {
        "truncated.npz": data[: len(data) // 2],
        "flipped.npz": bytes(data[:60]) + bytes([data[60] ^ 0xFF]) + bytes(data[61:]),
        "empty.npz": b"",
        "text.npz": b"not an embedding",
    }
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
    np.savez(tmp_path / "other.npz", weights=np.zeros(3))  # an .npz of something else
    np.savez(tmp_path / "shape.npz", words=np.array(["a", "b"]), vectors=np.zeros((3, 2), np.float32),
             meta=np.array("{}"))
    np.savez(tmp_path / "nan.npz", words=np.array(["a"]), vectors=np.full((1, 2), np.nan, np.float32),
             meta=np.array("{}"))
    for name in [*cases, "other.npz", "shape.npz", "nan.npz"]:
        with pytest.raises(ValueError) as err:
            StaticEmbedding.load(tmp_path / name)
        message = str(err.value)
        assert message.startswith(str(tmp_path / name)) and TRAIN_COMMAND in message, message
        assert "\n" not in message
    # the retrieval baselines leave a damaged file out, as an absent one, instead of failing
    assert static_baselines(None, tmp_path / "truncated.npz") == []
    # and the CLI says it in one line, exit 2
    assert main(["nearest", "bank", "--embedding", str(tmp_path / "flipped.npz")]) == 2


def test_bad_training_settings_stop_before_any_work(tmp_path, capsys):
    for argv, flag in ((["--epochs", "0"], "--epochs"), (["--dim", "-3"], "--dim"),
                       (["--min-count", "x"], "--min-count"), (["--workers", "0"], "--workers")):
        with pytest.raises(SystemExit) as exit_:
            main(["train-word2vec", "--out", str(tmp_path / "w.npz"), *argv])
        assert exit_.value.code == 2 and flag in capsys.readouterr().err
    assert main(["train-word2vec", "--out", str(tmp_path)]) == 2
    assert "is a directory" in capsys.readouterr().err
    with pytest.raises(ValueError, match="vector_size 0"):
        train_word2vec(None, Word2VecConfig(vector_size=0), out=None)
    assert list(tmp_path.iterdir()) == []


def test_a_second_training_on_the_same_file_stops(tmp_path):
    out = tmp_path / "w2v.npz"
    with output_lock(out):  # another run is writing this file
        with pytest.raises(OutputBusy, match="another run"):
            train_word2vec(None, Word2VecConfig(max_tokens=1000), out=out)
    assert not out.exists()


def test_the_file_is_a_zip_of_plain_arrays(tmp_path):
    _emb, path = small(tmp_path)
    with zipfile.ZipFile(path) as archive:
        assert sorted(archive.namelist()) == ["meta.npy", "vectors.npy", "words.npy"]
