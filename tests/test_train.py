"""The trainer on a tiny config: it learns, exports a loadable model, and resumes exactly."""

import gzip
import json
import threading
import time

import numpy as np
import pytest
import torch

from elmo_model.corpus.embedder import ElmoEmbedder
from elmo_model.models.registry import load_bilm
from elmo_model.training import trainer as trainer_module
from elmo_model.training.lm_data import make_batch, prefetched
from elmo_model.training.train import (
    TrainConfig,
    Trainer,
    evaluate_perplexity,
    load_language_model,
    main,
    read_sentences,
)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, data_root):
    """The first 400 paragraphs of the LM corpus's wiki validation shard."""
    path = tmp_path_factory.mktemp("corpus") / "text.txt"
    with gzip.open(data_root / "lm_corpus" / "wiki-valid.txt.gz", "rt", encoding="utf-8") as f:
        lines = [next(f) for _ in range(400)]
    path.write_text("".join(lines[:360]), encoding="utf-8")
    (path.parent / "valid.txt").write_text("".join(lines[360:]), encoding="utf-8")
    return path


def tiny(corpus, out, **overrides):
    settings = dict(train=[str(corpus)], valid=[str(corpus.parent / "valid.txt")], out=str(out),
                    vocab_size=800, vocab_max_tokens=100_000, vocab_min_count=1, char_embedding_dim=4,
                    filters=[[1, 8], [2, 8], [3, 16]], n_highway=1, lstm_dim=32, projection_dim=16,
                    softmax_cutoffs=[200], batch_tokens=300, max_sentence_tokens=30, learning_rate=5e-3,
                    log_every=10, valid_sentences=50, checkpoint_every_minutes=1e9, validate_every_minutes=1e9,
                    threads=1, precision="fp32")  # the same numbers on every CPU; bf16: tests/test_precision.py
    settings.update(overrides)
    return TrainConfig(**settings)


def test_training_drives_the_loss_down(corpus, tmp_path):
    trainer = Trainer(tiny(corpus, tmp_path, max_steps=200, epochs=5), progress=False)
    assert trainer.train() == "max_steps"
    curve = [point["loss"] for point in trainer.state["loss_curve"]]
    assert len(curve) == 20
    # nats per token: from near the uniform guess (ln 800 = 6.7) to well below the first window
    assert np.mean(curve[-3:]) < curve[0] - 1.0
    assert np.mean(curve[-3:]) < np.log(800) - 2.0
    valid = trainer.validate()
    assert valid["forward"] < 800 and valid["backward"] < 800  # far below a uniform guess over the vocabulary


def test_export_loads_through_elmo_model_with_the_same_activations(corpus, tmp_path):
    trainer = Trainer(tiny(corpus, tmp_path / "run", max_steps=15), progress=False)
    trainer.train()
    directory = trainer.export(tmp_path / "exported")
    for name in ("options.json", "weights.hdf5", "vocab.txt", "softmax.npz", "model_card.json"):
        assert (directory / name).is_file(), name
    card = json.loads((directory / "model_card.json").read_text())
    assert card["tokens_seen"] == trainer.state["tokens_seen"] > 0 and card["seed"] == 0
    assert card["training_loss_curve"] and card["corpus"]["train"][0]["bytes"] > 0
    sentences = [["The", "bank", "was", "closed", "."], ["Rivers", "flow", "."]]
    in_memory = ElmoEmbedder(trainer.lm.bilm.eval()).embed_batch(sentences)
    loaded = ElmoEmbedder(load_bilm(directory)).embed_batch(sentences)
    for a, b in zip(in_memory, loaded):
        np.testing.assert_array_equal(a, b)
    # the exported softmax gives the trainer's perplexity back
    lm, vocab = load_language_model(directory)
    from elmo_model.training.train import evaluate_perplexity, read_sentences

    held_out = read_sentences([corpus.parent / "valid.txt"], trainer.tokenize, 30, 50)
    assert evaluate_perplexity(lm, held_out, vocab) == pytest.approx(evaluate_perplexity(trainer.lm, held_out, vocab))


