"""Runs that stop when nobody watches: a closed browser tab stops a page's long computation.

``app_pages.page_kit`` asks the Streamlit runtime, at every progress callback, whether the
script run's browser session is still connected. AppTest runs scripts without a server (no
runtime, no browser connection), so these tests stand in for the runtime: the seam
``page_kit._session_is_connected`` answers what the server's session manager would, and its
own check against a runtime is tested with the runtime's singleton replaced.
"""

from pathlib import Path

import pytest
from streamlit.runtime import Runtime
from streamlit.testing.v1 import AppTest

import app_pages.page_kit as page_kit

APP = Path(__file__).resolve().parents[1] / "app.py"
TIMEOUT = 120
STEPS = 20


def counting_page():
    """A page whose work takes STEPS progress steps, recording each step in session state."""
    import streamlit as st

    from app_pages.page_kit import run_with_progress

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
    monkeypatch.setattr(page_kit, "_session_is_connected", connection)
    at = AppTest.from_function(counting_page, default_timeout=TIMEOUT).run()
    assert not at.exception and not at.error
    assert at.session_state["steps"] == [0, 1, 2, 3]  # the 4th check saw the tab gone
    assert not any("all steps done" in m.value for m in at.markdown)
    assert len(set(connection.asked)) == 1 and connection.asked[0]  # one session, by its id
    assert not any("failed" in s.label for s in at.get("expandable")), "a stopped run is not a failure"


def test_a_watched_run_goes_to_the_end(monkeypatch):
    connection = Connection(checks=10_000)
    monkeypatch.setattr(page_kit, "_session_is_connected", connection)
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
    assert page_kit._session_is_connected("any") is True  # no server runs this script: never stop
    monkeypatch.setattr(Runtime, "_instance", FakeRuntime({"tab-1"}))
    assert page_kit._session_is_connected("tab-1") is True
    assert page_kit._session_is_connected("tab-2") is False


def test_a_probe_run_whose_tab_is_gone_draws_nothing_and_fails_nothing(data_root, monkeypatch, tmp_path):
    """The Probes page through the same plumbing: gone from the first step, no result, no error."""
    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(data_root))
    monkeypatch.setenv("ELMO_WORKBENCH_CACHE", str(tmp_path / "activations"))
    monkeypatch.setenv("ELMO_WORKBENCH_MODEL", str(data_root / "fixtures" / "bilm_tf"))
    connection = Connection(checks=0)
    monkeypatch.setattr(page_kit, "_session_is_connected", connection)
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.session_state["pr_limit"] = 50
    at.session_state["pr_tasks"] = ["pos"]
    at.switch_page("app_pages/2_probes.py").run()
    [button] = [b for b in at.button if b.label == "Run the probes"]
    button.click().run()
    assert not at.exception and not at.error and not at.warning
    assert connection.asked, "the run never reached a progress step"
    assert not at.get("plotly_chart")  # no result drawn
