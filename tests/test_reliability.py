"""Nothing lost, nothing silently wrong: every writer, reader and resume of the workbench.

Each test reproduces one way a run used to lose data or write wrong output without a word, or
to fail with a traceback, on bilm-tf's fixture model and real sentences (UD English-EWT dev);
docs/reliability.md lists them beside the behaviour they guard."""

from __future__ import annotations

import gzip
import json
import shutil
import threading
from pathlib import Path
from urllib.parse import unquote

import h5py
import numpy as np
import pytest

from elmo_model import ElmoEmbedder, load_bilm
from elmo_model.corpus import embedder as embedder_cli
from elmo_model.text.reader import TextFileError, check_text_file, read_text_lines

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def fixture_dir(data_root):
    return data_root / "fixtures" / "bilm_tf"


@pytest.fixture(scope="module")
def model(fixture_dir):
    return load_bilm(fixture_dir)


def ud_sentences(data_root: Path, n: int, skip: int = 0) -> list[list[str]]:
    """The first ``n`` sentences (after ``skip``) of UD English-EWT dev, as token lists."""
    sentences, tokens = [], []
    with open(data_root / "ud_english_ewt" / "en_ewt-ud-dev.conllu", encoding="utf-8") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                if tokens:
                    sentences.append(tokens[:30])
                    tokens = []
                    if len(sentences) >= n + skip:
                        break
            elif not line.startswith("#"):
                cols = line.split("\t")
                if cols[0].isdigit():
                    tokens.append(cols[1])
    return sentences[skip:]


def write_lines(path: Path, sentences) -> Path:
    path.write_text("".join(" ".join(s) + "\n" for s in sentences), encoding="utf-8")
    return path


def read_all(path: Path) -> dict[str, np.ndarray]:
    with h5py.File(path, "r") as f:
        return {k: f[k][()] for k in f}


def assert_same_file(a: Path, b: Path) -> None:
    left, right = read_all(a), read_all(b)
    assert sorted(left) == sorted(right)
    for key in left:
        if key == "sentence_to_index":
            assert json.loads(left[key]) == json.loads(right[key])
        else:
            np.testing.assert_array_equal(left[key], right[key], err_msg=f"dataset {key!r}")


class Stop(Exception):
    pass


def stop_after(calls: int):
    """A progress callback that interrupts the run at its ``calls``-th report."""
    seen = []

    def progress(done, total):
        seen.append(done)
        if len(seen) >= calls:
            raise Stop

    return progress


# --------------------------------------------------------------------------------------------
# The embedding CLI / ElmoEmbedder.embed_file
# --------------------------------------------------------------------------------------------


def test_stateful_embedding_resumes_with_the_carried_state(tmp_path, model, data_root):
    text = write_lines(tmp_path / "in.txt", ud_sentences(data_root, 24))
    ElmoEmbedder(model, batch_size=4, stateful=True).embed_file(text, tmp_path / "whole.hdf5")
    with pytest.raises(Stop):
        ElmoEmbedder(model, batch_size=4, stateful=True).embed_file(text, tmp_path / "out.hdf5",
                                                                     progress=stop_after(3))
    assert (tmp_path / "out.hdf5.partial").exists()
    ElmoEmbedder(model, batch_size=4, stateful=True).embed_file(text, tmp_path / "out.hdf5")
    assert_same_file(tmp_path / "whole.hdf5", tmp_path / "out.hdf5")


def test_partial_of_an_edited_input_is_discarded(tmp_path, model, data_root, caplog):
    embedder = ElmoEmbedder(model, batch_size=2)
    sentences = ud_sentences(data_root, 200)
    text = write_lines(tmp_path / "in.txt", sentences)
    with pytest.raises(Stop):
        embedder.embed_file(text, tmp_path / "out.hdf5", progress=stop_after(3))  # 2 windows of 64 done
    edited = ud_sentences(data_root, 200, skip=300)  # other sentences, other lengths
    write_lines(text, edited)
    embedder.embed_file(text, tmp_path / "out.hdf5")
    assert "another job" in caplog.text and "input_digest" in caplog.text
    embedder.embed_file(text, tmp_path / "fresh.hdf5")
    assert_same_file(tmp_path / "fresh.hdf5", tmp_path / "out.hdf5")


