"""Sense retrieval: the SemCor occurrences a biLM puts next to a word in *your* sentence.

Widgets -> ``probing.senses.retrieval.SenseRetriever.query`` (nearest SemCor occurrences per layer with
sentence, sense and gloss; nearest word types under static embeddings) ->
``probing.figures.app.retrieval_figure`` and tables. On request, ``probing.senses.wsd.evaluate_wsd``
(1-NN WSD per layer on the same SemCor index) -> ``probing.figures.wsd_layers_figure``.
"""

import streamlit as st

from app_pages.data_setup import data_root, data_root_caption
from app_pages.display import escape_markdown, figure, table
from app_pages.first_figures import MAX_QUERY_CHARS, RETRIEVAL_EXAMPLE, RETRIEVAL_K, RETRIEVAL_SCOPE, retrieval_query
from app_pages.inputs import (
    POS_WORDS,
    nothing_in_slice,
    semcor_limit_widget,
    semcor_slice_words,
    single_line,
    widen_semcor_button,
    wider_semcor_limit,
)
from app_pages.model_choice import chosen_model_language, model_key
from app_pages.running import (
    anisotropy_baseline,
    cache_key,
    cached_result,
    lookup_result,
    require_model,
    semcor_index,
    show_failure,
)
from app_pages.serving import check_labelled_text
from elmo_model.models.names import is_english  # light: no torch
from probing.context.playground import parse_labelled  # light: no torch until a model embeds
from probing.figures import marked_sentence, wsd_layers_figure, wsd_sets_figure
from probing.figures.app import retrieval_figure

EXAMPLES = {
    "a stage play (Peters et al. 2018, Table 4)": RETRIEVAL_EXAMPLE,  # the example the page opens with
    "a play in a game (Table 4)": ("Chico Ruiz made a spectacular play on Alusik's grounder.", "play"),
    "the bank of a river": ("We sat on the grassy bank of the river and watched the boats.", "bank"),
    "a bank for money": ("She deposited her wages at the bank on Friday.", "bank"),
}
OWN = "my own sentence"
WSD_RUN = "retrieval_wsd_run"


def _use_example() -> None:
    choice = st.session_state.rt_example
    if choice in EXAMPLES:
        st.session_state.rt_sentence, st.session_state.rt_word = EXAMPLES[choice]


def _init_state() -> None:
    if "rt_example" not in st.session_state:
        st.session_state.rt_example = next(iter(EXAMPLES))
        _use_example()
    for key, value in {"rt_k": RETRIEVAL_K, "rt_scope": RETRIEVAL_SCOPE, "rt_pos": "any", "rt_static_k": 10}.items():
        st.session_state.setdefault(key, value)


def _layer_name(j: int) -> str:
    return "Layer 0 (character CNN: no context)" if j == 0 else f"Layer {j} (LSTM {j})"


def nothing_found(word: str, pos: str | None, limit: int | None, scope: str, own_sentence: bool = False) -> str:
    """Why a query found no SemCor occurrence, and what to change, in the page's own words."""
    what = f"a sense-tagged '{word}'" + (f" as {POS_WORDS[pos]}" if pos in POS_WORDS else "") \
        + (" besides the one your sentence is cut from" if own_sentence else "")
    fixes = ["set Part of speech to any"] if pos else []
    if scope == "lemma" and not pos and wider_semcor_limit(limit) is None:
        fixes.append("set Search to every SemCor word")
    return nothing_in_slice(what, limit, tuple(fixes))


def _show_nothing(word: str, pos: str | None, limit: int | None, scope: str, own_sentence: bool = False) -> None:
    """The empty result: the reason and the fix in words, and the one-click wider slice (no empty axes)."""
    st.warning(escape_markdown(nothing_found(word, pos, limit, scope, own_sentence)))
    widen_semcor_button(limit, "rt_widen")


