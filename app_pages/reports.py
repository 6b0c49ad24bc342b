"""Reports: run the scripted probe report from the page, read it here, download it, compare two.

- Run: a form -> ``probing.report.build_report`` (the same function as
  ``python -m probing.report``) into a new folder of the reports directory.
- Read: a saved report (``results.json`` -> ``probing.report.load_results``) drawn block by block
  from ``probing.report.report_blocks`` (the same content as report.html), with downloads of
  report.html, report.md, results.json and a zip of the folder.
- Compare: two saved results (reports, or probe-suite JSON files from the Probes page, saved or
  uploaded) -> ``probing.report.compare_blocks`` on the page and ``compare_reports`` for files.
"""

import re
import shutil
from datetime import datetime
from pathlib import Path

import streamlit as st

from app_pages.data_setup import data_root, data_root_caption, english_data_note, reports_dir
from app_pages.display import escape_markdown, figure, table
from app_pages.inputs import (
    DEFAULT_SEMCOR_LIMIT,
    SEMCOR_LIMITS,
    SENTENCE_LIMITS,
    as_limit,
    limit_label,
    offered_limits,
)
from app_pages.jobs import QueueFull
from app_pages.model_choice import chosen_model_spec, model_key, visitor_is_local
from app_pages.report_files import (budget_bytes, comparison_blocks, enforce_budget, is_pinned, load_upload, new_folder,
                                    real_file, saved_reports, set_pinned, upload_digest, usage, write_comparison,
                                    zip_folder)
from app_pages.running import cache_key, load_model, run_with_progress, show_failure
from app_pages.serving import MAX_WORD_CHARS, check_length, check_words, shown_path

TASK_NAMES = {"pos": "part of speech (EWT)", "upos": "universal POS (EWT)", "chunk": "chunking (CoNLL-2000)",
              "wsd": "all-words WSD + sense projections and neighbours (SemCor)",
              "lexsample": "Senseval-2 lexical sample"}
UPLOAD = "upload a file…"
MAX_WORDS = 8
MAX_WORDS_CHARS = 400
SELECTED = "reports_selected"  # session state: the folder of the report shown


def _init_state() -> None:
    for key, value in {"rp_tasks": ["pos"], "rp_words": "", "rp_limit": 200, "rp_seed": 0, "rp_umap": False,
                       "rp_context": True, "rp_png": False, "rp_semcor": DEFAULT_SEMCOR_LIMIT,
                       "rp_lex": 200}.items():
        st.session_state.setdefault(key, value)


@st.cache_data(show_spinner=False, max_entries=16)
def _load(path: str, stamp: int):
    """A saved result (a report's or a probe suite's), cached per file version."""
    # lazy: probing.report imports torch; only when a saved result is read (first paint)
    from probing.report import load_results

    return load_results(path)


def load_saved(folder: Path):
    path = folder / "results.json"
    return _load(str(path), path.stat().st_mtime_ns)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower()[:40] or "report"


# --------------------------------------------------------------------------------------------
# Drawing a report's blocks
# --------------------------------------------------------------------------------------------


def _inline(text: str) -> str:
    """Report text (``**bold**`` is its only markup) as literal Markdown with the bold kept."""
    return escape_markdown(text).replace("\\*\\*", "**")


def _unique(headers: list[str]) -> list[str]:
    out: list[str] = []
    for h in headers:
        name = h or " "
        while name in out:
            name += " "
        out.append(name)
    return out


def render_blocks(blocks: list, key: str) -> None:
    """Draw ``probing.report`` blocks: headings, paragraphs, tables, notes and figures."""
    # lazy: probing.report imports torch; only when a report is drawn (first paint)
    from probing.report import ReportFigure

    for k, block in enumerate(blocks):
        if isinstance(block, ReportFigure):
            figure(block.figure, block.name, key=f"{key}_{k}_{block.name}")
            if block.caption:
                st.caption(_inline(block.caption))
        elif hasattr(block, "level"):  # a heading
            (st.header if block.level <= 2 else st.subheader)(escape_markdown(block.text))
        elif hasattr(block, "headers"):  # a table
            columns = _unique(list(block.headers))
            rows = [{c: str(cell).replace("**", "") for c, cell in zip(columns, row)} for row in block.rows]
            table(rows, hide_index=True, width="stretch")
            if block.caption:
                st.caption(_inline(block.caption))
        elif hasattr(block, "code"):  # a command line: shown literally, copied as it is
            st.code(block.code, language="bash", wrap_lines=True)
        elif hasattr(block, "items"):  # notes
            st.markdown("\n".join(f"- {_inline(item)}" for item in block.items))
        elif hasattr(block, "text"):  # a paragraph
            st.markdown(_inline(block.text))