def test_a_partial_from_another_output_format_is_discarded(tmp_path, model, data_root):
    embedder = ElmoEmbedder(model, batch_size=2)
    text = write_lines(tmp_path / "in.txt", ud_sentences(data_root, 200))
    with pytest.raises(Stop):
        embedder.embed_file(text, tmp_path / "out.hdf5", "top", progress=stop_after(3))
    embedder.embed_file(text, tmp_path / "out.hdf5", "all")
    embedder.embed_file(text, tmp_path / "fresh.hdf5", "all")
    assert_same_file(tmp_path / "fresh.hdf5", tmp_path / "out.hdf5")


def test_a_second_run_on_the_same_output_stops_and_leaves_the_first_alone(tmp_path, model, data_root):
    embedder = ElmoEmbedder(model, batch_size=2)
    text = write_lines(tmp_path / "in.txt", ud_sentences(data_root, 140))
    errors = []

    def second_run_meanwhile(done, total):
        if done and not errors:
            try:
                ElmoEmbedder(model, batch_size=2).embed_file(text, tmp_path / "out.hdf5")
            except ValueError as err:
                errors.append(str(err))
            else:
                errors.append("no error")

    embedder.embed_file(text, tmp_path / "out.hdf5", progress=second_run_meanwhile)
    assert errors and "another run" in errors[0] and "out.hdf5" in errors[0]
    embedder.embed_file(text, tmp_path / "alone.hdf5")
    assert_same_file(tmp_path / "alone.hdf5", tmp_path / "out.hdf5")
    assert not (tmp_path / "out.hdf5.partial").exists() and not (tmp_path / "out.hdf5.lock").exists()


def test_a_second_process_on_the_same_output_is_refused(tmp_path, fixture_dir, data_root):
    """Between threads (separate open files, as between processes): the lock is flock-based."""
    from elmo_model.plumbing.io_safety import output_lock

    text = write_lines(tmp_path / "in.txt", ud_sentences(data_root, 5))
    held, release = threading.Event(), threading.Event()

    def holder():
        with output_lock(tmp_path / "out.hdf5"):
            held.set()
            release.wait(30)

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait(30)
    try:
        code = embedder_cli.main([str(text), str(tmp_path / "out.hdf5"), "--model", str(fixture_dir)])
    finally:
        release.set()
        thread.join()
    assert code == 2 and not (tmp_path / "out.hdf5").exists()


def test_sentence_keys_are_escaped_one_dataset_per_line(tmp_path, model):
    lines = [".", "and/or x", "and", "100% sure", "..", "sentence_to_index", "a . b", "and"]
    text = tmp_path / "in.txt"
    text.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = ElmoEmbedder(model, batch_size=3).embed_file(text, tmp_path / "out.hdf5", use_sentence_keys=True)
    by_line = ElmoEmbedder(model, batch_size=3).embed_file(text, tmp_path / "lines.hdf5")
    with h5py.File(out, "r") as f, h5py.File(by_line, "r") as g:
        index = json.loads(f["sentence_to_index"][()])
        assert sorted(index) == sorted(set(lines))
        for i, sentence in enumerate(lines):
            key = index[sentence]
            assert unquote(key) == sentence
            assert isinstance(f[key], h5py.Dataset) and "/" not in key
            np.testing.assert_array_equal(f[key][...], g[str(i)][...])
        assert len(f.keys()) == len(set(lines)) + 1  # every distinct sentence at the root, plus the index


def run_cli(argv, capsys):
    code = embedder_cli.main([str(a) for a in argv])
    err = capsys.readouterr().err
    return code, [line for line in err.splitlines() if line.startswith("error")]


def test_paths_are_checked_before_any_work(tmp_path, fixture_dir, capsys, caplog):
    text = write_lines(tmp_path / "in.txt", [["a", "b"]])
    (tmp_path / "somedir").mkdir()
    code, errors = run_cli([tmp_path / "somedir", tmp_path / "o.hdf5", "--model", fixture_dir], capsys)
    assert code == 2 and len(errors) == 1 and "somedir" in errors[0] and "directory" in errors[0]
    code, errors = run_cli([text, tmp_path / "somedir", "--model", fixture_dir], capsys)
    assert code == 2 and "is a directory" in errors[0]
    assert not list((tmp_path).glob("*.partial"))
    code, errors = run_cli([text, tmp_path / "missing" / "o.hdf5", "--model", fixture_dir], capsys)
    assert code == 2 and "missing does not exist" in errors[0] and "damaged" not in caplog.text
    code, errors = run_cli([text, text, "--model", fixture_dir], capsys)
    assert code == 2 and "input" in errors[0]
    assert text.read_text() == "a b\n"
    (tmp_path / "empty.txt").write_text("")
    code, errors = run_cli([tmp_path / "empty.txt", tmp_path / "e.hdf5", "--model", fixture_dir], capsys)
    assert code == 2 and "no sentences" in errors[0] and not (tmp_path / "e.hdf5").exists()


