"""The app served to a class: nothing a visitor types becomes a command or markup, every typed
text has a cap checked before any work, only the host downloads, who counts as local, the job
queue's rules and the reports' disk budget.

The browser checks (two visitors' reports queued, a 1 MB label, forged headers, a loopback visit
in IPv4-mapped form) are in ``tests/test_browser_shared.py``.
"""

import os
import shutil
import subprocess
import threading
import time
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from app_pages.display import escape_markdown
from app_pages.jobs import JobQueue
from app_pages.report_files import (enforce_budget, folder_files, new_folder, saved_reports, set_pinned, usage,
                                    zip_folder)
from app_pages.serving import (MAX_LABEL_CHARS, address_is_local, check_labelled_text, check_words, is_loopback,
                               redacted, shown_path)
from probing.report.blocks import reproduce_command
from probing.report.elements import ReportFigure, _Code, file_safe_name
from probing.report.config import ReportConfig, ReportResult
from probing.report.render import render_html, render_markdown

APP = Path(__file__).resolve().parents[1] / "app.py"
PLAYGROUND = "app_pages/playground.py"
PROBES = "app_pages/probes.py"
TIMEOUT = 240
SHELL_WORD = "bank;touch${IFS}PLANTED;#"


def _result(words, model_reference="", limit=None) -> ReportResult:
    return ReportResult(model_name="bilm_tf", model_identity="0" * 64, model_config={}, tasks=["pos"],
                        words=list(words), seed=3, limit=limit, config=ReportConfig(), settings={}, created="now",
                        versions={}, timings={}, model_reference=model_reference)


# --------------------------------------------------------------------------------------------
# Nothing typed becomes a command or markup
# --------------------------------------------------------------------------------------------


def _paste(line: str, folder: Path) -> list[str]:
    """``line`` pasted into bash in ``folder``, with ``python`` standing for a stub that writes its
    arguments (one a line) to ``args``: what the command would have been given."""
    script = f"python() {{ printf '%s\\n' \"$@\" > args; }}\n{line}\n"
    subprocess.run(["bash", "-c", script], cwd=folder, check=True, timeout=30)
    return (folder / "args").read_text().splitlines()


def test_a_word_with_shell_syntax_runs_nothing_when_the_reproduce_line_is_pasted(tmp_path):
    model_dir = tmp_path / "my models" / "it's mine"
    line = reproduce_command(_result([SHELL_WORD, "play:VERB"], model_reference=str(model_dir), limit=50))
    args = _paste(line, tmp_path)
    assert not (tmp_path / "PLANTED").exists()
    assert args == ["-m", "probing.report", "--model", str(model_dir), "--tasks", "pos", "--words", SHELL_WORD,
                    "play:VERB", "--seed", "3", "--limit", "50", "--out", "DIR"]


def test_the_reproduce_line_is_code_in_html_markdown_and_names_the_model_as_it_loads(tmp_path, data_root):
    from elmo_model import load_bilm
    from probing.report.run import model_reference

    fixture = data_root / "fixtures" / "bilm_tf"
    model = load_bilm(fixture)
    assert model_reference(model, data_root) == str(fixture.resolve())  # the folder, not its last name
    blocks = [_Code(reproduce_command(_result([SHELL_WORD])))]
    page = render_html(blocks, "t")
    assert "<pre><code>python -m probing.report --model bilm_tf --tasks pos --words &#x27;bank;touch${IFS}" in page
    markdown = render_markdown(blocks, "t")
    fenced = markdown.split("```sh\n", 1)[1].split("\n```", 1)[0]
    assert fenced == reproduce_command(_result([SHELL_WORD]))  # copied from report.md as it is
    _paste(fenced, tmp_path)
    assert not (tmp_path / "PLANTED").exists()


def test_figure_names_from_an_uploaded_file_become_safe_ids():
    import plotly.graph_objects as go

    hostile = 'pos"></div><script>alert(1)</script>'
    fig = ReportFigure(f"compare-{hostile}", "t", go.Figure())
    assert fig.name == file_safe_name(f"compare-{hostile}") and set(fig.name) <= set(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
    assert file_safe_name("pos</a>") != file_safe_name("pos<-a>")  # two names never merge into one
    assert file_safe_name("pos-layers") == "pos-layers"
    page = render_html([fig], "t")
    assert "<script>alert(1)" not in page and "</script>alert" not in page
    assert f'id="fig-{fig.name}"' in page


def test_reports_listing_and_zip_follow_no_symbolic_link(tmp_path, monkeypatch):
    monkeypatch.setenv("ELMO_WORKBENCH_REPORTS", str(tmp_path / "reports"))
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "results.json").write_text("{}")
    (secret / "key").write_text("private")
    report = tmp_path / "reports" / "mine"
    report.mkdir(parents=True)
    (report / "results.json").write_text("{}")
    (report / "report.md").write_text("# r")
    (report / "stolen").symlink_to(secret / "key")
    (report / "figures").symlink_to(secret)
    (tmp_path / "reports" / "linked").symlink_to(secret)
    assert [p.name for p in saved_reports()] == ["mine"]
    assert [p.name for p in folder_files(report)] == ["report.md", "results.json"]
    import io
    import zipfile

    names = zipfile.ZipFile(io.BytesIO(zip_folder(report))).namelist()
    assert sorted(names) == ["mine/report.md", "mine/results.json"]


