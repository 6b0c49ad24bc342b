"""Probes: which layer knows part of speech, chunks, word senses?

Widgets (a form: nothing runs until *Run the probes*) -> ``probing.tagging.suite.run_suite`` for the
sequence-labelling tasks and ``probing.senses.wsd.lexical_sample_probe`` for the Senseval-2 lexical
sample -> ``probing.figures``. A run is kept per setting (``running.cached_result``): running
the same setting again, or coming back to the page, shows it at once; the suite's own on-disk
caches make a changed setting reuse every activation and probe it can.
"""

import streamlit as st

from app_pages.data_setup import data_root_caption, treebank_or_stop
from app_pages.display import escape_markdown, figure, table
from app_pages.first_figures import LEXICAL_SAMPLE, LEXICAL_WORDS, PROBES_DEFAULTS, probes_run, probes_settings
from app_pages.inputs import ALL, SENTENCE_LIMITS, as_limit, limit_label, offered_limits
from app_pages.model_choice import model_key, what_this_model_shows
from app_pages.running import lookup_result, require_model, show_failure
from probing.figures import lexical_sample_figure, selectivity_figure, task_layers_figure
from probing.data.registry import get_treebank
from probing.figures.app import wilson_interval

TASK_NAMES = {
    "pos": "Part of speech (UD English-EWT, PTB tags)",
    "upos": "Universal part of speech (UD English-EWT)",
    "chunk": "Chunking (CoNLL-2000, BIO F1)",
    LEXICAL_SAMPLE: "Word sense: Senseval-2 lexical sample (hard, interest, line, serve)",
}
CONTEXT_LIMITS = [50, 100, 200, 400, 600, ALL]
LAST_RUN = "probes_last_run"  # session state: the key of the run shown (survives page switches)


def _init_state(n_layers: int, tasks: list[str]) -> None:
    for key, value in PROBES_DEFAULTS.items():
        st.session_state.setdefault(key, list(value) if isinstance(value, list) else value)
    if any(t not in tasks for t in st.session_state.pr_tasks):  # another language's model: its treebank's tasks
        st.session_state.pr_tasks = [t for t in st.session_state.pr_tasks if t in tasks] or tasks[:1]
    layers = st.session_state.get("pr_layers")
    if layers is None or any(j >= n_layers for j in layers):  # first visit, or a smaller model
        st.session_state.pr_layers = list(range(n_layers))


def _task_name(task: str, dataset: str | None = None) -> str:
    """The task's title; for a treebank other than EWT (its dataset ``ud_fr_gsd``), that treebank's."""
    if dataset is None or not dataset.startswith("ud_") or dataset == "ud_english_ewt":
        return TASK_NAMES.get(task, task)
    return f"Universal part of speech ({get_treebank(dataset.removeprefix('ud_')).title})"


def _layer_name(j: int) -> str:
    return "layer 0 (character CNN)" if j == 0 else f"layer {j} (LSTM {j})"


def _suite_table(task) -> list[dict]:
    """The numbers behind a task's figure, one row per probe (scores in percent)."""
    pct = lambda x: None if x is None else round(100 * x, 2)  # noqa: E731
    rows = [{"probe": "majority class", "test": pct(task.baselines.majority.estimate),
             "95% interval": _interval(task.baselines.majority)},
            {"probe": "word-conditional majority", "test": pct(task.baselines.word_majority.estimate),
             "95% interval": _interval(task.baselines.word_majority)}]
    for r in task.layers:
        rows.append({"probe": _layer_name(r.layer), "test": pct(r.probe.test.estimate),
                     "95% interval": _interval(r.probe.test), "dev": pct(r.probe.dev_score),
                     "token accuracy": pct(r.probe.test_accuracy),
                     "control accuracy": pct(r.control.test_accuracy) if r.control.kind == "control" else None,
                     "selectivity (points)": pct(r.selectivity) if r.control.kind == "control" else None,
                     "alpha": r.probe.alpha})
    if task.mix is not None:
        for p in task.mix.probes:
            rows.append({"probe": f"scalar mix, seed {p.seed}", "test": pct(p.test.estimate),
                         "95% interval": _interval(p.test), "dev": pct(p.dev_score),
                         "token accuracy": pct(p.test_accuracy), "alpha": p.alpha})
    for p in task.baselines.random_bilm:
        rows.append({"probe": f"random-init biLM, layer {p.layer}", "test": pct(p.test.estimate),
                     "95% interval": _interval(p.test), "dev": pct(p.dev_score), "alpha": p.alpha})
    for ref in task.baselines.reference:
        layer = f" layer {ref.layer}" if ref.layer is not None else ""
        rows.append({"probe": f"published: {ref.system}{layer} ({ref.source})", "test": pct(ref.value),
                     "95% interval": ref.note})
    return rows


