"""The app served to a class, in headless Chromium (as ``tests/test_browser.py``: Debian's
``chromium`` and the ``playwright`` package).

- A server on every interface (``--server.address ::``) that trusts every forwarded header at
  uvicorn's level (``FORWARDED_ALLOW_IPS=*``, the worst case): a visit to ``127.0.0.1`` (reported
  as ``::ffff:127.0.0.1``) is local; a visit from the machine's own network address is remote,
  and stays remote with a forged ``X-Forwarded-For: 127.0.0.1``.
- A public server (``ELMO_WORKBENCH_PUBLIC=1``) with one job at a time: two visitors asking for a
  report run one after the other, the second shown its place in the queue; the word with shell
  syntax one of them typed gives a Reproduce line that runs nothing when pasted; a 1 MB sense
  label is refused with one line, the server's memory unchanged.
- A public server on an empty data root: no Fetch button, the commands for the host instead.
"""

import socket
import subprocess
import time
from pathlib import Path

import pytest

from test_browser import (ERROR_BOX, FIGURE, FIGURE_TIMEOUT, TEXT_BOX, TRACEBACK, browser,  # noqa: F401 (fixtures: the tests name them, F811)
                                server_log, start_server, stop_server, wait_until_idle)

SHELL_WORD = "bank;touch${IFS}PLANTED;#"
REPORT_TIMEOUT = 400_000  # ms: two reports one after the other on a busy machine
FETCH_MODELS = "Published ELMo models"
WARNING_BOX = '[data-testid="stAlertContentWarning"]'


def own_address() -> str:
    """The machine's address on its network (no packet is sent), else 127.0.0.1 (then the visit
    from "another machine" is the loopback one with a forged header, which is remote too)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: routing only, nothing is sent
            return s.getsockname()[0]
        except OSError:
            return "127.0.0.1"


def rss_bytes(pid: int) -> int:
    """The resident memory of process ``pid`` (Linux)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no VmRSS for process {pid}")


def fetch_buttons(page, url: str) -> tuple[int, int]:
    """(Fetch buttons, download commands) in the sidebar's published-models panel."""
    page.goto(url + "/")
    page.get_by_text(FETCH_MODELS).first.wait_for(timeout=FIGURE_TIMEOUT)
    page.get_by_text(FETCH_MODELS).first.click()
    sidebar = page.locator('[data-testid="stSidebar"]')
    sidebar.get_by_text("python -m probing.data download").first.or_(
        sidebar.get_by_role("button", name="Fetch")).first.wait_for(timeout=FIGURE_TIMEOUT)
    return (sidebar.get_by_role("button").filter(has_text="Fetch").count(),
            sidebar.get_by_text("python -m probing.data download").count())


@pytest.fixture(scope="module")
def open_server(data_root, tmp_path_factory):
    process, url = start_server(str(data_root / "fixtures" / "bilm_tf"), address="::", FORWARDED_ALLOW_IPS="*",
                                ELMO_WORKBENCH_DATA=str(data_root),
                                ELMO_WORKBENCH_CACHE=str(tmp_path_factory.mktemp("activations")),
                                ELMO_WORKBENCH_REPORTS=str(tmp_path_factory.mktemp("reports")))
    yield process, url
    stop_server(process)


def test_a_visit_to_127_0_0_1_on_a_dual_stack_server_is_local(browser, open_server):  # noqa: F811
    process, url = open_server
    page = browser.new_page()
    try:
        buttons, commands = fetch_buttons(page, url)
        assert buttons >= 1 and commands == 0, server_log(process)
    finally:
        page.close()


def test_a_forged_x_forwarded_for_changes_nothing(browser, open_server):  # noqa: F811
    process, url = open_server
    remote_url = url.replace("127.0.0.1", own_address())
    for headers in ({}, {"X-Forwarded-For": "127.0.0.1"}):
        page = browser.new_page()
        page.set_extra_http_headers(headers)
        try:
            buttons, commands = fetch_buttons(page, remote_url if own_address() != "127.0.0.1" or headers else url)
            assert buttons == 0 and commands >= 1, (headers, server_log(process))
        finally:
            page.close()


@pytest.fixture(scope="module")
def class_server(data_root, tmp_path_factory):
    reports = tmp_path_factory.mktemp("reports")
    process, url = start_server(str(data_root / "fixtures" / "bilm_tf"), ELMO_WORKBENCH_PUBLIC="1",
                                ELMO_WORKBENCH_MAX_JOBS="1", ELMO_WORKBENCH_DATA=str(data_root),
                                ELMO_WORKBENCH_CACHE=str(tmp_path_factory.mktemp("activations")),
                                ELMO_WORKBENCH_REPORTS=str(reports))
    yield process, url, reports
    stop_server(process)