def _file_button(label: str, path: Path, mime: str, key: str) -> None:
    if real_file(path):
        st.download_button(label, data=lambda: path.read_bytes(), file_name=path.name, mime=mime, key=key)


def show_report(folder: Path) -> None:
    # lazy: probing.report imports torch; only when a report is shown (first paint)
    from probing.report import report_blocks

    try:
        result = load_saved(folder)
    except Exception as err:  # a damaged or foreign results.json
        show_failure(err, f"Reading {folder.name}/results.json")
        return
    cols = st.columns(4)
    with cols[0]:
        _file_button("Download report.html", folder / "report.html", "text/html", "rp_dl_html")
    with cols[1]:
        _file_button("Download report.md", folder / "report.md", "text/markdown", "rp_dl_md")
    with cols[2]:
        _file_button("Download results.json", folder / "results.json", "application/json", "rp_dl_json")
    with cols[3]:
        st.download_button("Download everything (.zip)", data=lambda: zip_folder(folder),
                           file_name=f"{folder.name}.zip",
                           mime="application/zip", key="rp_dl_zip",
                           help="report.html, report.md with its PNG figures (if made), results.json.")
    st.caption(f"Folder: `{_shown(folder)}`")
    pinned = is_pinned(folder)
    if not visitor_is_local():  # pins are the host's: a visitor could otherwise keep every report past the budget
        st.caption("Pinned by the host: kept whatever the disk budget." if pinned else
                   "Not pinned: the disk budget may remove it when newer reports need the room.")
    elif st.toggle("Pin: keep this report whatever the disk budget", value=pinned,
                   key=f"rp_pin_{folder.name}") != pinned:
        set_pinned(folder, not pinned)
    render_blocks(report_blocks(result), "report")


# --------------------------------------------------------------------------------------------
# Panels
# --------------------------------------------------------------------------------------------


def _shown(path: Path) -> str:
    """``path`` as this visitor may see it: in full from the server's machine, else relative."""
    return shown_path(path, visitor_is_local(), {"reports": reports_dir()})


def budget_caption() -> str:
    """The disk the reports use, against the budget."""
    try:
        budget = budget_bytes()
    except ValueError as err:  # a host's typo: the page still works, without a budget
        return escape_markdown(err)
    used = usage()
    if budget is None:
        return f"Reports and comparisons use {used / 2**20:,.0f} MB (no disk budget)."
    return (f"Reports and comparisons use {used / 2**20:,.0f} MB of a {budget / 2**20:,.0f} MB budget "
            "(`ELMO_WORKBENCH_REPORTS_BUDGET_MB`): past it, the oldest that are not pinned are removed.")


def _keep_to_budget(just_written: Path) -> None:
    """Remove the oldest unpinned reports past the disk budget (never the one just written); say which."""
    try:
        removed = enforce_budget(keep=(just_written,))
    except (ValueError, OSError) as err:
        st.warning(f"The disk budget was not applied: {escape_markdown(err)}")
        return
    if removed:
        st.info(f"Over the disk budget: removed the oldest unpinned {', '.join(escape_markdown(r) for r in removed)}.")


def _typed_words(text: str) -> list[str]:
    return [w.strip() for w in re.split(r"[,\s]+", text) if w.strip()]


