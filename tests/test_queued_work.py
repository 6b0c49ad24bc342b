"""The short work a class starts by the dozen goes through the server's queue like the long jobs: a
model load, the Playground's embedding, the anisotropy baseline, reading an uploaded file. With
the server's one slot taken by another visitor's job, each waits for it (or, with the waiting list
full, is refused in the queue's one line) instead of running at once; a stored result is read
without queueing.

The work itself is stubbed where it is not the point (a model, a biLM pass, a JSON file), so the
rules are checked in seconds; the Playground's page is run once with the real fixture model to see
the refusals as the visitor sees them. Waiting is observed through the queue's counts and events,
never through a sleep.
"""

import threading
import time
import uuid
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app_pages import jobs
from app_pages.display import escape_markdown
from app_pages.jobs import JobQueue, QueueFull

APP = Path(__file__).resolve().parents[1] / "app.py"
PLAYGROUND = "app_pages/playground.py"
TIMEOUT = 240
PATIENCE = 120  # seconds a step may take on a loaded machine before the test gives up


class BusyServer:
    """The server's queue (one slot), its slot held by another visitor's job while :attr:`blocker`
    runs; :meth:`free` ends that job, :meth:`take` starts another. ``waiting``: how many jobs may
    wait (0: every new request is refused)."""

    def __init__(self, waiting: int) -> None:
        self.queue = JobQueue(max_running=1, max_waiting=waiting)
        self.blocker: jobs.Job | None = None
        self.take()

    def take(self) -> None:
        waiting, self.queue.max_waiting = self.queue.max_waiting, 1  # it waits for a moment, as every job does
        self.blocker, _ = self.queue.submit("probes", None, "another-tab", visitor="another-visitor")
        self.queue.max_waiting = waiting
        assert self.queue.try_start(self.blocker)

    def free(self) -> None:
        self.queue.finish(self.blocker, value="theirs")


@pytest.fixture
def busy(monkeypatch):
    """A :class:`BusyServer` installed as the server's queue (no job may wait until a test says so)."""
    server = BusyServer(waiting=0)
    monkeypatch.setattr(jobs, "_QUEUE", server.queue)
    yield server
    server.free()
    jobs.reset_job_queue()


class Calls:
    """A stub's record: how many times the work ran, and an event set when it first did."""

    def __init__(self) -> None:
        self.count, self.ran = 0, threading.Event()

    def __call__(self, value):
        self.count += 1
        self.ran.set()
        return value


def waits_its_turn(server: BusyServer, calls: Calls, ask):
    """``ask()`` in a thread while another visitor's job holds the one slot: its job must join the
    waiting list and not run; once the other job ends it runs. Returns what ``ask`` returned."""
    server.queue.max_waiting = 1
    out: dict = {}

    def visit():
        try:
            out["value"] = ask()
        except BaseException as err:  # handed to the test's thread
            out["error"] = err

    thread = threading.Thread(target=visit, daemon=True)
    thread.start()
    deadline = time.monotonic() + PATIENCE
    while server.queue.counts() != (1, 1):
        assert thread.is_alive(), f"it never waited in the queue: {out}"
        assert time.monotonic() < deadline, "it never reached the queue"
        time.sleep(0.01)
    assert not calls.ran.is_set(), "it ran beside the other visitor's job"
    server.free()
    thread.join(PATIENCE)
    assert not thread.is_alive() and "error" not in out, out
    assert calls.count == 1
    return out["value"]


def refused_then_queued_then_read(server: BusyServer, calls: Calls, ask) -> None:
    """The whole rule for one kind of work: refused (QueueFull) while nothing may wait, queued behind
    the other visitor's job once something may, and, once stored, read without queueing even with
    the server full again."""
    with pytest.raises(QueueFull, match="the server is busy: 0 jobs are waiting for its 1 slot"):
        ask()
    assert calls.count == 0 and server.queue.counts() == (1, 0)  # refused before any work
    first = waits_its_turn(server, calls, ask)
    server.take()
    server.queue.max_waiting = 0
    assert ask() == first  # a stored value is a lookup: no job, so no refusal
    assert calls.count == 1


# --------------------------------------------------------------------------------------------
# Each kind of work
# --------------------------------------------------------------------------------------------


class StubPlayground:
    """What ``explore_word`` returns, as far as the page's computation uses it (kept by value)."""

    def __init__(self, texts) -> None:
        self.texts = list(texts)

    def sense_contrast_test(self):
        return None

    def __eq__(self, other) -> bool:
        return isinstance(other, StubPlayground) and other.texts == self.texts


def test_a_playground_embedding_waits_for_the_servers_slot(busy, monkeypatch):
    from app_pages import first_figures

    calls = Calls()
    key = f"stub-model-{uuid.uuid4()}"  # the stores live as long as the process: a key of this test's own
    monkeypatch.setattr(first_figures, "model_key", lambda model: key)
    monkeypatch.setattr("probing.context.playground.explore_word",
                        lambda model, texts, word, **kw: calls(StubPlayground(texts)))
    texts = ("We sat on the bank.", "The bank lent money.")
    refused_then_queued_then_read(busy, calls, lambda: first_figures.playground_view(
        object(), texts, "bank", None, ("river", "money")))


def test_the_anisotropy_baseline_waits_for_the_servers_slot(busy, monkeypatch):
    from app_pages import running

    calls = Calls()
    key = f"stub-model-{uuid.uuid4()}"
    monkeypatch.setattr(running, "model_key", lambda model: key)
    monkeypatch.setattr("probing.context.contextuality.anisotropy_baseline",
                        lambda model, sentences: calls([0.25, 0.5, 0.75]))
    refused_then_queued_then_read(busy, calls, lambda: running.anisotropy_baseline(object(), ("a b", "c d")))


