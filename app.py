"""ELMo Workbench: ``streamlit run app.py``.

The entry point: the page list (st.navigation) and the sidebar's biLM picker, nothing else.
The picker's choice goes to ``st.session_state["model_spec"]``; pages load it with
``app_pages.running.require_model()`` only when they need it, so the first paint never waits for
torch. The default model is ``elmo-mini`` (``data/models/elmo-mini``), or whatever
``$ELMO_WORKBENCH_MODEL`` names (a shipped name or a directory).

The pages live in ``app_pages/``, not ``pages/``: Streamlit (1.67) treats a folder named
``pages`` beside the entry script as an old-style multipage app until some session has run
st.navigation, so on a freshly started server a deep link such as ``/probes`` would run that
page without this script (no model picker, every file of the folder listed as a page).
"""

import os

# The app embeds a few short sentences at a time: one intra-op thread per request is several times
# faster than two on a 2-core machine (0.01-0.02 s vs 0.1-0.3 s for the bank demo, with
# multi-second stalls when another job holds the cores) and leaves a core for other sessions.
# Must be set before torch is first imported; OMP_NUM_THREADS given by the user wins.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import streamlit as st  # noqa: E402

from app_pages.data_setup import published_models_panel
from app_pages.display import note_session_start, prefetch_figure_scripts
from app_pages.inputs import keep_widget_state
from app_pages.model_choice import (OTHER_DIRECTORY, REJECTED_DIRECTORY, SPEC_KEY, default_model_spec, device_choice,
                                    model_card_panel, model_dir_allowed, model_names, precision_choice,
                                    visitor_is_local)
from app_pages.serving import MAX_PATH_CHARS

st.set_page_config(page_title="ELMo Workbench", page_icon=":material/layers:", layout="wide")
note_session_start()  # pages hold a new session's first figure back briefly (display.let_the_shell_paint)
keep_widget_state()

PAGES = [
    # The default page is served at the root URL ("/"); the others at /<file name without its
    # number>: /probes, /scalar_mix, /sense_retrieval, /layer_projections, /reports, /syntax.
    st.Page("app_pages/playground.py", title="Playground", icon=":material/compare_arrows:", default=True),
    st.Page("app_pages/lesson.py", title="Lesson", icon=":material/school:"),
    st.Page("app_pages/probes.py", title="Probes", icon=":material/query_stats:"),
    st.Page("app_pages/information.py", title="Beyond accuracy", icon=":material/insights:"),
    st.Page("app_pages/scalar_mix.py", title="Scalar mix", icon=":material/tune:"),
    st.Page("app_pages/sense_retrieval.py", title="Sense retrieval", icon=":material/manage_search:"),
    st.Page("app_pages/layer_projections.py", title="Layer projections", icon=":material/scatter_plot:"),
    st.Page("app_pages/reports.py", title="Reports", icon=":material/description:"),
    st.Page("app_pages/syntax.py", title="Syntax", icon=":material/account_tree:"),
]
page = st.navigation(PAGES)

with st.sidebar:
    st.subheader("biLM")
    default = default_model_spec()
    names = [default] + [n for n in model_names() if n != default] + [OTHER_DIRECTORY]
    choice = st.selectbox("Model", names, key="model_choice",
                          help="A model shipped in data/models/, a published ELMo model downloaded into the data root "
                               "(python -m probing.data download elmo-original), or a directory of your own.")
    spec = choice
    if choice == OTHER_DIRECTORY:
        spec = st.text_input("Model directory", key="model_dir", placeholder="/path/to/my-bilm",
                             max_chars=MAX_PATH_CHARS,
                             help="A directory holding options.json and weights.hdf5 "
                                  "(AllenNLP / bilm-tf layout; lm_weights.hdf5 also works).").strip()
        if not spec:
            st.caption("Type a directory path, then press Enter.")
        elif len(spec) > MAX_PATH_CHARS:
            st.error(f"A directory path of {len(spec):,} characters; at most {MAX_PATH_CHARS:,} are allowed.")
            spec = ""
        elif not model_dir_allowed(spec, visitor_is_local()):
            st.error(REJECTED_DIRECTORY)  # the same words for every path: nothing about it is revealed
            spec = ""
    st.session_state[SPEC_KEY] = spec
    precision_choice()
    device_choice()
    model_card_panel(spec)
    published_models_panel()
    prefetch_figure_scripts()  # plotly's script loads while the page computes; last, so it shifts nothing

page.run()
