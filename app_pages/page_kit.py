"""What the analysis pages (probes, scalar mix, retrieval, projections, reports) share.

Not a page. Imports nothing heavy at module level (the backends are imported inside the
functions that need them), so every page's widgets paint before torch is loaded.

- **Results** (:func:`cached_result`): one backend call per key, kept in ``st.cache_data`` (a
  copy per session, shared across sessions, bounded), computed the first time inside an
  ``st.status`` box with a progress bar. The backend's progress callback writes to that bar,
  so the computation cannot run *inside* a cached function (Streamlit would record the bar's
  updates and fail to replay them on a cache hit): the cached function is a keyed store that
  misses by raising, is filled after the work, and is read on every later visit.
- **Resources** (:func:`cached_resource`): the same for objects that hold arrays or a model
  (a SemCor index, a retriever, a task's features), kept in ``st.cache_resource``.
- **The data root** (:func:`data_root`): ``probing.data.data_root``'s rule (the variable
  ``ELMO_WORKBENCH_DATA``, the user cache, a ``shared`` folder beside the checkout), shown in a
  caption, or one guidance screen when it holds no dataset; reports go to :func:`reports_dir`
  (``$ELMO_WORKBENCH_REPORTS`` or the user cache).
- **Runs nobody watches** (:func:`visitor_gone`): every progress callback first asks whether the
  browser tab that started the run is still connected; when it has been closed, the run stops
  there (``st.stop``). What the work wrote so far (activations in the on-disk cache) stays; the
  unfinished result is not stored.
- **Failures** (:func:`show_failure`): a missing dataset, a refused input or a backend error
  becomes a message box that names the cause and the fix, never a traceback.
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any, Callable, TypeVar

import streamlit as st
from streamlit.runtime.scriptrunner import RerunException, StopException

from app_pages.shared import escape_markdown, figure, model_key, table  # noqa: F401 (figure, table: for the pages)

log = logging.getLogger(__name__)

T = TypeVar("T")

#: "All sentences" in a slice selector. Not None: a selectbox shows a value of None as "no
#: choice made" (an empty box), so the selectors hold 0 and :func:`as_limit` turns it into None.
ALL = 0

#: SemCor slices the pages offer (sentences from the start of SemCor; ALL = all 37,176).
SEMCOR_LIMITS = [100, 300, 1000, 3000, 10000, ALL]
DEFAULT_SEMCOR_LIMIT = 1000
SEMCOR_LIMIT_KEY = "semcor_limit"  # one widget key on every page: the pages share one index

#: EWT/CoNLL slices the pages offer (sentences per split; ALL = all).
SENTENCE_LIMITS = [50, 100, 200, 500, 1000, 2000, ALL]


def as_limit(value) -> int | None:
    """A slice selector's value as the backends' ``limit``: None for :data:`ALL`."""
    return None if not value else int(value)


def limit_label(value, all_text: str = "all") -> str:
    """How a slice selector shows ``value``."""
    return all_text if not value else f"first {int(value):,}"


# --------------------------------------------------------------------------------------------
# Results and resources
# --------------------------------------------------------------------------------------------


class _Missing(LookupError):
    """Raised by the stores on a miss (an exception is never cached)."""


@st.cache_data(show_spinner=False, max_entries=48)
def _result_store(kind: str, key: str, _value: Any = None) -> Any:
    if _value is None:
        raise _Missing(kind)
    return _value


@st.cache_resource(show_spinner=False, max_entries=12)
def _resource_store(kind: str, key: str, _value: Any = None) -> Any:
    if _value is None:
        raise _Missing(kind)
    return _value


@st.cache_resource(show_spinner=False, max_entries=2)
def _large_resource_store(kind: str, key: str, _value: Any = None) -> Any:
    """Resources of hundreds of MB (every layer of a task's slices): only the last two are kept."""
    if _value is None:
        raise _Missing(kind)
    return _value


def cache_key(*parts: Any) -> str:
    """A stable text key from JSON-able parts (tuples become lists; other objects their str)."""
    return json.dumps(parts, sort_keys=True, default=str)


def lookup_result(kind: str, key: str) -> Any | None:
    """The stored result of ``kind`` for ``key``, or None if it was never computed (or evicted)."""
    try:
        return _result_store(kind, key)
    except _Missing:
        return None


def cached_result(kind: str, key: str, title: str, work: Callable[["ProgressBar"], T]) -> T:
    """The result of ``work(progress)`` for ``key``: from the cache, else computed now behind
    ``title`` with a progress bar and stored. Exceptions propagate (nothing is stored)."""
    return _through(_result_store, kind, key, title, work)


def cached_resource(kind: str, key: str, title: str, work: Callable[["ProgressBar"], T], *,
                    large: bool = False) -> T:
    """As :func:`cached_result` for objects kept by reference (models' indexes, arrays);
    ``large``: one of at most two such objects kept (they hold hundreds of MB)."""
    return _through(_large_resource_store if large else _resource_store, kind, key, title, work)


def _through(store, kind: str, key: str, title: str, work: Callable[["ProgressBar"], T]) -> T:
    """``store``'s entry for (kind, key), else ``work`` run behind a progress bar and stored."""
    try:
        return store(kind, key)
    except _Missing:
        pass
    return store(kind, key, _value=run_with_progress(title, work))


# --------------------------------------------------------------------------------------------
# Progress
# --------------------------------------------------------------------------------------------


def _session_is_connected(session_id: str) -> bool:
    """Whether the server still holds a browser connection for ``session_id`` (True when no
    server runs this script: AppTest, a bare ``python`` run)."""
    from streamlit.runtime import Runtime

    if not Runtime.exists():
        return True
    return Runtime.instance().is_active_session(session_id)


def visitor_gone() -> bool:
    """Whether the browser tab this script run serves has been closed (or has lost its
    connection). Streamlit (1.67) asks such a script to stop, but the request only takes effect
    when the script next sends something to the browser, and a progress bar redraws at most every
    0.2 s; a server that keeps a closed tab's session for reconnecting would not ask at all. So
    the progress callbacks ask the runtime directly, on every call."""
    from streamlit.runtime.scriptrunner import get_script_run_ctx

    ctx = get_script_run_ctx(suppress_warning=True)
    return ctx is not None and not _session_is_connected(ctx.session_id)


def stop_if_visitor_gone(what: str) -> None:
    """Stop this script run (``st.stop``) when its browser tab has been closed."""
    if visitor_gone():
        log.info("browser tab closed: stopping %s", what)
        st.stop()


class ProgressBar:
    """A backend progress callback drawing an ``st.progress`` bar.

    Accepts both signatures the backends use: ``(label, done, total)`` (the probing suite)
    and ``(label, done, total, unit)`` (data, WSD, projections, word senses). Redraws at most
    every 0.2 s, and always at the end of a stage. Every call first checks that the browser tab
    is still there (:func:`stop_if_visitor_gone`): the run stops at the callback after the tab
    is closed.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.bar = st.progress(0.0, text=escape_markdown(text))
        self.last = 0.0

    def __call__(self, label: str, done: float, total: float | None = None, unit: str = "") -> None:
        stop_if_visitor_gone(self.text)
        now = time.monotonic()
        finished = bool(total) and done >= total
        if now - self.last < 0.2 and not finished:
            return
        self.last = now
        fraction = min(1.0, max(0.0, float(done) / float(total))) if total else 0.0
        count = f": {done:,.0f} of {total:,.0f} {unit}".rstrip() if total else ""
        self.bar.progress(fraction, text=escape_markdown(f"{label}{count}"))


def run_with_progress(title: str, work: Callable[[ProgressBar], T]) -> T:
    """Run ``work(progress)`` inside an ``st.status`` box with a progress bar; the box closes
    (collapsed, with the time taken) when it is done, or turns red if it raises."""
    start = time.perf_counter()
    with st.status(escape_markdown(title), expanded=True) as status:
        progress = ProgressBar(title)
        try:
            value = work(progress)
        except (StopException, RerunException):  # a closed tab or a rerun: not a failure, nothing to draw
            raise
        except BaseException:
            status.update(label=escape_markdown(f"{title}: failed"), state="error", expanded=False)
            raise
        status.update(label=escape_markdown(f"{title}: done in {time.perf_counter() - start:.1f} s"),
                      state="complete", expanded=False)
    return value


# --------------------------------------------------------------------------------------------
# The anisotropy baseline
# --------------------------------------------------------------------------------------------


@st.cache_data(show_spinner=False, max_entries=8)
def _anisotropy(_model, key: str):
    from probing.contextuality import anisotropy_baseline as measure  # imports h5py and torch: only here

    return measure(_model)


def anisotropy_baseline(model):
    """The model's anisotropy baseline (``probing.contextuality.anisotropy_baseline`` on the
    shipped demo sentences): measured once per model behind a spinner, then cached."""
    with st.spinner("Measuring the anisotropy baseline (once per model)…"):
        return _anisotropy(model, model_key(model))


def baseline_caption(baseline, layer_names: list[str]) -> str:
    """One sentence giving the baseline per layer, for a caption beside per-layer cosines."""
    values = ", ".join(f"{name.split(' (')[0]} {baseline.cosine[j]:.2f}" for j, name in enumerate(layer_names))
    return (f"For scale, the anisotropy baseline (Ethayarajh 2019): random words in random sentences "
            f"score {values} on average ({baseline.n_pairs:,} pairs of words from different sentences "
            f"among {baseline.n_sentences} of {baseline.source}). Any two vectors of a layer share that "
            "much; only the similarity above it says something about these words.")


# --------------------------------------------------------------------------------------------
# Data root, SemCor, messages
# --------------------------------------------------------------------------------------------


REPORTS_ENV_VAR = "ELMO_WORKBENCH_REPORTS"


def reports_dir() -> Path:
    """Where the Reports page writes and lists reports: ``$ELMO_WORKBENCH_REPORTS``, else
    ``${XDG_CACHE_HOME:-~/.cache}/elmo-workbench/reports``."""
    import os

    env = os.environ.get(REPORTS_ENV_VAR, "").strip()
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    return (Path(xdg).expanduser() if xdg else Path.home() / ".cache") / "elmo-workbench" / "reports"


def data_root() -> Path:
    """The data root the pages read (``probing.data.data_root``)."""
    from probing.data import data_root as resolve

    return resolve()


#: What each page reads from the data root (dataset names of ``probing.data.DATASETS``).
PAGE_DATASETS = {
    "Playground": (),
    "Probes": ("ud_english_ewt", "conll2000", "senseval", "wordnet"),
    "Scalar mix": ("ud_english_ewt", "conll2000", "wsd_framework", "wordnet"),
    "Sense retrieval": ("wsd_framework", "wordnet"),
    "Layer projections": ("wsd_framework", "wordnet"),
    "Reports": ("ud_english_ewt", "conll2000", "wsd_framework", "wordnet"),
}


def data_root_caption(stop_without_data: bool = True) -> None:
    """The data root in a caption; when it holds no dataset at all, the guidance screen
    (:func:`no_data_guidance`) and, if ``stop_without_data``, nothing else on the page."""
    from probing.data import ENV_VAR, holds_any_dataset, root_origin

    root = data_root()
    if not holds_any_dataset(root):
        no_data_guidance(root, root_origin())
        if stop_without_data:
            st.stop()
        return
    st.caption(f"Data root: `{root}` (set `{ENV_VAR}` to use another; "
               "`python -m probing.data status` lists what it holds).")


def no_data_guidance(root: Path, origin: str) -> None:
    """One screen for a machine with no data: what works without it, what each page needs,
    and how to point the app at a data root."""
    from probing.data import DATASETS, ENV_VAR, SIBLING_ROOT, status

    present = {row.name for row in status(root) if row.present}
    st.warning(f"**No datasets found.** The data root `{root}` ({escape_markdown(origin)}) holds "
               "none of the datasets this page reads.")
    st.markdown(
        "**What works without data:** the **Playground** (the default biLM and the demo sentence "
        "sets ship with the project). Every other page reads corpora from a data root:")
    table([{"page": page, "needs": ", ".join(f"{name} ({DATASETS[name].title})" for name in needs) or "nothing",
            "missing": ", ".join(name for name in needs if name not in present) or "-"}
           for page, needs in PAGE_DATASETS.items()], hide_index=True, width="stretch")
    st.markdown(
        f"**Point the app at a data root** (a folder laid out as `python -m probing.data` "
        f"describes), by one of:\n"
        f"1. set `{ENV_VAR}` before starting the app: `{ENV_VAR}=/path/to/data streamlit run app.py`;\n"
        f"2. put the data root at `{SIBLING_ROOT}` (a folder named `shared` beside the checkout: "
        "found when the variable is unset);\n"
        "3. fetch the datasets from their official sources (needs the internet; lm_corpus has no "
        "automatic download): the buttons below, or from a terminal:")
    st.code("python -m probing.data download\npython -m probing.data status", language="bash", wrap_lines=True)
    fetch_buttons(present)


def fetch_buttons(present: set[str]) -> None:
    """One button per downloadable dataset not in the data root, with its size: fetches it
    into ``probing.data.download_root()`` behind a progress bar. An interrupted download
    (network, closed tab) resumes where it stopped when the button is pressed again."""
    from probing.data import DATASETS, DownloadError, download, download_root, download_size_text

    target = download_root()
    missing = [d for d in DATASETS.values() if d.downloadable and d.name not in present]
    if not missing:
        return
    st.markdown(f"**Fetch a dataset** into `{target}`:")
    for dataset in missing:
        needed_by = [page for page, needs in PAGE_DATASETS.items() if dataset.name in needs]
        label = f"Fetch {dataset.title} ({download_size_text(dataset.name)})"
        if not st.button(label, key=f"fetch_{dataset.name}",
                         help=f"{dataset.description}. Source: {dataset.source}; licence: {dataset.licence}. "
                              f"Read by: {', '.join(needed_by) or 'reports'}."):
            continue
        try:
            run_with_progress(f"Fetching {dataset.title}",
                              lambda progress, name=dataset.name: download(name, target, progress=progress))
        except (DownloadError, ValueError) as err:
            st.error(f"**Fetching {escape_markdown(dataset.title)} failed.** {escape_markdown(err)}\n\n"
                     "Press the button again to try again: a download resumes where it stopped when "
                     "the server allows it.")
        else:
            st.success(f"**{escape_markdown(dataset.title)} is in `{target}`.** "
                       "Reload the page (or pick it again in the sidebar) to use it.")


def semcor_limit_widget(help_extra: str = "") -> int | None:
    """The SemCor slice selector (one key on every page, remembered across pages); returns the
    slice as a ``limit`` (None: all of SemCor)."""
    st.session_state.setdefault(SEMCOR_LIMIT_KEY, DEFAULT_SEMCOR_LIMIT)
    return as_limit(st.selectbox(
        "SemCor sentences", SEMCOR_LIMITS, key=SEMCOR_LIMIT_KEY, persist_state="session",
        format_func=lambda n: limit_label(n, "all 37,176 (slow the first time)"),
        help="How much of SemCor the biLM reads to build the sense index (once per model and slice, "
             "then cached on disk). A larger slice finds more occurrences of more words." + help_extra))


def semcor_index(model, limit: int | None):
    """The model's SemCor index over the first ``limit`` sentences (built once, with progress)."""
    from probing.wsd import build_semcor_index

    root = data_root()
    what = "all of SemCor" if limit is None else f"the first {limit:,} SemCor sentences"
    return cached_resource(
        "semcor_index", cache_key(model_key(model), str(root), limit),
        f"Indexing {what} with the biLM (once per model and slice)",
        lambda progress: build_semcor_index(model, root, semcor_limit=limit, progress=progress))


