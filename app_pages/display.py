"""Showing things on a page: markdown made literal, plotly figures, tables, captions.

Not a page. Imports nothing heavy (streamlit is already loaded when a page runs).

- **User text** (:func:`escape_markdown`): made literal for ``st.markdown`` and friends.
- **Figures and tables** (:func:`figure`, :func:`table`): full width, with a PNG download named
  after the figure; a new session's first one waits for the page's shell to paint
  (:func:`let_the_shell_paint`).
- **Plotly's script, ahead of the figures** (:func:`prefetch_figure_scripts`): fetched and run in
  the browser while the page computes, once the sidebar's picker is laid out.
- **Captions** shared by several pages (:func:`baseline_caption`).
"""

from __future__ import annotations

import json
import os
import time
from functools import lru_cache
from pathlib import Path

import streamlit as st

#: A session's first figure is not sent before this many seconds into its first script run (see
#: :func:`let_the_shell_paint`).
SHELL_SECONDS = float(os.environ.get("ELMO_WORKBENCH_SHELL_SECONDS", "1.0"))  # 0: never hold back
_SESSION_START_KEY = "_wb_session_start"
_SHELL_DONE_KEY = "_wb_shell_painted"


def note_session_start() -> None:
    """Called by ``app.py`` on every run: remembers when the session's first run started."""
    st.session_state.setdefault(_SESSION_START_KEY, time.monotonic())


def let_the_shell_paint() -> None:
    """Call before sending a plotly figure or a dataframe: on a session's first run, wait until
    :data:`SHELL_SECONDS` have passed since the run started (at most that; not at all when the
    page already spent longer computing, or on any later run).

    Why: every Streamlit widget, the sidebar's model picker included, is a lazily loaded script,
    and each element waits behind a skeleton until its script is in. When a page's figures come
    from a cache, they reach a new browser in the same instant as the picker, and the browser
    shows the picker in the same frame as plotly's first drawing, after fetching and running
    plotly's 4.7 MB bundle: a throwaway script on bench/app_timing.py's helpers saw the picker at
    3.9-4.9 s while the page title was up at 1.4 s. Holding the first figure back ~1 s lets the
    picker and the page's text paint first (1.5-2.7 s in that script and in bench/app_timing.py)
    at the cost of the figure coming up to that much later on the session's first page only."""
    if st.session_state.get(_SHELL_DONE_KEY):
        return
    st.session_state[_SHELL_DONE_KEY] = True
    started = st.session_state.get(_SESSION_START_KEY)
    if started is not None:
        time.sleep(max(0.0, SHELL_SECONDS - (time.monotonic() - started)))


#: Streamlit's lazily loaded scripts the pages' figures and tables need, by the start of their
#: file names in Streamlit's static folder (``static/js/<name>.<hash>.js``).
LAZY_SCRIPTS = ("PlotlyChart.", "DataFrame.", "arrowFormatUtils.")


@lru_cache(maxsize=1)
def _lazy_script_names() -> tuple[str, ...]:
    """The file names of :data:`LAZY_SCRIPTS` in the installed Streamlit, in that order (none it lacks)."""
    folder = Path(st.__file__).parent / "static" / "static" / "js"
    try:
        names = sorted(p.name for p in folder.iterdir() if p.suffix == ".js")
    except OSError:
        return ()
    return tuple(name for prefix in LAZY_SCRIPTS for name in names if name.startswith(prefix) and name.count(".") == 2)


#: Runs in the page (``st.html``): prefetches the scripts, then, once the sidebar's model picker is
#: laid out (or after 3 s), imports plotly's so that the browser runs it while the page computes.
#: Streamlit imports the same URL when the first figure arrives and gets the module already run.
_PREFETCH_SCRIPT = """<script>
(() => {
  if (window.__wbFigureScripts) return;  // once per browser tab: a page switch sends this again
  window.__wbFigureScripts = true;
  const entry = document.querySelector('script[type="module"][src*="static/js/index."]');
  const base = entry ? entry.src : new URL("./static/js/", document.baseURI).href;
  const urls = NAMES.map((name) => new URL(name, base).href);
  for (const url of urls) {
    const link = document.createElement("link");
    link.rel = "prefetch"; link.href = url; link.crossOrigin = "anonymous";
    document.head.appendChild(link);
  }
  const started = performance.now();
  const pickerShown = () => {
    const picker = document.querySelector('[data-testid="stSidebar"] [data-testid="stSelectbox"]');
    return picker && picker.getBoundingClientRect().height > 0;
  };
  const importPlotly = () => {
    if (pickerShown() || performance.now() - started > 3000) setTimeout(() => import(urls[0]).catch(() => {}), 0);
    else requestAnimationFrame(importPlotly);
  };
  requestAnimationFrame(importPlotly);
})();
</script>"""


def prefetch_figure_scripts() -> None:
    """Have the browser fetch plotly's and the table grid's scripts, and run plotly's, while the
    page computes.

    Why: Streamlit's browser side fetches the 4.7 MB script that draws a plotly figure (and the
    1.2 MB of the table grid) only when the first figure arrives, after :func:`let_the_shell_paint`'s
    hold, then runs it: a long task of 0.7-1.3 s before the figure is drawn (2-core AMD EPYC, load
    average 8 from other work; on a server busy with a page run the fetch itself took 1.3-1.7 s).
    Here the scripts are prefetched at once, and plotly's is imported as soon as the sidebar's
    model picker is laid out, so the picker and the page's text paint as before and plotly is
    ready when the figure comes. Called in the sidebar, last: its empty element shifts nothing
    (at the top of the main area its gap moved the page title down 16 px). The script is this
    module's own text; nothing a visitor typed goes into it."""
    names = _lazy_script_names()
    if names and names[0].startswith("PlotlyChart."):
        st.html(_PREFETCH_SCRIPT.replace("NAMES", json.dumps(["./" + name for name in names])),
                unsafe_allow_javascript=True)


_MARKDOWN_SPECIALS = set("\\`*_{}[]()<>#+-.!|$~:")


def escape_markdown(text: str) -> str:
    """User text made literal for st.markdown / st.caption / st.warning (a "$" would start
    LaTeX, a "*" emphasis, a leading "#" a heading)."""
    return "".join("\\" + c if c in _MARKDOWN_SPECIALS else c for c in str(text))


def plotly_config(filename: str) -> dict:
    """plotly's toolbar with a PNG download named after the figure."""
    return {"displaylogo": False,
            "toImageButtonOptions": {"format": "png", "filename": filename, "scale": 2}}


def figure(fig, name: str, key: str) -> None:
    """A plotly figure at full width with the PNG download named ``name``."""
    let_the_shell_paint()
    st.plotly_chart(fig, config=plotly_config(name), key=key)


def table(data, **kwargs) -> None:
    """``st.dataframe`` (its grid is a 1.2 MB lazily loaded script: see :func:`let_the_shell_paint`)."""
    let_the_shell_paint()
    st.dataframe(data, **kwargs)


def baseline_caption(baseline, layer_names: list[str]) -> str:
    """One sentence giving the baseline per layer, for a caption beside per-layer cosines."""
    values = ", ".join(f"{name.split(' (')[0]} {baseline.cosine[j]:.2f}" for j, name in enumerate(layer_names))
    return (f"For scale, the anisotropy baseline (Ethayarajh 2019): random words in random sentences "
            f"score {values} on average ({baseline.n_pairs:,} pairs of words from different sentences "
            f"among {baseline.n_sentences} of {baseline.source}). Any two vectors of a layer share that "
            "much; only the similarity above it says something about these words.")
