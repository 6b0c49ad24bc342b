"""Layer projections: one word's occurrences per layer in 2-D, coloured by sense.

Widgets -> ``probing.senses.projections.project_lemma`` (SemCor occurrences of the lemma, the demo
sentences and the user's own, PCA and/or UMAP per layer, separability per layer on the full
vectors) -> ``probing.figures.projection_figure`` with the user's sentences ringed
(``probing.figures.app.highlight_points``) and ``probing.figures.separability_figure``.
"""

import streamlit as st

from app_pages.data_setup import data_root_caption
from app_pages.display import escape_markdown, figure, table
from app_pages.first_figures import PROJECTION_DEFAULTS, parse_lines, projection, projection_settings
from app_pages.inputs import POS_WORDS, nothing_in_slice, semcor_limit_widget, widen_semcor_button
from app_pages.model_choice import chosen_model_language
from app_pages.running import require_model, semcor_lemma_index, show_failure
from app_pages.serving import check_labelled_text
from elmo_model.models.names import is_english  # light: no torch
from probing.context.playground import demo_set_names, load_demo_set  # light: no torch until a model embeds
from probing.figures import projection_figure, separability_figure
from probing.figures.app import highlight_points, projection_verdict, wilson_interval

TYPED = "type a lemma…"
LEMMAS = ["bank", "play", "bark", TYPED]
METHODS = {"pca": "PCA", "umap": "UMAP (slower; the first run compiles for ~15 s)", "both": "UMAP and PCA"}
FIGURE_ROWS = {"pca": ("pca",), "umap": ("umap",), "both": ("umap", "pca")}


def _lemma_changed() -> None:
    """A new lemma: drop the typed lines that do not use it (they belonged to the old one)."""
    lemma = (st.session_state.pj_typed if st.session_state.pj_choice == TYPED else st.session_state.pj_choice)
    word = lemma.strip().replace("_", " ").casefold()
    if not word:  # "type a lemma…" chosen, nothing typed yet: keep the lines until there is a lemma
        return
    lines = [line for line in str(st.session_state.pj_text).splitlines() if line.strip()]
    kept = [line for line in lines if word in line.rpartition("|")[0 if "|" in line else 2].casefold()]
    st.session_state.pj_text = "\n".join(kept)
    st.session_state.pj_dropped = (len(lines) - len(kept), lemma.strip())


def _init_state() -> None:
    for key, value in PROJECTION_DEFAULTS.items():
        st.session_state.setdefault(key, value)


def _squeezed(text: str) -> str:
    return "".join(text.split())


def _show(proj, shown: tuple, typed: list[str]) -> None:
    """``shown``: the figure's rows ("umap", "pca"); ``typed``: the user's own sentences (ringed)."""
    fig = projection_figure(proj, methods=shown)
    typed_keys = {_squeezed(t) for t in typed}
    mine = [i for i, p in enumerate(proj.points) if p.source == "user" and _squeezed(p.sentence) in typed_keys]
    highlight_points(fig, proj, shown, mine)
    figure(fig, f"projection-{proj.lemma}", key="projections_fig_scatter")
    st.markdown(
        "Each point is one occurrence of the word; colours are senses (WordNet sense keys: SemCor's, "
        "the demo sentences', and your labels when they name a key; other labels get their own "
        "colour); your own sentences are ringed with a star. "
        "Hover a point to read its sentence. Layer 0 sees only the spelling, so all occurrences "
        "spelled alike fall on one point; in the LSTM layers the context moves them apart. Marker "
        "shapes are word forms (the key below the figure): a cluster of one shape is a form "
        "(\"banks\", \"played\"), not a sense.")
    for layer in proj.layers:
        if layer.note:
            st.caption(escape_markdown(layer.note))
    st.subheader("Sense separability per layer")
    st.markdown(
        "Computed on the full vectors, not on the 2-D picture: leave-one-out 1-nearest-neighbour "
        "sense accuracy (each occurrence takes the sense of its most similar other occurrence; "
        "equal vectors are ties, settled by the commonest sense among them), against always "
        "guessing the commonest sense; and the silhouette of the sense groups (−1…1, higher = "
        "tighter, better separated senses). **Read the SemCor-only columns:** over SemCor and "
        "typed sentences together, 1-NN can also tell the *sources* apart (SemCor's prose vs short "
        "typed sentences), which is not sense.")
    figure(separability_figure([proj]), f"separability-{proj.lemma}", key="projections_fig_separability")
    pct = lambda x: None if x is None else round(100 * x, 1)  # noqa: E731
    rows = []
    for l in proj.layers:
        row = {"layer": l.layer}
        if l.semcor_loo_1nn_accuracy is not None:
            low, high = wilson_interval(l.semcor_loo_1nn_accuracy, l.semcor_n)
            row.update({"SemCor only: 1-NN (%)": pct(l.semcor_loo_1nn_accuracy),
                        "SemCor only: 95% interval (Wilson)": f"{100 * low:.1f} – {100 * high:.1f}",
                        "SemCor only: majority sense (%)": pct(l.semcor_majority_baseline),
                        "SemCor occurrences": l.semcor_n})
        row.update({"all points: 1-NN (%)": pct(l.loo_1nn_accuracy), "all points: majority sense (%)": pct(l.majority_baseline),
                    "silhouette": None if l.silhouette is None else round(l.silhouette, 3),
                    "distinct points": l.n_distinct, "PCA variance (%)": round(100 * sum(l.pca_explained), 1)})
        rows.append(row)
    table(rows, hide_index=True, width="stretch")
    semcor_senses = {p.sense for p in proj.points if p.source == "semcor" and p.sense}
    if len(semcor_senses) == 1:
        st.caption(f"This SemCor slice holds only one sense of '{escape_markdown(proj.lemma)}' among its SemCor "
                   "occurrences: no within-SemCor score (pick a larger slice of SemCor sentences).")
    verdict = projection_verdict(proj)
    if verdict is not None:
        (st.success if verdict[0] else st.warning)(verdict[1])
    for note in proj.notes:
        st.caption(escape_markdown(note))
    st.download_button("Download the projection (JSON)", data=proj.to_json(),
                       file_name=f"projection-{proj.lemma}.json", mime="application/json")