def test_builds_at_the_same_moment_get_their_own_folders(tmp_path):
    made, barrier = [], threading.Barrier(8)

    def claim():
        barrier.wait()
        made.append(new_folder(tmp_path, "bilm-20260101-120000"))

    threads = [threading.Thread(target=claim) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(made)) == 8 and all(p.is_dir() for p in made)


def test_the_disk_budget_removes_the_oldest_unpinned_first(tmp_path):
    folders = []
    for k, name in enumerate(["old", "pinned", "middle", "new"]):
        folder = tmp_path / name if name != "middle" else tmp_path / "comparisons" / name
        folder.mkdir(parents=True)
        (folder / "report.html").write_bytes(b"x" * 999)
        (folder / ("comparison.json" if name == "middle" else "results.json")).write_bytes(b"x")
        os.utime(folder, (1_000_000 + k, 1_000_000 + k))
        folders.append(folder)
    set_pinned(folders[1], True)
    os.utime(folders[1], (1_000_001, 1_000_001))
    assert usage(tmp_path) == 4000
    removed = enforce_budget(tmp_path, budget=2500, keep=(folders[3],))
    assert removed == ["old", "comparisons/middle"]  # the pinned one stays although it is older
    assert folders[1].is_dir() and folders[3].is_dir() and usage(tmp_path) == 2000
    assert enforce_budget(tmp_path, budget=100, keep=(folders[3],)) == []  # nothing unpinned left to remove


