"""The biLM that ships in data/models/elmo-mini: loads by name from any working directory, stays
under the size limit, and its card holds the Kneser-Ney comparison and the contextualisation table."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from elmo_model.bilm.config import ElmoConfig
from elmo_model.models.registry import DEFAULT_MODEL, MODELS_DIR, shipped_models

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
    code = ("from elmo_model.models.registry import load_bilm; m = load_bilm('elmo-mini'); "
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
    from elmo_model.corpus.embedder import ElmoEmbedder

    embedder = ElmoEmbedder("elmo-mini")
    a, b = embedder.embed_batch([["The", "bank", "raised", "its", "rates", "."],
                                 ["We", "sat", "on", "the", "river", "bank", "."]])
    va, vb = a[:, 1], b[:, 5]  # "bank" in each sentence: (layers, 2P)
    cos = (va * vb).sum(-1) / np.linalg.norm(va, axis=-1) / np.linalg.norm(vb, axis=-1)
    assert cos[0] == pytest.approx(1.0, abs=1e-6)
    assert (cos[1:] < 0.99).all(), cos
    assert np.isfinite(a).all() and np.isfinite(b).all()


def test_the_cards_perplexity_is_what_the_model_measures_on_a_held_out_slice(data_root):
    """The card's biLM perplexity on wiki-test, recomputed: every 25th sentence of the file (412
    sentences, spread over the whole file so no one article dominates) through the shipped model's
    language model, in fp32 as the card's figures are. On Intel Xeon with AMX, torch 2.13.0 CPU the
    slice measured 141.9 / 141.4 (forward / backward) against the card's 140.8 / 140.7 for the whole
    file (the slice starting at sentence 7: 145.8 / 143.8; gutenberg-test's slice 99.3 against 104.8):
    within 6 %, so 10 % is the tolerance. The count of predictions over the whole file (tokens plus
    one </S> a sentence, never <S>) must equal the card's exactly. Run against a copy of
    ``evaluate_perplexity`` whose count left out </S>: 412 predictions short on the slice and
    174.2 (+24 %); against a ``load_language_model`` that left the softmax at its initialisation:
    18,125 (the old test, which divided the card's figures by each other, passed both)."""
    from elmo_model.training.lm_data import read_sentences
    from elmo_model.training.trainer import _default_tokenize, evaluate_perplexity, load_language_model

    card = json.loads((MINI / "model_card.json").read_text(encoding="utf-8"))
    row = card["perplexity_vs_trigram"]["test_files"]["wiki-test.txt.gz"]
    sentences = read_sentences([data_root / "lm_corpus" / "wiki-test.txt.gz"], _default_tokenize(),
                               card["train_config"]["max_sentence_tokens"])
    assert sum(len(s) + 1 for s in sentences) == row["n_predictions"]
    lm, vocab = load_language_model(MINI)
    lm.bilm.set_precision("fp32")
    measured = evaluate_perplexity(lm, sentences[::25], vocab)
    assert measured["n_predictions"] == sum(len(s) + 1 for s in sentences[::25])
    for direction in ("forward", "backward"):
        assert measured[direction] == pytest.approx(row["bilm"][direction], rel=0.10), direction
