"""Showing things on a page: markdown made literal, plotly figures, tables, captions.

Not a page. Imports nothing heavy (streamlit is already loaded when a page runs).

- **User text** (:func:`escape_markdown`): made literal for ``st.markdown`` and friends.
- **Figures and tables** (:func:`figure`, :func:`table`): full width, with a PNG download named
  after the figure; a new session's first one waits for the page's shell to paint
  (:func:`let_the_shell_paint`).
- **Captions** shared by several pages (:func:`baseline_caption`).
"""

from __future__ import annotations

import os
import time

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