def test_resume_continues_the_same_loss_curve(corpus, tmp_path):
    straight = Trainer(tiny(corpus, tmp_path / "straight", max_steps=40), progress=False)
    straight.train()
    first = Trainer(tiny(corpus, tmp_path / "resumed", max_steps=20), progress=False)
    first.train()
    del first  # a new process would start from the files alone
    second = Trainer(tiny(corpus, tmp_path / "resumed", max_steps=40), progress=False)
    second.train()
    a = [(p["step"], p["tokens_seen"], p["loss"]) for p in straight.state["loss_curve"]]
    b = [(p["step"], p["tokens_seen"], p["loss"]) for p in second.state["loss_curve"]]
    assert a == b
    for x, y in zip(straight.lm.state_dict().values(), second.lm.state_dict().values()):
        assert torch.equal(x, y)


def test_resume_refuses_a_different_configuration(corpus, tmp_path):
    """The refusal names each setting that differs, with both values (the old message named none)."""
    Trainer(tiny(corpus, tmp_path, max_steps=2), progress=False).train()
    with pytest.raises(ValueError, match="different configuration") as refusal:
        Trainer(tiny(corpus, tmp_path, max_steps=4, lstm_dim=64, dropout=0.2), progress=False).train()
    named = str(refusal.value).split("configuration (")[1].split("); resume")[0]
    assert named.split("; ") == ["lstm_dim: 32 -> 64", "dropout: 0.1 -> 0.2"]  # not max_steps: a budget may change


def test_cli_help_and_missing_input(capsys, tmp_path):
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "--max-hours" in capsys.readouterr().out
    assert main(["--train", str(tmp_path / "nothing*.txt"), "--out", str(tmp_path / "run")]) == 2
    assert "no text files found" in capsys.readouterr().err


def test_init_from_an_export_continues_its_run_or_fine_tunes(corpus, tmp_path):
    first = Trainer(tiny(corpus, tmp_path / "run", max_steps=30), progress=False)
    first.train()
    exported = first.export(tmp_path / "exported", evaluate_test=False)
    held_out = read_sentences([corpus.parent / "valid.txt"], first.tokenize, 30, 50)
    before = evaluate_perplexity(first.lm, held_out, first.vocab)

    # the checkpoint is gone: the same run continues from its export
    again = Trainer(tiny(corpus, tmp_path / "recovered", max_steps=40), progress=False, init_from=exported,
                    init_warmup_steps=5)
    again._setup()
    assert evaluate_perplexity(again.lm, held_out, again.vocab) == pytest.approx(before)
    assert again.state["step"] == 30 and again.state["tokens_seen"] == first.state["tokens_seen"]
    assert again.state["batches_in_epoch"] == first.state["batches_in_epoch"]
    assert [again._learning_rate() / 5e-3] == [pytest.approx(1 / 5)]  # warm-up from step 30
    assert again.train() == "max_steps" and again.state["step"] == 40
    assert again.state["loss_curve"][:3] == first.state["loss_curve"]  # the curve carries on
    card = json.loads(again.export(tmp_path / "exported2", evaluate_test=False).joinpath("model_card.json").read_text())
    assert card["initialised_from"]["same_run"] and card["steps"] == 40

    # another corpus (fine-tuning): counters start at zero, weights are the export's
    other = corpus.parent / "other.txt"
    other.write_text(corpus.read_text(encoding="utf-8")[::-1][:20_000], encoding="utf-8")
    tuned = Trainer(tiny(corpus, tmp_path / "tuned", train=[str(other)], max_steps=3), progress=False,
                    init_from=exported)
    tuned._setup()
    assert tuned.state["step"] == 0 and not tuned.state["initialised_from"]["same_run"]
    assert evaluate_perplexity(tuned.lm, held_out, tuned.vocab) == pytest.approx(before)

    # an export of another shape is refused with both shapes named
    with pytest.raises(ValueError, match="differs from this run"):
        Trainer(tiny(corpus, tmp_path / "wrong", lstm_dim=64), progress=False, init_from=exported)._setup()


