"""Every number that enters a model is checked once, with one line naming the field and the file;
a training run that goes non-finite stops before the update and exports nothing; text that is not
UTF-8 and a truncated dataset file are refused on first use.

Each test here was run against the code before these checks (the commit before them) and failed
there: NaN and negative clips and ``"false"`` skip settings were accepted from options.json;
``train --cell-clip nan`` and ``--learning-rate 1e10`` trained, exited 0 and exported NaN weights;
``--filters '[]'`` ended in a torch traceback; ``model_card`` on a NaN model raised a ValueError
traceback; ``train --train random.bin`` and a Latin-1 file trained on replacement characters; a
truncated EWT train file was read as a 2-sentence treebank."""

import gzip
import json
import os
import shutil

import h5py
import numpy as np
import pytest
import torch

from elmo_model import load_bilm
from elmo_model.bilm.config import ElmoConfig
from elmo_model.elmo import Elmo
from elmo_model.training.model_card import main as model_card_main
from elmo_model.training.train import TrainConfig, Trainer
from elmo_model.training.train import main as train_main
from probing.data import DatasetTruncated, dataset_status
from probing.tagging.suite import main as suite_main
from probing.tagging.tasks import load_task

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, data_root):
    """The first 100 paragraphs of the LM corpus's wiki validation shard."""
    path = tmp_path_factory.mktemp("corpus") / "text.txt"
    with gzip.open(data_root / "lm_corpus" / "wiki-valid.txt.gz", "rt", encoding="utf-8") as f:
        path.write_text("".join(next(f) for _ in range(100)), encoding="utf-8")
    return path


TINY_SETTINGS = dict(vocab_size=800, vocab_max_tokens=100_000, vocab_min_count=1, char_embedding_dim=4,
                     filters=[[1, 8], [2, 8], [3, 16]], n_highway=1, lstm_dim=32, projection_dim=16,
                     softmax_cutoffs=[200], batch_tokens=300, max_sentence_tokens=30, threads=1, precision="fp32",
                     validate_every_minutes=1e9)
TINY = [text for name, value in TINY_SETTINGS.items() for text in (
    "--" + name.replace("_", "-"), json.dumps(value) if name == "filters" else
    str(value[0]) if name == "softmax_cutoffs" else str(value))]


def _one_error_line(captured) -> str:
    """The one ``error:`` line on stderr (progress bars and log lines aside); no traceback."""
    lines = [line for line in captured.err.replace("\r", "\n").splitlines() if line.startswith("error")]
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    return lines[0]


# ---- options.json ------------------------------------------------------------------------------

@pytest.mark.parametrize("section, key, value, field", [
    ("lstm", "cell_clip", float("nan"), "lstm.cell_clip = nan"),
    ("lstm", "cell_clip", -3, "lstm.cell_clip = -3"),
    ("lstm", "proj_clip", float("inf"), "lstm.proj_clip = inf"),
    ("lstm", "dim", 3.5, "lstm.dim = 3.5"),
    ("lstm", "use_skip_connections", "false", 'lstm.use_skip_connections = "false"'),
    ("char_cnn", "filters", [], "char_cnn.filters = []"),
    ("char_cnn", "filters", [[0, 4]], "char_cnn.filters = [[0, 4]]"),
])
def test_options_out_of_range_are_refused_naming_field_and_file(data_root, tmp_path, section, key, value, field):
    folder = tmp_path / "model"
    folder.mkdir()
    shutil.copy(data_root / "fixtures/bilm_tf/lm_weights.hdf5", folder / "weights.hdf5")
    options = json.loads((data_root / "fixtures/bilm_tf/options.json").read_text())
    options[section][key] = value
    (folder / "options.json").write_text(json.dumps(options))
    with pytest.raises(ValueError) as err:
        load_bilm(folder)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"{folder / 'options.json'}: {field}: must be")


def test_a_missing_clip_means_no_clip_and_loads(data_root, tmp_path):
    """bilm-tf's convention: no cell_clip key (or null) is no clipping, not an error."""
    options = json.loads((data_root / "fixtures/bilm_tf/options.json").read_text())
    del options["lstm"]["cell_clip"]
    options["lstm"]["proj_clip"] = None
    config = ElmoConfig.from_options(options, "options.json")
    assert config.lstm.cell_clip is None and config.lstm.proj_clip is None


def test_non_finite_mix_weights_are_refused(data_root):
    with pytest.raises(ValueError, match=r"scalar_mix_parameters = nan: each must be a finite number"):
        Elmo(data_root / "fixtures/bilm_tf/options.json", data_root / "fixtures/bilm_tf/lm_weights.hdf5", 1,
             scalar_mix_parameters=[0.0, float("nan"), 0.0])


# ---- the trainer's flags, its loss and its export ---------------------------------------------

@pytest.mark.parametrize("flag, value, shown", [
    ("--cell-clip", "nan", "--cell-clip nan: must be a finite number > 0"),
    ("--proj-clip", "-3", "--proj-clip -3.0: must be a finite number > 0"),
    ("--filters", "[]", "--filters []: must be a non-empty list of [width, n_filters] pairs"),
    ("--dropout", "nan", "--dropout nan"),
])
def test_train_refuses_a_bad_number_at_once_in_one_line(corpus, tmp_path, capsys, flag, value, shown):
    out = tmp_path / "run"
    assert train_main(["--train", str(corpus), "--out", str(out), "--max-steps", "2", *TINY, flag, value]) == 2
    assert _one_error_line(capsys.readouterr()).startswith(f"error: {shown}")
    assert not out.exists()  # refused before anything was read or written