def test_the_disk_budget_never_counts_nor_removes_a_folder_that_is_not_a_report(tmp_path):
    """ELMO_WORKBENCH_REPORTS set to a project folder: the user's own folders (a corpus, a report
    folder holding a file of theirs, figures with other files) are neither counted nor removed."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "train.txt").write_bytes(b"x" * 5000)
    mixed = tmp_path / "report-with-notes"
    (mixed / "figures").mkdir(parents=True)
    for name in ("report.html", "results.json", "notes.txt"):
        (mixed / name).write_bytes(b"x" * 1000)
    odd_figures = tmp_path / "report-odd-figures"
    (odd_figures / "figures").mkdir(parents=True)
    (odd_figures / "report.html").write_bytes(b"x" * 1000)
    (odd_figures / "results.json").write_bytes(b"x")
    (odd_figures / "figures" / "data.csv").write_bytes(b"x")
    report = tmp_path / "bilm-20260101-120000"
    (report / "figures").mkdir(parents=True)
    (report / "report.html").write_bytes(b"x" * 1000)
    (report / "results.json").write_bytes(b"x")
    (report / "figures" / "probe.png").write_bytes(b"x")
    for k, folder in enumerate((corpus, mixed, odd_figures, report)):
        os.utime(folder, (1_000_000 + k, 1_000_000 + k))
    assert usage(tmp_path) == 1002
    assert enforce_budget(tmp_path, budget=0) == ["bilm-20260101-120000"]
    assert corpus.is_dir() and (corpus / "train.txt").is_file()
    assert (mixed / "notes.txt").is_file() and (odd_figures / "figures" / "data.csv").is_file()


# --------------------------------------------------------------------------------------------
# Caps on typed text
# --------------------------------------------------------------------------------------------


def test_caps_are_checked_with_one_line_naming_the_limit():
    with pytest.raises(ValueError) as err:
        check_labelled_text("The bank. | " + "x" * 1000, "Sentences")
    assert str(err.value).count("\n") == 0 and f"at most {MAX_LABEL_CHARS}" in str(err.value)
    assert check_labelled_text("The bank. | river\nNo label here", "S")
    with pytest.raises(ValueError, match="at most 100,000"):
        check_labelled_text("a bank.\n" * 20_000, "Sentences")
    with pytest.raises(ValueError, match="at most 8"):
        check_words(["w"] * 9, "Words", 8)
    with pytest.raises(ValueError, match="at most 40 are allowed"):
        check_words(["w" * 41], "Words", 8)


@pytest.fixture
def app_env(data_root, tmp_path, monkeypatch):
    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(data_root))
    monkeypatch.setenv("ELMO_WORKBENCH_CACHE", str(tmp_path / "activations"))
    monkeypatch.setenv("ELMO_WORKBENCH_REPORTS", str(tmp_path / "reports"))
    monkeypatch.setenv("ELMO_WORKBENCH_MODEL", str(data_root / "fixtures" / "bilm_tf"))
    return data_root


def test_a_1_mb_label_is_refused_before_any_work(app_env):
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.switch_page(PLAYGROUND).run()
    at.text_area(key="pg_text").input("We sat on the bank. | river\nThe bank lent money. | " + "m" * 1_000_000).run()
    assert not at.exception
    assert [w.value for w in at.warning] == [escape_markdown(
        f"Sentences: the label of line 2 has 1,000,000 characters; a label (the text after |) may have at most "
        f"{MAX_LABEL_CHARS}")]
    assert not at.get("plotly_chart")  # nothing was embedded or drawn


def test_a_remote_visitor_gets_no_fetch_button_on_an_empty_data_root(app_env, tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("ELMO_WORKBENCH_DATA", str(empty))
    monkeypatch.setenv("ELMO_WORKBENCH_PUBLIC", "1")
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.switch_page(PROBES).run()
    assert not at.exception
    assert not [b for b in at.button if b.label.startswith("Fetch")]
    assert any("python -m probing.data download ud_english_ewt" in c.value for c in at.code)
    assert not any(str(empty) in w.value for w in at.warning)  # the server's path is not shown
    monkeypatch.delenv("ELMO_WORKBENCH_PUBLIC")
    local = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    local.switch_page(PROBES).run()
    assert [b for b in local.button if b.label.startswith("Fetch")]  # the host still fetches from the page


# --------------------------------------------------------------------------------------------
# Who is local
# --------------------------------------------------------------------------------------------


def test_loopback_in_ipv4_mapped_form_is_local_and_an_unknown_peer_is_remote():
    assert is_loopback("::ffff:127.0.0.1") and is_loopback("127.0.0.1") and is_loopback("::1")
    assert is_loopback("[::1]") and not is_loopback("::ffff:192.0.2.2") and not is_loopback("not an address")
    assert address_is_local("::ffff:127.0.0.1", {}, []) and address_is_local("127.0.0.1", {}, [])
    assert not address_is_local("192.0.2.7", {}, [])
    # no address, an error reading it, anything not an address: unknown, so remote (it counted as local)
    for unknown in (None, "", "not an address", 127001, object()):
        assert not address_is_local(unknown, {}, []), unknown


def test_forwarded_headers_are_trusted_only_from_a_named_proxy_that_is_the_peer():
    forged = {"X-Forwarded-For": "127.0.0.1"}
    assert not address_is_local("127.0.0.1", forged, [])  # no proxy named: a header is never believed
    assert not address_is_local("::ffff:127.0.0.1", {"Forwarded": "for=127.0.0.1"}, [])
    # a proxy on the same host, named by the host: the address it appends decides
    assert not address_is_local("127.0.0.1", {"x-forwarded-for": "127.0.0.1, 192.0.2.7"}, ["::1", "127.0.0.1"])
    assert address_is_local("192.0.2.1", {"x-forwarded-for": "127.0.0.1"}, ["192.0.2.1"])
    assert not address_is_local("127.0.0.1", {"x-forwarded-for": "127.0.0.1, ::ffff:127.0.0.1"}, ["127.0.0.1"])
    # the peer is no named proxy: its headers are a stranger's word (this was local)
    assert not address_is_local("203.0.113.9", {"X-Forwarded-For": "127.0.0.2"}, ["127.0.0.1", "::1"])
    assert not address_is_local("127.0.0.1", {}, [], public=True)


def test_remote_visitors_read_relative_paths_and_no_process_id(tmp_path):
    reports = tmp_path / "reports"
    assert shown_path(reports / "r1", False, {"reports": reports}) == "reports/r1"
    assert shown_path(reports / "r1", True, {"reports": reports}) == str(reports / "r1")
    text = f"{reports}/r1.lock: another run (pid 4242) is writing /srv/secret/thing"
    assert redacted(text, False, {"reports": reports}) == "reports/r1.lock: another run (another process) is " \
                                                          "writing …/thing"
    assert redacted(text, True) == text


# --------------------------------------------------------------------------------------------
# The job queue
# --------------------------------------------------------------------------------------------


def test_the_queue_runs_jobs_in_order_under_its_caps():
    queue = JobQueue(max_running=1)
    a, shared_a = queue.submit("report", "k1", "tab-1")
    b, _ = queue.submit("report", "k2", "tab-2")
    c, shared_c = queue.submit("report", "k1", "tab-3")  # the same request: joins a's job
    assert (shared_a, shared_c, c is a) == (False, True, True)
    assert queue.try_start(a) and not queue.try_start(b)
    assert queue.position(b) == 1 and queue.counts() == (1, 1)
    assert queue.eta(b) is None  # no report has finished on this server: no estimate yet
    queue.finish(a, value="folder-a")
    assert c.finished.is_set() and c.value == "folder-a"
    assert queue.try_start(b) and queue.typical_seconds("report") is not None
    assert queue.eta(b) == 0.0


def test_one_running_job_per_tab_and_nobody_held_up_by_it():
    queue = JobQueue(max_running=2)
    first, _ = queue.submit("probes", None, "tab-1")
    second, _ = queue.submit("probes", None, "tab-1")  # the same tab asks for more
    other, _ = queue.submit("probes", None, "tab-2")
    assert queue.try_start(first)
    assert not queue.try_start(second)  # that tab runs one already
    assert queue.try_start(other)  # a later visitor is not held up by it
    queue.finish(first)
    assert queue.try_start(second)


def test_the_cap_is_per_visitor_not_per_tab():
    """Two tabs of one browser are one visitor: its second job waits while another visitor's runs."""
    queue = JobQueue(max_running=3)
    first, _ = queue.submit("probes", None, "tab-1", visitor="browser-a")
    second, _ = queue.submit("probes", None, "tab-2", visitor="browser-a")  # the same browser, another tab
    other, _ = queue.submit("probes", None, "tab-3", visitor="browser-b")
    assert queue.try_start(first)
    assert not queue.try_start(second)  # a free slot, but that browser runs one already
    assert queue.try_start(other)
    queue.finish(first)
    assert queue.try_start(second)


