"""How fast the app feels in a real browser (against its goals), and the README's screenshots.

    python bench/app_timing.py                                  # elmo-mini, 3 repeats
    python bench/app_timing.py --model /path/to/bilm --repeats 5
    python bench/app_timing.py --model ../shared/fixtures/bilm_tf --repeats 1 --screenshots /tmp/shots
    python bench/app_timing.py --screenshots docs/             # playground.png, layer-projections.png
    python bench/app_timing.py --model ../shared/fixtures/bilm_tf --repeats 1 --pages   # the playground only
    python bench/app_timing.py --prepared --repeats 1           # after Prepare for class

Starts ``streamlit run app.py`` on 127.0.0.1 (a free port) with ``--model`` as the default biLM
(``ELMO_WORKBENCH_MODEL``), ``--data-root`` as ``ELMO_WORKBENCH_DATA``, and a temporary folder for
the activation caches and reports (``ELMO_WORKBENCH_CACHE``, ``ELMO_WORKBENCH_REPORTS``: user caches
are never read or written, so every first visit of a page is truly cold), and drives Debian's
headless Chromium (``/usr/bin/chromium``, or ``--chromium`` / ``$CHROMIUM``) through Playwright
(``executable_path``; no ``playwright install``). The server is always shut down at the end.

What is measured (seconds; ``--repeats N`` times where a repeat means something):

1. server start: from launching ``streamlit run`` to ``/_stcore/health`` answering 200 (polled
   every 0.05 s). N servers are started, one per cold round.
2. first paint of the playground (``/``): from the start of the navigation to the first animation
   frame in which both the sidebar's model picker (drawn by ``app.py``) and the page's title (an
   ``h1`` in the main area, drawn by the page script) are laid out with a non-zero size, i.e. the
   app's own content, not Streamlit's empty HTML shell or skeleton. Goal < 3 s. *Cold*: the first
   visit to a freshly started server (one per round, N rounds); *warm*: N later visits, each in a
   new browser context (a new session and an empty HTTP cache, like a first-time visitor to a
   server that has already loaded the model). Each visit's page run is let finish (the rest of the
   page after its first figure, as on the other pages) before the next visit starts, so a later
   visit meets a server at rest, not one still computing the previous visit's attribution.
3. the playground's main figure: as 2, until the first ``.js-plotly-plot`` has drawn its SVG
   (``.main-svg``) with a non-zero size. Cold (includes importing torch and loading the model)
   and warm.
4. typing: the playground's sentences box is replaced with new text (the demo text plus 1..8 new
   lines that use the compared word, different in every repeat so Streamlit's cache never answers)
   and committed with Ctrl+Enter, as a user does. Timed from the Ctrl+Enter keydown to the first
   animation frame in which the first figure holds the new data (see :data:`EDIT_WATCH` for why
   this signal); a second figure, "run finished", is when Streamlit's script run state
   (``data-test-script-state`` on ``stApp``) is back to ``notRunning``: the whole page, every
   figure below the first included, is up to date. Goal < 1 s for the redraw.
5. every other page, by deep link: first paint (as 2) and time to its first figure (the first
   ``.js-plotly-plot`` in the page, not necessarily the page's main one) and until the page has
   settled (its script run over, every element drawn; the playground's visits too), for its first visit on
   this server and N later visits. "1st visit" means the page's own results are not cached yet,
   but the pages are visited in order (probes, scalar mix, sense retrieval, layer projections,
   reports, syntax) after the playground, so the model is loaded and caches shared between pages
   (e.g. SemCor's activations) may already have been built by an earlier page. ``--pages`` picks
   which (``--pages`` alone: none, the playground only). The probes and reports pages start their
   work on a button: only their first paint is timed (it is not clicked). The scalar-mix and syntax
   pages train their probe only when asked (:data:`ASK_BUTTONS`): the visit presses that button as
   soon as it shows, so their first figure's time includes the training, as when they trained on
   opening. The syntax page's first figure is its structural probe's tree (a first look from a probe
   on 100 EWT sentences while the chosen one trains, on its first visit).

All page times are taken inside the page with ``performance.now()`` (0 = start of the
navigation), checked once per animation frame, so Playwright's round trips to the browser are not
in them; their resolution is one frame (~17 ms). Chromium's start is not timed.

``--prepared`` (``--prepared command``) runs the Prepare-for-class command (``python -m
app_pages.prepare``, for the playground and the pages timed) into each round's fresh cache before
its server starts; ``--prepared button`` presses the Lesson page's *Prepare every page for class*
once each round's server is up (so the server's memory is prepared too, not only its disk
caches), and the playground's first visit is then labelled "prepared server". Either way the
preparation's time is a row of the table and every page's first visit is timed on what it
prepared. The goal for a first figure after preparing: 3 s (elmo-mini).

``--screenshots DIR`` saves full-page PNGs of the playground (``playground.png``) and the layer
projections page (``layer-projections.png``) at 1400 px wide, after the measurements (so taking
them does not disturb the timings), once every figure on the page is drawn.

Also prints the machine (CPU model, cores, load average before and after, the server's torch
intra-op threads, this process's niceness): absolute times only mean something beside it.
Run it on an otherwise idle machine; on a busy one the figures are upper bounds.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
VIEWPORT = {"width": 1400, "height": 1000}

# (name, url path, has a figure without a click, or after pressing its ASK_BUTTONS button): the pages besides the playground.
OTHER_PAGES = [
    ("probes", "/probes", False),
    ("scalar-mix", "/scalar_mix", True),
    ("sense-retrieval", "/sense_retrieval", True),
    ("layer-projections", "/layer_projections", True),
    ("reports", "/reports", False),
    ("syntax", "/syntax", True),
]

# Pages that train nothing before they are asked: on a server where the probe is not trained yet, the
# visit presses this button as soon as it shows, and the first figure's time includes the training.
ASK_BUTTONS = {"scalar-mix": "Train the probe on this mix", "syntax": "Train the structural probe"}

# Each timed page's title in the Prepare-for-class command (``--pages``); the reports page has none.
PREPARE_TITLES = {"playground": "Playground", "probes": "Probes", "scalar-mix": "Scalar mix",
                  "sense-retrieval": "Sense retrieval", "layer-projections": "Layer projections", "syntax": "Syntax"}

# The label goes on to say how to label senses (app_pages/playground.py): match its start.
TEXT_BOX = 'textarea[aria-label^="Sentences, one a line"]'
WORD_BOX = 'input[aria-label="Word to compare"]'
FIGURE = ".js-plotly-plot"

GOALS = {"first paint": 3.0, "typing: figure redrawn": 1.0}
PREPARED_GOALS = {"1st visit: first figure": 3.0, "server: first figure": 3.0}  # with --prepared

# Installed in every document before Streamlit's own scripts. Once per animation frame it checks
# what is laid out and records the first frame each thing appears in window.__wb.marks
# (performance.now(): ms since the navigation started). rAF rather than a MutationObserver: a
# rAF callback runs just before the frame is painted, so "laid out at rAF time" means "in this
# frame's paint", and it costs three querySelector calls a frame instead of a forced layout on
# every one of the thousands of DOM mutations Streamlit and plotly make.
PAGE_WATCH = """
(() => {
  const w = window.__wb = {marks: {}, error: null};
  const shown = (el) => { if (!el) return false; const r = el.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const checks = {
    sidebar: () => shown(document.querySelector('[data-testid="stSidebar"] [data-testid="stSelectbox"]')),
    title: () => shown(document.querySelector('[data-testid="stMain"] h1')),
    figure: () => { const f = document.querySelector('.js-plotly-plot');
                    return !!(f && f.querySelector('.main-svg') && shown(f)); },
    settled: () => 'figure' in w.marks &&
                   !!document.querySelector('[data-testid="stApp"][data-test-script-state="notRunning"]'),
  };
  const tick = () => {
    const now = performance.now();
    for (const name in checks) if (!(name in w.marks) && checks[name]()) w.marks[name] = now;
    if (w.error === null) {
      const e = document.querySelector('[data-testid="stAlertContentError"], [data-testid="stException"]');
      if (e) w.error = (e.innerText || 'error box').slice(0, 500);
    }
    if (Object.keys(w.marks).length < Object.keys(checks).length) requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
})();
"""

# The typing signal. Started just before Ctrl+Enter; records (ms, performance.now()):
#   start:    the Ctrl+Enter keydown (capture phase, so before Streamlit's own handler);
#   figure:   the first frame in which the first figure's x tick labels number `expected` (the
#             occurrences of the word in the new text: 1..8 more than in the demo text, and a
#             different count than the previous repeat) AND its data differs from before the edit.
#             Reading plotly's own graph div (`gd.data`/`gd.layout`, what it has drawn from) is
#             robust where alternatives are not: the stale-element fade or Streamlit's "Running"
#             indicator say a rerun is under way, not that this figure has been redrawn, and the
#             run ends only after every later figure on the page is sent too; comparing the data
#             alone could fire on an intermediate redraw with unchanged content, and the count
#             alone could match by chance. Both together can only hold once the new sentences are
#             in the figure. Plotly draws the SVG in the same task that sets gd.data, so the
#             frame that sees the data is the frame that paints it;
#   running / finished: the script run state (data-test-script-state on stApp) leaving and then
#             coming back to notRunning: the whole page is up to date.
EDIT_WATCH = """
(expected) => {
  const w = window.__wb;
  const fig = document.querySelector('.js-plotly-plot');
  const before = JSON.stringify(fig.data);
  const e = w.edit = {};
  if (!w.listening) {
    w.listening = true;
    document.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' && ev.ctrlKey && w.edit && !('start' in w.edit)) w.edit.start = performance.now();
    }, true);
  }
  const tick = () => {
    if (w.edit !== e) return;
    const now = performance.now();
    if ('start' in e) {
      const app = document.querySelector('[data-testid="stApp"]');
      const state = app ? app.getAttribute('data-test-script-state') : null;
      if (!('running' in e) && state && state !== 'notRunning') e.running = now;
      if ('running' in e && !('finished' in e) && state === 'notRunning') e.finished = now;
      if (!('figure' in e)) {
        const f = document.querySelector('.js-plotly-plot');
        const ticks = f && f.layout && f.layout.xaxis && f.layout.xaxis.ticktext;
        if (ticks && ticks.length === expected && f.querySelector('.main-svg') && JSON.stringify(f.data) !== before)
          e.figure = now;
      }
      const err = document.querySelector('[data-testid="stAlertContentError"], [data-testid="stException"]');
      if (err && !e.error) e.error = (err.innerText || 'error box').slice(0, 500);
    }
    if (!('figure' in e && 'finished' in e)) requestAnimationFrame(tick);
  };
  requestAnimationFrame(tick);
}
"""

# Lines added to the demo text when typing (every one uses the compared word once).
NEW_LINES = [
    "On day {r} we sat by the {word} and talked until dark.",
    "Report {r} said the {word} would stay closed for a week.",
    "In story {r} the children ran along the {word} after school.",
    "Note {r}: nobody trusted the {word} after the scandal.",
    "Trip {r} ended at the {word} where the boats were tied.",
    "Letter {r} asked the {word} for a small loan.",
    "Photo {r} shows the muddy {word} after the flood.",
    "Meeting {r} took place in the old {word} downtown.",
]


class BenchError(RuntimeError):
    """A clear, expected failure (missing browser, server that does not start, ...)."""


# --------------------------------------------------------------------------------------------
# The server
# --------------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """``streamlit run app.py`` on a free port; :meth:`stop` always ends it."""

    def __init__(self, env: dict, log_dir: Path, timeout: float):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log_path = log_dir / f"streamlit-{self.port}.log"
        self.log = open(self.log_path, "wb")
        started = time.perf_counter()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
             "--server.port", str(self.port), "--server.address", "127.0.0.1",
             "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false"],
            cwd=PROJECT, env=env, stdout=self.log, stderr=subprocess.STDOUT)
        try:
            self.start_seconds = self._wait_healthy(started, timeout)
        except BaseException:
            self.stop()
            raise

    def _wait_healthy(self, started: float, timeout: float) -> float:
        deadline = started + timeout
        while time.perf_counter() < deadline:
            if self.process.poll() is not None:
                raise BenchError(f"streamlit exited with code {self.process.returncode}:\n{self.tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        return time.perf_counter() - started
            except OSError:
                pass
            time.sleep(0.05)
        raise BenchError(f"streamlit did not answer on {self.url} within {timeout:.0f} s:\n{self.tail()}")

    def tail(self, chars: int = 3000) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")[-chars:]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.close()


# --------------------------------------------------------------------------------------------
# The browser
# --------------------------------------------------------------------------------------------

def chromium_path(given: str | None) -> str:
    path = given or os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).is_file():
        raise BenchError(f"Chromium not found at {path}: install Debian's browser with "
                         "`apt-get install -y chromium` (or `bash scripts/install_browser.sh`), "
                         "or pass --chromium PATH")
    return path


def import_playwright():
    try:
        from playwright.sync_api import sync_playwright  # lazy: if it is missing, one clear BenchError
    except ImportError:
        raise BenchError("the playwright package is missing: pip install -r requirements.txt "
                         "(no `playwright install` needed: the system chromium is used)") from None
    return sync_playwright


class Visit:
    """One page load in a new browser context; marks are seconds since navigation start."""

    def __init__(self, browser, url: str, viewport: dict = VIEWPORT):
        self.context = browser.new_context(viewport=viewport)
        self.context.add_init_script(PAGE_WATCH)
        self.page = self.context.new_page()
        self.started = time.perf_counter()  # only for the -v cross-check ("wall")
        self.page.goto(url, wait_until="commit")

    def wait(self, names: list[str], timeout_s: float) -> dict:
        """Wait until every mark in ``names`` is set (or an error box shows); returns the marks
        (seconds) and ``error`` (text or None). A mark that never came is missing."""
        try:
            self.page.wait_for_function(
                "(names) => window.__wb && (window.__wb.error !== null || "
                "names.every(n => n in window.__wb.marks))", arg=names, timeout=timeout_s * 1000)
        except Exception as err:  # playwright's TimeoutError
            if "Timeout" not in type(err).__name__:
                raise
        wall = time.perf_counter() - self.started
        state = self.page.evaluate("() => window.__wb || {marks: {}, error: 'no page watch'}")
        marks = {k: v / 1000 for k, v in state["marks"].items()}
        if "sidebar" in marks and "title" in marks:
            marks["paint"] = max(marks["sidebar"], marks["title"])
        return {"marks": marks, "error": state.get("error"), "wall": wall}

    def close(self) -> None:
        self.context.close()


def wait_idle(page, timeout_s: float) -> None:
    """Until Streamlit's script run is over (every element of the page sent and drawn)."""
    page.wait_for_selector('[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout_s * 1000)


# --------------------------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------------------------

class Results:
    def __init__(self):
        self.rows: dict[str, list[float | None]] = {}
        self.problems: list[str] = []

    def add(self, name: str, value: float | None) -> None:
        self.rows.setdefault(name, []).append(value)

    def from_visit(self, prefix: str, got: dict, want_figure: bool, what: str) -> None:
        marks = got["marks"]
        self.add(f"{prefix}: first paint", marks.get("paint"))
        if want_figure:
            self.add(f"{prefix}: first figure", marks.get("figure"))
            self.add(f"{prefix}: settled", marks.get("settled"))
        if got["error"]:
            self.problems.append(f"{what}: error on the page: {got['error']}")
        elif "paint" not in marks or (want_figure and "figure" not in marks):
            self.problems.append(f"{what}: timed out (marks seen: {sorted(marks)})")


def visit_playground(browser, url: str, results: Results, label: str, timeout_s: float, verbose: bool) -> None:
    visit = Visit(browser, url + "/")
    try:
        got = visit.wait(["sidebar", "title", "figure"], timeout_s)
        if "figure" in got["marks"]:
            wait_idle(visit.page, timeout_s)  # the rest of the page (attribution, ...) is not left running
            got = visit.wait(["sidebar", "title", "figure", "settled"], timeout_s)
    finally:
        visit.close()
    results.from_visit(f"playground {label}", got, True, f"playground ({label})")
    if verbose:
        print(f"  playground {label}: {fmt_marks(got)}", flush=True)


def measure_typing(browser, url: str, results: Results, repeats: int, timeout_s: float, verbose: bool) -> None:
    visit = Visit(browser, url + "/")
    page = visit.page
    try:
        got = visit.wait(["figure"], timeout_s)
        if "figure" not in got["marks"]:
            results.problems.append(f"typing: the playground figure never appeared ({got['error'] or 'timeout'})")
            return
        wait_idle(page, timeout_s)
        word = page.locator(WORD_BOX).input_value().strip()
        base = page.locator(TEXT_BOX).input_value().rstrip("\n")
        count0 = len(page.evaluate(f"() => document.querySelector('{FIGURE}').layout.xaxis.ticktext || []"))
        if not word:
            results.problems.append("typing: the playground has no word to compare; not measured")
            return
        for r in range(repeats):
            added = r % len(NEW_LINES) + 1
            lines = [NEW_LINES[(r + j) % len(NEW_LINES)].format(r=r + 1, word=word) for j in range(added)]
            page.locator(TEXT_BOX).fill(base + "\n" + "\n".join(lines))
            page.evaluate(EDIT_WATCH.strip(), count0 + added)
            page.locator(TEXT_BOX).press("Control+Enter")  # a text area sends its value on Ctrl+Enter or blur
            try:
                page.wait_for_function("() => window.__wb.edit.error || ('figure' in window.__wb.edit && "
                                       "'finished' in window.__wb.edit)", timeout=timeout_s * 1000)
            except Exception as err:
                if "Timeout" not in type(err).__name__:
                    raise
            edit = page.evaluate("() => window.__wb.edit")
            start = edit.get("start")
            for key, name in (("figure", "typing: figure redrawn"), ("finished", "typing: run finished")):
                results.add(name, (edit[key] - start) / 1000 if start is not None and key in edit else None)
            if edit.get("error"):
                results.problems.append(f"typing {r + 1}: error on the page: {edit['error']}")
            elif start is None or "figure" not in edit:
                results.problems.append(f"typing {r + 1}: no redraw seen ({sorted(edit)})")
            if verbose:
                print(f"  typing {r + 1} (+{added} lines): "
                      + ", ".join(f"{k} {(v - start) / 1000:.3f}" for k, v in edit.items()
                                  if isinstance(v, (int, float)) and start is not None), flush=True)
            wait_idle(page, timeout_s)
    finally:
        visit.close()


def press_when_asked(page, label: str, timeout_s: float) -> bool:
    """Press the button ``label`` as soon as the page shows it, unless its first figure comes first
    (a later visit: the probe is trained). True when it was pressed."""
    deadline = time.monotonic() + timeout_s
    button = page.get_by_role("button", name=label)
    while time.monotonic() < deadline:
        if page.evaluate("() => !!(window.__wb && 'figure' in window.__wb.marks)"):
            return False
        if button.count() and button.first.is_visible():
            button.first.click()
            return True
        time.sleep(0.05)
    return False


def measure_other_pages(browser, url: str, results: Results, repeats: int, timeout_s: float, verbose: bool,
                        pages: list[str]) -> None:
    for name, path, has_figure in (row for row in OTHER_PAGES if row[0] in pages):
        for visit_no in range(repeats + 1):
            label = "1st visit" if visit_no == 0 else "later"
            visit = Visit(browser, url + path)
            try:
                if name in ASK_BUTTONS:
                    press_when_asked(visit.page, ASK_BUTTONS[name], timeout_s)
                got = visit.wait(["sidebar", "title"] + (["figure"] if has_figure else []), timeout_s)
                if has_figure and "figure" in got["marks"]:
                    wait_idle(visit.page, timeout_s)  # leave no run behind to slow the next visit
                    got = visit.wait(["sidebar", "title", "figure", "settled"], timeout_s)
            finally:
                visit.close()
            results.from_visit(f"{name} {label}", got, has_figure, f"{name} (visit {visit_no + 1})")
            if verbose:
                print(f"  {name} visit {visit_no + 1}: {fmt_marks(got)}", flush=True)


def take_screenshots(browser, url: str, directory: Path, timeout_s: float) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    saved = []
    for name, path in (("playground", "/"), ("layer-projections", "/layer_projections")):
        visit = Visit(browser, url + path)
        page = visit.page
        try:
            got = visit.wait(["sidebar", "title", "figure"], timeout_s)
            if "figure" not in got["marks"]:
                raise BenchError(f"screenshot of {path}: no figure ({got['error'] or 'timeout'})")
            wait_idle(page, timeout_s)
            # Streamlit scrolls its main area, not the document: grow the viewport to the content
            # so a full-page screenshot holds the whole page.
            height = page.evaluate(
                "() => Math.max(...['[data-testid=\"stMain\"]', '[data-testid=\"stAppViewContainer\"]', 'body']"
                ".map(s => document.querySelector(s)).filter(Boolean).map(e => e.scrollHeight))")
            page.set_viewport_size({"width": VIEWPORT["width"], "height": max(VIEWPORT["height"], int(height))})
            page.wait_for_timeout(1500)  # plotly's responsive resize and fonts
            out = directory / f"{name}.png"
            page.screenshot(path=str(out), full_page=True)
            saved.append(out)
        finally:
            visit.close()
    return saved


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------

def fmt_marks(got: dict) -> str:
    text = ", ".join(f"{k} {v:.3f}" for k, v in sorted(got["marks"].items(), key=lambda kv: kv[1]))
    text += f" (wall clock from goto to the wait's return: {got['wall']:.3f})"
    return text + (f"  ERROR: {got['error'][:120]}" if got["error"] else "")


def goal_of(name: str, prepared: bool = False) -> float | None:
    for key, goal in ({**GOALS, **PREPARED_GOALS} if prepared else GOALS).items():
        if name.endswith(key):
            return goal
    return None


def print_table(results: Results, prepared: bool = False) -> None:
    width = max(len(n) for n in results.rows) + 2
    print(f"\n{'measure (s)':<{width}} {'n':>3} {'median':>8} {'max':>8}  {'goal':<7} met")
    for name, values in results.rows.items():
        ok = [v for v in values if v is not None]
        missing = len(values) - len(ok)
        goal = goal_of(name, prepared)
        med = f"{statistics.median(ok):8.2f}" if ok else f"{'-':>8}"
        top = f"{max(ok):8.2f}" if ok else f"{'-':>8}"
        if goal is None:
            verdict = ""
        elif missing or not ok:
            verdict = "no (missing)"
        else:
            verdict = "yes" if max(ok) < goal else ("median only" if statistics.median(ok) < goal else "no")
        goal_text = f"< {goal:g} s" if goal is not None else ""
        note = f"  ({missing} missing)" if missing and goal is None else ""
        print(f"{name:<{width}} {len(values):>3} {med} {top}  {goal_text:<7} {verdict}{note}")


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def server_torch_threads(env: dict) -> str:
    """torch's intra-op threads as the server sets them up (app.py defaults OMP_NUM_THREADS to 1)."""
    code = ("import os; os.environ.setdefault('OMP_NUM_THREADS', '1'); import torch; "
            "print(torch.get_num_threads(), torch.__version__)")
    try:
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
        threads, version = out.stdout.split()
        return f"{threads} (torch {version}, OMP_NUM_THREADS={env.get('OMP_NUM_THREADS', 'unset -> 1')})"
    except Exception as err:  # informative only
        return f"unknown ({type(err).__name__})"


def print_machine(env: dict, browser_version: str, args: argparse.Namespace) -> None:
    try:
        import streamlit  # lazy: only for its version here; the app itself runs in the server process
        st_version = streamlit.__version__
    except ImportError:
        st_version = "?"
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print("machine")
    print(f"  CPU              {cpu_model()}")
    print(f"  cores            {os.cpu_count()} logical, {affinity} usable by this process")
    print(f"  load average     {load} (1/5/15 min, before the run)")
    print(f"  torch threads    {server_torch_threads(env)}")
    print(f"  niceness         {os.nice(0)}")
    print(f"  software         Python {platform.python_version()}, streamlit {st_version}, chromium {browser_version}, "
          f"{platform.system()} {platform.release()}")
    print(f"  model            {args.model}")
    print(f"  data root        {args.data_root}")
    print(f"  repeats          {args.repeats}", flush=True)


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------

def default_data_root() -> str:
    env = os.environ.get("ELMO_WORKBENCH_DATA", "").strip()
    return env or str(PROJECT.parent / "shared")


PREPARE_BUTTON = "Prepare every page for class"


def prepare_by_button(browser, url: str, timeout_s: float) -> float:
    """Press the Lesson page's Prepare button and wait for its "Prepared ..." line; seconds from the
    click to that line (the page's own run included)."""
    visit = Visit(browser, url + "/lesson")
    try:
        button = visit.page.get_by_role("button", name=PREPARE_BUTTON)
        button.wait_for(state="visible", timeout=timeout_s * 1000)
        started = time.perf_counter()
        button.click()
        visit.page.get_by_text(re.compile(r"^Prepared ")).first.wait_for(state="visible", timeout=timeout_s * 1000)
        seconds = time.perf_counter() - started
        wait_idle(visit.page, timeout_s)
        return seconds
    except Exception as err:  # playwright's TimeoutError: said as the bench's own error
        raise BenchError(f"the Prepare button did not finish within {timeout_s:.0f} s ({type(err).__name__})") from None
    finally:
        visit.close()


def prepare(env: dict, args: argparse.Namespace) -> float:
    """Run the Prepare-for-class command for the playground and the timed pages into ``env``'s cache;
    its wall time in seconds."""
    titles = [PREPARE_TITLES[name] for name in ["playground", *args.pages] if name in PREPARE_TITLES]
    command = [sys.executable, "-m", "app_pages.prepare", "--model", args.model, "--data-root", args.data_root,
               "--pages", *titles]
    started = time.perf_counter()
    done = subprocess.run(command, env=env, cwd=PROJECT, capture_output=True, text=True, timeout=args.prepare_timeout)
    if done.returncode != 0:
        raise BenchError(f"Prepare for class failed (exit {done.returncode}): {done.stderr.strip()[-800:]}")
    return time.perf_counter() - started


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Time the app in headless Chromium against its goals (first paint < 3 s, "
                    "typing -> redrawn figure < 1 s) and optionally save the README screenshots.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    parser.add_argument("--model", default="elmo-mini",
                        help="biLM name (data/models/) or directory; passed as ELMO_WORKBENCH_MODEL")
    parser.add_argument("--data-root", default=default_data_root(),
                        help="data root, passed as ELMO_WORKBENCH_DATA; the default is $ELMO_WORKBENCH_DATA, else ../shared")
    parser.add_argument("--repeats", type=int, default=3, help="repeats of each measurement (N cold servers, "
                        "N warm visits, N edits, 1+N visits of each other page)")
    parser.add_argument("--pages", nargs="*", default=[p[0] for p in OTHER_PAGES], choices=[p[0] for p in OTHER_PAGES],
                        metavar="PAGE", help="the pages besides the playground to time (`--pages` alone: none)")
    parser.add_argument("--screenshots", type=Path, default=None, metavar="DIR",
                        help="save playground.png and layer-projections.png (full page, 1400 px wide) here")
    parser.add_argument("--chromium", default=None, help="Chromium binary; None: $CHROMIUM, else `chromium` on PATH, "
                        "else /usr/bin/chromium")
    parser.add_argument("--timeout", type=float, default=300.0,
                        help="seconds to wait for one page's figure (a cold page embeds its data first)")
    parser.add_argument("--server-timeout", type=float, default=120.0, help="seconds to wait for the server")
    parser.add_argument("--prepared", nargs="?", const="command", default=None, choices=["command", "button"],
                        help="prepare for class first: 'command' runs python -m app_pages.prepare before each server "
                             "starts; 'button' presses the Lesson page's Prepare button once the server is up")
    parser.add_argument("--prepare-timeout", type=float, default=1800.0, help="seconds Prepare for class may take")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every visit's marks as it happens")
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")
    args.data_root = str(Path(args.data_root).expanduser().resolve())
    model_dir = Path(args.model).expanduser()
    if model_dir.exists():  # a directory: absolute, since the server runs in the project folder
        args.model = str(model_dir.resolve())
    return args


def run(args: argparse.Namespace) -> int:
    sync_playwright = import_playwright()
    executable = chromium_path(args.chromium)
    if not Path(args.data_root).is_dir():
        raise BenchError(f"data root {args.data_root} not found (--data-root or $ELMO_WORKBENCH_DATA)")
    results = Results()
    with tempfile.TemporaryDirectory(prefix="app-timing-") as tmp:
        tmp = Path(tmp)
        env = dict(os.environ, ELMO_WORKBENCH_MODEL=args.model, ELMO_WORKBENCH_DATA=args.data_root,
                   ELMO_WORKBENCH_CACHE=str(tmp / "cache"), ELMO_WORKBENCH_REPORTS=str(tmp / "reports"))
        # Streamlit's own machine-wide state (credentials prompt, config) stays out of $HOME too.
        env.setdefault("STREAMLIT_BROWSER_GATHER_USAGE_STATS", "false")
        with sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_ARGS)
            server = None
            try:
                print_machine(env, browser.version, args)
                for round_no in range(args.repeats):
                    # A fresh server and a fresh cache per round: the model is not loaded yet.
                    shutil.rmtree(tmp / "cache", ignore_errors=True)
                    if args.prepared == "command":
                        print(f"round {round_no + 1}/{args.repeats}: Prepare for class…", flush=True)
                        results.add("Prepare for class (the command)", prepare(env, args))
                    print(f"round {round_no + 1}/{args.repeats}: starting a server…", flush=True)
                    server = Server(env, tmp, args.server_timeout)
                    results.add("server start (HTTP health)", server.start_seconds)
                    label = "cold server"
                    if args.prepared == "button":
                        print(f"round {round_no + 1}/{args.repeats}: the Prepare button…", flush=True)
                        results.add("Prepare for class (the button)", prepare_by_button(browser, server.url,
                                                                                       args.prepare_timeout))
                        label = "prepared server"
                    visit_playground(browser, server.url, results, label, args.timeout, args.verbose)
                    if round_no < args.repeats - 1:
                        server.stop()
                        server = None
                print("warm visits of the playground…", flush=True)
                for _ in range(args.repeats):
                    visit_playground(browser, server.url, results, "warm", args.timeout, args.verbose)
                print("typing in the playground…", flush=True)
                measure_typing(browser, server.url, results, args.repeats, args.timeout, args.verbose)
                if args.pages:
                    print("the other pages…", flush=True)
                    measure_other_pages(browser, server.url, results, args.repeats, args.timeout, args.verbose,
                                        args.pages)
                if args.screenshots is not None:
                    for path in take_screenshots(browser, server.url, args.screenshots, args.timeout):
                        print(f"screenshot: {path} ({path.stat().st_size // 1024} KB)", flush=True)
                if results.problems:
                    print("\nserver log (end):\n" + server.tail(), flush=True)
            finally:
                if server is not None:
                    server.stop()
                browser.close()
    print_table(results, bool(args.prepared))
    print(f"\nload average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("first paint: sidebar model picker and page title laid out; first figure: first plotly "
          "figure's SVG drawn; both from navigation start. Typing: Ctrl+Enter to the first figure "
          "holding the new data (run finished: the whole page rerun).")
    for problem in results.problems:
        print(f"PROBLEM: {problem}")
    return 1 if results.problems else 0


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except BenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