@pytest.mark.parametrize("value", ["0", "-1", "x"])
def test_batch_size_must_be_positive(tmp_path, fixture_dir, capsys, value):
    text = write_lines(tmp_path / "in.txt", [["a", "b"]])
    with pytest.raises(SystemExit) as exit_info:
        embedder_cli.main([str(text), str(tmp_path / "o.hdf5"), "--model", str(fixture_dir), "--batch-size", value])
    assert exit_info.value.code == 2 and "--batch-size" in capsys.readouterr().err


def test_embedder_refuses_a_batch_size_below_one(model):
    with pytest.raises(ValueError, match="batch_size"):
        ElmoEmbedder(model, batch_size=0)


# --------------------------------------------------------------------------------------------
# The activation cache
# --------------------------------------------------------------------------------------------


def test_activation_data_is_on_disk_before_its_done_flags(tmp_path, model, data_root, monkeypatch):
    """At the instant a window's ``done`` flags are written, a copy of the file as it is on disk
    (what a crash would leave) already holds that window's vectors."""
    from probing.engine.activations import extract_activations

    sentences = ud_sentences(data_root, 70)  # 3 windows of 32 sentences
    snapshots = []
    original = h5py.Dataset.__setitem__

    def spy(self, selection, value):
        if self.name == "/done" and str(self.file.filename).endswith(".partial"):
            copy = tmp_path / f"crash{len(snapshots)}.h5"
            shutil.copyfile(self.file.filename, copy)
            snapshots.append((copy, selection, np.array(value)))
        return original(self, selection, value)

    monkeypatch.setattr(h5py.Dataset, "__setitem__", spy)
    cache = extract_activations(model, sentences, "ud", "dev", cache_dir=tmp_path / "cache", batch_size=1)
    monkeypatch.undo()
    assert sum(flags.any() for _, _, flags in snapshots) == 3
    for copy, selection, flags in snapshots:
        if not flags.any():
            continue  # the initial all-false flags
        window = range(len(sentences))[selection]
        with h5py.File(copy, "r") as f:
            for i in window:
                if flags[i - window.start]:
                    start, end = cache.offsets[i], cache.offsets[i + 1]
                    np.testing.assert_array_equal(f["activations"][:, start:end], cache.sentence(i),
                                                  err_msg=f"sentence {i} in {copy.name}")


# --------------------------------------------------------------------------------------------
# The trainer
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, data_root):
    """240 paragraphs of the LM corpus's wiki validation shard."""
    import gzip

    path = tmp_path_factory.mktemp("corpus") / "text.txt"
    with gzip.open(data_root / "lm_corpus" / "wiki-valid.txt.gz", "rt", encoding="utf-8") as f:
        path.write_text("".join(next(f) for _ in range(240)), encoding="utf-8")
    return path


def tiny_args(corpus: Path, out: Path, *extra) -> list[str]:
    return ["--train", str(corpus), "--out", str(out), "--vocab-size", "500", "--vocab-min-count", "1",
            "--char-embedding-dim", "4", "--filters", "[[1, 8], [2, 8]]", "--n-highway", "1", "--lstm-dim", "16",
            "--projection-dim", "8", "--softmax-cutoffs", "100", "--batch-tokens", "200",
            "--max-sentence-tokens", "20", "--log-every", "4", "--threads", "1", *map(str, extra)]


