"""The one background-compile engine (elmo_model.bilm.compile_engine): settings that hold in every
compiling thread, counts per kind of call, a fallback said once, a failed kind that stays alone, and
no hang on a fork during a compile. The configuration that ships (the fused step across many kinds
of call) is tested in a fresh process in tests/test_fused_step.py."""

import logging
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from elmo_model.bilm import compile_engine

PROJECT = Path(__file__).resolve().parents[1]


def _scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    return torch.tanh(x * factor) + 1.0


def _scale_examples(x: torch.Tensor, factor: float) -> list:
    return [(torch.zeros(*(3 + i for i in range(x.dim())), dtype=x.dtype), factor)]


def _by_dtype_and_rank(x: torch.Tensor, factor: float) -> tuple:
    return (x.dtype, x.dim(), factor, torch.is_grad_enabled())


@pytest.fixture
def engine(monkeypatch):
    """A fresh process-wide engine for one test, with one small function of its own."""
    assert compile_engine.wait_until_ready(timeout=600)
    monkeypatch.delenv(compile_engine.ENV, raising=False)
    monkeypatch.setattr(compile_engine, "ENGINE", compile_engine.fresh_engine())
    fn = compile_engine.CompiledFunction("test scale", _scale, _scale_examples, _by_dtype_and_rank, group="test")
    compile_engine.enable("test", wait=True)
    yield fn
    compile_engine.ENGINE.functions.pop("test scale", None)


def test_each_kind_compiled_by_a_fresh_thread_runs_compiled_at_every_later_call(engine):
    """Five kinds of call, each compiled by a new worker thread (the last one exits after 1 s idle):
    with a code object per kind, no kind shares torch's per-function limit of 8 graphs (once shared,
    from the fifth kind on every kind ran eager while marked ready), the settings hold in each new
    thread, and every call after its kind's compile ran compiled."""
    for rank in range(1, 6):
        x = torch.randn(*([4] * rank))
        assert torch.allclose(engine(x, 0.5), _scale(x, 0.5), atol=1e-6)
        engine(x, 0.5)
        time.sleep(1.2)  # the worker thread leaves; the next kind starts a new one
    counts = compile_engine.counts()["test scale"]
    assert len(counts) == 5
    for kind in counts.values():
        assert kind == {"state": "ready", "compiled": 2, "eager": 0, "reason": None}, counts


def test_a_kind_whose_guards_miss_counts_eager_and_says_so_once(engine, caplog):
    x = torch.randn(4, 5)
    engine(x, 0.5)  # compiled for float32 rank 2, factor 0.5
    run = engine.for_call(x, 0.5)
    with caplog.at_level(logging.WARNING, logger=compile_engine.__name__):
        for _ in range(3):  # a call the key says is the same kind, but the guards do not take
            assert torch.allclose(run(x.double(), 0.5), _scale(x.double(), 0.5))
    kind = next(iter(compile_engine.counts()["test scale"].values()))
    assert kind["compiled"] == 1 and kind["eager"] == 3 and "guards" in kind["reason"]
    assert len([r for r in caplog.records if "ran eager" in r.getMessage()]) == 1


def test_two_threads_calling_a_new_kind_at_once_both_wait_for_its_compile(engine, caplog, monkeypatch):
    """The biLM runs its two directions in two threads: both meet a new kind at once. The second
    caller must wait for the worker the first is starting; it once saw that worker before it had
    started, took it for a dead one and failed the kind ("the compiling thread is gone")."""
    real_thread = compile_engine.threading.Thread

    class SlowToStart(real_thread):
        def start(self):
            time.sleep(0.3)  # the window in which the other caller looks at the worker
            super().start()

    monkeypatch.setattr(compile_engine.threading, "Thread", SlowToStart)
    x = torch.randn(4, 5)
    results, errors = {}, []

    def call(name):
        try:
            results[name] = engine(x, 0.25)
        except BaseException as err:  # re-raised below
            errors.append(err)

    first = real_thread(target=call, args=("first",))
    second = real_thread(target=call, args=("second",))
    with caplog.at_level(logging.WARNING, logger=compile_engine.__name__):
        first.start()
        time.sleep(0.1)  # the first caller has queued the kind and is starting the worker
        second.start()
        first.join(600)
        second.join(600)
    assert not errors, errors
    assert [r.getMessage() for r in caplog.records if "failed" in r.getMessage()] == []
    (kind,) = compile_engine.counts()["test scale"].values()
    assert kind["state"] == "ready" and kind["reason"] is None, kind
    assert torch.allclose(results["first"], _scale(x, 0.25), atol=1e-6)
    assert torch.allclose(results["second"], _scale(x, 0.25), atol=1e-6)


