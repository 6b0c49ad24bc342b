"""Playground: contextual vs static embeddings of one word across sentences.

Widgets -> ``probing.context.playground.explore_word`` (one call, cached:
``first_figures.playground_view``) -> plotly figures. The widgets and texts paint first; the model
load, the embedding and the anisotropy baseline are jobs of the server's queue, each behind its
progress box.
"""

import logging

import plotly.graph_objects as go
import streamlit as st
from plotly.subplots import make_subplots

from app_pages.attribution_panel import playground_attribution
from app_pages.data_setup import data_root
from app_pages.display import baseline_caption, escape_markdown, figure, table
from app_pages.first_figures import PLAYGROUND_DEMO, playground_view
from app_pages.jobs import QueueFull
from app_pages.model_choice import chosen_model_language, what_this_model_shows
from app_pages.running import anisotropy_baseline, require_model, show_failure
from app_pages.serving import check_labelled_text
from elmo_model.models.names import is_english  # light: no torch
from probing.context.playground import (contexts_cap_note, demo_set_names, load_demo_set, parse_labelled,
                                       part_of_speech_confound, word_form_confound)
from probing.tagging.pos_tagger import tagged_confound, tagger_for

log = logging.getLogger(__name__)

OWN_SENTENCES = "my own sentences"
AUTO_FOCUS = -1  # "the first sentence that holds the word"
COLORSCALE = "Viridis"  # perceptually uniform, readable on light and dark backgrounds


# --------------------------------------------------------------------------------------------
# Widgets
# --------------------------------------------------------------------------------------------

def _use_demo() -> None:
    """The demo picker changed: put its labelled sentences and word in the text boxes."""
    name = st.session_state.pg_demo
    if name != OWN_SENTENCES:
        demo = load_demo_set(name)
        st.session_state.pg_text = demo.text
        st.session_state.pg_word = demo.word
        st.session_state.pg_focus = AUTO_FOCUS


def _edited() -> None:
    """The sentences or the word were edited: once they are no longer the demo set's, the
    picker says so (it must not go on naming a demo word the boxes no longer hold)."""
    name = st.session_state.pg_demo
    if name != OWN_SENTENCES:
        demo = load_demo_set(name)
        if (st.session_state.pg_text.strip() != demo.text
                or st.session_state.pg_word.strip().casefold() != demo.word.casefold()):
            st.session_state.pg_demo = OWN_SENTENCES


def _init_state() -> None:
    if "pg_demo" not in st.session_state:
        names = demo_set_names()
        st.session_state.pg_demo = PLAYGROUND_DEMO if PLAYGROUND_DEMO in names else (names[0] if names else OWN_SENTENCES)
        if st.session_state.pg_demo != OWN_SENTENCES:
            _use_demo()
    st.session_state.setdefault("pg_text", "")
    st.session_state.setdefault("pg_word", "")
    st.session_state.setdefault("pg_focus", AUTO_FOCUS)


def _load_demo(name: str) -> None:
    st.session_state.pg_demo = name
    _use_demo()


def _part_of_speech_guard(labels: list, result, language: str) -> None:
    """A warning when the senses follow part of speech (from the demo set's WordNet keys, labels
    that are keys or end in "(noun)", "(verb)"..., or else, for an English model, a tagger's reading
    of each occurrence), with the shipped set of this word (its senses share one) one click away."""
    demo = None if st.session_state.pg_demo == OWN_SENTENCES else load_demo_set(st.session_state.pg_demo)
    keys = [(demo.key_for_label(label) if demo else None) or label for label in labels]
    warning = part_of_speech_confound(labels, keys)
    if warning is None and demo is None and is_english(language):
        warning = _tagged_guard(result)
    if warning is None:
        return
    st.warning(escape_markdown(warning))
    shipped = result.word.casefold()
    if shipped in demo_set_names() and st.session_state.pg_demo != shipped:
        st.button(f"Compare with the shipped '{shipped}' set (part of speech held fixed)", key="pg_pos_fixed",
                  on_click=_load_demo, args=(shipped,))