def _report_form() -> bool:
    """The form of a report's settings; True when it was submitted."""
    # lazy: probing.report imports torch; the page's title and text paint first
    from probing.report import REPORT_TASKS

    with st.form("report_form"):
        a, b = st.columns(2)
        with a:
            st.multiselect("Tasks", list(REPORT_TASKS), key="rp_tasks", persist_state="session",
                           format_func=lambda t: TASK_NAMES.get(t, t))
            st.text_input("Words for learned s_j per lemma (optional)", key="rp_words", persist_state="session",
                          max_chars=MAX_WORDS_CHARS,
                          placeholder="bank, play, play:VERB",
                          help="SemCor lemmas (lemma:POS to restrict); bank, play and bark fall back to the "
                               f"demo sentences when SemCor's slice has too few. Up to {MAX_WORDS}, "
                               f"{MAX_WORD_CHARS} characters each.")
        with b:
            st.selectbox("Sentences per dataset", offered_limits(SENTENCE_LIMITS, "rp_limit"), key="rp_limit",
                         persist_state="session",
                         format_func=lambda n: limit_label(n, "all (a full report: hours on a CPU)"),
                         help="Every dataset but SemCor (below) is cut to its first N sentences.")
            st.selectbox("SemCor sentences", offered_limits(SEMCOR_LIMITS, "rp_semcor"), key="rp_semcor",
                         persist_state="session", format_func=lambda n: limit_label(n, "all 37,176"),
                         help="The first N SemCor sentences indexed for WSD, the sense panels and the words "
                              f"(the sense pages' default slice is {DEFAULT_SEMCOR_LIMIT:,}).")
            st.number_input("Seed", 0, 10_000, key="rp_seed", persist_state="session")
        with st.expander("More settings"):
            c, d = st.columns(2)
            c.checkbox("Contextuality (Ethayarajh 2019)", key="rp_context", persist_state="session")
            c.checkbox("UMAP beside PCA in the projections", key="rp_umap", persist_state="session")
            d.checkbox("PNG figures for report.md (needs Chromium; slower)", key="rp_png", persist_state="session")
            d.number_input("Lexical-sample contexts per word", 50, 4000, step=50, key="rp_lex", persist_state="session")
        return st.form_submit_button("Build the report", type="primary")


def run_panel() -> None:
    st.header("Run a report")
    st.markdown(
        "Everything the workbench measures about this biLM, as one document: the probing tasks "
        "(with baselines, selectivity and learned s_j), word senses, the lexical sample, learned s_j "
        "for words you name, and contextuality. The same as `python -m probing.report`. Reports run "
        "one at a time per tab, in the server's queue with everyone else's work.")
    note = english_data_note("UD English-EWT, CoNLL-2000, SemCor, Senseval-2")
    if note:  # reading and comparing saved reports below still work
        st.info(note)
        return
    if not _report_form():
        return
    spec = chosen_model_spec()
    try:
        model, error = load_model(spec) if spec else (None, "no model directory typed in the sidebar")
    except QueueFull as err:  # the server is busy: its one line, as for every job
        show_failure(err, "Loading the biLM")
        return
    if model is None:  # reading and comparing saved reports below still work
        st.error(f"**Could not load the biLM {escape_markdown(repr(spec))}**, so no report can be built: "
                 f"{escape_markdown(error)}. Pick another model in the sidebar.")
        return
    tasks = list(st.session_state.rp_tasks)
    if not tasks:
        st.warning("Pick at least one task.")
        return
    try:  # before any work: every word is written into the report, its figures and its command line
        typed = check_length(str(st.session_state.rp_words), "Words", MAX_WORDS_CHARS)
        words = list(dict.fromkeys(_typed_words(typed)))
        check_words(words, "Words", MAX_WORDS)
    except ValueError as err:
        st.warning(escape_markdown(err))
        return
    # lazy: probing.report imports torch; only when a report is built (first paint)
    from probing.report import ReportConfig, build_report
    from probing.report.config import REPORT_TRAIN_FRACTION
    from probing.tagging.suite_config import SuiteConfig

    config = ReportConfig(semcor_limit=as_limit(st.session_state.rp_semcor), umap=bool(st.session_state.rp_umap),
                          contextuality=bool(st.session_state.rp_context),
                          lexsample_max_instances=int(st.session_state.rp_lex),
                          suite=SuiteConfig(precision=getattr(model, "precision", "auto"),  # the sidebar's
                                            train_fraction=REPORT_TRAIN_FRACTION))
    stem = f"{_slug(str(getattr(model, 'name', '') or 'biLM'))}-{datetime.now():%Y%m%d-%H%M%S}"
    limit, seed, png = as_limit(st.session_state.rp_limit), int(st.session_state.rp_seed), bool(st.session_state.rp_png)

    def build(progress) -> Path:
        out_dir = new_folder(reports_dir(), stem)
        try:
            build_report(model, tasks, out_dir, words=words, data_root=data_root(), seed=seed, limit=limit,
                         progress=progress, config=config, png=png)
        except BaseException:  # a failure, a closed tab, a cancelled job: no half-written folder stays
            shutil.rmtree(out_dir, ignore_errors=True)
            raise
        return out_dir

    # the same request from another visitor while this one runs shares its job and its folder
    request = cache_key(model_key(model), tasks, words, seed, limit, config.to_dict(), png)
    try:
        out_dir = run_with_progress(f"Building a report on {getattr(model, 'name', '') or 'the biLM'}", build,
                                    kind="report", key=f"report:{request}")
    except Exception as err:
        show_failure(err, "Building the report")
        return
    name = out_dir.name
    st.session_state[SELECTED] = name
    st.success(f"Report written to `{_shown(out_dir)}`.")
    _keep_to_budget(out_dir)


