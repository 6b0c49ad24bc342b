"""Scalar mix: which layers does a task lean on (s_j, gamma), and what if you set s_j yourself?

Three panels, one backend call each:
1. learned s_j and gamma per task (``probing.tagging.suite.run_suite`` with only the scalar-mix probe, or
   the Probes page's last run) -> ``probing.figures.mix_weights_figure``;
2. s_j by hand: sliders -> ``probing.tagging.scalar_mix.explore_mix`` (a probe on the mixed layers
   and the nearest SemCor occurrences of a word) -> ``probing.figures.app.hand_mix_figure``;
3. learned s_j per lemma: ``probing.tagging.scalar_mix.lemma_mixes`` ->
   ``probing.figures.word_senses_figure``.
"""

import streamlit as st

from app_pages.data_setup import data_root, data_root_caption, needs_english_data
from app_pages.display import escape_markdown, figure, table
from app_pages.first_figures import (MAX_QUERY_CHARS, MIX_DEFAULTS, learn_mix, learned_path, mix_task, mix_view,
                                     mix_view_key, model_checksum)
from app_pages.inputs import (
    DEFAULT_SEMCOR_LIMIT,
    SEMCOR_LIMIT_KEY,
    SENTENCE_LIMITS,
    as_limit,
    limit_label,
    nothing_in_slice,
    offered_limits,
    semcor_limit_widget,
    single_line,
    widen_semcor_button,
)
from app_pages.model_choice import model_key
from app_pages.running import (
    cache_key,
    cached_result,
    has_resource,
    lookup_result,
    require_model,
    semcor_index,
    show_failure,
)
from probing.figures import marked_sentence, mix_weights_figure, word_senses_figure
from probing.figures.app import gamma_figure, hand_mix_figure

MAX_SENTENCES = 1000  # probing.tagging.scalar_mix.MAX_SENTENCES: every layer of these is kept in memory
MIX_TASKS = {"pos": "part of speech (EWT)", "upos": "universal POS (EWT)", "chunk": "chunking (CoNLL-2000)"}
LEARNED_RUN = "mix_learned_run"  # session state: key of this page's last s_j run
PROBES_RUN = "probes_last_run"  # the Probes page's last run (its result holds a suite too)
HAND_ASKED = "mix_hand_asked"  # session state: the visitor asked for the probe on a hand-set mix
MAX_LEMMAS = 8
DEMO_LEMMAS = ["bank", "play", "bark"]


def _init_state(n_layers: int) -> None:
    defaults = {**MIX_DEFAULTS, "mx_source": "demo", "mx_lemmas": ["bank", "play"], "mx_more": "", "mx_pos": "any",
                "mx_max_occ": 300, "mx_min_sense": 5, "mx_seeds": 2, "mx_folds": 3}
    for key, value in defaults.items():
        st.session_state.setdefault(key, list(value) if isinstance(value, list) else value)
    for j in range(n_layers):
        st.session_state.setdefault(f"mx_s{j}", round(1.0 / n_layers, 2))
    # a model with fewer layers than the last one: forget sliders that no longer exist
    for key in [k for k in st.session_state if isinstance(k, str) and k.startswith("mx_s")
                and k[4:].isdigit() and int(k[4:]) >= n_layers]:
        del st.session_state[key]


def _set_weights(values) -> None:
    for j, v in enumerate(values):
        st.session_state[f"mx_s{j}"] = float(round(v, 2))


# --------------------------------------------------------------------------------------------
# 1. Learned s_j per task
# --------------------------------------------------------------------------------------------


def _learned_suite(model):
    """The latest suite with a scalar mix: the one this browser tab learned, else one any visitor
    (or an earlier server) learned for the form's settings (kept on disk), else the Probes page's."""
    key = st.session_state.get(LEARNED_RUN)
    suite = lookup_result("mix_learned", key) if key else None
    if suite is None and st.session_state.mx_learn_tasks:
        # lazy: probing.tagging.scalar_mix imports torch and sklearn (first paint)
        from probing.tagging.scalar_mix import load_learned_mix

        suite = load_learned_mix(learned_path(model, list(st.session_state.mx_learn_tasks),
                                               as_limit(st.session_state.mx_learn_limit)))
    if suite is None and st.session_state.get(PROBES_RUN):
        shown = lookup_result("probes", st.session_state[PROBES_RUN])
        suite = shown["suite"] if shown else None
    if suite is not None and (suite.model_identity != model_checksum(model)
                              or not any(t.mix is not None for t in suite.tasks)):
        return None
    return suite


