"""The data root as the pages see it: which folder they read, what each page needs from it, the
screen shown when it holds nothing (with buttons that fetch the datasets), the sidebar's offer to
fetch the published ELMo models it lacks, and where reports go.

Not a page. ``probing.data`` is light (no torch), so it is imported at the top.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from app_pages.display import escape_markdown, table
from app_pages.model_choice import chosen_model_language, visitor_is_local
from app_pages.running import run_with_progress
from app_pages.serving import shown_path
from probing import data as _data
from probing.data import (
    DATASETS,
    ENV_VAR,
    MODELS,
    SIBLING_ROOT,
    data_command,
    download_root,
    download_size_text,
    holds_any_dataset,
    model_download_command,
    model_home,
    model_missing_files,
    root_origin,
    status,
)
from probing.data.downloads import DownloadError, download
from probing.data.registry import Treebank
from probing.data.treebanks import fetch_command, fetch_name, language_treebank, treebank_missing
from probing.engine.renamed_keywords import renamed_keywords
from elmo_model.models.names import is_english  # light: no torch
from elmo_model.plumbing.settings import folder_setting

REPORTS_ENV_VAR = "ELMO_WORKBENCH_REPORTS"


def reports_dir() -> Path:
    """Where the Reports page writes and lists reports: ``$ELMO_WORKBENCH_REPORTS``, else
    ``${XDG_CACHE_HOME:-~/.cache}/elmo-workbench/reports``."""
    return folder_setting(REPORTS_ENV_VAR, "reports")


def data_root() -> Path:
    """The data root the pages read (``probing.data.data_root``)."""
    return _data.data_root()


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
    root = data_root()
    if not holds_any_dataset(root):
        no_data_guidance(root, root_origin())
        if stop_without_data:
            st.stop()
        return
    st.caption(f"Data root: `{shown_path(root, visitor_is_local())}` (set `{ENV_VAR}` to use another; "
               "`python -m probing.data status` lists what it holds).")


ANY_LANGUAGE = "the Playground, Layer projections and Sense retrieval over your own sentences work in any language"


def english_data_note(datasets: str) -> str | None:
    """One line saying that what needs ``datasets`` (English data: EWT, CoNLL-2000, SemCor) has
    nothing to run on for the chosen model, when that model reads another language; None for an
    English one."""
    language = chosen_model_language()
    if is_english(language):
        return None
    return (f"This needs English data ({datasets}) and the chosen model reads {escape_markdown(language)}, "
            f"so there is nothing to run here; {ANY_LANGUAGE}.")


def needs_english_data(datasets: str) -> None:
    """For a page that reads only English data: with a model of another language, the one line of
    :func:`english_data_note` and ``st.stop()``, before the model is loaded or anything computed."""
    note = english_data_note(datasets)
    if note:
        st.info(note)
        st.stop()


def model_treebank(what: str) -> tuple[Treebank | None, str | None]:
    """The UD treebank ``what`` (part of speech, the tree probe) reads for the chosen model: (None,
    None) for an English model (UD English-EWT, as ever); (its language's treebank, None) when the
    host has fetched it; else (None, one line naming the command that fetches it, or saying that the
    table has no treebank of that language)."""
    language = chosen_model_language()
    if is_english(language):
        return None, None
    shown = escape_markdown(language)
    try:
        treebank = language_treebank(language, None, data_root())
    except ValueError:
        return None, (f"{what.capitalize()} needs a UD treebank of the model's language ({shown}), and the "
                      f"workbench knows none; {ANY_LANGUAGE}.")
    if treebank_missing(treebank, data_root()):
        command = (fetch_command(treebank, data_root()) if visitor_is_local()  # a remote visitor sees no paths
                   else f"{data_command()} download {fetch_name(treebank)}")
        return None, (f"The chosen model reads {shown}: {what} runs on {treebank.title}, which is not in the data "
                      f"root; the host fetches it with `{command}`.")
    return treebank, None


def treebank_or_stop(what: str) -> Treebank | None:
    """For a page whose probes read a treebank: the chosen model's (:func:`model_treebank`), or its one
    line and ``st.stop()`` when it has none, before the model is loaded or anything computed."""
    treebank, note = model_treebank(what)
    if note:
        st.info(note)
        st.stop()
    return treebank


@renamed_keywords(root="data_root")
def no_data_guidance(data_root: Path, origin: str) -> None:
    """One screen for a machine with no data: what works without it, what each page needs,
    and how to point the app at a data root."""
    present = {row.name for row in status(data_root) if row.present}
    shown = shown_path(data_root, visitor_is_local())
    st.warning(f"**No datasets found.** The data root `{shown}` ({escape_markdown(origin)}) holds "
               "none of the datasets this page reads.")
    st.markdown(
        "**What works without data:** the **Playground** (the default biLM and the demo sentence "
        "sets ship with the project). Every other page reads corpora from a data root:")
    table([{"page": page, "needs": ", ".join(f"{name} ({DATASETS[name].title})" for name in needs) or "nothing",
            "missing": ", ".join(name for name in needs if name not in present) or "-"}
           for page, needs in PAGE_DATASETS.items()], hide_index=True, width="stretch")
    st.markdown(
        f"**Point the app at a data root** (a folder laid out as `python -m probing.data` describes), by one of:\n"
        f"1. set `{ENV_VAR}` before starting the app: `{ENV_VAR}=/path/to/data streamlit run app.py`;\n"
        f"2. put the data root at `{SIBLING_ROOT}` (a folder named `shared` beside the checkout: "
        "found when the variable is unset);\n"
        "3. fetch the datasets from their official sources (needs the internet; lm_corpus has no "
        "automatic download): the buttons below, or from a terminal:")
    st.code(f"{data_command()} download\n{data_command()} status", language="bash", wrap_lines=True)
    fetch_buttons(present)


def fetch_buttons(present: set[str]) -> None:
    """One button per downloadable dataset not in the data root, with its size: fetches it
    into ``probing.data.download_root()`` behind a progress bar. An interrupted download
    (network, closed tab) resumes where it stopped when the button is pressed again."""
    target = download_root()
    missing = [d for d in DATASETS.values() if d.downloadable and d.name not in present]
    if not missing:
        return
    if not visitor_is_local():  # gigabytes onto the server's disk are the host's call, as models are
        st.markdown("**Fetching datasets** is for the server's owner, from a terminal on the server:")
        st.code("\n".join(f"{data_command()} download {d.name}" for d in missing), language="bash",
                wrap_lines=True)
        return
    st.markdown(f"**Fetch a dataset** into `{target}`:")
    for dataset in missing:
        needed_by = [page for page, needs in PAGE_DATASETS.items() if dataset.name in needs]
        fetch_button(dataset.name, dataset.title,
                     help=f"{dataset.description}. Source: {dataset.source}; licence: {dataset.licence}. "
                          f"Read by: {', '.join(needed_by) or 'reports'}.",
                     done="Reload the page (or pick it again in the sidebar) to use it.")


def fetch_button(name: str, title: str, help: str, done: str) -> bool:
    """A button "Fetch TITLE (SIZE)" that downloads dataset or published model ``name`` into
    ``probing.data.download_root()`` behind a progress bar (``probing.data.downloads.download``),
    then says where it went (and ``done``), or why it failed and that pressing it again resumes.
    True once the download succeeded in this run."""
    target = download_root()
    if not visitor_is_local():  # the button is never drawn for them; a stale click does nothing
        return False
    if not st.button(f"Fetch {title} ({download_size_text(name)})", key=f"fetch_{name}", help=help):
        return False
    try:
        where = None if name in MODELS else target  # a model goes to the models home, which every page reads
        run_with_progress(f"Fetching {title}", lambda progress: download(name, where, progress=progress),
                          kind="download", key=f"download:{name}:{where}")
    except (DownloadError, ValueError) as err:
        st.error(f"**Fetching {escape_markdown(title)} failed.** {escape_markdown(err)}\n\n"
                 "Press the button again to try again: a download resumes where it stopped when the server allows it.")
        return False
    st.success(f"**{escape_markdown(title)} is in `{target}`.** {done}")
    return True


FETCHED_MODEL_KEY = "fetched_model"  # session state: the model the sidebar just fetched (said once, after the rerun)


def published_models_panel() -> None:
    """For the sidebar: the published ELMo models the data root lacks, each with a button that
    fetches it (size shown) as the guidance screen fetches datasets; after a fetch the script
    runs again, so the Model list above holds the new model. Nothing when all are there. A
    visitor from another machine sees the commands instead of buttons (hundreds of MB onto the
    server's disk are the server's owner's call)."""
    fetched = st.session_state.pop(FETCHED_MODEL_KEY, None)
    if fetched:
        st.success(f"**{escape_markdown(fetched)} is in `{model_home()}/`:** pick it in the Model list.")
    absent = [model for model in MODELS.values() if model_missing_files(model.name)]
    if not absent:
        return
    local = visitor_is_local()
    with st.expander(f"Published ELMo models ({len(absent)} to fetch)"):
        # markdown, not a caption: the pages' tests read the page's last caption
        st.markdown(f"AllenNLP's ELMo models, fetched into `{shown_path(model_home(), local)}/` and their weights "
                    "checked; once there they are in the Model list.")
        for model in absent:
            card = model.card()
            about = (f"{model.title}: {card['LSTM']}; {card['parameters']}. Trained on {model.corpus}. "
                     f"{model.licence}. {card['source']}")
            if not local:
                st.markdown(f"- **{model.name}** ({download_size_text(model.name)}): "
                            f"`{model_download_command(model.name)}`",
                            help=about)
            elif fetch_button(model.name, model.name, help=about, done=""):
                st.session_state[FETCHED_MODEL_KEY] = model.name
                st.rerun()