def _show(result, baseline, limit: int | None, retriever) -> None:
    if not any(layer.neighbours for layer in result.layers):
        own = result.scope == "lemma" and len(retriever.index.lemma_rows(result.lemma, result.pos)) > 0
        _show_nothing(result.lemma, result.pos, limit, result.scope, own_sentence=own)
        return
    marked = " ".join(f"[{t}]" if i == result.token_index else t for i, t in enumerate(result.query_tokens))
    st.caption(f"Query: {escape_markdown(marked)} · lemma **{escape_markdown(result.lemma)}** · searched "
               f"{semcor_slice_words(limit)}")
    figure(retrieval_figure(result), f"retrieval-{result.word}", key="retrieval_fig_neighbours")
    st.markdown(
        "Each dot is one SemCor occurrence among the query word's nearest, coloured by its WordNet "
        "sense. In a layer that encodes sense, the nearest occurrences share the sense of your "
        "sentence. Layer 0 sees only the spelling: every occurrence spelled alike ties, and "
        "tied neighbours of one sense share one marker labelled ×n.")
    contextual, static = st.columns([3, 1])
    with contextual:
        tabs = st.tabs([_layer_name(layer.layer) for layer in result.layers])
        for tab, layer in zip(tabs, result.layers):
            with tab:
                if not layer.neighbours:
                    st.info("No SemCor occurrence to compare with in this slice.")
                    continue
                if layer.cut_is_arbitrary:
                    st.markdown(f"**Ties:** the last of the {len(layer.neighbours)} nearest ties with "
                                f"{layer.n_tied_beyond:,} more occurrence(s) not shown (equal cosine), so "
                                f"which of them are listed is arbitrary and no commonest sense is claimed. "
                                f"Searched {layer.n_searched:,} occurrences.")
                else:
                    verdict = "most neighbours share it" if layer.majority_agrees else "no sense holds a majority"
                    st.markdown(f"Commonest sense among the {len(layer.neighbours)} nearest: "
                                f"**{escape_markdown(layer.majority_sense)}**: "
                                f"{escape_markdown(layer.majority_gloss or '')} ({100 * layer.majority_share:.0f}%; "
                                f"{verdict}). Searched {layer.n_searched:,} occurrences.")
                st.caption(f"Cosine for scale: two random words in random sentences score "
                           f"{baseline.cosine[layer.layer]:.2f} on average at this layer (anisotropy "
                           f"baseline, Ethayarajh 2019); a neighbour's cosine says something only above it.")
                table([{"rank": n.rank, "cosine": round(n.similarity, 3),
                               "sentence": marked_sentence(n.sentence, n.start, n.end), "sense": n.sense_keys[0],
                               "gloss": n.gloss} for n in layer.neighbours],
                             hide_index=True, width="stretch")
    with static:
        st.markdown("**Static embeddings** (one vector per word type, no context): nearest words")
        if not result.static:
            st.caption("No static embedding is available (no vocab.txt beside the model, no word2vec file).")
        for s in result.static:
            st.markdown(f"*{escape_markdown(s.embedding)}*")
            if s.note:
                st.caption(escape_markdown(s.note))
            else:
                table([{"word": w, "cosine": round(v, 3)} for w, v in s.neighbours],
                             hide_index=True, width="stretch")
    for note in result.notes:
        st.caption(escape_markdown(note))
    st.download_button("Download the neighbours (JSON)", data=result.to_json(),
                       file_name=f"retrieval-{result.lemma}.json", mime="application/json")


