"""The app in a real browser: ``streamlit run app.py`` driven by headless Chromium.

Needs Debian's ``chromium`` package (``apt-get install -y chromium``) and the ``playwright``
Python package; Playwright's own browser downloads are not used (``executable_path`` points at
the system browser). The server runs on 127.0.0.1 on a free port with the fixture biLM as its
default model (``ELMO_WORKBENCH_MODEL``). One screenshot per page is saved under
``$ELMO_WORKBENCH_SCREENSHOTS`` if set, else under pytest's temporary directory (the path is
printed).

Every page in :data:`PAGES` must render its main figure with no error box and no traceback
(pages whose work starts on a button get that button clicked first, as a user would), judged
once the page has stopped computing (:func:`wait_until_idle`), with every plotly figure drawn
(:data:`FIGURES_DRAWN`); the
playground must redraw its figure after a sentence is typed; a model that cannot load must
show an error box (so the "no error box" check is known to see one). The server reads the data
root (``ELMO_WORKBENCH_DATA``) and writes its activation caches and reports into temporary
folders (``ELMO_WORKBENCH_CACHE``, ``ELMO_WORKBENCH_REPORTS``).
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
SERVER_START_TIMEOUT = 60  # s
FIGURE_TIMEOUT = 90_000  # ms: the first figure waits for torch, nltk and the model to load
WORK_TIMEOUT = 180_000  # ms: a page whose work starts on a button (a probe run, a report)

# (title, url path, what the page's main figure is, a text its title holds ("" if it has no
# title), the button that starts the page's work (None: it starts by itself)): one row per page.
PAGES = [
    ("playground", "/", "the cross-sentence similarity heatmaps", "", None),
    ("probes", "/probes", "POS accuracy per layer with intervals and baselines", "pos: accuracy per layer",
     "Run the probes"),
    ("information", "/information", "the online codelength of POS per layer", "pos: MDL online code per layer",
     "Measure"),
    ("scalar-mix", "/scalar_mix", "the hand-set s_j and the probe's score", "Your scalar mix",
     "Train the probe on this mix"),
    ("sense-retrieval", "/sense_retrieval", "nearest SemCor occurrences per layer", "Nearest SemCor occurrences",
     None),
    ("layer-projections", "/layer_projections", "per-layer PCA of 'bank' coloured by sense", "“bank”", None),
    ("reports", "/reports", "the built report's figures", "pos: accuracy per layer", "Build the report"),
    ("syntax", "/syntax", "the structural probe's tree under the gold tree", "the probe's minimum spanning tree",
     "Train the structural probe"),
]

FIGURE = ".js-plotly-plot"
ERROR_BOX = '[data-testid="stAlertContentError"]'
TRACEBACK = '[data-testid="stException"]'
TEXT_BOX = 'textarea[aria-label^="Sentences, one a line"]'  # the label goes on to say how to label senses


def chromium_path() -> str:
    path = os.environ.get("CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).is_file():
        pytest.fail(f"Chromium not found at {path}: install Debian's browser with "
                    "`apt-get install -y chromium` (or set $CHROMIUM to its path)", pytrace=False)
    return path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(model: str, address: str = "127.0.0.1", **env_vars: str) -> tuple[subprocess.Popen, str]:
    """``streamlit run app.py`` on a free port of ``address`` ("::": every interface, IPv4 too) with
    ``model`` as the default biLM (and ``env_vars`` added to its environment)."""
    port = free_port()
    env = dict(os.environ, ELMO_WORKBENCH_MODEL=model, **env_vars)
    log = tempfile.TemporaryFile()
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
         "--server.port", str(port), "--server.address", address,
         "--server.fileWatcherType", "none", "--browser.gatherUsageStats", "false"],
        cwd=PROJECT, env=env, stdout=log, stderr=subprocess.STDOUT)
    process.log = log
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + SERVER_START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return process, url
        except OSError:
            time.sleep(0.3)
    output = server_log(process)
    stop_server(process)
    pytest.fail(f"streamlit did not start on {url}:\n{output}", pytrace=False)


def stop_server(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    process.log.close()


def server_log(process: subprocess.Popen) -> str:
    process.log.seek(0)
    return process.log.read().decode(errors="replace")[-4000:]


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    """Headless Chromium with a fresh profile (one context for the module)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.fail("the playwright package is missing: pip install -r requirements.txt "
                    "(no `playwright install`: the test uses Debian's chromium)", pytrace=False)
    executable = chromium_path()
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=executable,
            headless=True, args=CHROMIUM_ARGS, viewport={"width": 1400, "height": 3000})
        yield context
        context.close()