def read_panel(saved: list[Path]) -> None:
    st.header("Read a saved report")
    if not saved:
        st.info(f"No saved reports yet in `{_shown(reports_dir())}`: build one above.")
        return
    names = [p.name for p in saved]
    if st.session_state.get(SELECTED) not in names:
        st.session_state[SELECTED] = names[0]
    st.selectbox("Report", names, key=SELECTED)
    show_report(saved[names.index(st.session_state[SELECTED])])


def _pick(side: str, names: list[str], default: int):
    """One side of the comparison: a saved folder, or an uploaded file. (result, label, stamp) or
    (None, None, None); ``stamp`` names the content (an upload's digest, a saved file's version)."""
    key, chosen = f"rp_cmp_{side}", f"rp_cmp_{side}_chosen"
    options = names + [UPLOAD]
    # follow the newest reports until the user picks one (a default set while only one report
    # existed must not stick once there are two)
    if st.session_state.get(key) not in options or not st.session_state.get(chosen, False):
        st.session_state[key] = options[min(default, len(options) - 1)]
    choice = st.selectbox(f"Result {side.upper()}", options, key=key,
                          on_change=lambda: st.session_state.__setitem__(chosen, True))
    if choice == UPLOAD:
        upload = st.file_uploader(f"A results.json for {side.upper()} (a report's or a probe suite's)", type=["json"],
                                  key=f"rp_upload_{side}")
        if upload is None:
            return None, None, None
        return load_upload(upload), upload.name, "upload:" + upload_digest(upload)
    folder = reports_dir() / choice
    return load_saved(folder), choice, f"saved:{choice}:{(folder / 'results.json').stat().st_mtime_ns}"


def compare_panel(saved: list[Path]) -> None:
    st.header("Compare two results")
    st.markdown("Two saved reports, or probe-suite results downloaded from the Probes page: the scores per "
                "layer side by side, with the difference B − A.")
    names = [p.name for p in saved]
    left, right = st.columns(2)
    try:
        with left:
            a, label_a, stamp_a = _pick("a", names, 1)
        with right:
            b, label_b, stamp_b = _pick("b", names, 0)
    except Exception as err:  # not JSON, another format, a damaged file
        show_failure(err, "Reading a result to compare")
        return
    if a is None or b is None:
        st.info("Choose two results (save reports above, or upload results.json files).")
        return
    if label_a == label_b:
        st.caption("A and B are the same result: every difference is 0.")
    labels = ("A", "B") if label_a == label_b else (f"A: {label_a}", f"B: {label_b}")
    request = cache_key(stamp_a, stamp_b, labels)
    try:
        blocks = comparison_blocks(a, b, labels, request)
    except Exception as err:  # a busy server's one line, or results that cannot be compared
        show_failure(err, "Comparing the two results")
        return
    render_blocks(blocks, "compare")
    if st.button("Write the comparison files (HTML, Markdown, JSON)", key="rp_write_compare"):
        try:
            out, files = write_comparison(a, b, labels, f"{_slug(label_a)}-vs-{_slug(label_b)}")
        except Exception as err:
            show_failure(err, "Writing the comparison")
            return
        cols = st.columns(3)
        with cols[0]:
            _file_button("Download comparison HTML", Path(files.html), "text/html", "rp_cmp_html")
        with cols[1]:
            _file_button("Download comparison Markdown", Path(files.markdown), "text/markdown", "rp_cmp_md")
        with cols[2]:
            _file_button("Download comparison.json", Path(files.json), "application/json", "rp_cmp_json")
        st.caption(f"Written to `{_shown(out)}`.")
        _keep_to_budget(out)


# --------------------------------------------------------------------------------------------
# The page
# --------------------------------------------------------------------------------------------

st.title("Reports")
data_root_caption(stop_without_data=False)  # saved reports need no data
st.caption(f"Reports directory: `{_shown(reports_dir())}` (set `ELMO_WORKBENCH_REPORTS` to use another). "
           + budget_caption())
_init_state()
run_panel()
saved = saved_reports()
read_panel(saved)
compare_panel(saved)