def _wsd_panel(model, limit) -> None:
    st.header("1-NN word-sense disambiguation per layer")
    st.markdown(
        "Peters et al. (2018, Table 5) disambiguated every word of the standard all-words test sets by "
        "the nearest SemCor sense centroid, per layer: their biLM's layer 2 beat layer 1, and both beat "
        "WordNet's first sense. The same here, with the centroids of the SemCor slice above (a small slice "
        "leaves many words to the first-sense backoff).")
    key = cache_key(model_key(model), limit, str(data_root()))
    run = st.button("Score all-words WSD per layer", key="rt_wsd")
    if run:
        # lazy: probing.senses.wsd imports torch; only when WSD is scored (first paint)
        from probing.senses.wsd import evaluate_wsd

        try:
            index = semcor_index(model, limit)
            cached_result("wsd", key, "Embedding the five evaluation sets and scoring 1-NN WSD",
                          lambda progress: evaluate_wsd(model, data_root(), index=index, progress=progress))
            st.session_state[WSD_RUN] = key
        except Exception as err:
            show_failure(err, "Scoring WSD")
            return
    result = lookup_result("wsd", key) if st.session_state.get(WSD_RUN) == key else None
    if result is None:
        st.caption("Embeds about 1,200 test sentences once per model (cached on disk afterwards).")
        return

    figure(wsd_layers_figure(result), "wsd-layers", key="retrieval_fig_wsd_layers")
    with st.expander("F1 per evaluation set"):
        figure(wsd_sets_figure(result), "wsd-sets", key="retrieval_fig_wsd_sets")
        table(result.table(), hide_index=True, width="stretch")
    for note in result.notes:
        st.caption(escape_markdown(note))
    st.download_button("Download the WSD scores (JSON)", data=result.to_json(), file_name="wsd.json",
                       mime="application/json")


def _own_sentences_tabs(result, baseline) -> None:
    tabs = st.tabs([_layer_name(layer.layer) for layer in result.layers])
    for tab, layer in zip(tabs, result.layers):
        with tab:
            if not layer.neighbours:
                st.info("None of your labelled sentences holds the word.")
                continue
            verdict = "most neighbours share it" if layer.majority_agrees else "no label holds a clear majority"
            st.markdown(f"Commonest label among the {len(layer.neighbours)} nearest: "
                        f"**{escape_markdown(layer.majority_sense)}** ({100 * layer.majority_share:.0f}%; {verdict}). "
                        f"Searched {layer.n_searched:,} occurrences.")
            st.caption(f"Cosine for scale: two random words in random sentences score "
                       f"{baseline.cosine[layer.layer]:.2f} on average at this layer (anisotropy baseline).")
            table([{"rank": n.rank, "cosine": round(n.similarity, 3), "line": n.sentence_id,
                    "sentence": marked_sentence(n.sentence, n.start, n.end), "label": n.sense_keys[0]}
                   for n in layer.neighbours], hide_index=True, width="stretch")


def own_sentences_page(language: str) -> None:
    """The page for a model of another language (SemCor is English): the query word's nearest
    occurrences among the user's own labelled sentences (``probing.senses.retrieval.labelled_neighbours``)."""
    st.info(f"SemCor is English and the chosen model reads {escape_markdown(language)}: the nearest "
            "occurrences are searched among your own labelled sentences.")
    st.text_area("Sentence", key="rt_own_query", height=80, help="The sentence whose word is looked up.")
    a, b = st.columns(2)
    a.text_input("Word", key="rt_own_word", max_chars=100, help="A word of the sentence (ignoring case).")
    b.number_input("Neighbours per layer", 1, 20, key="rt_k")
    st.text_area("Your labelled sentences: one a line; end a line with `| sense`", key="rt_own_text", height=200,
                 help="Sentences that use the word, each labelled with its sense, e.g. `… | river`. Words of a "
                      "script written without spaces: type them separated by spaces.")
    try:  # before any work: a long label would be copied into every row
        check_labelled_text(str(st.session_state.get("rt_own_text", "")), "Your labelled sentences")
    except ValueError as err:
        st.warning(escape_markdown(err))
        return
    contexts, labels = parse_labelled(st.session_state.get("rt_own_text", ""))
    sentence = single_line(st.session_state.get("rt_own_query", ""), MAX_QUERY_CHARS)
    word, k = st.session_state.get("rt_own_word", "").strip(), int(st.session_state.rt_k)
    if not (sentence and word and contexts):
        st.info("Type a sentence, its word, and labelled sentences that use the word.")
        return
    model = require_model()
    # lazy: imports torch (first paint)
    from probing.senses.retrieval import labelled_neighbours

    try:
        result = cached_result("retrieval_labelled", cache_key(model_key(model), sentence, word, k, contexts, labels),
                               "Finding the nearest of your sentences",
                               lambda progress: labelled_neighbours(model, sentence, word, contexts, labels, k=k))
        baseline = anisotropy_baseline(model, tuple(contexts) if len(contexts) >= 2 else None)
    except Exception as err:  # a full queue, a word not in the sentence, a model that cannot run
        show_failure(err, "Looking up the word")
        return
    marked = " ".join(f"[{t}]" if i == result.token_index else t for i, t in enumerate(result.query_tokens))
    st.caption(f"Query: {escape_markdown(marked)}")
    _own_sentences_tabs(result, baseline)
    for note in result.notes:
        st.caption(escape_markdown(note))
    st.download_button("Download the neighbours (JSON)", data=result.to_json(),
                       file_name=f"retrieval-{result.lemma}.json", mime="application/json")