@pytest.fixture(scope="module")
def server(data_root, tmp_path_factory):
    process, url = start_server(str(data_root / "fixtures" / "bilm_tf"), ELMO_WORKBENCH_DATA=str(data_root),
                                ELMO_WORKBENCH_CACHE=str(tmp_path_factory.mktemp("activations")),
                                ELMO_WORKBENCH_REPORTS=str(tmp_path_factory.mktemp("reports")))
    yield process, url
    stop_server(process)


@pytest.fixture(scope="module")
def screenshots(tmp_path_factory) -> Path:
    env = os.environ.get("ELMO_WORKBENCH_SCREENSHOTS", "").strip()
    directory = Path(env) if env else tmp_path_factory.mktemp("screenshots")
    directory.mkdir(parents=True, exist_ok=True)
    print(f"screenshots in {directory}")
    return directory


#: True when the app has stopped computing: the script is not running (the attribute Streamlit's
#: own browser tests read), and no spinner, running st.status box, skeleton or stale element is
#: left on the page.
IDLE = """() => {
  const app = document.querySelector('[data-test-script-state]');
  if (!app || app.getAttribute('data-test-script-state') !== 'notRunning') return false;
  return !document.querySelector('[data-testid="stSpinner"], [data-testid="stExpanderIconSpinner"], '
    + '[data-testid="stSkeleton"], [data-stale="true"]');
}"""

#: Per plotly figure on the page: whether plotly has drawn it (its layout computed, at least one
#: trace, an SVG of real size, and something drawn in a trace layer: plotly's ``g.mlayer`` groups,
#: heatmaplayer / barlayer / boxlayer / scatterlayer).
FIGURES_DRAWN = """() => Array.from(document.querySelectorAll('.js-plotly-plot')).map(f => {
  const box = f.getBoundingClientRect();
  return Boolean(f._fullLayout && f._fullData && f._fullData.length > 0 && f.querySelector('.main-svg')
    && box.width > 50 && box.height > 50
    && f.querySelectorAll('.cartesianlayer .mlayer > *, .pielayer > *, .polarlayer .mlayer > *').length > 0);
})"""


def wait_until_idle(page, timeout: int, settle: float = 0.6) -> None:
    """Wait until the page has stopped computing (:data:`IDLE`), and still is ``settle`` s later
    (a rerun or a lazily loaded element may follow the first idle moment)."""
    deadline = time.monotonic() + timeout / 1000
    while True:
        page.wait_for_function(IDLE, timeout=max(1, int((deadline - time.monotonic()) * 1000)))
        page.wait_for_timeout(int(settle * 1000))
        if page.evaluate(IDLE):
            return
        if time.monotonic() > deadline:
            raise TimeoutError("the page did not stop computing")


def assert_figures_drawn(page, title: str) -> None:
    drawn = page.evaluate(FIGURES_DRAWN)
    assert drawn and all(drawn), f"{title}: figures drawn: {drawn}"


def figure_data(page) -> str:
    """The data of the page's first figure, as JSON text (to see that it changed)."""
    return page.evaluate(f"() => JSON.stringify(document.querySelector('{FIGURE}').data)")


def assert_no_error(page, process) -> None:
    errors = page.locator(ERROR_BOX).all_inner_texts() + page.locator(TRACEBACK).all_inner_texts()
    assert not errors, f"error on the page: {errors}\nserver log:\n{server_log(process)}"


def wait_for_figure_titled(page, text: str, timeout: int) -> None:
    """Wait until a plotly figure whose title holds ``text`` is drawn."""
    page.wait_for_function(
        "(text) => Array.from(document.querySelectorAll('.js-plotly-plot')).some(f => f.layout && "
        "f.layout.title && String(f.layout.title.text || '').includes(text))", arg=text, timeout=timeout)