def _tagged_guard(result) -> str | None:
    """The part-of-speech confound as a tagger counted from EWT reads each occurrence of the typed
    sentences (None without EWT in the data root)."""
    try:
        tagger = tagger_for(data_root())
    except (OSError, ValueError) as err:
        log.warning("part-of-speech tagger unavailable: %s", err)
        return None
    if tagger is None:
        return None
    tags = {k: tagger.tag(result.tokens[k]) for k in {k for k, _ in result.occurrences}}
    return tagged_confound([result.senses[k] for k, _ in result.occurrences],
                           [tags[k][t] for k, t in result.occurrences])


# --------------------------------------------------------------------------------------------
# Figures (no template colours: Streamlit's theme makes them readable in light and dark)
# --------------------------------------------------------------------------------------------

def _short_layer(name: str) -> str:
    return name.split(" (")[0]


def _layer_heatmaps(matrices, layer_names: list[str], labels: list[str], hover: list, hovertemplate: str,
                    axis_title: str, cmin: float, height: int, texttemplate: str | None = None) -> go.Figure:
    """One square heatmap per layer side by side, one colour scale up to 1, ``labels`` on both axes."""
    index = list(range(len(labels)))
    fig = make_subplots(rows=1, cols=len(layer_names), subplot_titles=layer_names,
                        horizontal_spacing=0.04, shared_yaxes=True)
    for layer, name in enumerate(layer_names):
        fig.add_trace(go.Heatmap(z=matrices[layer], x=index, y=index, coloraxis="coloraxis", customdata=hover,
                                 texttemplate=texttemplate, hovertemplate=hovertemplate, name=name),
                      row=1, col=layer + 1)
    fig.update_layout(
        coloraxis=dict(colorscale=COLORSCALE, cmin=cmin, cmax=1.0,
                       colorbar=dict(title=dict(text="cosine<br>similarity", side="top"))),
        height=height, margin=dict(t=60, b=10))
    fig.update_xaxes(tickvals=index, ticktext=labels, tickangle=-60, tickfont=dict(size=10), title_text=axis_title)
    fig.update_yaxes(tickvals=index, ticktext=labels, tickfont=dict(size=10), autorange="reversed")
    fig.update_yaxes(title_text=axis_title, row=1, col=1)
    return fig


def similarity_figure(result) -> go.Figure:
    """One heatmap per layer of the word's cross-sentence cosine similarity, one colour scale."""
    labels = result.occurrence_labels()
    n = len(labels)
    # Hover shows both sentences; past 24 occurrences just their labels (the figure's JSON
    # grows with n^2 and would reach megabytes).
    sentence_of = [f"S{k + 1}: {result.sentences[k][:80]}" if n <= 24 else labels[i]
                   for i, (k, _) in enumerate(result.occurrences)]
    hover = [[[sentence_of[i], sentence_of[j]] for j in range(n)] for i in range(n)]
    low = float(result.similarity.min()) if n else 0.0
    return _layer_heatmaps(
        result.similarity, result.layer_names, labels, hover,
        "%{customdata[0]}<br>vs %{customdata[1]}<br>cosine %{z:.3f}<extra></extra>",
        f"occurrence of '{result.word}'", cmin=min(low, 0.999), height=300 + 12 * min(n, 40),
        texttemplate="%{z:.2f}" if n <= 8 else None)


BASELINE_NAME = "random words (anisotropy baseline)"