def learned_panel(model) -> object:
    st.header("1. Learned s_j and γ per task")
    st.markdown(
        "ELMo hands a downstream task  γ · Σ_j s_j · h_j: a softmax-normalised weight s_j per layer "
        "and one scale γ, learned with the task. Large s_j on a layer means the task leans on it. "
        "The bars are the mean over three seeds; the whiskers their standard deviation (a wide "
        "whisker: s_j is not well determined by the data).")
    with st.form("mix_learn_form"):
        a, b = st.columns(2)
        a.multiselect("Tasks", list(MIX_TASKS), key="mx_learn_tasks", format_func=MIX_TASKS.get,
                      persist_state="session")
        b.selectbox("Sentences per split", offered_limits(SENTENCE_LIMITS, "mx_learn_limit"), key="mx_learn_limit",
                    persist_state="session",
                    format_func=lambda n: limit_label(n, "all (slow)"))
        learn = st.form_submit_button("Learn s_j")
    if learn:
        tasks = list(st.session_state.mx_learn_tasks)
        if not tasks:
            st.warning("Pick at least one task.")
        else:
            try:
                key, _suite = learn_mix(model, tasks, as_limit(st.session_state.mx_learn_limit))
                st.session_state[LEARNED_RUN] = key
            except Exception as err:
                show_failure(err, "Learning s_j")
    suite = _learned_suite(model)
    if suite is None:
        st.info("No learned s_j yet: **Learn s_j** here, or run the probes (with scalar-mix seeds) on the Probes page.")
        return None

    weights_column, gamma_column = st.columns([3, 1])
    with weights_column:
        figure(mix_weights_figure(suite), "learned-s_j", key="mix_fig_learned")
    with gamma_column:
        figure(gamma_figure(suite), "learned-gamma", key="mix_fig_gamma")
    rows = []
    for t in suite.tasks:
        if t.mix is None:
            continue
        best = t.best_layer
        rows.append({"task": t.task, **{f"s_{j}": f"{m:.3f} ± {s:.3f}" for j, m, s in
                                        zip(t.mix.layers, t.mix.weights_mean, t.mix.weights_std)},
                     "γ": f"{t.mix.gamma_mean:.2f} ± {t.mix.gamma_std:.2f}",
                     "mix score (%)": round(100 * sum(p.test.estimate for p in t.mix.probes) / len(t.mix.probes), 2),
                     "best single layer (%)": f"layer {best.layer}: {100 * best.probe.test.estimate:.2f}",
                     "test sentences": t.n_sentences.get("test", 0)})
    table(rows, hide_index=True, width="stretch")
    return suite


# --------------------------------------------------------------------------------------------
# 2. s_j by hand
# --------------------------------------------------------------------------------------------


FIRST_LOOK = 50  # sentences a split the figure is first drawn from while a larger slice is embedded


def _first_look(model, task: str, limit: int, weights: list[float], learned):
    """While the chosen slice is not in memory yet: the figure from the first :data:`FIRST_LOOK`
    sentences of each split, drawn at once and replaced when the whole slice is ready (its first
    sentences are not embedded again: the activation store copies them). Returns its slot."""
    slot = st.empty()
    if limit <= FIRST_LOOK or has_resource("mix_task", cache_key(model_key(model), task, limit, str(data_root())),
                                           large=True):
        return slot
    # lazy: probing.tagging.scalar_mix imports torch and sklearn (first paint)
    from probing.tagging.scalar_mix import explore_mix

    try:
        data = mix_task(model, task, FIRST_LOOK)
        key = cache_key(model_key(model), task, FIRST_LOOK, str(data_root()), [round(w, 4) for w in weights])
        view = cached_result("mix_view_first", key, "Training the probe on your mix (first sentences)",
                             lambda progress: explore_mix(data, weights))
    except Exception:  # noqa: BLE001 (the whole slice's run below says what went wrong)
        return slot
    with slot.container():
        figure(hand_mix_figure(view, *(learned or (None, None))), f"hand-mix-{task}", key="mix_fig_hand_first")
        st.caption(f"A first look from the first {FIRST_LOOK} sentences of each split; the {limit:,} you chose "
                   "are being embedded below, and this figure is replaced when they are.")
    return slot


