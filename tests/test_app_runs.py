"""Runs that stop when nobody watches: a closed browser tab stops a page's long computation.

``app_pages.running`` asks the Streamlit runtime, at every progress callback, whether the
script run's browser session is still connected. AppTest runs scripts without a server (no
runtime, no browser connection), so these tests stand in for the runtime: the seam
``running._session_is_connected`` answers what the server's session manager would, and its
own check against a runtime is tested with the runtime's singleton replaced.
"""

from pathlib import Path

import streamlit as st
from streamlit.runtime import Runtime
from streamlit.testing.v1 import AppTest

import app_pages.running as running

APP = Path(__file__).resolve().parents[1] / "app.py"
TIMEOUT = 120
STEPS = 20


def counting_page():
    """A page whose work takes STEPS progress steps, recording each step in session state."""
    import streamlit as st

    from app_pages.running import run_with_progress

    steps = st.session_state.setdefault("steps", [])

    def work(progress):
        for step in range(20):
            steps.append(step)
            progress("counting", step + 1, 20, "steps")
        return "all steps done"

    st.write(run_with_progress("Counting", work))


class Connection:
    """Stands in for the server's view of one browser tab: connected for ``checks`` checks."""

    def __init__(self, checks: int) -> None:
        self.checks = checks
        self.asked: list[str] = []

    def __call__(self, session_id: str) -> bool:
        self.asked.append(session_id)
        return len(self.asked) <= self.checks


def test_a_run_stops_at_the_first_progress_step_after_its_tab_closes(monkeypatch):
    connection = Connection(checks=3)
    monkeypatch.setattr(running, "_session_is_connected", connection)
    at = AppTest.from_function(counting_page, default_timeout=TIMEOUT).run()
    assert not at.exception and not at.error
    assert at.session_state["steps"] == [0, 1, 2, 3]  # the 4th check saw the tab gone
    assert not any("all steps done" in m.value for m in at.markdown)
    assert len(set(connection.asked)) == 1 and connection.asked[0]  # one session, by its id
    assert [s.label for s in at.status] == ["Counting"], "a stopped run is not marked failed (nor done)"


def test_a_watched_run_goes_to_the_end(monkeypatch):
    connection = Connection(checks=10_000)
    monkeypatch.setattr(running, "_session_is_connected", connection)
    at = AppTest.from_function(counting_page, default_timeout=TIMEOUT).run()
    assert not at.exception
    assert at.session_state["steps"] == list(range(STEPS))
    assert any("all steps done" in m.value for m in at.markdown)
    assert len(connection.asked) == STEPS  # checked at every step, not only at the bar's redraws


class FakeRuntime:
    """The one method of streamlit's Runtime the check uses."""

    def __init__(self, active: set[str]) -> None:
        self.active = active

    def is_active_session(self, session_id: str) -> bool:
        return session_id in self.active


def test_the_check_asks_the_runtime_for_the_session(monkeypatch):
    assert running._session_is_connected("any") is True  # no server runs this script: never stop
    monkeypatch.setattr(Runtime, "_instance", FakeRuntime({"tab-1"}))
    assert running._session_is_connected("tab-1") is True
    assert running._session_is_connected("tab-2") is False


def test_a_probe_run_whose_tab_is_gone_draws_nothing_and_fails_nothing(data_root, monkeypatch, tmp_path):
    """The Probes page through the same plumbing: gone from the first step, no result, no error."""
    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(data_root))
    monkeypatch.setenv("ELMO_WORKBENCH_CACHE", str(tmp_path / "activations"))
    monkeypatch.setenv("ELMO_WORKBENCH_MODEL", str(data_root / "fixtures" / "bilm_tf"))
    connection = Connection(checks=0)
    monkeypatch.setattr(running, "_session_is_connected", connection)
    st.cache_data.clear()  # AppTest shares the process's caches: an earlier page test may hold this run's result
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.session_state["pr_limit"] = 50
    at.session_state["pr_tasks"] = ["pos"]
    at.switch_page("app_pages/probes.py").run()
    [button] = [b for b in at.button if b.label == "Run the probes"]
    button.click().run()
    assert not at.exception and not at.error and not at.warning
    assert connection.asked, "the run never reached a progress step"
    assert not at.get("plotly_chart")  # no result drawn


def test_the_guidance_screens_fetch_button_downloads_and_resumes(data_root, monkeypatch, tmp_path):
    """No dataset in the data root: the Probes page's guidance screen fetches UD English-EWT
    (its dev and test files, served by a local server that answers Range requests) behind a
    progress bar; a cut connection leaves nothing in the dataset's place, the second press
    resumes, and the page then opens."""
    import dataclasses

    from range_server import RangeServer

    from probing import data

    served = {f"/en_ewt-ud-{s}.conllu": (data_root / f"ud_english_ewt/en_ewt-ud-{s}.conllu").read_bytes()
              for s in ("dev", "test")}
    ewt = data.DATASETS["ud_english_ewt"]
    root = tmp_path / "root"
    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(root))
    monkeypatch.setenv("ELMO_WORKBENCH_MODEL", str(data_root / "fixtures" / "bilm_tf"))
    with RangeServer(served) as server:
        files = tuple(dataclasses.replace(f, url=server.url("/" + f.path.split("/")[-1])) for f in ewt.files[1:])
        monkeypatch.setitem(data.DATASETS, "ud_english_ewt", dataclasses.replace(ewt, files=files))
        at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
        at.switch_page("app_pages/probes.py").run()
        [fetch] = [b for b in at.button if b.label.startswith("Fetch UD English-EWT")]
        assert fetch.label == "Fetch UD English-EWT (17.8 MB)"
        server.cut_next = 500_000
        fetch.click().run()
        assert not at.exception
        [failed] = [e.value for e in at.error]
        assert "Fetching UD English" in failed and "resume from byte 500,000" in failed.replace("\\", "")
        assert not (root / "ud_english_ewt").exists()  # nothing in the dataset's place
        [fetch] = [b for b in at.button if b.label.startswith("Fetch UD English-EWT")]
        fetch.click().run()
        assert not at.exception and not at.error
        assert any("is in" in s.value for s in at.success)
        assert ("/en_ewt-ud-dev.conllu", "bytes=500000-") in server.requests
        assert at.status[-1].state == "complete" and "Fetching UD English" in at.status[-1].label
        for name, payload in served.items():
            assert (root / "ud_english_ewt" / name.lstrip("/")).read_bytes() == payload
        at.run()  # the page, no longer the guidance screen
        assert not any("No datasets found" in w.value for w in at.warning)
        assert any(b.label == "Run the probes" for b in at.button)
