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
#: The part-of-speech selectors' values as the pages' sentences say them.
POS_WORDS = {"NOUN": "a noun", "VERB": "a verb", "ADJ": "an adjective", "ADV": "an adverb"}

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
        # first drawn on this page, or the slice changed elsewhere (another page, a widen button):
        # set through session state, so the browser is told the value rather than its first option
        st.session_state[widget_key] = st.session_state[SEMCOR_LIMIT_KEY]
    return as_limit(st.selectbox(
        "SemCor sentences", options, key=widget_key, on_change=_share_semcor_limit, args=(widget_key,),
        format_func=lambda n: limit_label(n, "all 37,176 (slow the first time)"),
        help="How much of SemCor the biLM reads to build the sense index (once per model and slice, "
             "then cached on disk). A larger slice finds more occurrences of more words. The sense "
             "pages share one slice: a change here holds on the others." + help_extra))


def wider_semcor_limit(limit: int | None) -> int | None:
    """The slice a "widen" button offers after ``limit`` (None: all of SemCor), as a selector
    value: the default slice when ``limit`` is smaller, else all of SemCor (:data:`ALL`) for a
    visitor offered it; None when there is no wider one."""
    if limit is not None and limit < DEFAULT_SEMCOR_LIMIT:
        return DEFAULT_SEMCOR_LIMIT
    if limit is not None and visitor_is_local():
        return ALL
    return None


def semcor_slice_words(limit: int | None) -> str:
    """``limit`` as the pages say it: "the first 1,000 SemCor sentences", "all of SemCor"."""
    return "all of SemCor" if limit is None else f"the first {limit:,} SemCor sentences"


def nothing_in_slice(what: str, limit: int | None, other_fixes: tuple[str, ...] = ()) -> str:
    """An empty result in the pages' words: which slice held nothing and what to change, naming
    the page's controls ("No SemCor sentence in the first 100 holds a sense-tagged 'bank' as a
    noun: widen the slice (SemCor sentences) or set Part of speech to any.")."""
    where = "No SemCor sentence" if limit is None else f"No SemCor sentence in the first {limit:,}"
    fixes = (["widen the slice (SemCor sentences)"] if wider_semcor_limit(limit) is not None else []) \
        + list(other_fixes)
    return f"{where} holds {what}" + (f": {' or '.join(fixes)}." if fixes else ".")


def widen_semcor_button(limit: int | None, key: str) -> bool:
    """Under an empty result: a button that sets the shared slice to :func:`wider_semcor_limit`
    in one click. False (no button) when ``limit`` is already the widest this visitor has."""
    wider = wider_semcor_limit(limit)
    if wider is None:
        return False
    st.button(f"Search {semcor_slice_words(as_limit(wider))}", key=key, icon=":material/zoom_out_map:",
              on_click=_set_semcor_limit, args=(wider,))
    return True


def _set_semcor_limit(value: int) -> None:
    st.session_state[SEMCOR_LIMIT_KEY] = value


def single_line(text: str, limit: int = 2000) -> str:
    """Text from a box as one line (newlines become spaces), at most ``limit`` characters."""
    return " ".join(str(text).split())[:limit]