def test_a_failed_compile_leaves_that_kind_eager_and_no_other(engine, caplog, monkeypatch):
    good = torch.randn(4, 5)
    engine(good, 0.5)
    original = engine.examples

    def broken_for_float64(x, factor):
        if x.dtype == torch.float64:
            return [("not a tensor", factor)]  # compiling on it raises
        return original(x, factor)

    monkeypatch.setattr(engine, "examples", broken_for_float64)
    say = compile_engine.log.warning

    def slow_to_say(*args):  # a loaded machine: the worker is slow between the failure and its next step
        time.sleep(0.5)
        say(*args)

    monkeypatch.setattr(compile_engine.log, "warning", slow_to_say)
    bad = torch.randn(4, 5, dtype=torch.float64)
    with caplog.at_level(logging.WARNING, logger=compile_engine.__name__):
        assert torch.equal(engine(bad, 0.5), _scale(bad, 0.5))
        engine(bad, 0.5)
    engine(good, 0.5)
    counts = compile_engine.counts()["test scale"]
    states = {key: (kind["state"], kind["compiled"], kind["eager"]) for key, kind in counts.items()}
    assert sorted(states.values()) == [("failed", 0, 2), ("ready", 2, 0)], states
    assert compile_engine.unavailable_reason() is None
    assert len([r for r in caplog.records if "that kind runs eager" in r.getMessage()]) == 1


def test_a_compile_that_never_ends_cannot_hang_a_waiting_caller(engine, monkeypatch, caplog):
    monkeypatch.setenv(compile_engine.TIMEOUT_ENV, "1")
    release = __import__("threading").Event()
    original = engine._compile

    def stuck(*args):
        release.wait(60)
        return original(*args)

    monkeypatch.setattr(engine, "_compile", stuck)
    x = torch.randn(3, 4)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger=compile_engine.__name__):
        assert torch.equal(engine(x, 0.5), _scale(x, 0.5))
    assert time.monotonic() - started < 10
    assert any("took over 1 s" in r.getMessage() for r in caplog.records)
    release.set()
    assert compile_engine.wait_until_ready(timeout=300)


FORK_SCRIPT = textwrap.dedent("""
    import os, sys, time, torch
    from elmo_model.bilm import compile_engine
    os.environ[compile_engine.TIMEOUT_ENV] = "120"

    def scale(x, f):
        return torch.tanh(x * f) + 1.0

    fn = compile_engine.CompiledFunction("scale", scale, lambda x, f: [(torch.zeros(3, 4), f)],
                                         lambda x, f: (x.dtype, x.dim(), f), group="g")
    compile_engine.enable("g")
    x = torch.randn(5, 6)
    fn(x, 0.5)  # queued; compiles in the background
    deadline = time.monotonic() + 120
    while not compile_engine.ENGINE.compiling and time.monotonic() < deadline:
        time.sleep(0.001)
    assert compile_engine.ENGINE.compiling, "the compile never started"
    pid = os.fork()
    if pid == 0:  # the child: waits for the same kind, which nobody there was compiling
        # a compile started after a fork may never finish (torch's compile workers are the parent's):
        # the child's wait is bounded, 15 s here rather than 120 (the suite's slowest test otherwise)
        os.environ[compile_engine.TIMEOUT_ENV] = "15"
        compile_engine.enable("g", wait=True)
        ok = torch.allclose(fn(x, 0.5), scale(x, 0.5))
        os._exit(0 if ok else 3)
    _, status = os.waitpid(pid, 0)
    print("child", os.waitstatus_to_exitcode(status))
""")


def test_a_fork_during_a_compile_does_not_hang_the_child():
    env = {k: v for k, v in os.environ.items() if k != compile_engine.ENV}
    env["PYTHONPATH"] = str(PROJECT)
    done = subprocess.run([sys.executable, "-c", FORK_SCRIPT], capture_output=True, text=True, env=env,
                          cwd=PROJECT, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "child 0" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]


