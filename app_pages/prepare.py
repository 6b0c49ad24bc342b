"""Prepare for class: every page's first figure computed ahead, for the chosen model and data.

Not a page: the Lesson page's *Prepare every page* button (:func:`prepare_panel`) and the command
``python -m app_pages.prepare`` (run from the folder that holds app.py). Both run the pages' own
first computations (``app_pages.first_figures``, the functions the pages call, with the values a
page opens with) one page after another, so that afterwards each page's first figure is read from
the caches: the button fills this server's caches and the ones on disk; the command fills the ones
on disk (activations, probe results, the structural probe, the learned s_j), which a server started
later reads. Each page's time is kept beside the activation cache, per model and data root, and the
next preparation's estimate is the sum of the last times of the pages left: until a page has been
prepared once there is no estimate, rather than a guess. Stopping (the Stop button, a closed tab,
Ctrl-C) loses nothing a finished page computed.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

log = logging.getLogger(__name__)

#: The pages in the navigation's order, with the function of ``app_pages.first_figures`` that computes
#: what the page computes before its first figure. Reports has none: it reads saved reports.
PAGES: list[tuple[str, str]] = [
    ("Playground", "playground_first"), ("Lesson", "lesson_first"), ("Probes", "probes_first"),
    ("Beyond accuracy", "information_first"), ("Scalar mix", "scalar_mix_first"),
    ("Sense retrieval", "retrieval_first"), ("Layer projections", "projections_first"), ("Syntax", "syntax_first"),
]
ENGLISH_ONLY = {title for title, _ in PAGES} - {"Playground"}  # pages that read English datasets
TIMES_FILE = "prepare_times.json"


@dataclass
class PageTime:
    """One page's preparation: its seconds, and why it was left out or failed ("" when done)."""
    page: str
    seconds: float
    problem: str = ""


def _times_path() -> Path:
    from probing.engine.cache_file import default_cache_dir  # lazy: the command's --help needs no torch

    return default_cache_dir() / TIMES_FILE


def _times_key(model, data_root) -> str:
    from app_pages.model_choice import model_key

    return f"{model_key(model)}|{data_root}"


def last_times(model, data_root) -> dict[str, float]:
    """Each page's seconds when this model was last prepared on this data root (empty: never)."""
    try:
        return dict(json.loads(_times_path().read_text()).get(_times_key(model, data_root), {}))
    except (OSError, ValueError):
        return {}


def _keep_time(model, data_root, page: str, seconds: float) -> None:
    from elmo_model.plumbing.io_safety import atomic_write_text

    path = _times_path()
    try:
        every = json.loads(path.read_text()) if path.is_file() else {}
        every.setdefault(_times_key(model, data_root), {})[page] = round(seconds, 2)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, json.dumps(every, indent=1, sort_keys=True))
    except (OSError, ValueError) as err:  # an estimate is a nicety: never fail the preparation over it
        log.warning("could not keep the preparation's times in %s: %s", path, err)


def estimate(pages: list[str], times: dict[str, float]) -> float | None:
    """Seconds the ``pages`` took last time, together; None when any of them has no time yet."""
    if any(page not in times for page in pages):
        return None
    return sum(times[page] for page in pages)


def eta_text(seconds: float | None) -> str:
    """How an estimate reads: measured, or said to be missing."""
    if seconds is None:
        return "no estimate yet (a page not prepared before with this model and data)"
    from elmo_model.plumbing.progress import about

    return f"{about(seconds)} left, by the last preparation's times"