def _hand_controls(n_layers: int, learned: tuple[list[float], list[float]] | None) -> int | None:
    """Panel 2's widgets: task, sentences, the query, one slider per s_j and the preset buttons;
    returns the SemCor slice chosen."""
    left, right = st.columns([1, 2])
    with left:
        st.selectbox("Task for the probe", list(MIX_TASKS), key="mx_task", format_func=MIX_TASKS.get,
                     persist_state="session")
        st.selectbox("Sentences per split", [n for n in SENTENCE_LIMITS if n and n <= MAX_SENTENCES],
                     key="mx_limit", persist_state="session", format_func=limit_label,
                     help="Every layer of these sentences is held in memory while you move the sliders.")
    with right:
        st.text_input("Sentence for the nearest neighbours", key="mx_sentence", persist_state="session")
        a, b, c = st.columns([2, 1, 2])
        a.text_input("Word", key="mx_word", persist_state="session", max_chars=100)
        b.number_input("Neighbours", 1, 20, key="mx_k", persist_state="session")
        with c:
            limit = semcor_limit_widget("mx_semcor_limit")
    for j, column in enumerate(st.columns(n_layers)):
        column.slider(f"s_{j}: layer {j}" + (" (character CNN)" if j == 0 else f" (LSTM {j})"), 0.0, 1.0,
                      step=0.01, key=f"mx_s{j}", persist_state="session")
    buttons = st.columns(2 + n_layers)
    buttons[0].button("Uniform", on_click=_set_weights, args=([1.0 / n_layers] * n_layers,), key="mx_uniform",
                      width="stretch")
    buttons[1].button("Learned s_j", on_click=_set_weights, args=(learned[0] if learned else [],),
                      disabled=learned is None, key="mx_use_learned", width="stretch",
                      help="The s_j the scalar-mix probe learned for this task (panel 1)."
                      if learned else "Learn s_j for this task in panel 1 first.")
    for j in range(n_layers):
        buttons[2 + j].button(f"Layer {j} only", on_click=_set_weights, key=f"mx_only{j}", width="stretch",
                              args=([1.0 if i == j else 0.0 for i in range(n_layers)],))
    return limit


def _show_mix_neighbours(view, sentence: str, word: str, not_in_slice: bool, limit: int | None) -> None:
    """The SemCor occurrences nearest the query word under the mix, or why there are none."""
    if not sentence or not word:
        st.info("Type a sentence and one of its words to see its nearest SemCor occurrences under your mix.")
    elif not_in_slice or (view.lemma and not view.neighbours):
        # the slice holds no sense-tagged occurrence of the word: say so with this panel's controls
        name = view.lemma or word.lower()
        st.warning(escape_markdown(nothing_in_slice(f"a sense-tagged '{name}' to compare with", limit,
                                                    ("type another word",))))
        widen_semcor_button(limit, "mx_widen")
    elif view.neighbours:
        st.subheader(f"Nearest SemCor occurrences of '{escape_markdown(view.word)}' (lemma "
                     f"{escape_markdown(view.lemma)}) under your mix")
        table([{"rank": n.rank, "cosine": round(n.similarity, 3),
                       "sentence": marked_sentence(n.sentence, n.start, n.end), "sense": n.sense_key, "gloss": n.gloss}
                      for n in view.neighbours], hide_index=True, width="stretch")
        st.caption(f"Searched {view.n_searched:,} sense-tagged occurrences of the lemma. Each layer's vector is "
                   "scaled to unit length before mixing, so s_j is the share of each layer's direction.")
    for note in view.notes:
        if "no neighbours" not in note or not view.lemma:  # a lemma without neighbours is said above
            (st.warning if "no neighbours" in note else st.caption)(escape_markdown(note))