def contrast_figure(result, contrast: dict, baseline: list[float] | None = None) -> go.Figure:
    """Mean similarity within a sense and across senses, per layer, beside the layer's
    anisotropy ``baseline`` (mean cosine of random words in random sentences) when given."""
    layers = [_short_layer(n) for n in result.layer_names]
    bars = [
        go.Bar(x=layers, y=contrast["within"], name="same sense",
               hovertemplate="%{x}: %{y:.3f}<extra>same sense</extra>"),
        go.Bar(x=layers, y=contrast["across"], name="different senses",
               hovertemplate="%{x}: %{y:.3f}<extra>different senses</extra>"),
    ]
    if baseline is not None:
        bars.append(go.Bar(x=layers, y=baseline, name=BASELINE_NAME, marker_color="#9e9e9e",
                           hovertemplate="%{x}: %{y:.3f}<extra>random words, random sentences</extra>"))
    fig = go.Figure(bars)
    low = min(min(contrast["within"]), min(contrast["across"]), *(baseline or []))
    fig.update_layout(barmode="group", height=340, margin=dict(t=30, b=10),
                      legend=dict(orientation="h", y=1.12))
    fig.update_xaxes(title_text="layer")
    fig.update_yaxes(title_text="mean cosine similarity (unitless)",
                     range=[max(-1.0, low - 0.1 * (1 - low) - 0.01), 1.0])
    return fig


def norms_figure(result) -> go.Figure:
    """The word's vector norm per layer, one point per occurrence, grouped by sense."""
    labels = result.occurrence_labels()
    layers = [_short_layer(n) for n in result.layer_names]
    groups: dict[str, list[int]] = {}
    for i, (k, _) in enumerate(result.occurrences):
        groups.setdefault(result.senses[k] or "typed", []).append(i)
    fig = go.Figure()
    for group, members in groups.items():
        fig.add_trace(go.Box(
            x=[layers[j] for j in range(result.n_layers) for _ in members],
            y=[float(result.norms[j, i]) for j in range(result.n_layers) for i in members],
            text=[labels[i] for _ in range(result.n_layers) for i in members],
            name=group, boxpoints="all", jitter=0.4, pointpos=0,
            hovertemplate="%{text}<br>%{x}: norm %{y:.2f}<extra></extra>"))
    fig.update_layout(boxmode="group", height=360, margin=dict(t=30, b=10),
                      legend=dict(orientation="h", y=1.12), showlegend=len(groups) > 1)
    fig.update_xaxes(title_text="layer")
    fig.update_yaxes(title_text="L2 norm of the vector (unitless)", rangemode="tozero")
    return fig


def token_figure(result) -> go.Figure:
    """Token-by-token cosine similarity within the focus sentence, one heatmap per layer."""
    tokens = result.tokens[result.focus_sentence]
    hover = [[[a, b] for b in tokens] for a in tokens]
    return _layer_heatmaps(
        result.token_similarity, result.layer_names, tokens, hover,
        "'%{customdata[0]}' vs '%{customdata[1]}'<br>cosine %{z:.3f}<extra></extra>", "token",
        cmin=-1.0 if result.token_similarity.min() < 0 else 0.0, height=260 + 14 * min(len(tokens), 50))


def _marked(tokens: list[str], positions: list[int]) -> str:
    """The tokens joined by spaces, the target in [brackets]."""
    return " ".join(f"[{t}]" if i in positions else t for i, t in enumerate(tokens))


# --------------------------------------------------------------------------------------------
# The page
# --------------------------------------------------------------------------------------------

st.title("Playground: contextual vs static embeddings")
st.markdown(
    "A static embedding gives a word one vector, whatever the sentence. A biLM gives it a new "
    "vector in every sentence. Type sentences that use the same word in different senses (or "
    "pick a demo set) and watch, layer by layer, how far the word's vectors drift apart.")
what_this_model_shows(("contextual", "senses", "confound"), "here")

_init_state()
left, right = st.columns([3, 1])
with right:
    st.selectbox("Demo set", demo_set_names() + [OWN_SENTENCES], key="pg_demo", on_change=_use_demo,
                 help="Sentences written for this project: bank (river / money), play "
                      "(theatre or music / sport or game), bark (dog / tree). Editing the "
                      "sentences or the word makes them your own.")
    st.text_input("Word to compare", key="pg_word", max_chars=100, on_change=_edited,
                  help="Matched against the tokens, ignoring case.")
