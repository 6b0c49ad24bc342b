"""Beyond accuracy: how easily a layer gives a property up, what it adds to layer 0, whether the model uses it.

Widgets (a form: nothing runs until *Measure*) -> ``probing.information.run.run_information`` for
one task, one layer and one method -> ``probing.figures`` (the report's figures). A run is kept per
setting (``running.cached_result``); the activation cache makes another layer or method of the same
slice skip the biLM.
"""

import streamlit as st

from app_pages.data_setup import data_root_caption, needs_english_data
from app_pages.display import escape_markdown, figure, table
from app_pages.first_figures import INFORMATION_DEFAULTS, information_run, information_settings
from app_pages.model_choice import model_key
from app_pages.running import lookup_result, require_model, show_failure
from probing.figures import amnesic_figure, conditional_figure, erasure_figure, mdl_figure

TASK_NAMES = {"pos": "Part of speech (UD English-EWT)", "upos": "Universal part of speech (UD English-EWT)",
              "chunk": "Chunking (CoNLL-2000)",
              "lexsample": "Word senses: Senseval-2 lexical sample (hard, interest, line, serve)"}
METHODS = {
    "mdl": "How easily? MDL probing (online codelength)",
    "conditional": "Beyond layer 0? Conditional probing (bits per token)",
    "amnesic": "Does the model use it? Amnesic probing (INLP)",
    "erasure": "What does removing it cost? LEACE, mean projection and INLP, every layer",
}
EXPLAIN = {
    "mdl": ("**What the numbers mean.** Imagine sending the tags of every training word to a friend who already "
            "has the layer's vectors. You send the first few tags plainly, then train a probe on what you sent "
            "and let it guess the next block; a good guess costs few bits. The total is the *online codelength* "
            "(in kbits; *compression* = plain code / online code). A probe can reach the same accuracy by "
            "memorising words, but it then needs many examples first, and pays for them in bits: so the control "
            "labels (a random tag per word type) get a long code where a layer that really holds the property "
            "gets a short one. Accuracy cannot show that difference; codelength can (Voita & Titov 2020)."),
    "conditional": ("**What the numbers mean.** Layer 0 is the character CNN: it sees each word alone, and already "
                    "knows a lot (\"-ly\" words are adverbs). A probe on layer j gets credit for all of that too. "
                    "Conditional probing asks what layer j *adds*: how many bits per word a probe saves when it "
                    "sees layer 0 **and** layer j rather than layer 0 alone (Hewitt et al. 2021). Near 0 means "
                    "the layer only repeats layer 0; the interval is a 95% bootstrap over test sentences."),
    "amnesic": ("**What the numbers mean.** A probe finding a property does not show the model *uses* it. Amnesic "
                "probing removes the property: probe, delete the directions the probe reads, probe again, until a "
                "probe does no better than the commonest tag (INLP). Then: how much worse do probes for the task "
                "do, and, at the top layer, how much worse does the biLM predict the next word? A random removal of "
                "as many directions is the control: removing the property should cost more than that "
                "(Elazar et al. 2021). A model saved without its softmax can only show the probes."),
    "erasure": ("**What the numbers mean.** Three ways to remove a property from the vectors. **LEACE** (Belrose et "
                "al. 2023) is fitted in one step and moves the vectors as little as any linear eraser can; the "
                "**mean projection** deletes the directions between the tags' average vectors; **INLP** deletes the "
                "directions probe after probe. Each should bring a probe down to the commonest tag (dashed), and "
                "the best eraser does so with the least damage: to another task's probe, to the vectors "
                "themselves, and (top layer, a model with its softmax) to the biLM's next-word loss. The x marks "
                "are random removals of as many directions. The page runs every layer, so the layers compare."),
}
TRAIN_SENTENCES = [100, 200, 500, 1000]
LAST_RUN = "information_last_run"


def _init_state(n_layers: int) -> None:
    for key, value in INFORMATION_DEFAULTS.items():
        st.session_state.setdefault(key, value)
    if st.session_state.get("in_layer") is None or st.session_state.in_layer >= n_layers:
        st.session_state.in_layer = min(1, n_layers - 1)