def hand_panel(model, n_layers: int, suite) -> None:
    st.header("2. Set s_j yourself")
    st.markdown(
        "Move the sliders to mix the layers yourself (they are normalised to sum to 1). A linear "
        "probe is trained on the mixed vectors and scored on test, beside each layer alone and the "
        "uniform mix. Below, the SemCor occurrences nearest to a word under your mix: watch the "
        "senses of the neighbours change as weight moves between layers.")
    learned = None
    task = st.session_state.mx_task
    if suite is not None and any(t.task == task and t.mix is not None for t in suite.tasks):
        mix = suite.task(task).mix
        if list(mix.layers) == list(range(n_layers)):
            learned = (list(mix.weights_mean), list(mix.weights_std))
    limit = _hand_controls(n_layers, learned)

    weights = [float(st.session_state[f"mx_s{j}"]) for j in range(n_layers)]
    if sum(weights) <= 0:
        st.warning("Every s_j is 0: give at least one layer a weight above 0.")
        return
    sentence = single_line(st.session_state.mx_sentence, MAX_QUERY_CHARS)
    word = st.session_state.mx_word.strip()
    if len(" ".join(st.session_state.mx_sentence.split())) > MAX_QUERY_CHARS:
        st.caption(f"Only the first {MAX_QUERY_CHARS:,} characters of the sentence are used.")
    task, mix_limit = st.session_state.mx_task, st.session_state.mx_limit
    k = int(st.session_state.mx_k)
    prepared = lookup_result("mix_view", mix_view_key(model, task, mix_limit, weights, sentence, word, k, limit))
    if prepared is None and not st.session_state.get(HAND_ASKED):
        # nothing trains before it is asked for: a prepared server shows the opening mix at once
        st.info("The probe on your mix trains on every layer of the chosen sentences (seconds to a minute).")
        if not st.button("Train the probe on this mix", key="mx_train", type="primary"):
            return
        st.session_state[HAND_ASKED] = True  # from now on the sliders retrain at once
    first = st.empty() if prepared is not None else _first_look(model, task, mix_limit, weights, learned)
    try:
        view, not_in_slice = mix_view(model, task, mix_limit, weights, sentence, word, k, limit)
    except Exception as err:
        show_failure(err, "Scoring your mix")
        return

    first.empty()
    figure(hand_mix_figure(view, *(learned or (None, None))), f"hand-mix-{task}", key="mix_fig_hand")
    best = max(range(n_layers), key=lambda j: view.single_layer[j].estimate)
    delta = 100 * (view.score.estimate - view.single_layer[best].estimate)
    st.markdown(f"Your mix scores **{100 * view.score.estimate:.1f}%** "
                f"({delta:+.1f} points vs the best single layer, layer {best}).")
    _show_mix_neighbours(view, sentence, word, not_in_slice, limit)


# --------------------------------------------------------------------------------------------
# 3. Learned s_j per lemma
# --------------------------------------------------------------------------------------------


def _typed_lemmas(text: str) -> list[str]:
    return [part.strip() for part in text.replace(";", ",").split(",") if part.strip()]


def _lemma_form(options: list[str]) -> bool:
    """Panel 3's form: lemmas (picked or typed), part of speech, occurrences, seeds and folds;
    True when it was submitted."""
    with st.form("mix_lemma_form"):
        a, b = st.columns(2)
        with a:
            st.multiselect("Lemmas", options, key="mx_lemmas", persist_state="session",
                           help="bank, play, bark, then the SemCor slice's commonest words with 2+ senses.")
            st.text_input("More lemmas (comma-separated)", key="mx_more", persist_state="session",
                          placeholder="e.g. line, serve, interest")
            st.selectbox("Part of speech (SemCor)", ["any", "NOUN", "VERB", "ADJ", "ADV"], key="mx_pos",
                         persist_state="session")
        with b:
            c, d = st.columns(2)
            c.number_input("Max occurrences a lemma", 20, 2000, step=20, key="mx_max_occ", persist_state="session")
            d.number_input("Min occurrences a sense", 2, 50, key="mx_min_sense", persist_state="session",
                           help="Rarer senses are merged into 'other' (or dropped); the result says which.")
            c.number_input("Seeds", 1, 5, key="mx_seeds", persist_state="session")
            d.number_input("Folds", 2, 10, key="mx_folds", persist_state="session")
        run = st.form_submit_button("Learn s_j per lemma")
    return run


def _show_lemma_mixes(comparison) -> None:
    """The learned s_j per lemma: refusals, the bar figure, the table, each lemma's notes, the JSON."""
    for lemma, reason in comparison.refused.items():
        st.warning(f"**{escape_markdown(lemma[:60])}**: {escape_markdown(reason)}")
    if comparison.results:
        figure(word_senses_figure(comparison), "learned-s_j-per-lemma", key="mix_fig_lemmas")
        table([{"lemma": r.lemma + (f" ({r.pos})" if r.pos else ""), "source": r.source,
                       "occurrences": sum(r.senses.values()), "senses": len(r.senses),
                       **{f"s_{j}": f"{m:.2f} ± {s:.2f}"
                          for j, (m, s) in enumerate(zip(r.weights_mean, r.weights_std))},
                       "mix accuracy (%)": round(100 * r.mix_accuracy_mean, 1),
                       "best layer alone": f"layer {r.best_layer}: {100 * r.layer_accuracy_mean[r.best_layer]:.1f}%",
                       "majority sense (%)": round(100 * r.majority_accuracy_mean, 1)}
                      for r in comparison.results], hide_index=True, width="stretch")
        for r in comparison.results:
            for note in r.notes:
                st.caption(f"{escape_markdown(r.lemma)}: {escape_markdown(note)}")
        st.download_button("Download the per-lemma result (JSON)", data=comparison.to_json(),
                           file_name="learned-s_j-per-lemma.json", mime="application/json")


