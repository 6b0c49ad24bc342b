"""bilm-tf's training command (``--train_prefix --vocab_file --save_dir --options_file``) on the trainer."""

import json
import logging
import subprocess
import sys
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path

import pytest
import torch

from elmo_model import Elmo, ElmoEmbedder, batch_to_ids
from elmo_model.models.registry import load_bilm
from elmo_model.training.bilm_tf import TOP_LEVEL, config_from_options, is_bilm_tf_command, read_vocabulary
from elmo_model.training.train import main
from elmo_model.training.vocab import SPECIALS

pytestmark = pytest.mark.usefixtures("one_torch_thread")

ROOT = Path(__file__).resolve().parents[1]
SENTENCES = ["the cat sat on the mat .", "the dog sat on the log .", "a bird flew over the house .",
             "the bank was closed today ."]
#: bilm-tf's options as tutorials write them, every field, at a size that trains in seconds
OPTIONS = {"bidirectional": True, "dropout": 0.1, "all_clip_norm_val": 10.0, "n_epochs": 2, "batch_size": 4,
           "unroll_steps": 10, "n_train_tokens": 1000, "n_negative_samples_batch": 8192, "n_tokens_vocab": 9,
           "char_cnn": {"activation": "relu", "embedding": {"dim": 4}, "filters": [[1, 8], [2, 8], [3, 16]],
                        "max_characters_per_token": 50, "n_characters": 261, "n_highway": 1},
           "lstm": {"cell_clip": 3, "dim": 32, "n_layers": 2, "proj_clip": 3, "projection_dim": 16,
                    "use_skip_connections": True}}
TUTORIAL_VOCAB = ["<S>", "</S>", "<UNK>", "the", "sat", "on", ".", "cat", "dog"]