def _interval(interval) -> str:
    return f"{100 * interval.low:.2f} – {100 * interval.high:.2f}"


def _lexical_table(lexical) -> list[dict]:
    rows = []
    for w in lexical.words:
        rows.append({"word": w.word, "representation": "majority sense",
                     "accuracy": round(100 * w.majority_accuracy, 1), "test contexts": w.n_test})
        for j, (a, c) in enumerate(zip(w.layer_accuracy, w.control_accuracy)):
            low, high = wilson_interval(a, w.n_test)
            rows.append({"word": w.word, "representation": _layer_name(j), "accuracy": round(100 * a, 1),
                         "95% interval (Wilson)": f"{100 * low:.1f} – {100 * high:.1f}",
                         "control accuracy": round(100 * c, 1), "selectivity (points)": round(100 * (a - c), 1),
                         "test contexts": w.n_test})
    return rows


def _show(result) -> None:
    settings = result["settings"]
    suite, lexical = result["suite"], result["lexical"]
    limit = "all" if settings["limit"] is None else f"the first {settings['limit']:,}"
    st.caption(f"Run on **{escape_markdown(settings['model_name'])}**, {limit} sentences a split, seed "
               f"{settings['seed']}. Scores are on the test split; intervals are 95% bootstrap intervals "
               "over test sentences.")
    if suite is not None:
        for task in suite.tasks:
            st.subheader(_task_name(task.task, task.dataset))
            figure(task_layers_figure(task, suite.model_name), f"probes-{task.task}", key=f"probes_fig_{task.task}")
            best = task.best_layer
            st.markdown(
                f"Best layer on dev: **layer {best.layer}** ({100 * best.probe.test.estimate:.1f}% on test). "
                "Grey lines are what needs no biLM at all (the commonest tag; each word's commonest tag); "
                "the random-init biLM shows what the architecture gives without training; stars are "
                "Peters et al. (2018)'s full-size ELMo on the PTB (other data, other model: a "
                "yardstick, not a target). Click legend entries to show the forward and backward "
                "halves of each LSTM layer.")
            with st.expander(f"{task.task}: the numbers"):
                table(_suite_table(task), hide_index=True, width="stretch")
        if any(r.control.kind == "control" for t in suite.tasks for r in t.layers):
            st.subheader("Selectivity: does the probe read the layer, or memorise words?")
            st.markdown(
                "The same probe trained on *control labels* (Hewitt & Liang, 2019: every word type "
                "gets a random tag) can only memorise words. Selectivity = task accuracy − control "
                "accuracy: high selectivity means the layer itself encodes the property.")
            figure(selectivity_figure(suite), "probes-selectivity", key="probes_fig_selectivity")
        if any(t.mix is not None for t in suite.tasks):
            st.page_link("app_pages/scalar_mix.py", label="See the learned scalar-mix weights s_j",
                         icon=":material/tune:")
        st.download_button("Download the suite result (JSON)", data=suite.to_json(),
                           file_name=f"probes-{suite.model_name}.json", mime="application/json",
                           help="probing.tagging.results.SuiteResult.from_json reads it back; the Reports page "
                                "compares two of them.")
    if lexical is not None:
        st.subheader(TASK_NAMES[LEXICAL_SAMPLE])
        figure(lexical_sample_figure(lexical), "probes-lexical-sample", key="probes_fig_lexical")
        st.markdown(
            "A logistic-regression sense probe per layer on the target word's vector, trained on "
            f"{settings['contexts'] or 'all'} contexts a word (a quarter held out for the test). "
            "Dashed: always guessing the commonest sense. Dotted: the control task (a random sense "
            "per following word), which a probe can only memorise. Every layer is probed.")
        for note in lexical.notes:
            st.caption(escape_markdown(note))
        with st.expander("Lexical sample: the numbers"):
            table(_lexical_table(lexical), hide_index=True, width="stretch")
        st.download_button("Download the lexical-sample result (JSON)", data=lexical.to_json(),
                           file_name="probes-lexical-sample.json", mime="application/json")


# --------------------------------------------------------------------------------------------
# The page
# --------------------------------------------------------------------------------------------