with left:
    st.text_area("Sentences, one a line; end a line with `| sense` to label it", key="pg_text", height=250,
                 on_change=_edited,
                 help="Each line is one context (up to 32 lines, 100 tokens each). A label after "
                      "the last `|` names the word's sense in that line, e.g. `We walked along "
                      "the bank. | river`; lines with the same label are compared as the same "
                      "sense. Press Ctrl+Enter or click outside the box to update.")
try:  # before any work: a long label would be copied into every hover entry of every figure
    check_labelled_text(str(st.session_state.pg_text), "Sentences")
except ValueError as err:
    with left:
        st.warning(escape_markdown(err))
    st.stop()
contexts, labels = parse_labelled(st.session_state.pg_text)
cap_note = contexts_cap_note(st.session_state.pg_text)
if cap_note:
    with left:
        st.warning(escape_markdown(cap_note))
focus_options = [AUTO_FOCUS] + list(range(len(contexts)))
if st.session_state.pg_focus not in focus_options:
    st.session_state.pg_focus = AUTO_FOCUS
with right:
    st.selectbox("Sentence for the token-by-token matrix", focus_options, key="pg_focus",
                 format_func=lambda k: "first with the word" if k == AUTO_FOCUS
                 else f"S{k + 1}: {contexts[k][:40]}")

if not contexts:
    st.info("Type at least one sentence (one a line), or pick a demo set.")
    st.stop()
model = require_model()
focus = None if st.session_state.pg_focus == AUTO_FOCUS else st.session_state.pg_focus
try:
    result, test = playground_view(model, tuple(contexts), st.session_state.pg_word, focus, tuple(labels))
except QueueFull as err:  # the server is busy: its one line, as for every job
    show_failure(err, "Embedding the sentences")
    st.stop()
except Exception as err:  # a model that loads but cannot run this input: say so, keep the page
    log.exception("explore_word failed")
    st.error(f"The biLM could not embed these sentences: {type(err).__name__}: {escape_markdown(str(err))}")
    st.stop()

dims = f"{result.n_layers - 1} LSTM layers"
language = chosen_model_language()
st.caption(f"Model: **{escape_markdown(result.model_name)}** ({escape_markdown(language)}; {dims}; layer 0 is the "
           "character CNN). "
           f"Every sentence is embedded on its own, from a zero LSTM state.")
if result.notes:
    st.warning("\n".join(f"- {escape_markdown(note)}" for note in result.notes))

with st.expander("Tokens", expanded=False):
    st.caption("How the project tokenizer split each line; the compared word is in [brackets].")
    table(
        [{"sentence": f"S{k + 1}", "sense": result.senses[k] or "", "tokens": _marked(t, result.positions[k]),
          "word at": ", ".join(str(p + 1 + result.token_offsets[k]) for p in result.positions[k]) or "not found"}
         for k, t in enumerate(result.tokens)],
        hide_index=True, width="stretch")

# the shipped demo sentences are English: a model of another language draws its random words from yours
try:
    baseline = anisotropy_baseline(model, None if is_english(language) or len(contexts) < 2 else tuple(contexts))
except Exception as err:  # a full queue, or a model that cannot run the demo sentences
    show_failure(err, "Measuring the anisotropy baseline")
    st.stop()

