"""The biLM that ships in data/models/elmo-mini: loads by name from any working directory, stays
under the size limit, and its card holds the Kneser-Ney comparison and the contextualisation table."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from elmo_model.config import ElmoConfig
from elmo_model.registry import DEFAULT_MODEL, MODELS_DIR, shipped_models

PROJECT = Path(__file__).resolve().parents[1]
MINI = MODELS_DIR / DEFAULT_MODEL
LIMIT_BYTES = 50 * 1000 ** 2  # "the shipped elmo-mini stays under 50 MB"

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_elmo_mini_ships_and_is_the_default():
    assert DEFAULT_MODEL == "elmo-mini"
    assert "elmo-mini" in shipped_models()
    for name in ("options.json", "weights.hdf5", "vocab.txt", "model_card.json"):
        assert (MINI / name).is_file(), name
    total = sum(p.stat().st_size for p in MINI.iterdir() if p.is_file())
    assert total < LIMIT_BYTES, f"elmo-mini is {total / 1e6:.1f} MB"


def test_loads_by_name_from_another_working_directory(tmp_path):
    code = ("from elmo_model.registry import load_bilm; m = load_bilm('elmo-mini'); "
            "print(m.config.lstm.dim, m.config.lstm.projection_dim)")
    env_path = str(PROJECT)
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
                          env={"PYTHONPATH": env_path, "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    options = ElmoConfig.from_json(MINI / "options.json")
    assert done.stdout.split() == [str(options.lstm.dim), str(options.lstm.projection_dim)]


def test_the_card_records_training_and_the_measured_quality():
    card = json.loads((MINI / "model_card.json").read_text(encoding="utf-8"))
    assert card["tokens_seen"] > 0 and card["steps"] > 0 and card["wall_time_hours"] > 0
    assert {f["file"] for f in card["corpus"]["train"]} and card["git_commit"]
    # the probes' data never trains the LM
    assert not any(k in f["file"].lower() for f in card["corpus"]["train"]
                   for k in ("conll", "ewt", "semcor", "senseval", "semeval"))
    files = card["perplexity_vs_trigram"]["test_files"]
    assert {"wiki-test.txt.gz", "gutenberg-test.txt.gz"} <= set(files)
    for name, row in files.items():
        for direction in ("forward", "backward"):
            ratio = row["bilm"][direction] / row["kneser_ney_trigram"][direction]
            assert ratio == pytest.approx(row["ratio"][direction])
            # a regression guard looser than the 0.75 goal of docs/training.md: the shipped biLM beats
            # a trigram trained on the same tokens
            assert ratio < 1.0, (name, direction, ratio)
    for row in card["contextualisation"]:
        assert row["same_sense_mean_cosine"][0] == pytest.approx(1.0, abs=1e-4)
        assert max(row["same_sense_mean_cosine"][1:]) < 1.0


def test_layer0_is_context_free_and_the_lstm_layers_are_not():
    from elmo_model.embedder import ElmoEmbedder

    embedder = ElmoEmbedder("elmo-mini")
    a, b = embedder.embed_batch([["The", "bank", "raised", "its", "rates", "."],
                                 ["We", "sat", "on", "the", "river", "bank", "."]])
    va, vb = a[:, 1], b[:, 5]  # "bank" in each sentence: (layers, 2P)
    cos = (va * vb).sum(-1) / np.linalg.norm(va, axis=-1) / np.linalg.norm(vb, axis=-1)
    assert cos[0] == pytest.approx(1.0, abs=1e-6)
    assert (cos[1:] < 0.99).all(), cos
    assert np.isfinite(a).all() and np.isfinite(b).all()