# --------------------------------------------------------------------------------------------
# The page
# --------------------------------------------------------------------------------------------

st.title("Sense retrieval: nearest SemCor occurrences, layer by layer")
st.markdown(
    "Type a sentence and pick a word of it. For every layer, the biLM's vector of that word is "
    "compared with the vectors of the same word's sense-tagged occurrences in SemCor: the nearest "
    "ones, with their senses, show what the layer took from the context. Static embeddings give a "
    "word one vector whatever the sentence, so their nearest words are the same for every sentence.")
_init_state()
language = chosen_model_language()
if not is_english(language):
    own_sentences_page(language)
    st.stop()
data_root_caption()
left, right = st.columns([3, 1])
with right:
    st.selectbox("Example", list(EXAMPLES) + [OWN], key="rt_example", on_change=_use_example,
                 persist_state="session")
    limit = semcor_limit_widget("rt_semcor_limit")
with left:
    st.text_area("Sentence", key="rt_sentence", height=80, persist_state="session",
                 help="Several sentences are read as one context. Up to 1,000 characters are used.")
    a, b, c, d = st.columns(4)
    a.text_input("Word", key="rt_word", max_chars=100, persist_state="session",
                 help="A word of the sentence (its first occurrence, ignoring case).")
    b.number_input("Neighbours per layer", 1, 20, key="rt_k", persist_state="session")
    c.selectbox("Search", ["lemma", "any"], key="rt_scope", persist_state="session",
                format_func={"lemma": "same lemma", "any": "every SemCor word"}.get,
                help="'every SemCor word' compares with all sense-tagged occurrences (slower, more memory).")
    d.selectbox("Part of speech", ["any", "NOUN", "VERB", "ADJ", "ADV"], key="rt_pos", persist_state="session")

sentence = single_line(st.session_state.rt_sentence, MAX_QUERY_CHARS)
word = st.session_state.rt_word.strip()
if len(" ".join(st.session_state.rt_sentence.split())) > MAX_QUERY_CHARS:
    st.caption(f"Only the first {MAX_QUERY_CHARS:,} characters of the sentence are used.")
model = require_model()
if not sentence:
    st.info("Type a sentence (or pick an example).")
elif not word:
    st.info("Type the word of the sentence to look up.")
elif len(word.split()) > 1:
    st.warning("Type a single word of the sentence (no spaces).")
else:
    pos = None if st.session_state.rt_pos == "any" else st.session_state.rt_pos
    try:
        # lazy: imports torch (first paint)
        from probing.senses.retrieval import find_token

        find_token(sentence, word)  # a word not in the sentence is said before any index is built
        retriever, result = retrieval_query(model, limit, sentence, word, int(st.session_state.rt_k),
                                            st.session_state.rt_scope, pos)
        baseline = None if result is None else anisotropy_baseline(model)
    except Exception as err:  # a full queue, a word not in the sentence, a missing dataset
        show_failure(err, "Looking up the word")
    else:
        if result is None:  # the slice holds none of the lemmas the word may have
            _show_nothing(word.lower(), pos, limit, st.session_state.rt_scope)
        else:
            _show(result, baseline, limit, retriever)
_wsd_panel(model, limit)