def test_off_by_default_and_the_environment_decides(monkeypatch):
    monkeypatch.setattr(compile_engine, "ENGINE", compile_engine.fresh_engine())
    fn = compile_engine.CompiledFunction("off test", _scale, _scale_examples, _by_dtype_and_rank, group="off")
    try:
        x = torch.randn(3, 4)
        fn(x, 0.5)
        assert compile_engine.counts()["off test"] == {}  # not enabled: nothing queued
        compile_engine.enable("off")
        monkeypatch.setenv(compile_engine.ENV, "0")
        fn(x, 0.5)
        assert compile_engine.counts()["off test"] == {}  # the environment's 0 wins over enable()
    finally:
        compile_engine.ENGINE.functions.pop("off test", None)


EXIT_SCRIPT = textwrap.dedent("""
    import torch
    from elmo_model.bilm import compile_engine

    fn = compile_engine.CompiledFunction("scale", lambda x, f: torch.tanh(x * f) + 1.0,
                                         lambda x, f: [(torch.zeros(3, 4), f)], lambda x, f: (x.dtype, x.dim(), f),
                                         group="g")
    compile_engine.enable("g")
    for rank in (2, 3, 4):  # three kinds queued; the process ends while the first compiles
        fn(torch.randn(*([5] * rank)), 0.5)
    print("leaving")
""")


DAEMON_EXIT_SCRIPT = EXIT_SCRIPT.replace("for rank in (2, 3, 4):", "def ask():\n    for rank in (2, 3, 4):").replace(
    "    fn(torch.randn", "        fn(torch.randn").replace('print("leaving")', textwrap.dedent("""\
        import threading
        asker = threading.Thread(target=ask, daemon=True)  # as Streamlit's script threads are
        asker.start()
        asker.join()
        print("leaving")"""))


@pytest.mark.parametrize("script", [EXIT_SCRIPT, DAEMON_EXIT_SCRIPT], ids=["main thread", "a daemon thread asks"])
def test_a_process_that_ends_during_a_compile_exits_cleanly(script):
    """The compiling thread is joined at exit (it takes no more work once the interpreter is
    closing), never killed inside native code: exit 0, no abort, every time; also when the kinds
    are asked for by a daemon thread (a Streamlit script), whose daemon flag a new thread inherits."""
    env = {k: v for k, v in os.environ.items() if k != compile_engine.ENV}
    env["PYTHONPATH"] = str(PROJECT)
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                              cwd=PROJECT, timeout=600)
        assert done.returncode == 0 and "leaving" in done.stdout, (done.returncode, done.stderr[-2000:])
        assert "terminate called" not in done.stderr


def test_the_compiling_thread_is_never_a_daemon_whoever_starts_it(engine, monkeypatch):
    """A thread inherits its creator's daemon flag: a worker started from a daemon thread (a
    Streamlit script run) would not be joined at exit, and one still inside a C++ compile when the
    interpreter finalizes aborts the process ("terminate called without an active exception")."""
    import threading

    seen = {}
    ensure = compile_engine.ENGINE._ensure_worker

    def ensure_and_record():  # the thread as it is created (it leaves after 1 s idle)
        ensure()
        seen.setdefault("worker", compile_engine.ENGINE.worker)

    monkeypatch.setattr(compile_engine.ENGINE, "_ensure_worker", ensure_and_record)

    def ask():
        engine(torch.randn(2, 2, 2, 2, 2, 2), 0.25)  # a new kind: a worker is started for it

    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    asker.join(60)
    assert seen["worker"] is not None and not seen["worker"].daemon
    assert compile_engine.wait_until_ready(timeout=600)


def test_a_seeded_random_bilm_waits_while_a_compile_may_rewind_the_rng(data_root):
    """Tracing saves torch's global RNG and restores it when done: a random biLM built meanwhile in
    another thread (the app's baseline while another visitor's kind compiles) drew part of its weights
    from the rewound stream. The compile holds ``RNG_LOCK``, and the seeded draws wait for it."""
    import threading

    from elmo_model import ElmoConfig
    from probing.tagging.baselines import random_bilm

    config = ElmoConfig.from_json(data_root / "fixtures" / "bilm_tf" / "options.json")
    alone = random_bilm(config, seed=3).checksum
    built = {}
    with compile_engine.RNG_LOCK:  # as the compiling thread holds it
        builder = threading.Thread(target=lambda: built.update(model=random_bilm(config, seed=3)))
        builder.start()
        builder.join(1.0)
        assert builder.is_alive(), "a seeded random biLM was built while a compile could rewind the RNG"
    builder.join(60)
    assert built["model"].checksum == alone