def test_a_visitor_is_named_by_the_browsers_xsrf_cookie(monkeypatch):
    """Every tab of one browser sends the same XSRF cookie: one visitor; no cookie: the tab."""
    from types import SimpleNamespace

    from app_pages import running

    def visitor(cookies):
        monkeypatch.setattr(running, "st", SimpleNamespace(context=SimpleNamespace(cookies=cookies)))
        return running._visitor_id()

    a = visitor({running.XSRF_COOKIE: "2|1f2e|aa11|1765000000"})
    assert a == visitor({running.XSRF_COOKIE: "2|1f2e|aa11|1765000000", "other": "x"})
    assert a.startswith("browser-") and "aa11" not in a  # a digest, not the token
    assert a != visitor({running.XSRF_COOKIE: "2|0c0c|bb22|1765000000"})
    assert visitor({}) == running._session_id()


def test_the_waiting_list_is_bounded_for_the_server_and_for_each_visitor():
    from app_pages.jobs import QueueFull

    queue = JobQueue(max_running=1, max_waiting=3, per_visitor_waiting=2)
    running, _ = queue.submit("report", None, "t0", visitor="v0")
    assert queue.try_start(running)
    queue.submit("report", None, "t1", visitor="v1")
    queue.submit("report", None, "t2", visitor="v1")
    with pytest.raises(QueueFull, match="you have 2 jobs waiting"):
        queue.submit("report", None, "t3", visitor="v1")  # that visitor's share is full
    queue.submit("report", "k", "t4", visitor="v2")
    with pytest.raises(QueueFull, match=r"the server is busy: 3 jobs are waiting for its 1 slot;"):
        queue.submit("report", None, "t5", visitor="v3")
    assert queue.counts() == (1, 3)
    joined, shared = queue.submit("report", "k", "t6", visitor="v3")  # the same request joins, never refused
    assert shared and joined.key == "k"
    assert issubclass(QueueFull, ValueError)  # a page shows it as one line (show_failure's warning)
    default = JobQueue(max_running=2)
    assert default.max_waiting == 16 and default.per_visitor_waiting == 4


def test_the_estimate_comes_from_finished_jobs_of_the_kind():
    queue = JobQueue(max_running=1)
    done, _ = queue.submit("report", None, "t0")
    queue.try_start(done)
    time.sleep(0.05)
    queue.finish(done, value=1)
    typical = queue.typical_seconds("report")
    running, _ = queue.submit("report", None, "t1")
    waiting, _ = queue.submit("report", None, "t2")
    queue.try_start(running)
    eta = queue.eta(waiting)
    assert 0.0 <= eta <= typical  # the running one is partly done already
    assert queue.position(waiting) == 1