def test_a_model_load_waits_for_the_servers_slot_and_a_full_queue_is_no_broken_model(busy, monkeypatch):
    """A load is a job; a full queue is raised as QueueFull (the page's busy line), never returned
    as "could not load the biLM"; a loaded model is read at once, whoever asks."""
    from app_pages import running

    calls = Calls()
    model = object()
    stamp = ("stub-weights", str(uuid.uuid4()))  # the model store lives as long as the process
    monkeypatch.setattr(running, "weights_stamp", lambda spec: stamp)
    monkeypatch.setattr(running, "read_model", lambda spec, precision, device: calls(model))
    refused_then_queued_then_read(busy, calls, lambda: running.load_model("stub-model", "auto", "cpu"))
    assert running.load_model("stub-model", "auto", "cpu") == (model, None)


class Upload:
    """What ``st.file_uploader`` hands the page, as far as reading it goes."""

    def __init__(self, data: bytes, name: str = "results.json") -> None:
        self.data, self.name = data, name

    def getvalue(self) -> bytes:
        return self.data


def test_reading_an_uploaded_file_waits_for_the_servers_slot(busy, monkeypatch):
    from app_pages import report_files

    calls = Calls()
    monkeypatch.setattr(report_files, "_read_results", lambda data: calls({"read": data.decode()}))
    content = f'{{"format": "stub", "id": "{uuid.uuid4()}"}}'.encode()
    refused_then_queued_then_read(busy, calls, lambda: report_files.load_upload(Upload(content)))
    assert report_files.load_upload(Upload(content, "renamed.json")) == {"read": content.decode()}  # by content
    assert calls.count == 1


def test_comparing_two_results_waits_for_the_servers_slot(busy, monkeypatch):
    from app_pages import report_files

    calls = Calls()
    monkeypatch.setattr("probing.report.compare_blocks", lambda a, b, labels: calls([("table", a, b, labels)]))
    request = f"stub-request-{uuid.uuid4()}"
    refused_then_queued_then_read(busy, calls, lambda: report_files.comparison_blocks("a", "b", ("A", "B"), request))


def test_writing_a_comparison_waits_for_the_servers_slot_and_leaves_no_folder_when_refused_or_failed(
        busy, monkeypatch, tmp_path):
    from app_pages import report_files

    calls = Calls()
    monkeypatch.setattr(report_files, "reports_dir", lambda: tmp_path)

    def compare_reports(a, b, out, labels, png):
        (out / "comparison.json").write_text("{}")
        return calls(out / "comparison.json")

    monkeypatch.setattr("probing.report.compare_reports", compare_reports)
    write = lambda: report_files.write_comparison("a", "b", ("A", "B"), "a-vs-b")  # noqa: E731
    with pytest.raises(QueueFull, match="the server is busy"):
        write()
    assert calls.count == 0 and not (tmp_path / "comparisons").exists()  # refused before any work
    out, written = waits_its_turn(busy, calls, write)
    assert out == tmp_path / "comparisons" / "a-vs-b" and written.is_file()

    def fails(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr("probing.report.compare_reports", fails)
    busy.free()
    with pytest.raises(OSError, match="disk full"):
        write()
    assert sorted(p.name for p in (tmp_path / "comparisons").iterdir()) == ["a-vs-b"]  # no half-written a-vs-b-2


def test_a_damaged_upload_is_one_line_without_the_servers_temporary_path(monkeypatch):
    from app_pages import report_files

    jobs.reset_job_queue()
    with pytest.raises(ValueError) as caught:
        report_files.load_upload(Upload(f'{{"not": "a result {uuid.uuid4()}"}}'.encode()))
    assert "/tmp" not in str(caught.value) and "results.json:" not in str(caught.value)


# --------------------------------------------------------------------------------------------
# As the visitor sees it
# --------------------------------------------------------------------------------------------


def test_a_busy_server_says_so_on_the_playground_for_the_model_and_the_embedding(busy, data_root, tmp_path,
                                                                                  monkeypatch):
    import streamlit as st

    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(data_root))
    monkeypatch.setenv("ELMO_WORKBENCH_CACHE", str(tmp_path / "activations"))
    monkeypatch.setenv("ELMO_WORKBENCH_MODEL", str(data_root / "fixtures" / "bilm_tf"))
    st.cache_resource.clear()  # AppTest shares the process's caches: an earlier test may hold the model
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.switch_page(PLAYGROUND).run()
    assert not at.exception and not at.error
    busy_line = escape_markdown("the server is busy: 0 jobs are waiting for its 1 slot; try again in a few minutes")
    assert [w.value for w in at.warning] == [f"**Loading the biLM:** {busy_line}"]
    assert not at.get("plotly_chart")
    busy.free()
    busy.queue.max_waiting = 8  # every job passes through the waiting list, if only for an instant
    at.run()  # the slot is free: the model loads, the sentences are embedded
    assert not at.exception and not at.error and at.get("plotly_chart")
    busy.take()
    busy.queue.max_waiting = 0
    at.text_area(key="pg_text").input(f"We sat on the bank. | river\nThe bank lent {uuid.uuid4().hex}. | money").run()
    assert not at.exception and not at.error
    assert [w.value for w in at.warning] == [f"**Embedding the sentences:** {busy_line}"]
    assert not at.get("plotly_chart")