# --------------------------------------------------------------------------------------------
# The page
# --------------------------------------------------------------------------------------------

st.title("Layer projections: where do the senses come apart?")
st.markdown(
    "Pick a word. Its sense-tagged occurrences in SemCor (and the sentences you add) are embedded, "
    "and every layer's vectors are projected to two dimensions side by side. If a layer encodes "
    "the word's sense, occurrences of one sense gather and the senses separate.")
data_root_caption()
_init_state()
language = chosen_model_language()
english = is_english(language)  # SemCor and the demo sentences are English
left, right = st.columns([1, 2])
with left:
    st.selectbox("Lemma", LEMMAS, key="pj_choice", persist_state="session", on_change=_lemma_changed)
    if st.session_state.pj_choice == TYPED:
        st.text_input("Your lemma", key="pj_typed", max_chars=60, persist_state="session",
                      placeholder="e.g. line, interest, run, take_place", on_change=_lemma_changed)
    a, b = st.columns(2)
    a.selectbox("Part of speech", ["any", "NOUN", "VERB", "ADJ", "ADV"], key="pj_pos", persist_state="session")
    b.selectbox("Projection", list(METHODS), key="pj_method", format_func=METHODS.get, persist_state="session")
    st.checkbox("SemCor occurrences", key="pj_semcor", persist_state="session", disabled=not english)
    st.slider("At most this many SemCor occurrences", 20, 500, step=10, key="pj_max", persist_state="session",
              help="A seeded random sample when SemCor has more.")
    limit = semcor_limit_widget("pj_semcor_limit")
with right:
    st.checkbox("Add the labelled demo sentences (bank, play, bark)", key="pj_demo", persist_state="session",
                disabled=not english)
    if not english:
        st.caption(f"SemCor and the demo sentences are English and the chosen model reads "
                   f"{escape_markdown(language)}: only your own sentences are projected.")
    st.text_area("Your sentences: one a line; end a line with ' | label' to give its sense", key="pj_text",
                 height=150, persist_state="session",
                 help="Each occurrence of the lemma (or an inflection: banks, played) in a line becomes a "
                      "point, ringed in the figure. Up to 32 lines. A label is a WordNet sense key "
                      "(bank%1:17:01::) or a demo set's sense name (river, money), which stands for "
                      "its key: then your points share SemCor's colour for that sense. Changing the "
                      "lemma drops the lines that do not use the new one.")
    dropped, dropped_for = st.session_state.pop("pj_dropped", (0, ""))
    if dropped:
        st.caption(f"{dropped} line(s) that do not use '{escape_markdown(dropped_for)}' were removed.")

lemma = (st.session_state.pj_typed if st.session_state.pj_choice == TYPED else st.session_state.pj_choice).strip()
try:  # before any work: a long label would be copied into every hover entry of every figure
    check_labelled_text(str(st.session_state.pj_text), "Your sentences")
except ValueError as err:
    st.warning(escape_markdown(err))
    st.stop()
typed, labels, notes = parse_lines(st.session_state.pj_text)
for note in notes:
    st.caption(escape_markdown(note))
model = require_model()
if not lemma:
    st.info("Type a lemma to project (one word, or words joined by _ for a multiword lemma).")
    st.stop()
own_demo = load_demo_set(lemma.lower()) if english and lemma.lower() in demo_set_names() else None
demo = own_demo if st.session_state.pj_demo else None
if st.session_state.pj_demo and english and demo is None:
    st.caption(f"No demo sentences for '{escape_markdown(lemma)}' (there are sets for {', '.join(demo_set_names())}).")
use_semcor = bool(st.session_state.pj_semcor) and english
if not use_semcor and demo is None and not typed:
    st.info("Choose at least one source of occurrences: SemCor, the demo sentences, or your own sentences.")
    st.stop()
method = st.session_state.pj_method
methods = ("pca", "umap") if method in ("umap", "both") else ("pca",)
settings = projection_settings(model, lemma, None if st.session_state.pj_pos == "any" else st.session_state.pj_pos,
                               demo, own_demo, typed, labels, int(st.session_state.pj_max), methods, use_semcor, limit)
try:
    # the lemma's own SemCor sentences, unless the slice's whole index is built: seconds, not minutes
    index = semcor_lemma_index(model, limit, lemma) if settings["semcor"] else None
    if settings["semcor"] and (index is None or len(index.lemma_rows(lemma, settings["pos"])) == 0):
        # the slice has no SemCor point to draw: say so with the page's controls, offer a wider slice
        pos = settings["pos"]
        st.warning(escape_markdown(nothing_in_slice(
            f"a sense-tagged '{lemma}'" + (f" as {POS_WORDS[pos]}" if pos in POS_WORDS else ""), limit,
            ("set Part of speech to any",) if pos else ())))
        widen_semcor_button(limit, "pj_widen")
        if not settings["sentences"]:
            st.stop()
        index = None  # the demo's and your sentences' points only
    proj = projection(model, settings, index)
except Exception as err:
    show_failure(err, f"Projecting '{lemma}'")
else:
    _show(proj, FIGURE_ROWS[method], typed)