def test_a_non_finite_loss_stops_before_the_update_keeping_the_last_checkpoint(corpus, tmp_path, capsys):
    """A learning rate of 1e10 makes step 2's loss NaN: the run stops there, names the step,
    keeps step 1's checkpoint (finite), exports nothing and exits nonzero."""
    out = tmp_path / "run"
    code = train_main(["--train", str(corpus), "--out", str(out), "--max-steps", "20", *TINY,
                       "--learning-rate", "1e10", "--grad-clip", "0", "--checkpoint-every-minutes", "0"])
    line = _one_error_line(capsys.readouterr())
    assert code != 0 and line.startswith("error: step 2: not finite (loss nan")
    assert f"{out / 'checkpoint.pt'} (step 1) is kept" in line
    saved = torch.load(out / "checkpoint.pt", map_location="cpu", weights_only=True)
    assert saved["progress"]["step"] == 1
    assert all(torch.isfinite(t).all() for t in saved["model"].values() if t.is_floating_point())
    assert not (out / "model").exists()


def test_export_refuses_non_finite_weights(corpus, tmp_path):
    config = TrainConfig(train=[str(corpus)], out=str(tmp_path / "run"), max_steps=2, checkpoint_every_minutes=1e9,
                         **TINY_SETTINGS)
    trainer = Trainer(config, progress=False)
    trainer.train()
    with torch.no_grad():
        trainer.lm.bilm.token_embedder.projection.weight[0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"the weights hold 1 non-finite values \(bilm.token_embedder.projection"):
        trainer.export()
    assert not (tmp_path / "run" / "model" / "weights.hdf5").exists()


def test_model_card_on_a_model_holding_nan_says_so_in_one_line(corpus, tmp_path, capsys):
    run = tmp_path / "run"
    assert train_main(["--train", str(corpus), "--out", str(run), "--max-steps", "2", *TINY,
                       "--checkpoint-every-minutes", "1e9"]) == 0
    model = run / "model"
    with h5py.File(model / "weights.hdf5", "r+") as f:
        f["CNN_proj/W_proj"][0, 0] = np.nan
    card = json.loads((model / "model_card.json").read_text())
    del card["weights_sha256"]  # replaced on purpose: the NaN itself must be caught
    (model / "model_card.json").write_text(json.dumps(card))
    capsys.readouterr()
    assert model_card_main([str(model), "--skip-perplexity"]) == 2
    line = _one_error_line(capsys.readouterr())
    assert line.startswith(f"error: {model / 'weights.hdf5'}: dataset 'CNN_proj/W_proj' contains NaN")
    # a card whose recorded settings break the trainer's rules: one line naming the card
    with h5py.File(model / "weights.hdf5", "r+") as f:
        f["CNN_proj/W_proj"][0, 0] = 0.0
    card["train_config"]["cell_clip"] = float("nan")
    (model / "model_card.json").write_text(json.dumps(card))
    assert model_card_main([str(model), "--skip-perplexity"]) == 2
    assert _one_error_line(capsys.readouterr()) == (
        f"error: {model / 'model_card.json'}: train_config: --cell-clip nan: must be a finite number > 0")


# ---- text that is not text ---------------------------------------------------------------------

@pytest.mark.parametrize("name, content, where", [
    ("random.bin", bytes(np.random.default_rng(0).integers(0, 256, 3000, dtype=np.uint8)), ":1: "),
    ("latin1.txt", "the cat sat .\nun café au lait .\n".encode("latin-1"), ":2: not valid UTF-8"),
    ("nul.txt", b"the cat sat .\nthe\x00dog .\n", ":2: holds a NUL byte"),
])
def test_train_refuses_text_that_is_not_utf8_naming_file_and_line(tmp_path, capsys, name, content, where):
    path = tmp_path / name
    path.write_bytes(content)
    code = train_main(["--train", str(path), "--out", str(tmp_path / "run"), "--max-steps", "2", *TINY])
    assert code == 2 and _one_error_line(capsys.readouterr()).startswith(f"error: {path}{where}")


# ---- a truncated dataset file ------------------------------------------------------------------

def test_a_truncated_dataset_file_is_refused_on_first_use(data_root, tmp_path, capsys):
    """EWT train cut mid-line at 3,000 bytes (the rest of the data root linked as it is): the
    reader and the suite refuse it with one line, instead of training on 2 sentences."""
    root = tmp_path / "root"
    (root / "ud_english_ewt").mkdir(parents=True)
    for entry in os.listdir(data_root):
        if entry != "ud_english_ewt":
            (root / entry).symlink_to(data_root / entry)
    for split in ("dev", "test"):
        (root / f"ud_english_ewt/en_ewt-ud-{split}.conllu").symlink_to(
            data_root / f"ud_english_ewt/en_ewt-ud-{split}.conllu")
    train = root / "ud_english_ewt/en_ewt-ud-train.conllu"
    train.write_bytes((data_root / "ud_english_ewt/en_ewt-ud-train.conllu").read_bytes()[:3000])
    with pytest.raises(DatasetTruncated, match=r"3,000 bytes, but the UD English-EWT file has 14,203,025"):
        load_task("pos", "train", data_root=root, limit=5)
    assert load_task("pos", "dev", data_root=root, limit=5)  # the intact files still read
    # and `probing.data status` says so without --verify (one stat, no hashing)
    assert dataset_status("ud_english_ewt", root).corrupt == ("ud_english_ewt/en_ewt-ud-train.conllu",)
    code = suite_main(["--model", str(data_root / "fixtures/bilm_tf"), "--tasks", "pos", "--limit", "20",
                       "--no-random-bilm", "--quiet", "--data-root", str(root), "--cache-dir", str(tmp_path / "C")])
    assert code == 2 and _one_error_line(capsys.readouterr()).startswith(f"error: {train}: 3,000 bytes")
