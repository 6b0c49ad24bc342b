"""Batches made in worker processes (elmo_model.training.batch_workers): the thread's batches, in its
order, from a slice of the LM corpus; a worker's or the coordinator's failure as one line; no
process left behind, by the block's end or by a trainer killed with SIGKILL; the trainer with
workers trains what it trains without them, resumed or not."""

import gzip
import multiprocessing
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import types
from collections import Counter
from pathlib import Path

import pytest
import torch

from elmo_model.text.reader import TextFileError
from elmo_model.text.tokenizer import tokenize
from elmo_model.training.batch_workers import (
    BatchWorkerError,
    StreamRecipe,
    default_batch_workers,
    made_in_workers,
)
from elmo_model.training.distributed import DistributedTrainer
from elmo_model.training.lm_data import prefetched, sentences_from_files
from elmo_model.training.trainer import TrainConfig, Trainer
from elmo_model.training.vocab import Vocabulary

#: Small tasks, small buffers and small batches: many chunks and groups come back out of order.
SMALL = dict(chunk_chars=4_000)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory, data_root) -> Path:
    """The first 300 paragraphs of the LM corpus's wiki validation shard."""
    path = tmp_path_factory.mktemp("corpus") / "text.txt"
    with gzip.open(data_root / "lm_corpus" / "wiki-valid.txt.gz", "rt", encoding="utf-8") as f:
        path.write_text("".join(next(f) for _ in range(300)), encoding="utf-8")
    return path


def recipe_for(corpus: Path, tokenizer=tokenize) -> StreamRecipe:
    counts = Counter(w for s in sentences_from_files([corpus], tokenize, 30) for w in s)
    vocab = Vocabulary.build(counts, 2_000, 1)
    return StreamRecipe((str(corpus),), tokenizer, 30, 600, seed=5, vocab_words=tuple(vocab.words), buffer_sentences=256)


def assert_same_batches(made, expected):
    assert len(made) == len(expected)
    for a, b in zip(made, expected):
        assert a.n_tokens == b.n_tokens
        for x, y in ((a.char_ids, b.char_ids), (a.mask, b.mask), (a.word_ids, b.word_ids)):
            assert x.dtype == y.dtype and torch.equal(x, y)


def fails_on_the_fortieth_paragraph(line: str) -> list[list[str]]:
    """A tokenizer that breaks where the real one would not: the text's 40th paragraph."""
    if line.startswith(FORTIETH[0]):
        raise ValueError("cannot split this paragraph\nsecond line of the detail")
    return tokenize(line)


FORTIETH: list[str] = []


def coordinator_pids() -> list[int]:
    return [p.pid for p in multiprocessing.active_children() if p.name == "batch-coordinator"]


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc), in the order they started."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return sorted(found)


def worker_pids() -> list[int]:
    """The coordinator's worker processes (none when there is no coordinator)."""
    return [pid for coordinator in coordinator_pids() for pid in children_of(coordinator)]


def gone(pid: int) -> bool:
    """Neither running nor a zombie: reaped."""
    return not Path(f"/proc/{pid}").exists()