def tiny_config(corpus: Path, out: Path, **overrides):
    from elmo_model.training.train import TrainConfig

    settings = dict(train=[str(corpus)], out=str(out), vocab_size=500, vocab_min_count=1, char_embedding_dim=4,
                    filters=[[1, 8], [2, 8]], n_highway=1, lstm_dim=16, projection_dim=8, softmax_cutoffs=[100],
                    batch_tokens=200, max_sentence_tokens=20, log_every=4, threads=1,
                    checkpoint_every_minutes=1e9, validate_every_minutes=1e9)
    settings.update(overrides)
    return TrainConfig(**settings)


def test_the_logged_loss_curve_continues_across_an_interruption_inside_a_window(corpus, tmp_path):
    from elmo_model.training.train import Trainer

    straight = Trainer(tiny_config(corpus, tmp_path / "straight", max_steps=16), progress=False)
    straight.train()
    Trainer(tiny_config(corpus, tmp_path / "resumed", max_steps=10), progress=False).train()  # stops mid-window
    resumed = Trainer(tiny_config(corpus, tmp_path / "resumed", max_steps=16), progress=False)
    resumed.train()
    losses = lambda trainer: [(p["step"], p["loss"]) for p in trainer.state["loss_curve"]]  # noqa: E731
    assert losses(straight) == losses(resumed) and len(losses(straight)) == 4


@pytest.mark.parametrize("flag,value", [("--batch-tokens", 0), ("--max-hours", 0), ("--max-hours", -1),
                                        ("--max-steps", 0), ("--log-every", 0), ("--max-tokens", -5)])
def test_training_arguments_are_checked_before_any_work(corpus, tmp_path, capsys, flag, value):
    from elmo_model.training.train import main

    code = main(tiny_args(corpus, tmp_path / "run", "--max-steps", 3, flag, value))
    err = capsys.readouterr().err
    assert code == 2 and f"{flag} {value}" in err and "expected" in err
    assert not (tmp_path / "run" / "model").exists() and not (tmp_path / "run").exists()


def test_an_empty_training_file_trains_and_exports_nothing(tmp_path, capsys):
    from elmo_model.training.train import main

    (tmp_path / "empty.txt").write_text("\n\n", encoding="utf-8")
    code = main(tiny_args(tmp_path / "empty.txt", tmp_path / "run", "--max-steps", 3))
    captured = capsys.readouterr()
    assert code == 2 and "no text in" in captured.err and "empty.txt" in captured.err
    assert not (tmp_path / "run" / "model").exists() and "exported" not in captured.out


