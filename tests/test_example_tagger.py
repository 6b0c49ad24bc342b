"""examples/train_tagger.py: a POS tagger on an EWT slice with ``Elmo`` as its embedder (fixture biLM)."""

import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

import pytest
import torch

from probing.tagging.tasks import read_ewt

pytestmark = pytest.mark.usefixtures("one_torch_thread")

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "train_tagger.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("train_tagger", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules["train_tagger"] = module  # dataclasses look their module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules["train_tagger"]


def test_tagger_learns_the_mix_and_the_softmax_with_the_bilm_frozen(example, data_root):
    mini = Path(__file__).resolve().parents[1] / "data" / "models" / "elmo-mini"
    files = mini / "options.json", mini / "weights.hdf5"
    train = read_ewt("train", "upos", data_root, limit=48)
    dev = read_ewt("dev", "upos", data_root, limit=24)
    tagger, result = example.train_tagger(train, dev, *files, epochs=3, batch_size=16, lr=1e-2, dropout=0.0, seed=0)
    untouched = example.ElmoTagger(*files, n_tags=3).elmo.bilm
    for (name, trained), original in zip(tagger.elmo.bilm.state_dict().items(), untouched.state_dict().values()):
        assert torch.equal(trained, original), f"the frozen biLM changed: {name}"
    assert result.epoch_losses[-1] < 0.5 * result.epoch_losses[0]
    assert result.mix_weights != [round(1 / 3, 4)] * 3  # the mix was trained
    assert result.dev_tokens == sum(len(s) for s in dev)
    most_frequent = Counter(t for s in train for t in s.tags).most_common(1)[0][0]
    majority_accuracy = sum(t == most_frequent for s in dev for t in s.tags) / result.dev_tokens
    assert result.dev_accuracy > majority_accuracy + 0.3


def test_command_line_writes_its_result(example, data_root, tmp_path, capsys):
    fixture = data_root / "fixtures" / "bilm_tf"
    output = tmp_path / "result.json"
    arguments = ["--options-file", str(fixture / "options.json"), "--weight-file", str(fixture / "lm_weights.hdf5"),
                 "--data-root", str(data_root), "--train-sentences", "20", "--dev-sentences", "10", "--epochs", "1",
                 "--lstm-hidden", "8", "--output", str(output)]
    code = example.main(arguments)
    assert code == 0
    result = json.loads(output.read_text())
    output.rename(tmp_path / "first.json")
    assert example.main(arguments) == 0  # same seed, same numbers
    first = json.loads((tmp_path / "first.json").read_text())
    assert {k: v for k, v in first.items() if k != "seconds"} == {k: v for k, v in result.items() if k != "seconds"}
    assert result["train_sentences"] == 20 and len(result["mix_weights"]) == 3
    assert "EWT dev UPOS accuracy" in capsys.readouterr().out
    assert example.main(["--model", str(tmp_path / "nowhere"), "--data-root", str(data_root)]) == 2
    assert "no such directory" in capsys.readouterr().err