@pytest.mark.parametrize("title, path, main_figure, figure_title, button", PAGES, ids=[p[0] for p in PAGES])
def test_page_renders_its_main_figure(browser, server, screenshots, title, path, main_figure, figure_title, button):
    process, url = server
    page = browser.new_page()
    try:
        page.goto(url + path)
        if button is not None:
            start = page.get_by_role("button", name=button)
            start.wait_for(timeout=FIGURE_TIMEOUT)
            start.click()
        if figure_title:
            wait_for_figure_titled(page, figure_title, WORK_TIMEOUT if button else FIGURE_TIMEOUT)
        else:
            page.wait_for_selector(FIGURE, timeout=FIGURE_TIMEOUT)
        wait_until_idle(page, WORK_TIMEOUT)  # judged once the page has stopped computing
        assert_no_error(page, process)
        assert page.locator(FIGURE).count() >= 1, f"{title}: no figure ({main_figure})"
        assert_figures_drawn(page, title)
        assert page.locator('[data-testid="stSidebar"]').get_by_text("Model").count() >= 1
        page.screenshot(path=str(screenshots / f"{title}.png"), full_page=True)
        assert (screenshots / f"{title}.png").stat().st_size > 10_000
    finally:
        page.close()


def test_typing_a_sentence_redraws_the_playground(browser, server, screenshots):
    process, url = server
    page = browser.new_page()
    try:
        page.goto(url + "/")
        page.wait_for_selector(FIGURE, timeout=FIGURE_TIMEOUT)
        before = figure_data(page)
        labels = page.evaluate(f"() => document.querySelector('{FIGURE}').layout.xaxis.ticktext")
        assert len(labels) == 12, labels
        text_box = page.locator(TEXT_BOX)
        text_box.click()
        page.keyboard.press("Control+End")
        page.keyboard.type("\nThe robbers left the bank with nothing.")
        page.keyboard.press("Control+Enter")  # a text area sends its value on Ctrl+Enter or blur
        page.wait_for_function(
            f"(before) => {{ const f = document.querySelector('{FIGURE}');"
            f" return f && JSON.stringify(f.data) !== before; }}", arg=before, timeout=30_000)
        labels = page.evaluate(f"() => document.querySelector('{FIGURE}').layout.xaxis.ticktext")
        assert len(labels) == 13 and labels[-1] == "S13", labels
        assert_no_error(page, process)
        page.screenshot(path=str(screenshots / "playground-typed.png"), full_page=True)
    finally:
        page.close()


def test_a_model_that_cannot_load_shows_an_error_box(browser, tmp_path):
    process, url = start_server(str(tmp_path / "no-such-model"))
    page = browser.new_page()
    try:
        page.goto(url + "/")
        page.wait_for_selector(ERROR_BOX, timeout=FIGURE_TIMEOUT)
        assert "Could not load the biLM" in page.locator(ERROR_BOX).first.inner_text()
        assert page.locator(TRACEBACK).count() == 0 and page.locator(FIGURE).count() == 0
    finally:
        page.close()
        stop_server(process)


SEMCOR_SLICE = 'input[aria-label="SemCor sentences"]'  # the sense pages' slice selector (its shown value)


@pytest.mark.parametrize("first_title, first_path", [("Scalar mix", "/scalar_mix"),
                                                      ("Layer projections", "/layer_projections")],
                         ids=["after-scalar-mix", "after-layer-projections"])
def test_sense_retrieval_keeps_the_default_slice_after_another_sense_page(browser, server, first_title, first_path):
    """A visit to Scalar mix or Layer projections, then Sense retrieval through the sidebar, in one
    session: Sense retrieval shows, and searches, the default SemCor slice. (The pages once drew
    one selector key each; Streamlit's widget id includes the page, so on the second page the
    browser started the selector at its first option and the slice fell from 1,000 to 100.)"""
    from app_pages.inputs import DEFAULT_SEMCOR_LIMIT, limit_label

    process, url = server
    default = limit_label(DEFAULT_SEMCOR_LIMIT)
    page = browser.new_page()
    try:
        page.goto(url + first_path)
        page.locator(SEMCOR_SLICE).wait_for(timeout=FIGURE_TIMEOUT)
        wait_until_idle(page, WORK_TIMEOUT)  # the page as the lecturer left it: done computing
        assert page.locator(SEMCOR_SLICE).input_value() == default
        page.locator('[data-testid="stSidebarNav"] a', has_text="Sense retrieval").first.click()
        page.get_by_text("Sense retrieval: nearest SemCor occurrences").wait_for(timeout=FIGURE_TIMEOUT)
        wait_until_idle(page, WORK_TIMEOUT)
        assert_no_error(page, process)
        assert page.locator(SEMCOR_SLICE).input_value() == default, f"after {first_title}"
        # what the page searched, not only what the selector shows
        page.get_by_text(f"searched the {default} SemCor sentences").wait_for(timeout=FIGURE_TIMEOUT)
    finally:
        page.close()
