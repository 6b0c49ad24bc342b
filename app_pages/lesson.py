"""Lesson: the ELMo paper's story in five steps, one click each, on the chosen model.

Each step -> ``probing.report.lesson`` (one function a step; steps 3 and 4 share one probe run,
kept per model and slice by ``running.cached_result``, through ``first_figures.lesson_step``) -> the question, what this model shows in its
own numbers, what the paper reports, whether this model makes the point, and the numbers. Nothing
runs before its button is pressed. Where the model does not make a point, the models that can are
one click away for the host (fetched or chosen in place). For the host, *Prepare every page for
class* (``app_pages.prepare``) computes every page's first figure ahead.
"""

import streamlit as st

from app_pages.data_setup import needs_english_data
from app_pages.display import escape_markdown, table
from app_pages.first_figures import LESSON_STEPS, lesson_step, lesson_step_key
from app_pages.model_choice import SPEC_KEY, visitor_is_local
from app_pages.prepare import prepare_panel
from app_pages.running import require_model, show_failure
from probing.data import MODELS, model_missing_files

STRONGER = ("elmo-small", "elmo-original")  # the published models a class can switch to
DOWNLOAD_RATE = 10e6  # bytes a second the download times assume


def _stronger_models() -> None:
    """The published models that can make the paper's points, each one click away for the host: a
    model already here is chosen in place; one to fetch is fetched by the sidebar's button, which
    this names with its size and download time."""
    st.subheader("The models that can show it")
    st.markdown("Where this model does not make a point, a model trained on a billion words does (the paper's). "
                "The lesson runs the same steps on whichever model the sidebar picks.")
    for name in STRONGER:
        model = MODELS[name]
        minutes = model.weights_bytes / DOWNLOAD_RATE / 60
        about = f"{model.title}: {model.size_text()}, about {max(1, round(minutes))} min to fetch at 10 MB/s"
        if not model_missing_files(name):
            if st.button(f"Use {name} ({about})", key=f"lesson_use_{name}"):
                st.session_state[SPEC_KEY] = name
                st.rerun()
        elif visitor_is_local():
            st.markdown(f"- **{name}** ({escape_markdown(about)}): *Fetch {name}* under *Published ELMo models* "
                        "in the sidebar, then pick it in the Model list.")
        else:
            st.markdown(f"- **{name}** ({escape_markdown(about)}): the host can fetch it from the sidebar.")


def _show(step) -> None:
    verdict = {True: ":green[this model makes the point]", False: ":orange[this model does not make the point]",
               None: "not measured"}[step.made]
    st.markdown(f"**This model:** {escape_markdown(step.shows)} ({verdict})")
    st.markdown(f"**The paper:** {escape_markdown(step.paper)}")
    if step.rows:
        table(step.rows, hide_index=True)
    if step.made is False:
        st.caption("A published ELMo can show it: see *The models that can show it* below.")


st.title("Lesson")
st.markdown("The ELMo paper's story in five steps, in order, each on the model chosen in the sidebar: press a "
            "step's button and it computes that step now (steps 3 and 4 train small probes: about a minute "
            "on elmo-mini the first time, then kept). Each step sets this model's own numbers beside the "
            "paper's (Peters et al., 2018). docs/teaching.md is the teacher's script.")
needs_english_data("UD English-EWT, CoNLL-2000, SemCor")
model = require_model()
if visitor_is_local():  # the host's: a class's visitors would each recompute the server's caches
    prepare_panel(model)
for key, title, question in LESSON_STEPS:
    with st.container(border=True):
        st.subheader(title)
        st.markdown(f"*{question}*")
        result_key = lesson_step_key(model, key)
        shown_key = f"lesson_shown_{key}"
        if st.button("Run this step", key=f"lesson_run_{key}") or st.session_state.get(shown_key) == result_key:
            try:
                step = lesson_step(model, key, title)
                st.session_state[shown_key] = result_key
                _show(step)
            except Exception as err:  # a missing dataset, a model that cannot run
                show_failure(err, title)
_stronger_models()
