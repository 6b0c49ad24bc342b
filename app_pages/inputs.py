"""What the user gives the pages: the slice selectors, text from a box, and the widget values
that outlive a visit to another page.

Not a page. Imports nothing heavy.
"""

from __future__ import annotations

import streamlit as st

from app_pages.model_choice import visitor_is_local

#: Session-state keys that start with one of these survive a visit to another page (Streamlit
#: forgets a widget's value when a run does not draw it; app.py re-stores them every run).
PERSISTENT_PREFIXES = ("pg_",)

#: "All sentences" in a slice selector. Not None: a selectbox shows a value of None as "no
#: choice made" (an empty box), so the selectors hold 0 and :func:`as_limit` turns it into None.
ALL = 0

#: SemCor slices the pages offer (sentences from the start of SemCor; ALL = all 37,176).
SEMCOR_LIMITS = [100, 300, 1000, 3000, 10000, ALL]
#: The sense pages' slice until the visitor picks another: 10,000 sentences hold most words a
#: class asks about ("bank" 28 times where the first 1,000 hold it 5 times), and the lemma
#: index a word's first query builds over them takes seconds (docs/app.md, *SemCor's slice*).
DEFAULT_SEMCOR_LIMIT = 10000
#: Session state: the SemCor slice every sense page shares (Scalar mix, Sense retrieval, Layer
#: projections). A plain value, not a widget's key: Streamlit's id of a keyed widget includes the
#: page, so one key drawn on several pages is a new widget on each, and a new widget starts at
#: its first option (100) whatever the key held on the page before. Each page draws its own
#: selector (its own key), which starts at this value and writes its changes back here.
SEMCOR_LIMIT_KEY = "semcor_limit"

#: EWT/CoNLL slices the pages offer (sentences per split; ALL = all).
SENTENCE_LIMITS = [50, 100, 200, 500, 1000, 2000, ALL]


def as_limit(value) -> int | None:
    """A slice selector's value as the backends' ``limit``: None for :data:`ALL`."""
    return None if not value else int(value)


def limit_label(value, all_text: str = "all") -> str:
    """How a slice selector shows ``value``."""
    return all_text if not value else f"first {int(value):,}"


def keep_widget_state() -> None:
    """Re-store the persistent widget values so they outlive a page switch."""
    for key in list(st.session_state.keys()):
        if isinstance(key, str) and key.startswith(PERSISTENT_PREFIXES):
            st.session_state[key] = st.session_state[key]


def offered_limits(limits: list[int], key: str) -> list[int]:
    """The slices a selector offers this visitor: all of ``limits`` from the server's machine;
    from another machine, not :data:`ALL` (a whole dataset is hours of the server's CPU, the
    host's call). A remembered ALL becomes the largest slice offered."""
    options = list(limits) if visitor_is_local() else [n for n in limits if n]
    if key in st.session_state and st.session_state[key] not in options:
        st.session_state[key] = max(options)
    return options


def _share_semcor_limit(widget_key: str) -> None:
    st.session_state[SEMCOR_LIMIT_KEY] = st.session_state[widget_key]


def semcor_limit_widget(widget_key: str, help_extra: str = "") -> int | None:
    """The SemCor slice selector of one page (``widget_key``: that page's own key): it shows the
    slice the sense pages share (:data:`SEMCOR_LIMIT_KEY`) and a change to it is the new shared
    slice. Returns the slice as a ``limit`` (None: all of SemCor)."""
    st.session_state.setdefault(SEMCOR_LIMIT_KEY, DEFAULT_SEMCOR_LIMIT)
    options = offered_limits(SEMCOR_LIMITS, SEMCOR_LIMIT_KEY)
    if st.session_state.get(widget_key) != st.session_state[SEMCOR_LIMIT_KEY]:
        # first drawn on this page, or the slice changed elsewhere (on another page):
        # set through session state, so the browser is told the value rather than its first option
        st.session_state[widget_key] = st.session_state[SEMCOR_LIMIT_KEY]
    return as_limit(st.selectbox(
        "SemCor sentences", options, key=widget_key, on_change=_share_semcor_limit, args=(widget_key,),
        format_func=lambda n: limit_label(n, "all 37,176 (slow the first time)"),
        help="How much of SemCor the biLM reads to build the sense index (once per model and slice, "
             "then cached on disk). A larger slice finds more occurrences of more words. The sense "
             "pages share one slice: a change here holds on the others." + help_extra))


def semcor_slice_words(limit: int | None) -> str:
    """``limit`` as the pages say it: "the first 1,000 SemCor sentences", "all of SemCor"."""
    return "all of SemCor" if limit is None else f"the first {limit:,} SemCor sentences"


def single_line(text: str, limit: int = 2000) -> str:
    """Text from a box as one line (newlines become spaces), at most ``limit`` characters."""
    return " ".join(str(text).split())[:limit]