def test_cooldown_decays_the_rate_linearly_to_max_steps_and_may_be_set_on_a_resume(corpus, tmp_path):
    first = Trainer(tiny(corpus, tmp_path, max_steps=10), progress=False)
    assert first.train() == "max_steps"
    # the resumed run ends at step 20 and cools down over its last 8 steps, to a tenth of the rate
    resumed = Trainer(tiny(corpus, tmp_path, max_steps=20, cooldown_steps=8, cooldown_final_fraction=0.1),
                      progress=False)
    rates = []
    for step in range(10, 20):
        resumed.state = {"step": step}
        rates.append(resumed._learning_rate() / 5e-3)
    expected = [1.0, 1.0] + [1.0 - 0.9 * k / 8 for k in range(8)]
    assert rates == pytest.approx(expected)
    assert resumed.train() == "max_steps" and resumed.state["step"] == 20
    assert resumed.optimizer.param_groups[0]["lr"] / 5e-3 == pytest.approx(expected[-1])
    with pytest.raises(ValueError, match="needs --max-steps"):
        Trainer(tiny(corpus, tmp_path / "other", cooldown_steps=5), progress=False)


# --------------------------------------------------------------------------------------------
# The stops and the timed work that the tests above switch off (budgets of 1e9 minutes)
# --------------------------------------------------------------------------------------------