def _show(result, settings: dict) -> None:
    task = result.tasks[0]
    method = settings["method"]
    where = "every layer" if method == "erasure" else f"layer {settings['layer']}"
    st.caption(f"**{escape_markdown(result.model_name)}**, {TASK_NAMES[task.task]}, {where}: "
               f"{task.n_tokens['train']:,} training and {task.n_tokens['test']:,} test tokens; "
               f"{result.seconds.get('total', 0.0):.0f} s.")
    if method == "mdl":
        figure(mdl_figure(task, result.model_name), f"mdl-{task.task}", key="information_fig_mdl")
        code = task.codes[0]
        control = "" if code.control is None else (
            f"; the control labels took {code.control.online_bits / 1000:.1f} kbits ({code.control.compression:.2f}×)")
        st.markdown(f"The task's labels took **{code.task.online_bits / 1000:.1f} kbits** "
                    f"({code.task.compression:.2f}× shorter than the plain code){control}.")
    elif method == "conditional":
        figure(conditional_figure(task, result.model_name), f"conditional-{task.task}",
               key="information_fig_conditional")
        c = task.conditional[0].conditional
        st.markdown(f"Layer {settings['layer']} adds **{c.estimate:.3f} bits per word** beyond layer 0 "
                    f"(95% interval {c.low:.3f} to {c.high:.3f}).")
    elif method == "erasure":
        figure(erasure_figure(task, result.model_name), f"erasure-{task.task}", key="information_fig_erasure")
        table([{"layer": e.layer, "method": o.method, "rank removed": o.rank,
                f"{task.task} after (%)": round(100 * o.task_accuracy, 1),
                "random control (%)": round(100 * o.random_accuracy, 1),
                "majority (%)": round(100 * e.majority, 1), "vectors moved": round(o.mean_squared_change, 3),
                **{f"{t} lost (points)": round(100 * (e.other_original[t] - v["after"]), 1)
                   for t, v in o.other_tasks.items()},
                **({"LM bits added": round(o.lm["after"] - e.lm_original, 3)} if o.lm else {})}
               for e in task.erasure for o in e.outcomes], hide_index=True)
    else:
        figure(amnesic_figure(task, result.model_name), f"amnesic-{task.task}", key="information_fig_amnesic")
        a = task.amnesic[0]
        acc = a.task_accuracy
        st.markdown(f"INLP removed **{a.rank} directions** in {a.iterations} rounds "
                    f"({'down to' if a.reached_majority else 'not yet down to'} the commonest-tag level, "
                    f"{100 * a.majority:.1f}%). A fresh probe: {100 * acc['original']:.1f}% before, "
                    f"{100 * acc['amnesic']:.1f}% after, {100 * acc['random']:.1f}% after the random control.")
        if a.lm is not None:
            lm = a.lm
            st.markdown(f"The biLM's own next-word loss: {lm['original']['mean']:.3f} → "
                        f"**{lm['amnesic']['mean']:.3f}** bits per word (random control {lm['random']['mean']:.3f}).")
        elif a.lm_note:
            st.info(a.lm_note.capitalize() + ".")
    st.markdown(EXPLAIN[method])
    st.download_button("Download the result (JSON)", data=result.to_json(),
                       file_name=f"information-{task.task}-{method}.json", mime="application/json")


st.title("Beyond accuracy: what a layer knows, adds and is used for")
st.markdown(
    "Probe accuracy says a layer *can* be read for a property. Three newer questions, one at a time: "
    "how **easily** it gives the property up, what it **adds** beyond the context-free layer 0, and "
    "whether the model **uses** it.")
data_root_caption()
needs_english_data("UD English-EWT, CoNLL-2000, Senseval-2")
model = require_model()
n_layers = model.config.n_output_layers
_init_state(n_layers)

with st.form("information_form"):
    left, right = st.columns(2)
    with left:
        st.selectbox("Method", list(METHODS), key="in_method", format_func=METHODS.get)
        st.selectbox("Task", list(TASK_NAMES), key="in_task", format_func=TASK_NAMES.get)
    with right:
        st.selectbox("Layer", list(range(n_layers)), key="in_layer",
                     format_func=lambda j: "layer 0 (character CNN)" if j == 0 else f"layer {j} (LSTM {j})",
                     help="Conditional probing needs a layer above 0; amnesic probing measures the language "
                          "model at the top layer.")
        st.selectbox("Training sentences", TRAIN_SENTENCES, key="in_train",
                     help="The first N training sentences (and N/2 dev and test); for the lexical sample, N "
                          "contexts of each word, split 60/20/20. More is slower and steadier.")
        st.number_input("Seed", min_value=0, max_value=10_000, step=1, key="in_seed")
    submitted = st.form_submit_button("Measure", type="primary")

if submitted:
    settings = information_settings(model, st.session_state.in_task, st.session_state.in_method,
                                    st.session_state.in_layer, st.session_state.in_train, st.session_state.in_seed)
    if settings["method"] == "conditional" and settings["layer"] == 0:
        st.warning("Conditional probing measures what a layer adds beyond layer 0: pick layer 1 or above.")
    else:
        try:
            key, _result = information_run(model, settings, f"Measuring: {METHODS[settings['method']]}")
            st.session_state[LAST_RUN] = (key, settings)
        except Exception as err:  # a missing dataset, a refused setting, a model that cannot run
            show_failure(err, "Measuring")

last = st.session_state.get(LAST_RUN)
shown = lookup_result("information", last[0]) if last else None
if shown is not None and last[1]["model"] == model_key(model):
    _show(shown, last[1])
elif not submitted:
    st.info("Pick a method, a task and a layer, then **Measure**. With 200 training sentences a run takes "
            "seconds to a few minutes on a CPU; results are kept, so coming back is instant.")