def show_failure(err: BaseException, doing: str) -> None:
    """A message box for a failure while ``doing`` something: a missing dataset or file (with
    the command that fixes it), a refused input (a warning), anything else (an error with its
    type; the traceback goes to the log)."""
    from probing.data import DatasetMissing

    if isinstance(err, DatasetMissing):
        st.error(f"**{escape_markdown(doing)}: a dataset is missing.**")
        st.code(str(err), language=None, wrap_lines=True)  # a long path or command wraps, never runs off the box
    elif isinstance(err, FileNotFoundError):
        st.error(f"**{escape_markdown(doing)}: a file is missing.** {escape_markdown(err)}")
    elif isinstance(err, (ValueError, KeyError, IndexError)):
        st.warning(f"**{escape_markdown(doing)}:** {escape_markdown(_plain_message(err))}")
    else:
        log.error("%s failed", doing, exc_info=err)
        st.error(f"**{escape_markdown(doing)} failed:** {type(err).__name__}: {escape_markdown(err)}")


def _plain_message(err: BaseException, limit: int = 400) -> str:
    """The exception's message, cut to ``limit`` characters (a message may quote a whole input)."""
    text = str(err)
    if isinstance(err, KeyError) and len(err.args) == 1:
        text = str(err.args[0])
    return text if len(text) <= limit else text[:limit - 1] + "…"


def single_line(text: str, limit: int = 2000) -> str:
    """Text from a box as one line (newlines become spaces), at most ``limit`` characters."""
    return " ".join(str(text).split())[:limit]