def lemma_panel(model) -> None:
    st.header("3. Which layers separate the senses of a word?")
    st.markdown(
        "For one word at a time, s_j and γ are learned jointly with a linear *sense* classifier on "
        "that word's sense-tagged occurrences (cross-validated over seeds × folds). The bars show "
        "where the sense information sits; the line is each layer's sense accuracy on its own. "
        "Source: SemCor (any lemma it has) or the labelled demo sentences (bank, play, bark).")
    source = st.radio("Occurrences from", ["semcor", "demo"], key="mx_source", horizontal=True,
                      persist_state="session",
                      format_func={"semcor": "SemCor (the slice chosen above)", "demo": "demo sentences"}.get)
    options = list(DEMO_LEMMAS)
    index = None
    if source == "semcor":
        try:
            index = semcor_index(model, as_limit(st.session_state.get(SEMCOR_LIMIT_KEY, DEFAULT_SEMCOR_LIMIT)))
            # lazy: probing.tagging.scalar_mix imports torch and sklearn (first paint)
            from probing.tagging.scalar_mix import polysemous_lemmas

            options += [name for name, _n, _s in polysemous_lemmas(index, top=30) if name not in options]
        except Exception as err:
            show_failure(err, "Reading SemCor")
            return
    # a change of source brings lemmas that source has enough of: the demo words, or the SemCor
    # slice's commonest words with two senses (bank has 5 occurrences in SemCor's first 1,000 sentences)
    if st.session_state.setdefault("mx_lemmas_for", source) != source:
        st.session_state.mx_lemmas = options[len(DEMO_LEMMAS):len(DEMO_LEMMAS) + 2] if source == "semcor" \
            else DEMO_LEMMAS[:2]
        st.session_state.mx_lemmas_for = source
    st.session_state.mx_lemmas = [x for x in st.session_state.mx_lemmas if x in options]
    run = _lemma_form(options)
    if run:
        lemmas = list(dict.fromkeys(list(st.session_state.mx_lemmas) + _typed_lemmas(st.session_state.mx_more)))
        if not lemmas:
            st.warning("Pick or type at least one lemma.")
        else:
            if len(lemmas) > MAX_LEMMAS:
                st.warning(f"{len(lemmas)} lemmas given; the first {MAX_LEMMAS} are fitted.")
                lemmas = lemmas[:MAX_LEMMAS]
            settings = dict(source=source, pos=None if st.session_state.mx_pos == "any" else st.session_state.mx_pos,
                            max_occurrences=int(st.session_state.mx_max_occ),
                            min_per_sense=int(st.session_state.mx_min_sense),
                            seeds=list(range(int(st.session_state.mx_seeds))), folds=int(st.session_state.mx_folds))
            key = cache_key(model_key(model), lemmas, settings, str(data_root()),
                            index.n_sentences if index is not None else None)
            # lazy: probing.tagging.scalar_mix imports torch and sklearn (first paint)
            from probing.tagging.scalar_mix import lemma_mixes

            try:
                cached_result("lemma_mixes", key, f"Learning s_j for {len(lemmas)} lemma(s)",
                              lambda progress: lemma_mixes(model, lemmas, index=index, data_root=data_root(),
                                                           progress=progress, **settings))
                st.session_state["mix_lemma_run"] = key
            except Exception as err:
                show_failure(err, "Learning s_j per lemma")
    key = st.session_state.get("mix_lemma_run")
    comparison = lookup_result("lemma_mixes", key) if key else None
    if comparison is None:
        st.info("Pick lemmas, then **Learn s_j per lemma** (a few seconds a lemma).")
        return

    _show_lemma_mixes(comparison)


# --------------------------------------------------------------------------------------------
# The page
# --------------------------------------------------------------------------------------------

st.title("Scalar mix: how a task weighs the layers")
data_root_caption()
needs_english_data("UD English-EWT, CoNLL-2000, SemCor")
model = require_model()
n_layers = model.config.n_output_layers
_init_state(n_layers)
suite = learned_panel(model)
hand_panel(model, n_layers, suite)
lemma_panel(model)