def not_running(pid: int, seconds: float = 15.0) -> bool:
    """Whether ``pid`` is gone or a zombie (an orphan's reaping is its adoptive parent's) within ``seconds``."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                return True
        except (OSError, IndexError):
            return True
        time.sleep(0.1)
    return False


def test_workers_make_the_threads_batches_in_its_order_and_skip_unmade(corpus):
    recipe = recipe_for(corpus)
    with prefetched(recipe.batches_in_line(), 3) as ahead:
        threaded = list(ahead)
    assert len(threaded) > 40
    with made_in_workers(recipe, 2, start_method="fork", **SMALL) as stream:
        assert_same_batches(list(stream), threaded)
    # a resume: the first 17 are not made (None in their place), the rest are the thread's
    with made_in_workers(recipe, 3, skip=17, start_method="fork", **SMALL) as stream:
        made = list(stream)
    assert made[:17] == [None] * 17
    assert_same_batches(made[17:], threaded[17:])


def test_a_failing_or_dying_worker_stops_the_stream_with_one_line(corpus):
    FORTIETH[:] = [corpus.read_text(encoding="utf-8").splitlines()[39].strip()[:40]]
    recipe = recipe_for(corpus, fails_on_the_fortieth_paragraph)
    with pytest.raises(BatchWorkerError) as failure, made_in_workers(recipe, 2, start_method="fork", **SMALL) as stream:
        list(stream)
    message = str(failure.value)
    assert "\n" not in message and message.startswith("batch worker ")
    assert "while tokenising lines" in message and "ValueError: cannot split this paragraph" in message
    killed = r"batch worker \d \(pid \d+\) was killed by SIGKILL"
    with pytest.raises(BatchWorkerError, match=killed), \
            made_in_workers(recipe_for(corpus), 2, depth=1, start_method="fork", **SMALL) as stream:
        next(stream)
        os.kill(worker_pids()[1], signal.SIGKILL)
        list(stream)
    assert not coordinator_pids()


def test_a_line_that_is_not_utf8_stops_the_stream_as_the_threads_error(corpus, tmp_path):
    broken = tmp_path / "broken.txt"
    broken.write_bytes(corpus.read_bytes()[:20_000] + b"\nan \xff byte\n")
    recipe = StreamRecipe((str(broken),), tokenize, 30, 600, seed=5, vocab_words=("</S>", "<S>", "<UNK>"))
    with pytest.raises(TextFileError) as threaded, prefetched(recipe.batches_in_line(), 2) as ahead:
        list(ahead)
    with pytest.raises(TextFileError) as made, made_in_workers(recipe, 1, start_method="fork", **SMALL) as stream:
        list(stream)
    assert str(made.value) == str(threaded.value) and "broken.txt" in str(made.value)
    assert not coordinator_pids()


def test_a_dying_coordinator_stops_the_stream_with_one_line_and_its_workers_leave(corpus):
    with pytest.raises(BatchWorkerError) as failure, \
            made_in_workers(recipe_for(corpus), 2, depth=1, start_method="fork", **SMALL) as stream:
        next(stream)
        workers = worker_pids()
        os.kill(coordinator_pids()[0], signal.SIGKILL)
        list(stream)
    message = str(failure.value)
    assert "\n" not in message
    assert message.startswith("the batch coordinator (pid ") and "was killed by SIGKILL" in message
    assert len(workers) == 2 and all(not_running(pid) for pid in workers)  # they watch the coordinator
    assert not coordinator_pids()


def test_no_worker_or_thread_outlives_the_block(corpus):
    recipe = recipe_for(corpus)

    def leave(how: str) -> list[int]:
        with made_in_workers(recipe, 2, depth=1, start_method="fork", **SMALL) as stream:
            first = next(stream)
            pids = coordinator_pids() + worker_pids()
            for pid in pids:  # Ctrl-C reaches the whole process group: the coordinator and workers leave it to us
                os.kill(pid, signal.SIGINT)
            assert next(stream).n_tokens > 0 and first.n_tokens > 0
            if how == "error":
                raise RuntimeError("step failed")
            if how == "interrupt":
                raise KeyboardInterrupt
        return pids  # "break": the block ends with the stream unfinished

    pids = leave("break")
    for how, error in (("error", RuntimeError), ("interrupt", KeyboardInterrupt)):
        with pytest.raises(error):
            leave(how)
    assert len(pids) == 3 and all(gone(pid) for pid in pids)  # the coordinator reaped its workers, we it
    assert not coordinator_pids()
    assert not [t for t in threading.enumerate() if t.name.startswith("prefetch-batch-workers")]


def test_a_tokenizer_that_does_not_pickle_is_refused_in_one_line(corpus):
    recipe = recipe_for(corpus, lambda line: tokenize(line))
    with pytest.raises(ValueError, match="batch workers need a tokenizer that pickles"), \
            made_in_workers(recipe, 1, start_method="fork"):
        pass
    assert not coordinator_pids()


ORPHAN_SCRIPT = textwrap.dedent("""
    import sys, time
    from elmo_model.text.tokenizer import tokenize
    from elmo_model.training.batch_workers import StreamRecipe, made_in_workers
    import multiprocessing
    recipe = StreamRecipe((sys.argv[1],), tokenize, 30, 600, seed=5, vocab_words=("</S>", "<S>", "<UNK>"))
    with made_in_workers(recipe, 2, depth=1, chunk_chars=4_000) as stream:
        next(stream)
        coordinator, = [p.pid for p in multiprocessing.active_children()]
        print(coordinator, flush=True)
        time.sleep(600)