st.title("Probes: what does each layer know?")
st.markdown(
    "A *probe* is a linear classifier trained on one layer's frozen vectors to predict a property "
    "of each word. If a simple probe does well, the layer encodes the property in a readable way. "
    "Peters et al. (2018) found part of speech best in the first LSTM layer and word sense in the "
    "second; check it on your biLM.")
what_this_model_shows(("pos", "control"), "here")
data_root_caption()
treebank = treebank_or_stop("part of speech")
if treebank is not None:
    st.caption(f"The chosen model reads {escape_markdown(treebank.language)}: part of speech is probed on "
               f"{treebank.title} (universal tags, {treebank.licence}); chunking and the lexical sample read English "
               "data and are left out.")
task_options = list(TASK_NAMES) if treebank is None else ["upos"]
model = require_model()
n_layers = model.config.n_output_layers
_init_state(n_layers, task_options)

with st.form("probes_form"):
    left, right = st.columns(2)
    with left:
        st.multiselect("Tasks", task_options, key="pr_tasks",
                       format_func=lambda t: _task_name(t, None if treebank is None else treebank.dataset),
                       persist_state="session")
        st.multiselect("Layers", list(range(n_layers)), key="pr_layers", format_func=_layer_name,
                       persist_state="session",
                       help="Layers to probe for POS, UPOS and chunking (the lexical sample probes all).")
    with right:
        st.selectbox("Sentences per split (POS, chunking)", offered_limits(SENTENCE_LIMITS, "pr_limit"), key="pr_limit",
                     persist_state="session",
                     format_func=lambda n: limit_label(n, "all (slow: minutes to hours)"),
                     help="The first N sentences of train, dev and test. Small slices answer in "
                          "seconds; the full datasets are what a report should use.")
        st.multiselect("Lexical-sample words", list(LEXICAL_WORDS), key="pr_words", persist_state="session")
        st.selectbox("Contexts per word (lexical sample)", CONTEXT_LIMITS, key="pr_contexts",
                     persist_state="session",
                     format_func=lambda n: "all (2,368 – 4,378)" if not n else f"{n:,} (seeded sample)")
    with st.expander("Baselines and settings"):
        a, b, c = st.columns(3)
        a.checkbox("Control task (selectivity)", key="pr_control", persist_state="session")
        a.checkbox("Random-init biLM baseline", key="pr_random", persist_state="session",
                   help="Probes on a biLM of the same shape with random weights (costs a second "
                        "activation pass over a quarter of the training slice).")
        b.checkbox("Forward / backward halves", key="pr_halves", persist_state="session")
        b.number_input("Scalar-mix seeds", min_value=0, max_value=5, step=1, key="pr_mix_seeds",
                       persist_state="session", help="0: no scalar-mix probe.")
        c.number_input("Seed", min_value=0, max_value=10_000, step=1, key="pr_seed", persist_state="session")
    submitted = st.form_submit_button("Run the probes", type="primary")

if submitted:
    tasks, layers = list(st.session_state.pr_tasks), sorted(st.session_state.pr_layers)
    problem = None
    if not tasks:
        problem = "Pick at least one task."
    elif not layers and any(t != LEXICAL_SAMPLE for t in tasks):
        problem = "Pick at least one layer to probe."
    elif LEXICAL_SAMPLE in tasks and not st.session_state.pr_words:
        problem = "Pick at least one lexical-sample word (or leave out the lexical-sample task)."
    if problem:
        st.warning(problem)
    else:
        settings = probes_settings(model, tasks, layers, as_limit(st.session_state.pr_limit), st.session_state.pr_words,
                                   as_limit(st.session_state.pr_contexts), st.session_state.pr_control,
                                   st.session_state.pr_random, st.session_state.pr_halves,
                                   st.session_state.pr_mix_seeds, st.session_state.pr_seed,
                                   None if treebank is None else treebank.code)
        try:
            key, _result = probes_run(model, settings)
            st.session_state[LAST_RUN] = key
        except Exception as err:  # a missing dataset, a refused setting, a model that cannot run
            show_failure(err, "Running the probes")

last = st.session_state.get(LAST_RUN)
shown = lookup_result("probes", last) if last else None
if shown is not None and shown["settings"]["model"] == model_key(model):
    _show(shown)
elif not submitted:
    st.info("Choose tasks and layers, then **Run the probes**. With the default slice (200 sentences "
            "a split) a run takes seconds to a minute; results are kept, so coming back is instant.")