def write_inputs(folder: Path, vocab=TUTORIAL_VOCAB, options=OPTIONS) -> list[str]:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "news-00001.txt").write_text("\n".join(SENTENCES[:2]) + "\n", encoding="utf-8")
    (folder / "news-00002.txt").write_text("\n".join(SENTENCES[2:]) + "\n", encoding="utf-8")
    (folder / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    (folder / "options.json").write_text(json.dumps(options), encoding="utf-8")
    return ["--train_prefix", str(folder / "news-*"), "--vocab_file", str(folder / "vocab.txt"),
            "--save_dir", str(folder / "run"), "--options_file", str(folder / "options.json")]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """The command run once on four sentences: (folder, exit code, stdout, log records)."""
    folder = tmp_path_factory.mktemp("bilm_tf")
    argv = write_inputs(folder)
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logging.getLogger("elmo_model").addHandler(handler)
    out = StringIO()
    try:
        with redirect_stdout(out):
            code = main(argv)
    finally:
        logging.getLogger("elmo_model").removeHandler(handler)
    return folder, code, out.getvalue(), [r.getMessage() for r in records]


def test_four_sentences_train_and_the_run_says_they_are_tiny(trained):
    folder, code, stdout, log_lines = trained
    assert code == 0, stdout
    assert any("tiny: 4 sentences, 27 tokens" in line for line in log_lines), log_lines
    assert "stopped: finished" in stdout


def test_every_option_is_used_or_named_in_one_line(trained):
    folder, _, stdout, _ = trained
    notes = [line.strip() for line in stdout.splitlines() if line.startswith("  ")]
    for key in TOP_LEVEL:
        assert any(line.startswith(key) for line in notes), key
    for key in OPTIONS["char_cnn"]:
        assert any(line.startswith(f"char_cnn.{key}") or f"char_cnn.{key}" in line for line in notes), key
    for key in OPTIONS["lstm"]:
        assert any(line.startswith(f"lstm.{key}") for line in notes), key
    assert any(line.startswith("n_negative_samples_batch") and "not used" in line for line in notes)
    config = json.loads((folder / "run" / "train_config.json").read_text())
    assert (config["epochs"], config["batch_tokens"], config["max_sentence_tokens"]) == (2, 40, 10)
    assert (config["lstm_dim"], config["projection_dim"], config["n_highway"], config["char_embedding_dim"]) \
        == (32, 16, 1, 4)
    assert config["grad_clip"] == 10.0 and config["dropout"] == 0.1 and config["max_tokens"] == 2 * 1000
    assert config["filters"] == OPTIONS["char_cnn"]["filters"] and config["vocab_size"] == len(TUTORIAL_VOCAB)


def test_the_tutorial_vocabulary_order_is_the_softmax_vocabulary(trained):
    folder, *_ = trained
    words = (folder / "run" / "vocab.txt").read_text().split()
    assert tuple(words[:3]) == SPECIALS and words[3:] == TUTORIAL_VOCAB[3:]
    card = json.loads((folder / "run" / "model" / "model_card.json").read_text())
    assert card["vocabulary_size"] == len(TUTORIAL_VOCAB) and card["steps"] == 2  # one batch a pass, two passes


def test_the_export_loads_with_elmo_from_the_two_paths_tutorials_use(trained):
    folder, *_ = trained
    run = folder / "run"
    for name in ("options.json", "weights.hdf5"):  # the model/ export stays, and the two files are beside it
        assert (run / name).read_bytes() == (run / "model" / name).read_bytes()
    elmo = Elmo(str(run / "options.json"), str(run / "weights.hdf5"), 1, dropout=0.0)
    sentences = [["the", "cat", "sat"], ["a", "bird"]]
    out = elmo(batch_to_ids(sentences))
    assert out["elmo_representations"][0].shape == (2, 3, 32) and out["mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    layers, _ = ElmoEmbedder(load_bilm(run / "model"), precision="fp32").batch_to_embeddings(sentences)
    elmo.bilm.set_precision("fp32")
    expected = layers.mean(dim=1)  # the fresh mix: equal weights, gamma 1
    torch.testing.assert_close(elmo(batch_to_ids(sentences))["elmo_representations"][0], expected,
                               rtol=1e-5, atol=1e-6)


def test_the_vocabulary_orders_and_their_errors(tmp_path):
    tutorial, bilm_tf = tmp_path / "a.txt", tmp_path / "b.txt"
    tutorial.write_text("<S>\n</S>\n<UNK>\nthe\ncat\n")
    bilm_tf.write_text("</S>\n<S>\n<UNK>\nthe\ncat\n")
    assert read_vocabulary(tutorial).words == read_vocabulary(bilm_tf).words == [*SPECIALS, "the", "cat"]
    missing = tmp_path / "c.txt"
    missing.write_text("<S>\n</S>\nthe\n")
    with pytest.raises(ValueError, match=r"c\.txt: no <UNK> line"):
        read_vocabulary(missing)
    repeated = tmp_path / "d.txt"
    repeated.write_text("<S>\n</S>\n<UNK>\nthe\nthe\n")
    with pytest.raises(ValueError, match="'the' appears twice"):
        read_vocabulary(repeated)


def test_options_the_trainer_cannot_follow_are_refused_by_name():
    def config(**changes):
        options = json.loads(json.dumps(OPTIONS))
        for dotted, value in changes.items():
            *parents, key = dotted.split("__")
            target = options
            for parent in parents:
                target = target[parent]
            target[key] = value
        return config_from_options(options, ["x.txt"], "run", vocab_size=9)

    with pytest.raises(ValueError, match="bidirectional = false"):
        config(bidirectional=False)
    with pytest.raises(ValueError, match="char_cnn.activation = \"tanh\""):
        config(char_cnn__activation="tanh")
    with pytest.raises(ValueError, match="max_characters_per_token = 40"):
        config(char_cnn__max_characters_per_token=40)
    with pytest.raises(ValueError, match="dropout"):
        config(dropout=1.5)
    _, notes = config(n_tokens_vocab=793471, learning_rate=0.2, word_emb_dim=128)
    assert any(n.startswith("n_tokens_vocab") and "9 words; it says 793471" in n for n in notes)
    assert any(n.startswith("learning_rate 0.2: not used") and "Adagrad" in n for n in notes)
    assert "word_emb_dim: not used (not a bilm-tf training option)" in notes
    assert is_bilm_tf_command(["--train_prefix=x", "--save_dir", "y"]) and not is_bilm_tf_command(["--train", "x"])


def test_bad_inputs_stop_before_any_work_with_one_line(tmp_path):
    argv = write_inputs(tmp_path, vocab=["<S>", "</S>", "the"])
    done = subprocess.run([sys.executable, "-m", "elmo_model.training.train", *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
    assert "--vocab_file" in done.stderr and "no <UNK> line" in done.stderr
    assert not (tmp_path / "run").exists()
    argv = write_inputs(tmp_path)
    argv[argv.index("--options_file") + 1] = str(tmp_path / "run" / "options.json")
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "options.json").write_text(json.dumps(OPTIONS))
    assert main(argv) == 2  # the options file would be replaced by the trained model's
    assert not (tmp_path / "run" / "checkpoint.pt").exists()


def test_a_save_dir_holding_an_exported_model_is_refused_and_left_as_it_was(trained, tmp_path, capsys):
    """Pointed at a model the user means to continue, bilm-tf's command would train from scratch and
    overwrite its options.json and weights.hdf5: refused in one line, the folder byte for byte as it was,
    and the line names --init-from. A run folder of the command itself (its checkpoint.pt) still resumes."""
    folder, code, _, _ = trained
    assert code == 0
    model = tmp_path / "my-model"
    model.mkdir()
    for name in ("options.json", "weights.hdf5"):
        (model / name).write_bytes((folder / "run" / name).read_bytes())
    (model / "model_card.json").write_text("{}", encoding="utf-8")
    before = {p.name: p.read_bytes() for p in model.iterdir()}
    argv = write_inputs(tmp_path / "inputs")
    argv[argv.index("--save_dir") + 1] = str(model)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "holds a model" in err and "--init-from" in err and err.strip().count("\n") == 0, err
    assert {p.name: p.read_bytes() for p in model.iterdir()} == before
    assert (folder / "run" / "checkpoint.pt").exists()  # the finished run's own folder: a rerun resumes
    argv = write_inputs(folder)
    assert main(argv) == 0


def test_a_vocabulary_with_a_byte_order_mark_reads_as_without(tmp_path):
    plain, marked = tmp_path / "plain.txt", tmp_path / "marked.txt"
    plain.write_text("\n".join(TUTORIAL_VOCAB) + "\n", encoding="utf-8")
    marked.write_text("\n".join(TUTORIAL_VOCAB) + "\n", encoding="utf-8-sig")
    assert read_vocabulary(marked).words == read_vocabulary(plain).words


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for a machine without a GPU")
def test_n_gpus_on_a_machine_without_one_names_n_gpus(tmp_path, capsys):
    argv = write_inputs(tmp_path) + ["--n_gpus", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--n_gpus 1: torch sees no GPU" in err and "--device" not in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("change, expected", [
    ({"batch_size": "128"}, 'batch_size is "128"; it must be a whole number'),
    ({"dropout": None}, "dropout is null; it must be a number"),
    ({"lstm": {**OPTIONS["lstm"], "dim": "32"}}, 'lstm.dim is "32"; it must be a whole number'),
    ({"lstm": {**OPTIONS["lstm"], "cell_clip": None}}, "lstm.cell_clip is null; it must be a number"),
    ({"char_cnn": {**OPTIONS["char_cnn"], "embedding": 4}}, "char_cnn.embedding is 4; it must be an object"),
    ({"char_cnn": {**OPTIONS["char_cnn"], "filters": [[1, "8"]]}}, "char_cnn.filters is"),
    ({"bidirectional": "true"}, 'bidirectional is "true"; it must be true or false'),
])
def test_options_of_the_wrong_type_are_one_line_naming_the_field(change, expected, tmp_path, capsys):
    """Numbers as strings, nulls and objects where a number goes raised TypeErrors, or named a flag and
    a value the user never wrote ("--batch-tokens 128128..."): one line naming the field, before any work."""
    argv = write_inputs(tmp_path, options={**OPTIONS, **change})
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert expected in err and err.strip().count("\n") == 0 and "Traceback" not in err, err
    assert "--batch-tokens" not in err
    assert not (tmp_path / "run").exists()


def test_unknown_char_cnn_keys_are_named_not_dropped():
    options = json.loads(json.dumps(OPTIONS))
    options["char_cnn"]["highway_dim"] = 64
    _, notes = config_from_options(options, ["x.txt"], "run", vocab_size=9)
    assert "char_cnn.highway_dim 64: not used (not a bilm-tf char_cnn option)" in notes