""")


def test_no_process_outlives_a_trainer_killed_with_sigkill(corpus):
    root = Path(__file__).resolve().parents[1]
    trainer = subprocess.Popen([sys.executable, "-c", ORPHAN_SCRIPT, str(corpus)], cwd=root, stdout=subprocess.PIPE,
                               text=True)  # spawn, as the trainer starts them
    try:
        coordinator = int(trainer.stdout.readline())
        pids = [coordinator, *children_of(coordinator)]
        assert len(pids) == 3
        trainer.kill()
        trainer.wait()
        assert all(not_running(pid) for pid in pids), [Path(f"/proc/{p}/stat").read_text() for p in pids if
                                                       not gone(p)]
    finally:
        trainer.kill()
        trainer.wait()


def test_how_many_workers_a_run_gets():
    assert default_batch_workers("cpu", cpus=16) == 0  # the CPU's step releases the interpreter: the thread
    assert [default_batch_workers("cuda", cpus=n) for n in (1, 2, 3, 16)] == [0, 1, 2, 4]
    assert TrainConfig(train=[], batch_workers=-1).problems() == ["--batch-workers -1: expected an integer >= 0"]
    assert TrainConfig(train=[], batch_workers=None).problems() == []
    # torchrun ranks tokenise in their thread, whatever was asked
    rank = types.SimpleNamespace(config=TrainConfig(train=[], batch_workers=3))
    assert DistributedTrainer._batch_workers(rank) == 0


def tiny(corpus: Path, out: Path, **overrides) -> TrainConfig:
    settings = dict(train=[str(corpus)], out=str(out), vocab_size=800, vocab_max_tokens=100_000, vocab_min_count=1,
                    char_embedding_dim=4, filters=[[1, 8], [2, 8]], n_highway=1, lstm_dim=16, projection_dim=8,
                    softmax_cutoffs=[200], batch_tokens=300, max_sentence_tokens=30, learning_rate=5e-3, log_every=2,
                    checkpoint_every_minutes=1e9, validate_every_minutes=1e9, threads=1, precision="fp32")
    settings.update(overrides)
    return TrainConfig(**settings)


def test_the_trainer_with_workers_trains_and_resumes_as_without(corpus, tmp_path):
    straight = Trainer(tiny(corpus, tmp_path / "thread", max_steps=10, batch_workers=0), progress=False)
    straight.train()
    assert straight.batch_pipeline == "a background thread"
    first = Trainer(tiny(corpus, tmp_path / "workers", max_steps=5, batch_workers=1), progress=False)
    first.train()
    assert first.batch_pipeline == "1 worker process"  # spawned: the trainer's own start method
    resumed = Trainer(tiny(corpus, tmp_path / "workers", max_steps=10, batch_workers=1), progress=False)
    resumed.train()
    assert [(p["step"], p["loss"]) for p in resumed.state["loss_curve"]] == \
        [(p["step"], p["loss"]) for p in straight.state["loss_curve"]]
    assert resumed.state["tokens_seen"] == straight.state["tokens_seen"]
    for x, y in zip(straight.lm.state_dict().values(), resumed.lm.state_dict().values()):
        assert torch.equal(x, y)
    assert not coordinator_pids()