@pytest.mark.parametrize("damage", ["truncated", "random", "empty"])
def test_a_damaged_checkpoint_is_named_with_the_way_out(corpus, tmp_path, capsys, damage):
    from elmo_model.training.train import main

    run = tmp_path / "run"
    assert main(tiny_args(corpus, run, "--max-steps", 2)) == 0
    checkpoint = run / "checkpoint.pt"
    data = checkpoint.read_bytes()
    checkpoint.write_bytes({"truncated": data[: len(data) // 2], "random": np.random.default_rng(0).bytes(4096),
                            "empty": b""}[damage])
    capsys.readouterr()
    code = main(tiny_args(corpus, run, "--max-steps", 4))
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error")]
    assert code == 2 and len(lines) == 1
    assert str(checkpoint) in lines[0] and "damaged" in lines[0] and f"--init-from {run / 'model'}" in lines[0]


def test_the_resume_refusal_does_not_offer_to_change_the_training_files(corpus, tmp_path):
    from elmo_model.training.train import RESUMABLE_CHANGES, Trainer

    other = tmp_path / "other.txt"
    other.write_text(corpus.read_text(encoding="utf-8")[:20_000], encoding="utf-8")
    Trainer(tiny_config(corpus, tmp_path / "run", max_steps=1), progress=False).train()
    with pytest.raises(ValueError) as refusal:
        Trainer(tiny_config(other, tmp_path / "run", max_steps=2), progress=False).train()
    message = str(refusal.value)
    listed = message.split("only ")[1].split(" may change")[0].split(", ")
    assert "train" not in listed and set(listed) == set(RESUMABLE_CHANGES) - {"train"}
    assert "same training files" in message


def test_a_second_trainer_on_the_same_run_directory_stops(corpus, tmp_path):
    from elmo_model.plumbing.io_safety import output_lock
    from elmo_model.training.train import Trainer

    (tmp_path / "run").mkdir()
    with output_lock(tmp_path / "run" / "train"):
        with pytest.raises(ValueError, match="another run"):
            Trainer(tiny_config(corpus, tmp_path / "run", max_steps=1), progress=False).train()
    assert not (tmp_path / "run" / "checkpoint.pt").exists()


# --------------------------------------------------------------------------------------------
# Weights, options, model cards
# --------------------------------------------------------------------------------------------


def copy_fixture(fixture_dir: Path, target: Path) -> Path:
    target.mkdir()
    shutil.copy(fixture_dir / "options.json", target / "options.json")
    shutil.copy(fixture_dir / "lm_weights.hdf5", target / "weights.hdf5")
    return target


def flip_bytes(path: Path, n: int = 64) -> None:
    data = bytearray(path.read_bytes())
    for i in np.random.default_rng(0).choice(np.arange(len(data) // 2, len(data)), n, replace=False):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def test_flipped_bytes_in_weights_are_refused_when_the_card_records_a_checksum(fixture_dir, tmp_path):
    from elmo_model.bilm.weights import file_checksum

    model_dir = copy_fixture(fixture_dir, tmp_path / "m")
    (model_dir / "model_card.json").write_text(json.dumps({"weights_sha256": file_checksum(model_dir / "weights.hdf5")}))
    load_bilm(model_dir)  # intact: loads
    flip_bytes(model_dir / "weights.hdf5")
    with pytest.raises(ValueError, match="weights.hdf5: sha256 .* differs from .* model card"):
        load_bilm(model_dir)


def test_the_shipped_card_records_the_shipped_weights(tmp_path):
    from elmo_model.bilm.weights import file_checksum
    from elmo_model.models.registry import MODELS_DIR

    card = json.loads((MODELS_DIR / "elmo-mini" / "model_card.json").read_text(encoding="utf-8"))
    assert card["weights_sha256"] == file_checksum(MODELS_DIR / "elmo-mini" / "weights.hdf5")


def test_an_export_records_its_weights_checksum(corpus, tmp_path):
    from elmo_model.bilm.weights import file_checksum
    from elmo_model.training.train import Trainer

    trainer = Trainer(tiny_config(corpus, tmp_path / "run", max_steps=2), progress=False)
    trainer.train()
    directory = trainer.export(evaluate_test=False)
    card = json.loads((directory / "model_card.json").read_text(encoding="utf-8"))
    assert card["weights_sha256"] == file_checksum(directory / "weights.hdf5")
    flip_bytes(directory / "weights.hdf5")
    with pytest.raises(ValueError, match="differs"):
        load_bilm(directory)


def test_a_non_utf8_options_file_is_named(fixture_dir, tmp_path):
    model_dir = copy_fixture(fixture_dir, tmp_path / "m")
    (model_dir / "options.json").write_bytes(b'{"note": "caf\xe9", ' + (fixture_dir / "options.json").read_bytes()[1:])
    with pytest.raises(ValueError, match=r"options\.json: not UTF-8"):
        load_bilm(model_dir)


def test_weight_shapes_are_checked_before_the_model_is_allocated(fixture_dir, tmp_path, monkeypatch):
    import elmo_model.models.registry as registry

    model_dir = copy_fixture(fixture_dir, tmp_path / "m")
    options = json.loads((fixture_dir / "options.json").read_text())
    options["lstm"]["dim"] = 4096 * 64  # an options.json that would allocate gigabytes
    (model_dir / "options.json").write_text(json.dumps(options))

    def allocate(*args, **kwargs):
        raise AssertionError("the model was allocated before the weight file was checked")

    monkeypatch.setattr(registry, "BiLM", allocate)
    with pytest.raises(ValueError, match="has shape .* expected .* from options.json"):
        load_bilm(model_dir)


# --------------------------------------------------------------------------------------------
# Text a user gives: one reader, one line for each fault
# --------------------------------------------------------------------------------------------


def _cut_gzip() -> bytes:
    whole = gzip.compress("".join(f"line {i} by the river bank .\n" for i in range(3000)).encode())
    return whole[: len(whole) // 2]


@pytest.mark.parametrize("name, content, says", [
    ("latin1.txt", "fine\nun caf\xe9 .\n".encode("latin-1"),
     "{path}:2: not valid UTF-8 (invalid continuation byte at byte 6 of the line); re-encode the file as UTF-8"),
    ("nul.bin", b"fine\nfine\nthe\x00dog\n", "{path}:3: holds a NUL byte: a binary file, not text; give UTF-8 text"),
    ("cut.txt.gz", _cut_gzip(), "{path}: not a readable gzip file ("),
    ("plain.txt.gz", b"plain text, not gzip\n", "{path}: not a readable gzip file ("),
    ("folder", None, "{path}: is a directory; give the vocabulary file itself"),
    ("missing.txt", "", "{path}: no such file"),
])
def test_the_check_and_the_reader_refuse_bad_text_in_the_same_words(tmp_path, name, content, says):
    """``check_text_file`` (a command's check before the work) and ``read_text_lines`` (the work)
    are one reader: the same fault gives the same line, the flag that named the file first."""
    path = tmp_path / name
    if content is None:
        path.mkdir()
    elif content:
        path.write_bytes(content)
    expected = says.format(path=f"--vocab {path}")
    with pytest.raises(TextFileError) as checked:
        check_text_file(path, "--vocab", "vocabulary file")
    with pytest.raises(TextFileError) as read:
        list(read_text_lines(path, flag="--vocab", what="vocabulary file"))
    assert str(checked.value).startswith(expected)
    assert str(read.value) == str(checked.value)


def test_the_check_reads_the_head_of_a_file_and_the_reader_all_of_it(tmp_path):
    """A Latin-1 byte far past the checked head passes the check (a command's inputs are checked
    in milliseconds) and is still refused, naming its line, when the work reaches it."""
    path = tmp_path / "long.txt.gz"
    path.write_bytes(gzip.compress(b"the river bank .\n" * 20000 + b"caf\xe9\n"))
    assert check_text_file(path, max_chars=10_000) == path
    with pytest.raises(TextFileError, match=r":20001: not valid UTF-8"):
        list(read_text_lines(path))
    with pytest.raises(TextFileError, match=r":20001: not valid UTF-8"):
        check_text_file(path)  # the whole file lies within the default head


# --------------------------------------------------------------------------------------------
# Caches read back from disk
# --------------------------------------------------------------------------------------------


def test_an_edited_probe_cache_entry_is_recomputed_not_reported(tmp_path):
    from probing.engine.metrics import BootstrapInterval
    from probing.tagging.probes import PathPoint
    from probing.engine.result_cache import ResultCache
    from probing.tagging.results import PROBE_CACHE_VERSION, ProbeScore

    score = ProbeScore("layer 1", "layer", 1, None, BootstrapInterval("accuracy", 0.8734, 0.8612, 0.8851, 0.95, 200, 100, 0),
                       0.8734, 0.8611, 1.0, (PathPoint(1.0, 0.8611, 40, 0.5),), 5000, 40, 0.5, 0)
    cache = ResultCache(tmp_path, ProbeScore, enabled=True, version=PROBE_CACHE_VERSION)
    key = cache.key(task="pos", layer=1)
    cache.put(key, score)
    assert cache.get(key) == score
    path = next(tmp_path.glob("*.json"))
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("0.8734", "0.9734"), encoding="utf-8")  # one digit
    assert cache.get(key) is None


def test_a_truncated_archive_is_damaged_not_present(tmp_path, data_root, capsys):
    from probing import data
    from probing.data import cli as data_cli
    from probing.tagging.tasks import read_conll2000

    corpora = tmp_path / "nltk_data" / "corpora"
    corpora.mkdir(parents=True)
    whole = (data_root / "nltk_data" / "corpora" / "conll2000.zip").read_bytes()
    (corpora / "conll2000.zip").write_bytes(whole[: len(whole) // 2])
    status = data.dataset_status("conll2000", tmp_path)
    assert status.state == "corrupt" and not status.present
    assert not data.is_present("conll2000", tmp_path)  # so `download` fetches it again
    with pytest.raises(data.DatasetMissing) as missing:
        read_conll2000("test", tmp_path)
    message = str(missing.value)
    assert "conll2000.zip" in message and "damaged" in message and "--force" in message
    assert data_cli.main(["status", "--data-root", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "DAMAGED" in out and "download conll2000 --force" in out


# --------------------------------------------------------------------------------------------
# Progress
# --------------------------------------------------------------------------------------------


def test_the_report_bar_weights_sections_by_their_expected_work():
    from probing.report import SECTION_SECONDS, _Progress

    calls = []
    sections = ["probing suite", "SemCor index", "contextuality"]
    steps = _Progress(lambda *a: calls.append(a[1]), sections)
    steps.start("probing suite")
    steps.suite("probe", 1, 2)  # half the suite
    total = sum(SECTION_SECONDS[s] for s in sections)
    assert calls[-1] == pytest.approx(100 * 0.5 * SECTION_SECONDS["probing suite"] / total, abs=0.1)
    steps.start("contextuality")
    assert calls[-1] == pytest.approx(100 * (total - SECTION_SECONDS["contextuality"]) / total, abs=0.1)


def test_the_report_bar_weights_the_semcor_index_by_the_slice_it_indexes():
    """All of SemCor (--semcor-limit 0) takes about 3.7 times the default 10,000 sentences: the bar
    gives the index that much more of itself, and a small slice that much less."""
    from probing.report.run import SECTION_SECONDS, _Progress

    suite, semcor = SECTION_SECONDS["probing suite"], SECTION_SECONDS["SemCor index"]
    for sentences, scale in ((10_000, 1.0), (None, 3.7176), (0, 3.7176), (1_000, 0.1)):
        calls = []
        steps = _Progress(lambda *a: calls.append(a[1]), ["probing suite", "SemCor index"], (), sentences)
        steps.start("SemCor index")
        assert calls[-1] == pytest.approx(100 * suite / (suite + semcor * scale), abs=0.1), sentences


def test_the_report_bar_weights_the_syntax_section_by_its_tasks():
    from probing.report.run import SECTION_SECONDS, SYNTAX_TASK_SECONDS, _Progress

    suite = SECTION_SECONDS["probing suite"]
    at_syntax = []
    for tasks in (["pos", "structural"], ["pos", "structural", "arcs"]):
        calls = []
        steps = _Progress(lambda *a: calls.append(a[1]), ["probing suite", "syntax"], tasks)
        steps.start("syntax")  # the suite is done: its share of the whole is what the bar shows
        syntax = sum(SYNTAX_TASK_SECONDS[t] for t in tasks if t in SYNTAX_TASK_SECONDS)
        assert calls[-1] == pytest.approx(100 * suite / (suite + syntax), abs=0.1)
        assert calls[-1] < 100 * suite / (suite + 10.0) - 1  # the syntax probes count their seconds, not 10
        at_syntax.append(calls[-1])
    assert at_syntax[1] < at_syntax[0]  # a second syntax task leaves more of the bar to the section


def test_a_long_extraction_moves_the_suite_bar(tmp_path, model, data_root):
    from probing.tagging.suite import run_suite
    from probing.tagging.suite_config import SuiteConfig

    seen = []
    run_suite(model, ["pos"], layers=[1], cache_dir=tmp_path, limit=200, progress=lambda label, done, total: seen.append(done),
              config=SuiteConfig(probe_cache=False, random_bilm=False, mix=False, halves=False, control=False, batch_size=2))
    first_step = [d for d in seen if d < 1]
    assert len(set(first_step)) > 2  # the bar moved while the first split was extracted
    assert seen == sorted(seen)


def test_a_stateful_crash_between_the_state_and_its_mark_resumes_exactly(tmp_path, model, data_root, monkeypatch):
    """A crash after a batch's state is saved but before the mark that says the batch is done:
    the resume must restore the state of the last mark, not the newer one."""
    text = write_lines(tmp_path / "in.txt", ud_sentences(data_root, 24))
    ElmoEmbedder(model, batch_size=4, stateful=True).embed_file(text, tmp_path / "whole.hdf5")
    original = h5py.AttributeManager.__setitem__

    def crash_at_the_third_mark(self, name, value):
        if name == "lines_done" and value == 12:
            raise Stop
        return original(self, name, value)

    monkeypatch.setattr(h5py.AttributeManager, "__setitem__", crash_at_the_third_mark)
    with pytest.raises(Stop):
        ElmoEmbedder(model, batch_size=4, stateful=True).embed_file(text, tmp_path / "out.hdf5")
    monkeypatch.undo()
    ElmoEmbedder(model, batch_size=4, stateful=True).embed_file(text, tmp_path / "out.hdf5")
    assert_same_file(tmp_path / "whole.hdf5", tmp_path / "out.hdf5")