def _ask_for_report(page, url: str, words: str, seed: int) -> None:
    page.goto(url + "/reports")
    button = page.get_by_role("button", name="Build the report")
    button.wait_for(timeout=FIGURE_TIMEOUT)
    page.locator('input[aria-label="Words for learned s_j per lemma (optional)"]').fill(words)
    page.locator('input[aria-label="Seed"]').fill(str(seed))
    page.locator('input[aria-label="SemCor sentences"]').click()  # a small slice, not the default 10,000
    page.get_by_role("option", name="first 300", exact=True).click()
    button.click()


def test_two_visitors_reports_run_one_at_a_time_and_the_reproduce_line_runs_nothing(browser, class_server,  # noqa: F811
                                                                                    tmp_path):
    process, url, reports = class_server
    first, second = browser.new_page(), browser.new_page()
    try:
        _ask_for_report(first, url, SHELL_WORD, 0)
        _ask_for_report(second, url, "", 1)
        waited = None
        deadline = time.monotonic() + REPORT_TIMEOUT / 1000
        while waited is None and time.monotonic() < deadline:
            for page in (first, second):
                if page.get_by_text("Waiting in the queue: place 1").count():
                    waited = page
            time.sleep(0.2)
        assert waited is not None, "no visitor was shown a place in the queue\n" + server_log(process)
        for page in (first, second):
            page.get_by_text("Report written to").wait_for(timeout=REPORT_TIMEOUT)
            assert page.locator(ERROR_BOX).count() == 0 and page.locator(TRACEBACK).count() == 0
        folders = sorted(p.name for p in reports.iterdir() if (p / "results.json").is_file())
        assert len(folders) == 2, folders
        # the shown command, pasted into a shell with a stub for python, plants nothing
        shown = first.locator('[data-testid="stCode"]', has_text="probing.report").first
        shown.wait_for(timeout=FIGURE_TIMEOUT)  # the report's page draws its blocks one after another
        line = shown.inner_text().strip()
        script = f"python() {{ printf '%s\\n' \"$@\" > args; }}\n{line}\n"
        subprocess.run(["bash", "-c", script], cwd=tmp_path, check=True, timeout=30)
        args = (tmp_path / "args").read_text().splitlines()
        assert not (tmp_path / "PLANTED").exists()
        assert args[args.index("--words") + 1] == SHELL_WORD
    finally:
        first.close()
        second.close()


def test_a_1_mb_label_is_refused_and_the_server_memory_is_unchanged(browser, class_server):  # noqa: F811
    process, url, _ = class_server
    page = browser.new_page()
    try:
        page.goto(url + "/")
        page.wait_for_selector(FIGURE, timeout=FIGURE_TIMEOUT)
        wait_until_idle(page, FIGURE_TIMEOUT)
        before = rss_bytes(process.pid)
        box = page.locator(TEXT_BOX)
        box.fill("We sat on the bank. | river\nThe bank lent us money. | " + "m" * 1_000_000)
        box.press("Control+Enter")
        page.locator(WARNING_BOX).first.wait_for(timeout=FIGURE_TIMEOUT)
        wait_until_idle(page, FIGURE_TIMEOUT)
        warnings = page.locator(WARNING_BOX).all_inner_texts()
        assert len(warnings) == 1 and "may have at most 60" in warnings[0] and "\n" not in warnings[0].strip()
        grown = rss_bytes(process.pid) - before
        assert grown < 64 * 2**20, f"the server grew by {grown / 2**20:.0f} MB"
        assert page.locator(FIGURE).count() == 0  # refused before any work: nothing embedded or drawn
    finally:
        page.close()


def test_a_remote_visitor_gets_no_fetch_button_on_an_empty_data_root(browser, data_root, tmp_path):  # noqa: F811
    empty = tmp_path / "empty"
    empty.mkdir()
    process, url = start_server(str(data_root / "fixtures" / "bilm_tf"), ELMO_WORKBENCH_PUBLIC="1",
                                ELMO_WORKBENCH_DATA=str(empty))
    page = browser.new_page()
    try:
        page.goto(url + "/probes")
        page.get_by_text("No datasets found").wait_for(timeout=FIGURE_TIMEOUT)
        wait_until_idle(page, FIGURE_TIMEOUT)
        assert page.get_by_role("button").filter(has_text="Fetch").count() == 0
        assert page.get_by_text("python -m probing.data download ud_english_ewt").count() >= 1
        assert str(empty) not in page.locator("body").inner_text()
    finally:
        page.close()
        stop_server(process)