if result.occurrences:
    st.subheader(f"How similar is '{escape_markdown(result.word)}' to itself across sentences?")
    st.markdown(
        "Each square compares the word's vector in two sentences (cosine similarity: 1 = same "
        "direction). **Layer 0** is the character CNN: it sees only the spelling, so it is a "
        "static embedding and every pair of identical spellings scores exactly 1.0 (a capitalised "
        "*Bank* is a different spelling). **The LSTM layers** read the whole sentence, so the "
        "word's vectors differ from sentence to sentence; if a layer carries the word's sense, "
        "pairs in the same sense are brighter than pairs across senses (the next chart measures "
        "this when the lines carry sense labels). One colour scale for all panels, so layers compare directly.")
    figure(similarity_figure(result), f"similarity-{result.word}", key="playground_fig_similarity")
    st.caption(escape_markdown(baseline_caption(baseline, result.layer_names)))
    st.subheader("Same sense vs different senses")
    if test is None:
        st.info("This chart is hidden: " + result.contrast_missing_reason())
    else:
        st.markdown(
            "The average of the squares above over pairs with the same sense label and pairs with "
            "different labels. Layer 0 gives one spelling one vector, so its two bars are equal. "
            "A gap between the bars in an LSTM layer is sense information in its vectors (for "
            "this word, in these sentences), but a few sentences give a noisy gap: the table "
            "says how sure it is (bootstrap over sentences; permutation test shuffling the labels "
            f"across sentences, {test.n_resamples:,} draws each). The grey bar is the layer's "
            "anisotropy baseline: two random words in two random sentences score that much.")
        figure(contrast_figure(result, {"within": test.within, "across": test.across}, baseline.cosine),
               f"senses-{result.word}", key="playground_fig_contrast")
        (st.success if any(test.separates(j) for j in range(1, result.n_layers)) else st.warning)(
            escape_markdown(test.verdict(result.layer_names) + " "
                            + test.against_baseline(result.layer_names, baseline.cosine)))
        _part_of_speech_guard(labels, result, language)
        form_warning = word_form_confound([result.senses[k] for k, _ in result.occurrences],
                                          [result.tokens[k][t] for k, t in result.occurrences])
        if form_warning:
            st.warning(escape_markdown(form_warning))
        table([{"layer": _short_layer(name), "same sense": round(test.within[j], 4),
                "different senses": round(test.across[j], 4), "gap": round(test.gap[j], 4),
                "baseline (random words)": round(baseline.cosine[j], 4),
                "95% interval of the gap": f"{test.gap_low[j]:+.4f} to {test.gap_high[j]:+.4f}",
                "permutation p": round(test.p_value[j], 4)}
               for j, name in enumerate(result.layer_names)], hide_index=True, width="stretch")
        st.caption(f"{test.n_same_pairs} same-sense and {test.n_different_pairs} different-sense pairs "
                   f"of occurrences from {test.n_sentences} labelled sentences.")
    st.subheader("Vector length per layer")
    st.markdown(
        "The Euclidean norm of the word's vector in each sentence. Norms differ between layers "
        "(the layers are not on one scale, which is why ELMo learns a weight per layer), while "
        "the cosine similarity above ignores length and compares directions only.")
    figure(norms_figure(result), f"norms-{result.word}", key="playground_fig_norms")
elif result.word:
    st.info(f"'{escape_markdown(result.word)}' is in none of the sentences, so there is nothing to compare. "
            "Check the spelling, or add a sentence that uses it.")

if result.focus_sentence is not None:
    k = result.focus_sentence
    st.subheader(f"Token by token within sentence S{k + 1}")
    st.markdown(
        "Every token against every other token of one sentence. Layer 0 compares spellings only. "
        "In the LSTM layers every token carries the context of the whole sentence, so the "
        "vectors of one sentence tend to point in similar directions and the matrix grows "
        "brighter (Ethayarajh, 2019, calls this intra-sentence similarity). For scale, two random "
        "words in two random sentences score "
        + ", ".join(f"{baseline.cosine[j]:.2f} at {_short_layer(name)}" for j, name in enumerate(result.layer_names))
        + " (the anisotropy baseline).")
    st.caption(escape_markdown(result.sentences[k]))
    figure(token_figure(result), f"tokens-S{k + 1}", key="playground_fig_tokens")
    playground_attribution(model, result)

st.download_button("Download the numbers (JSON)", data=result.to_json(),
                   file_name=f"playground-{result.word or 'tokens'}.json", mime="application/json",
                   help="Every matrix and norm shown here; load it with "
                        "probing.context.playground.PlaygroundResult.from_json. Each figure's camera icon "
                        "saves it as PNG.")