def prepare(model, data_root, english: bool, on_start: Callable[[int, int, str, float | None], None],
            on_done: Callable[[int, PageTime], None], pages: list[str] | None = None) -> list[PageTime]:
    """Run each page's first computation in turn (``pages``: their titles; None: every page).
    ``on_start(i, n, title, eta)`` before page ``i`` of ``n`` (``eta``: seconds left, or None);
    ``on_done(i, page_time)`` after it. A page whose dataset is missing, or that fails, is said
    and skipped; an interruption (KeyboardInterrupt, a stopped script) propagates, and what the
    pages before it computed stays in the caches."""
    from probing.data import DatasetMissing

    first_figures = importlib.import_module("app_pages.first_figures")  # lazy: streamlit (the command's --help)
    chosen = [(title, getattr(first_figures, name)) for title, name in PAGES if pages is None or title in pages]
    times, done = last_times(model, data_root), []
    for i, (title, work) in enumerate(chosen):
        on_start(i, len(chosen), title, estimate([t for t, _ in chosen[i:]], times))
        start = time.perf_counter()
        problem = ""
        if not english and title in ENGLISH_ONLY:
            problem = "left out: it reads English data and the model is of another language"
        else:
            try:
                work(model)
            except DatasetMissing as err:
                problem = f"left out: a dataset is missing ({str(err).splitlines()[0]})"
            except (ValueError, FileNotFoundError, RuntimeError) as err:
                log.warning("preparing %s failed", title, exc_info=err)
                problem = f"failed: {type(err).__name__}: {err}"
        page = PageTime(title, time.perf_counter() - start, problem)
        if not problem:
            _keep_time(model, data_root, title, page.seconds)
        done.append(page)
        on_done(i, page)
    return done


def summary(done: list[PageTime], total: float) -> str:
    """One line: the time in all and per page."""
    parts = [f"{p.page} {p.seconds:.1f} s" + (f" ({p.problem})" if p.problem else "") for p in done]
    return f"{len(done)} page(s) in {_duration(total)}: " + "; ".join(parts) + "."