def test_a_job_is_abandoned_only_when_every_asker_has_gone():
    queue = JobQueue(max_running=1)
    job, _ = queue.submit("wsd", "k", "tab-1")
    queue.submit("wsd", "k", "tab-2")
    assert not queue.abandoned(job, lambda s: s == "tab-2")
    queue.leave(job, "tab-2")
    assert queue.abandoned(job, lambda s: s == "tab-2")
    queue.finish(job, cancelled=True)
    again, shared = queue.submit("wsd", "k", "tab-2")  # a cancelled job is not joined: asked again
    assert again is not job and not shared


def test_queue_settings_are_checked(monkeypatch):
    from app_pages import jobs

    monkeypatch.setenv(jobs.MAX_JOBS_ENV_VAR, "none")
    jobs.reset_job_queue()
    with pytest.raises(ValueError, match="ELMO_WORKBENCH_MAX_JOBS='none'"):
        jobs.job_queue()
    monkeypatch.setenv(jobs.MAX_JOBS_ENV_VAR, "3")
    jobs.reset_job_queue()
    assert jobs.job_queue().max_running == 3
    monkeypatch.delenv(jobs.MAX_JOBS_ENV_VAR)
    jobs.reset_job_queue()


def test_an_abandoned_job_leaves_no_partial_activation_file(tmp_path, monkeypatch):
    from app_pages.running import _remove_partial_files

    monkeypatch.setenv("ELMO_WORKBENCH_CACHE", str(tmp_path))
    (tmp_path / "split").mkdir()
    old, new = tmp_path / "split" / "old.hdf5.partial", tmp_path / "split" / "new.hdf5.partial"
    old.write_bytes(b"x")
    os.utime(old, (1_000_000, 1_000_000))
    since = time.time() - 1
    new.write_bytes(b"x")
    folder = tmp_path / "report"
    folder.mkdir()
    busy = JobQueue(max_running=2)
    other, _ = busy.submit("probes", None, "tab-2")
    busy.try_start(other)
    _remove_partial_files(lambda: shutil.rmtree(folder), since, busy)
    assert not folder.exists() and new.exists()  # another job runs: its partial file may be the one written
    busy.finish(other)
    _remove_partial_files(None, since, busy)
    assert not new.exists() and old.exists()  # only what changed while the job ran


def test_run_with_progress_shares_identical_requests_and_keeps_to_the_cap(monkeypatch):
    from app_pages import jobs, running

    monkeypatch.setenv(jobs.MAX_JOBS_ENV_VAR, "1")
    jobs.reset_job_queue()
    names = threading.local()
    monkeypatch.setattr(running, "_session_id", lambda: names.session)
    calls, active, most = [], [0], [0]
    lock = threading.Lock()

    def work(progress):
        with lock:
            calls.append(threading.current_thread().name)
            active[0] += 1
            most[0] = max(most[0], active[0])
        time.sleep(0.3)
        with lock:
            active[0] -= 1
        return f"value of {threading.current_thread().name}"

    got = {}

    def visit(session, key):
        names.session = session
        got[session] = running.run_with_progress("t", work, kind="test", key=key)

    threads = [threading.Thread(target=visit, args=(f"tab-{k}", key), name=f"tab-{k}")
               for k, key in enumerate(["same", "same", "other", "same"])]
    for t in threads:
        t.start()
        time.sleep(0.02)
    for t in threads:
        t.join(timeout=30)
    try:
        assert most[0] == 1  # one job at a time on this server
        assert sorted(calls) in (["tab-0", "tab-2"], ["tab-0", "tab-2", "tab-3"])
        assert got["tab-1"] == got["tab-0"] == "value of tab-0"  # asked while tab-0's job ran: shared
        assert got["tab-2"] == "value of tab-2"
    finally:
        jobs.reset_job_queue()


def test_whole_datasets_are_the_hosts_call(app_env, monkeypatch):
    monkeypatch.setenv("ELMO_WORKBENCH_PUBLIC", "1")
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    at.switch_page("app_pages/reports.py").run()
    assert not at.exception
    options = at.selectbox(key="rp_limit").options
    assert options and not any(o.startswith("all") for o in options)
    monkeypatch.delenv("ELMO_WORKBENCH_PUBLIC")
    local = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    local.switch_page("app_pages/reports.py").run()
    assert any(o.startswith("all") for o in local.selectbox(key="rp_limit").options)
