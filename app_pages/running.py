"""Running work from a page: computing once and keeping the result, one queue for the server, a
progress bar, stopping when the browser tab is closed, and a failure shown as a message rather
than a traceback.

Not a page. The backends that import torch are imported inside the functions that run them,
so every page's widgets paint before torch is loaded.

- **Results** (:func:`cached_result`): one backend call per key, kept in ``st.cache_data`` (a
  copy per session, shared across sessions, bounded), computed the first time inside an
  ``st.status`` box with a progress bar. The backend's progress callback writes to that bar,
  so the computation cannot run *inside* a cached function (Streamlit would record the bar's
  updates and fail to replay them on a cache hit): the cached function is a keyed store that
  misses by raising, is filled after the work, and is read on every later visit.
- **Resources** (:func:`cached_resource`): the same for objects that hold arrays or a model
  (a SemCor index, a retriever, a task's features), kept in ``st.cache_resource``.
- **The queue** (:func:`run_with_progress`): every computation behind a progress bar is a job of
  the server's queue (``app_pages.jobs``: a global cap, one running job per visitor (a browser,
  all its tabs), a bounded waiting list, identical requests sharing one job); a waiting job shows
  its place and an estimate. That includes the short ones a class starts by the dozen: a model
  load (:func:`load_model`), the Playground's embedding and the anisotropy baseline
  (:func:`cached_result` with ``typed``), reading an uploaded file. A stored value is read at
  once and never queued: only work waits for a slot.
- **Runs nobody watches** (:func:`visitor_gone`): every progress callback first asks whether the
  browser tab that started the run is still connected; when it has been closed, the run stops
  there (``st.stop``). When no other tab waits for the same job, its partial files (the
  activation cache's ``.partial`` files it changed, a report's folder) are removed; a tab that
  still waits runs the job again itself. The unfinished result is not stored.
- **Work several pages share** (:func:`require_model`, :func:`semcor_index`,
  :func:`anisotropy_baseline`): the model once per process, the rest once per model (and slice),
  through the stores above; the vectors under them, once per model and
  sentences, through the activation store (``probing.engine.store``). A page about one word
  (:func:`semcor_lemma_index`) embeds only that word's SemCor sentences until the whole slice's
  index exists.
- **Failures** (:func:`show_failure`): a missing dataset, a refused input or a backend error
  becomes a message box that names the cause and the fix, never a traceback.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any, Callable, TypeVar

import streamlit as st
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner import RerunException, StopException, get_script_run_ctx

from app_pages.display import escape_markdown
from app_pages.jobs import Job, JobQueue, QueueFull, job_queue
from app_pages.model_choice import (DEFAULT_MODEL_NAME, chosen_device, chosen_model_spec, chosen_precision, model_key,
                                    read_model, visitor_is_local, weights_stamp)
from app_pages.serving import redacted
from elmo_model.plumbing.progress import Throughput, about
from probing.data import DatasetMissing, data_root

log = logging.getLogger(__name__)

T = TypeVar("T")
#: The cookie Streamlit (tornado) sets once per browser for its XSRF check.
XSRF_COOKIE = "_streamlit_xsrf"
_this_thread = threading.local()  # .job: the queue's job this script thread runs (None outside one)


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


@st.cache_data(show_spinner=False, max_entries=64)
def _typed_store(kind: str, key: str, _value: Any = None) -> Any:
    """Results of what visitors type (the Playground's sentences, a baseline on their own sentences):
    many and small, kept apart so that a class typing away never pushes out the results of long jobs."""
    if _value is None:
        raise _Missing(kind)
    return _value


@st.cache_resource(show_spinner=False, max_entries=24)  # a word's small index and retriever each take one
def _resource_store(kind: str, key: str, _value: Any = None) -> Any:
    if _value is None:
        raise _Missing(kind)
    return _value


@st.cache_resource(show_spinner=False, max_entries=4)
def _model_store(kind: str, key: str, _value: Any = None) -> Any:
    """Loaded biLMs, one object shared by every visitor: the last four kept (a full-size one holds a GB)."""
    if _value is None:
        raise _Missing(kind)
    return _value


@st.cache_resource(show_spinner=False, max_entries=2)
def _large_resource_store(kind: str, key: str, _value: Any = None) -> Any:
    """Resources of hundreds of MB (every layer of a task's slices): only the last two are kept."""
    if _value is None:
        raise _Missing(kind)
    return _value


def has_resource(kind: str, key: str, *, large: bool = False) -> bool:
    """Whether :func:`cached_resource` holds ``kind`` for ``key`` (nothing is computed)."""
    try:
        (_large_resource_store if large else _resource_store)(kind, key)
    except _Missing:
        return False
    return True


def cache_key(*parts: Any) -> str:
    """A stable text key from JSON-able parts (tuples become lists; other objects their str)."""
    return json.dumps(parts, sort_keys=True, default=str)


def lookup_result(kind: str, key: str) -> Any | None:
    """The stored result of ``kind`` for ``key``, or None if it was never computed (or evicted)."""
    try:
        return _result_store(kind, key)
    except _Missing:
        return None


def cached_result(kind: str, key: str, title: str, work: Callable[["ProgressBar"], T], *, typed: bool = False) -> T:
    """The result of ``work(progress)`` for ``key``: from the cache, else computed now behind
    ``title`` with a progress bar and stored. Exceptions propagate (nothing is stored). ``typed``:
    one of many small results of what visitors type, kept in a store of their own."""
    return _through(_typed_store if typed else _result_store, kind, key, title, work)


def cached_resource(kind: str, key: str, title: str, work: Callable[["ProgressBar"], T], *, large: bool = False) -> T:
    """As :func:`cached_result` for objects kept by reference (models' indexes, arrays);
    ``large``: one of at most two such objects kept (they hold hundreds of MB)."""
    return _through(_large_resource_store if large else _resource_store, kind, key, title, work)


def _through(store, kind: str, key: str, title: str, work: Callable[["ProgressBar"], T]) -> T:
    """``store``'s entry for (kind, key), else ``work`` run behind a progress bar and stored."""
    try:
        return store(kind, key)  # a hit is a lookup: it never waits in the queue, only work does
    except _Missing:
        pass
    return store(kind, key, _value=run_with_progress(title, work, kind=kind, key=f"{kind}:{key}"))


# --------------------------------------------------------------------------------------------
# Progress
# --------------------------------------------------------------------------------------------


def _session_is_connected(session_id: str) -> bool:
    """Whether the server still holds a browser connection for ``session_id`` (True when no
    server runs this script: AppTest, a bare ``python`` run)."""
    if not Runtime.exists():
        return True
    return Runtime.instance().is_active_session(session_id)


def visitor_gone() -> bool:
    """Whether the browser tab this script run serves has been closed (or has lost its
    connection). Streamlit (1.67) asks such a script to stop, but the request only takes effect
    when the script next sends something to the browser, and a progress bar redraws at most every
    0.2 s; a server that keeps a closed tab's session for reconnecting would not ask at all. So
    the progress callbacks ask the runtime directly, on every call."""
    ctx = get_script_run_ctx(suppress_warning=True)
    return ctx is not None and not _session_is_connected(ctx.session_id)


def stop_if_visitor_gone(what: str) -> None:
    """Stop this script run (``st.stop``) when its browser tab has been closed; inside a job of the
    queue, when every tab that asked for the job has been closed (a shared job runs on for the others)."""
    job = getattr(_this_thread, "job", None)
    gone = visitor_gone() if job is None else job_queue().abandoned(job, _session_is_connected)
    if gone:
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
        self.throughput = Throughput()

    def __call__(self, label: str, done: float, total: float | None = None, unit: str = "") -> None:
        stop_if_visitor_gone(self.text)
        now = time.monotonic()
        # counted work (sentences, layers) gets its measured rate and time left; numbered steps of
        # unequal cost (the suite's) do not: a mean over them would promise a time nobody measured
        eta = self.throughput.describe(label, done, total, unit, now) if unit and unit != "steps" else ""
        finished = bool(total) and done >= total
        if now - self.last < 0.2 and not finished:
            return
        self.last = now
        fraction = min(1.0, max(0.0, float(done) / float(total))) if total else 0.0
        count = f": {done:,.0f} of {total:,.0f} {unit}".rstrip() if total else ""
        self.bar.progress(fraction, text=escape_markdown(f"{label}{count}{eta}"))


def one_step(progress: ProgressBar, label: str, call: Callable[[], T]) -> T:
    """``call()`` for work that reports no progress of its own (one biLM pass, one file read): the
    bar names it, and the tab is checked once before it starts, so a job whose tab closed while it
    waited stops there rather than computing for nobody."""
    progress(label, 0, None)
    value = call()
    progress(label, 1, 1)
    return value


def run_with_progress(title: str, work: Callable[[ProgressBar], T], *, kind: str | None = None,
                      key: str | None = None, cleanup: Callable[[], None] | None = None) -> T:
    """Run ``work(progress)`` as a job of the server's queue (``app_pages.jobs``), inside an
    ``st.status`` box with a progress bar; the box closes (collapsed, with the time taken) when it is
    done, or turns red if it raises. While the job waits for a slot, its place in the queue and an
    estimate are shown. ``kind``: what the estimate goes by (default: ``title``); ``key``: identical
    requests (the same key) share one job and its value; ``cleanup``: removes what the work wrote
    when the job is abandoned (every tab that asked for it closed). Work inside a running job (a
    nested call) runs at once."""
    if getattr(_this_thread, "job", None) is not None:
        return _run_in_box(title, work)
    queue, session, visitor = job_queue(), _session_id(), _visitor_id()
    while True:
        job, shared = queue.submit(kind or title, key, session, title, visitor=visitor)
        if not shared:
            break
        _wait_for_shared(queue, job, session)
        if job.state == "done":
            return job.value
        if job.state == "failed" and job.error is not None:
            raise job.error
        # cancelled: every other asker left; this tab asks again and may run it itself
    try:
        _wait_for_slot(queue, job)
    except BaseException:
        queue.finish(job, cancelled=True)
        raise
    _this_thread.job, started = job, time.time()
    try:
        value = _run_in_box(title, work)
    except (StopException, RerunException):
        abandoned = queue.abandoned(job, _session_is_connected)
        queue.finish(job, cancelled=True)
        if abandoned:
            _remove_partial_files(cleanup, started, queue)
        raise
    except BaseException as err:
        queue.finish(job, error=err)
        raise
    finally:
        _this_thread.job = None
    queue.finish(job, value=value)
    return value


def _run_in_box(title: str, work: Callable[[ProgressBar], T]) -> T:
    """``work(progress)`` inside an ``st.status`` box with a progress bar."""
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


def _session_id() -> str:
    ctx = get_script_run_ctx(suppress_warning=True)
    return ctx.session_id if ctx is not None else "no-session"


def _visitor_id() -> str:
    """Who the queue's caps count a job against: the browser, named by Streamlit's XSRF cookie (set
    once per browser, sent by every tab) through a digest; the tab's session where there is none."""
    try:
        cookie = st.context.cookies.get(XSRF_COOKIE)
    except Exception:  # no script run (a bare thread), or a Streamlit without cookies
        cookie = None
    if not cookie:
        return _session_id()
    return "browser-" + hashlib.sha256(str(cookie).encode()).hexdigest()[:16]


def _wait_for_slot(queue: JobQueue, job: Job) -> None:
    """Wait until ``job`` may start, showing its place and an estimate; ``st.stop`` if the tab closes."""
    if queue.try_start(job):
        return
    box = st.empty()
    while not queue.try_start(job):
        if visitor_gone():
            log.info("browser tab closed while %s waited in the queue", job.title)
            box.empty()
            st.stop()
        running, waiting = queue.counts()
        eta, typical = queue.eta(job), queue.typical_seconds(job.kind)
        when = ("no estimate yet: no job of this kind or of those ahead has finished on this server"
                if eta is None else f"it should start in {about(eta)}")
        took = "" if typical is None else f" Such a job took {about(typical)} here."
        box.info(escape_markdown(f"Waiting in the queue: place {queue.position(job)} of {waiting} "
                                 f"({running} of {queue.max_running} jobs running on this server); {when}.{took}"),
                 icon=":material/hourglass_top:")
        queue.wait(1.0)
    box.empty()


def _wait_for_shared(queue: JobQueue, job: Job, session: str) -> None:
    """Wait for another visitor's identical job; ``st.stop`` (and leave it) if this tab closes."""
    box = st.empty()
    while not job.finished.wait(0.5):
        if visitor_gone():
            queue.leave(job, session)
            box.empty()
            st.stop()
        place = queue.position(job)
        box.info(escape_markdown(f"The same request is {'queued (place ' + str(place) + ')' if place else 'running'} "
                                 f"for another visitor: {job.title}. Its result is shown here too when it is done."),
                 icon=":material/group:")
    box.empty()


def _remove_partial_files(cleanup: Callable[[], None] | None, since: float, queue: JobQueue) -> None:
    """After an abandoned job: ``cleanup`` and, when no other job runs (a partial file could be
    theirs), the activation caches' ``.partial`` files changed since the job started."""
    try:
        if cleanup is not None:
            cleanup()
        if queue.counts()[0]:
            return
        from probing.engine.activations import default_cache_dir  # a job ran: torch is loaded

        root = default_cache_dir()
        for partial in root.rglob("*.partial") if root.is_dir() else ():
            if not partial.is_symlink() and partial.stat().st_mtime >= since:
                partial.unlink(missing_ok=True)
                log.info("abandoned job: removed %s", partial)
    except OSError as err:  # clean-up is best effort: never turn a closed tab into an error
        log.warning("removing an abandoned job's partial files failed: %s", err)


# --------------------------------------------------------------------------------------------
# Work several pages share
# --------------------------------------------------------------------------------------------


def anisotropy_baseline(model, sentences: tuple[str, ...] | None = None):
    """The model's anisotropy baseline (``probing.context.contextuality.anisotropy_baseline``) on
    ``sentences`` (raw text, at least 2; None: the shipped demo sentences, which are English: a
    model of another language is measured on the user's own): once per model and sentences, as a
    job of the queue (a biLM pass over every sentence), then read from the store."""

    def work(progress: ProgressBar):
        from probing.context.contextuality import (
            anisotropy_baseline as measure,  # lazy: imports h5py and torch (first paint)
        )

        what = "the demo sentences" if sentences is None else f"{len(sentences)} sentences"
        return one_step(progress, f"Embedding {what}", lambda: measure(model, None if sentences is None
                                                                        else list(sentences)))

    return cached_result("anisotropy", cache_key(model_key(model), sentences),
                         "Measuring the anisotropy baseline (once per model)", work, typed=True)


def load_model(spec: str, precision: str = "auto", device: str | None = None):
    """``(model, None)`` or ``(None, message)``: never raises for a missing or broken model.
    ``device``: "cuda" or "cpu" (None: the sidebar's choice). One biLM per (spec, weight file
    stamp, precision, device), so a retrained model on disk is reloaded, kept for every visitor.

    A load is a job of the server's queue although its model is shared: a full-size biLM takes a
    GB and seconds to minutes of CPU, and a class choosing models must not load them all at once; a
    visitor asking for a model another's job is loading waits for that job. A model already loaded
    is read at once. A full queue raises :class:`QueueFull`: the model is fine, the server is busy,
    and the page says so in the words it uses for every job."""
    device = device or chosen_device()
    try:
        key = cache_key(spec, weights_stamp(spec), precision, device)
        # a folder by its last name: other visitors waiting for the same load read the title
        return _through(_model_store, "model", key, f"Loading the biLM {Path(spec).name or spec}",
                        lambda progress: read_model(spec, precision, device)), None
    except QueueFull:
        raise
    except ValueError as err:  # the registry and weight reader name the file and the fix
        return None, str(err)
    except Exception as err:  # a corrupt hdf5 or options.json can fail in many ways
        log.exception("loading biLM %r failed", spec)
        return None, f"{type(err).__name__}: {err}"


def require_model():
    """The biLM the sidebar chose (:func:`load_model`); on failure an error box, on a full queue
    its one-line warning, and ``st.stop()``."""
    spec = chosen_model_spec()
    if not spec:
        st.info("Type the path of a biLM directory (options.json + weights.hdf5) in the sidebar.")
        st.stop()
    try:
        model, error = load_model(spec, chosen_precision(), chosen_device())
    except QueueFull as err:
        show_failure(err, "Loading the biLM")
        st.stop()
    if model is None:
        st.error(f"**Could not load the biLM {escape_markdown(repr(spec))}.** {escape_markdown(error)}\n\n"
                 "Pick another model in the sidebar, or choose *a directory…* and type the path of "
                 "a directory holding `options.json` and `weights.hdf5`.")
        if spec == DEFAULT_MODEL_NAME:
            st.info(f"The default model is trained by `python -m elmo_model.training.train` and exported to "
                    f"`data/models/{DEFAULT_MODEL_NAME}/`; until it exists, any biLM directory "
                    f"works (e.g. bilm-tf's test model in `fixtures/bilm_tf` of the data root).")
        st.stop()
    return model


def semcor_index(model, limit: int | None):
    """The model's SemCor index over the first ``limit`` sentences (built once, with progress)."""
    from probing.senses.wsd import build_semcor_index  # lazy: imports torch (first paint)

    root = data_root()
    what = "all of SemCor" if limit is None else f"the first {limit:,} SemCor sentences"
    return cached_resource(
        "semcor_index", cache_key(model_key(model), str(root), limit),
        f"Indexing {what} with the biLM (once per model and slice)",
        lambda progress: build_semcor_index(model, root, semcor_limit=limit, progress=progress))


def semcor_index_is_built(model, limit: int | None) -> bool:
    """Whether this server holds the model's SemCor index over the first ``limit`` sentences."""
    return has_resource("semcor_index", cache_key(model_key(model), str(data_root()), limit))


def semcor_lemma_index(model, limit: int | None, name: str, lemmas: list[str] | None = None):
    """What the SemCor index over the first ``limit`` sentences knows of the lemma ``name`` (or of
    ``lemmas``, named ``name``): that index when a page has built it (in this server or on disk),
    else one over only the slice's sentences that hold the lemmas
    (``probing.senses.semcor_index.build_lemma_index``: seconds, where the whole slice takes
    minutes on a full-size model). None when the slice has no instance of them."""
    # lazy: imports torch (first paint)
    from probing.senses.semcor_index import build_lemma_index

    root = data_root()
    if semcor_index_is_built(model, limit):
        return semcor_index(model, limit)
    what = "SemCor" if limit is None else f"the first {limit:,} SemCor sentences"
    index = cached_resource(  # False: no instance (a store keeps no None)
        "semcor_lemma_index", cache_key(model_key(model), str(root), limit, lemmas or [name]),
        f"Embedding the sentences of {what} that hold '{name}'",
        lambda progress: build_lemma_index(model, lemmas or [name], root, semcor_limit=limit,
                                           progress=progress) or False)
    return index or None


# --------------------------------------------------------------------------------------------
# Failures
# --------------------------------------------------------------------------------------------


def show_failure(err: BaseException, doing: str) -> None:
    """A message box for a failure while ``doing`` something: a missing dataset or file (with
    the command that fixes it), a refused input (a warning), anything else (an error with its
    type; the traceback goes to the log). A visitor from another machine reads no absolute server
    path and no process id (``app_pages.serving.redacted``)."""
    local = visitor_is_local()
    roots = {"<data root>": data_root()}
    if isinstance(err, DatasetMissing):
        st.error(f"**{escape_markdown(doing)}: a dataset is missing.**")
        # a long path or command wraps, never runs off the box
        st.code(redacted(str(err), local, roots), language=None, wrap_lines=True)
    elif isinstance(err, FileNotFoundError):
        st.error(f"**{escape_markdown(doing)}: a file is missing.** "
                 f"{escape_markdown(redacted(str(err), local, roots))}")
    elif isinstance(err, (ValueError, KeyError, IndexError)):
        st.warning(f"**{escape_markdown(doing)}:** {escape_markdown(redacted(_plain_message(err), local, roots))}")
    else:
        log.error("%s failed", doing, exc_info=err)
        st.error(f"**{escape_markdown(doing)} failed:** {type(err).__name__}: "
                 f"{escape_markdown(redacted(str(err), local, roots))}")


def _plain_message(err: BaseException, limit: int = 400) -> str:
    """The exception's message, cut to ``limit`` characters (a message may quote a whole input)."""
    text = str(err)
    if isinstance(err, KeyError) and len(err.args) == 1:
        text = str(err.args[0])
    return text if len(text) <= limit else text[:limit - 1] + "…"