def _duration(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 90 else f"{int(seconds // 60)} min {seconds % 60:.0f} s"


# --------------------------------------------------------------------------------------------
# The button (on the Lesson page)
# --------------------------------------------------------------------------------------------

DONE_KEY = "prepare_done"  # session state: the last preparation's pages and times (kept if it is stopped)


def prepare_panel(model) -> None:
    """*Before class*: one button that prepares every page, a bar with the page and the time left,
    then the time in all and per page. Stop (or any click) interrupts it; finished pages stay."""
    import streamlit as st

    from app_pages.data_setup import data_root
    from app_pages.display import escape_markdown, table
    from app_pages.model_choice import chosen_model_language
    from elmo_model.models.names import is_english

    with st.container(border=True):
        st.markdown("**Before class.** Compute every page's first figure now, for this model and data, so that "
                    "in class each page opens at once (elmo-mini: about 1.5 min on a busy 2-core CPU; the times are in "
                    "docs/teaching.md). `python -m app_pages.prepare` does the same from a shell.")
        go, stop = st.columns([3, 1])
        pressed = go.button("Prepare every page for class", key="prepare_go", type="primary")
        stop.button("Stop", key="prepare_stop", help="Stops after the step running now; finished pages stay prepared.")
        if pressed:
            st.session_state[DONE_KEY] = {"pages": [], "total": 0.0, "finished": False}
            _run_in_page(model, data_root(), is_english(chosen_model_language()), st.session_state[DONE_KEY])
        record = st.session_state.get(DONE_KEY)
        if record and record["pages"]:
            line = summary([PageTime(**p) for p in record["pages"]], record["total"])
            unfinished = "" if record["finished"] else f" Stopped after {len(record['pages'])} of {len(PAGES)}: " \
                "the pages above are prepared; press the button again for the rest."
            (st.success if record["finished"] else st.warning)(escape_markdown(f"Prepared {line}{unfinished}"))
            table([{"page": p["page"], "seconds": round(p["seconds"], 1), "note": p["problem"]}
                   for p in record["pages"]], hide_index=True)


def _run_in_page(model, data_root, english: bool, record: dict) -> None:
    import streamlit as st

    from app_pages.display import escape_markdown

    bar = st.progress(0.0, text="Preparing…")
    start = time.perf_counter()

    def started(i: int, n: int, title: str, eta: float | None) -> None:
        bar.progress(i / n, text=escape_markdown(f"Page {i + 1} of {n}: {title}; {eta_text(eta)}"))

    def finished(i: int, page: PageTime) -> None:
        record["pages"].append(page.__dict__)  # kept as it goes: a stopped run still says what it did
        record["total"] = time.perf_counter() - start

    prepare(model, data_root, english, started, finished)
    record["finished"] = True
    bar.progress(1.0, text="Every page is prepared.")


# --------------------------------------------------------------------------------------------
# The command
# --------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    from elmo_model.plumbing.flags import EXIT_CODES, add_device_argument, add_precision_argument

    parser = argparse.ArgumentParser(
        prog="python -m app_pages.prepare",
        description="Prepare the app for a class: compute every page's first figure (the Playground's bank, the "
                    "Lesson's five steps, the Probes and Beyond-accuracy forms' defaults, the Scalar mix's s_j and "
                    "hand-set mix, Sense retrieval's and Layer projections' opening words, the Syntax page's "
                    "structural probe) into the caches on disk, as the app's Prepare button does, so that a server "
                    "started afterwards opens each page from them. Prints each page's progress with the time left "
                    "(from the last preparation of this model and data), then the time in all and per page. "
                    "Ctrl-C keeps every page already prepared.",
        epilog=EXIT_CODES)
    parser.add_argument("--model", default=None,
                        help="a shipped or published model's name, or a model folder (default: the app's, "
                             "$ELMO_WORKBENCH_MODEL or elmo-mini)")
    parser.add_argument("--data-root", default=None, help="the data root (default: as the app finds it)")
    parser.add_argument("--pages", nargs="+", choices=[title for title, _ in PAGES], metavar="PAGE",
                        help="only these pages (titles as in the app: " + ", ".join(t for t, _ in PAGES) + ")")
    add_precision_argument(parser)
    add_device_argument(parser, default="cpu")
    return parser


def _quiet_streamlit() -> None:
    """No bare-mode warnings (no runtime, no script context): nothing here is drawn."""
    for name in [n for n in logging.root.manager.loggerDict if n.startswith("streamlit")]:
        logging.getLogger(name).disabled = True


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.data_root:
        os.environ["ELMO_WORKBENCH_DATA"] = str(Path(args.data_root).expanduser())
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # app_pages.* as the app imports it
    importlib.import_module("streamlit.runtime.scriptrunner")  # its loggers, made on import, are quietened here
    _quiet_streamlit()
    importlib.import_module("app_pages.first_figures")  # the stores' loggers, likewise
    from app_pages.data_setup import data_root
    from app_pages.model_choice import default_model_spec
    from app_pages.running import load_model
    from elmo_model.models.names import is_english, model_language

    _quiet_streamlit()

    spec = args.model or default_model_spec()
    model, error = load_model(spec, args.precision, args.device)
    if model is None:
        print(f"error: could not load the biLM {spec!r}: {error}", file=sys.stderr)
        return 2
    root, start, done = data_root(), time.perf_counter(), []

    def started(i: int, n: int, title: str, eta: float | None) -> None:
        print(f"[{i + 1}/{n}] {title}: preparing; {eta_text(eta)}", flush=True)

    def finished(i: int, page: PageTime) -> None:
        done.append(page)
        print(f"[{i + 1}] {page.page}: {page.problem or 'done'} in {page.seconds:.1f} s", flush=True)

    print(f"Preparing the app for {spec} (data root {root})", flush=True)
    try:
        prepare(model, root, is_english(model_language(spec)), started, finished, args.pages)
    except KeyboardInterrupt:
        print(f"interrupted: kept {summary(done, time.perf_counter() - start)} Run it again for the rest.",
              file=sys.stderr)
        return 130
    print(f"Prepared {summary(done, time.perf_counter() - start)}")
    return 1 if any(p.problem.startswith("failed") for p in done) else 0


if __name__ == "__main__":
    sys.exit(main())