class FakeClock:
    """``time`` for the trainer module with a ``monotonic`` that advances ``step`` seconds per call,
    so that hours pass in a test's second; everything else is the real module."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 1000.0, step

    def monotonic(self) -> float:
        self.now += self.step
        return self.now

    def __getattr__(self, name):
        return getattr(time, name)


def test_max_tokens_stops_at_the_first_step_past_the_budget(corpus, tmp_path):
    """Run against a ``_should_stop`` without the max_tokens clause: the run went on to the end of
    the epoch (reason "finished")."""
    trainer = Trainer(tiny(corpus, tmp_path, max_tokens=2_000, epochs=3), progress=False)
    assert trainer.train() == "max_tokens"
    seen = trainer.state["tokens_seen"]
    assert 2_000 <= seen < 2_000 + 300  # one batch holds at most batch_tokens
    card = json.loads((trainer.export() / "model_card.json").read_text())
    assert card["tokens_seen"] == seen


def test_max_hours_is_a_budget_over_every_resume(corpus, tmp_path, monkeypatch):
    """A clock that advances 20 s a reading: --max-hours 0.05 (180 s) stops with "max_hours" after a
    few steps, the checkpoint records the seconds spent, and a rerun with the same budget stops
    at once (the budget counts every resume) while a larger one continues. Run against a trainer
    that restarted its clock on a resume: the rerun trained on (10 steps where the first run stopped at 6)."""
    monkeypatch.setattr(trainer_module, "time", FakeClock(20.0))
    first = Trainer(tiny(corpus, tmp_path, max_hours=0.05, epochs=50), progress=False)
    assert first.train() == "max_hours"
    steps = first.state["step"]
    assert steps >= 1 and first.state["train_seconds"] >= 180
    again = Trainer(tiny(corpus, tmp_path, max_hours=0.05, epochs=50), progress=False)
    assert again.train() == "max_hours" and again.state["step"] == steps
    more = Trainer(tiny(corpus, tmp_path, max_hours=0.1, epochs=50), progress=False)
    assert more.train() == "max_hours" and more.state["step"] > steps


def test_the_epochs_end_the_run_when_no_budget_does(corpus, tmp_path):
    """Without a budget the run ends after ``epochs`` passes over the text ("finished"), each
    epoch the same number of batches. Run against a loop that did not count epochs (it stopped
    after the first): 1 epoch where 2 were asked for."""
    one = Trainer(tiny(corpus.parent / "valid.txt", tmp_path / "one", epochs=1), progress=False)
    assert one.train() == "finished"
    two = Trainer(tiny(corpus.parent / "valid.txt", tmp_path / "two", epochs=2), progress=False)
    assert two.train() == "finished"
    assert two.state["epoch"] == 2 and one.state["epoch"] == 1
    assert two.state["step"] == 2 * one.state["step"] > 0
    assert two.state["batches_in_epoch"] == 0


def test_checkpoints_and_validation_come_on_their_timers(corpus, tmp_path, monkeypatch):
    """A clock that advances 15 s a reading; checkpoints every 1 minute and validation every 2:
    both happen during the run (not only at its end), validation less often than checkpoints, each
    validation recorded with its step. Run against a loop that ignored the timers: one checkpoint
    (the final one) and no validation."""
    monkeypatch.setattr(trainer_module, "time", FakeClock(15.0))
    saved = []
    real_save = Trainer.save_checkpoint

    def counting_save(self):
        saved.append(self.state["step"])
        real_save(self)

    monkeypatch.setattr(Trainer, "save_checkpoint", counting_save)
    trainer = Trainer(tiny(corpus, tmp_path, max_steps=12, checkpoint_every_minutes=1.0,
                           validate_every_minutes=2.0), progress=False)
    assert trainer.train() == "max_steps"
    during = [step for step in saved if step < 12]
    validations = [v["step"] for v in trainer.state["validation"]]
    assert len(during) >= 2 and saved[-1] == 12
    assert 1 <= len(validations) < len(during) + 1
    assert validations == sorted(validations) and all(1 <= s <= 12 for s in validations)
    assert all(np.isfinite(v["forward"]) and np.isfinite(v["backward"]) for v in trainer.state["validation"])


def test_the_batch_thread_yields_the_synchronous_batches_in_order(corpus, tmp_path):
    trainer = Trainer(tiny(corpus, tmp_path), progress=False)
    trainer._setup()
    synchronous = list(trainer._epoch_batches(0))
    threads_during = set()
    with prefetched(trainer._epoch_batches(0), 3) as ahead:
        threaded = []
        for batch in ahead:
            threads_during.update(t.name for t in threading.enumerate())
            threaded.append(batch)
    assert "prefetch-batches" in threads_during  # made by the thread, not in line
    assert not [t for t in threading.enumerate() if t.name == "prefetch-batches"]
    assert len(threaded) == len(synchronous) > 20
    for a, b in zip(threaded, synchronous):
        assert a.n_tokens == b.n_tokens
        for x, y in ((a.char_ids, b.char_ids), (a.mask, b.mask), (a.word_ids, b.word_ids)):
            assert torch.equal(x, y)


def test_a_resumed_run_trains_the_next_batch_of_the_stream(corpus, tmp_path, monkeypatch):
    first = Trainer(tiny(corpus, tmp_path, max_steps=7, prefetch_batches=3), progress=False)
    first._setup()
    expected = list(first._epoch_batches(0))[7]
    first.train()
    trained = []
    original = Trainer._step
    monkeypatch.setattr(Trainer, "_step", lambda self, batch: trained.append(batch) or original(self, batch))
    Trainer(tiny(corpus, tmp_path, max_steps=8, prefetch_batches=3), progress=False).train()
    assert len(trained) == 1
    assert torch.equal(trained[0].char_ids, expected.char_ids) and torch.equal(trained[0].word_ids, expected.word_ids)


def test_the_batch_thread_stops_on_break_errors_and_interrupts():
    def stream(fail_at=None):
        for i in range(1000):
            if i == fail_at:
                raise OSError("disk gone")
            yield torch.full((3,), i)

    def alive():
        return [t for t in threading.enumerate() if t.name == "prefetch-batches"]

    with prefetched(stream(), 2) as ahead:  # the consumer stops early: the producer waits on a full queue
        assert [int(next(ahead)[0]) for _ in range(3)] == [0, 1, 2]
    assert not alive()
    with pytest.raises(OSError, match="disk gone"), prefetched(stream(fail_at=5), 2) as ahead:
        list(ahead)  # the stream's error reaches the consumer
    assert not alive()
    with pytest.raises(KeyboardInterrupt), prefetched(stream(), 2) as ahead:
        for item in ahead:
            if int(item[0]) == 4:
                raise KeyboardInterrupt  # Ctrl-C in the consumer
    assert not alive()
    with prefetched(stream(), 0) as ahead:  # depth 0: the stream itself, no thread
        assert int(next(ahead)[0]) == 0 and not alive()


def test_a_failing_step_leaves_no_batch_thread_behind(corpus, tmp_path, monkeypatch):
    def failing_step(self, batch):
        raise RuntimeError("step failed")

    monkeypatch.setattr(Trainer, "_step", failing_step)
    with pytest.raises(RuntimeError, match="step failed"):
        Trainer(tiny(corpus, tmp_path, max_steps=5), progress=False).train()
    assert not [t for t in threading.enumerate() if t.name == "prefetch-batches"]


def test_perplexity_in_large_batches_equals_one_sentence_at_a_time(corpus, tmp_path):
    trainer = Trainer(tiny(corpus, tmp_path, max_steps=10), progress=False)
    trainer.train()
    held_out = read_sentences([corpus.parent / "valid.txt"], trainer.tokenize, 30, 120)
    fw = bw = 0.0
    n = 0
    trainer.lm.eval()
    with torch.no_grad():
        for sentence in held_out:  # the definition: no padding, no neighbours
            a, b, count = trainer.lm(make_batch([sentence], trainer.vocab))
            fw, bw, n = fw + float(a), bw + float(b), n + count
    reference = {"forward": np.exp(fw / n), "backward": np.exp(bw / n), "n_predictions": n}
    for batch_tokens in (None, 200, 1_000, 1_000_000):
        result = evaluate_perplexity(trainer.lm, held_out, trainer.vocab, batch_tokens)
        assert result["n_predictions"] == n and result["n_sentences"] == len(held_out)
        assert result["forward"] == pytest.approx(reference["forward"], rel=1e-5)
        assert result["backward"] == pytest.approx(reference["backward"], rel=1e-5)


def test_two_exports_into_one_folder_at_once_leave_one_runs_model_whole(corpus, tmp_path, monkeypatch):
    """Two trainers exporting into one folder at once (``Trainer.export``, no command line around
    it): run A's export paused after its weights while run B's ran whole, and the folder ended with
    B's options and weights beside A's vocab.txt, softmax and card, whose weights_sha256 was B's. The
    export holds the folder's lock throughout: B is refused in one line and the folder is wholly
    A's. Inside the command's claim of ``--export-to`` (the same lock, re-entrant) it exports."""
    from elmo_model.bilm.weights import file_checksum
    from elmo_model.plumbing.io_safety import OutputBusy, output_lock
    from elmo_model.training import export as export_module

    runs = {name: Trainer(tiny(corpus, tmp_path / name, max_steps=2, valid=[], seed=seed, vocab_size=size),
                          progress=False) for name, seed, size in (("a", 1, 600), ("b", 2, 800))}
    for run in runs.values():
        run.train()
    folder = tmp_path / "shared"
    a_wrote_weights, b_finished = threading.Event(), threading.Event()
    real_save_weights = export_module.save_weights

    def save_weights(bilm, path):
        real_save_weights(bilm, path)
        if bilm is runs["a"].lm.bilm:
            a_wrote_weights.set()
            b_finished.wait(60)  # run B exports while A is half-way

    monkeypatch.setattr(export_module, "save_weights", save_weights)
    outcome: dict[str, str] = {}

    def export(name: str) -> None:
        try:
            if name == "b":
                a_wrote_weights.wait(60)
            runs[name].export(folder)
            outcome[name] = "exported"
        except OutputBusy as err:
            outcome[name] = str(err)
        finally:
            if name == "b":
                b_finished.set()

    threads = [threading.Thread(target=export, args=(name,)) for name in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)

    def owner() -> str:
        """The run the folder wholly belongs to (its card, weights, softmax and vocabulary)."""
        card = json.loads((folder / "model_card.json").read_text(encoding="utf-8"))
        name = next(n for n in runs if card["train_config"]["out"] == str(tmp_path / n))
        assert card["weights_sha256"] == file_checksum(folder / "weights.hdf5")
        lm, vocab = load_language_model(folder)
        assert vocab.words == runs[name].vocab.words
        for key, value in runs[name].lm.state_dict().items():
            assert torch.equal(lm.state_dict()[key], value), f"{key} is not run {name}'s"
        return name

    assert owner() == "a" and outcome["a"] == "exported"
    assert "another run" in outcome["b"] and "export folder" in outcome["b"] and "\n" not in outcome["b"]
    monkeypatch.undo()
    with output_lock(folder, what="export folder", reentrant=True):  # the command's claim, held for the run
        runs["b"].export(folder)
    assert owner() == "b"
    with output_lock(folder, what="export folder"):  # anyone else's hold
        with pytest.raises(OutputBusy, match="export folder"):
            runs["a"].export(folder)
    assert owner() == "b"
