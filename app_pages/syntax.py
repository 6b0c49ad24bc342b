"""Syntax: the structural probe's tree for one sentence, and which words move a token's vector.

Widgets -> ``probing.syntax.structural.tree_probe`` (Hewitt & Manning's distance probe for one layer, trained
on a slice of UD EWT, or of the fetched treebank of the model's language, and cached on disk) +
``probing.syntax.structural.parse_with_probe`` ->
``probing.syntax.sections.tree_figure`` (gold tree above the words, the probe's minimum spanning
tree below); and ``app_pages.attribution_panel`` (``probing.context.attribution.attribute_context`` ->
``probing.syntax.sections.attribution_figure``, as in the Playground).
"""

import streamlit as st

from app_pages.attribution_panel import attribution_panel
from app_pages.data_setup import data_root, data_root_caption, model_treebank
from app_pages.display import figure
from app_pages.first_figures import SYNTAX_LAYER, SYNTAX_RANK, SYNTAX_TRAIN, syntax_config, tree_probe, tree_probe_key
from app_pages.running import has_resource, require_model, show_failure

SOURCES = {"ewt": "a test sentence of the UD treebank (with its gold tree)",
           "nonsense": "the same sentence as nonsense (Jabberwocky)", "typed": "my own sentence"}
TRAIN_SIZES = [200, 500, 2000]
RANKS = [16, 32, 64, 128]
MAX_CHARS = 400


def _init_state() -> None:
    # lazy: probing.syntax.sections imports torch and scipy (first paint)
    from probing.syntax.sections import BANK_REFERENCE, BANK_SENTENCE

    for key, value in {"sy_layer": SYNTAX_LAYER, "sy_source": "ewt", "sy_index": 1, "sy_text": BANK_SENTENCE,
                       "sy_train": SYNTAX_TRAIN, "sy_rank": SYNTAX_RANK, "sy_attr_text": BANK_SENTENCE, "sy_attr_word": "bank",
                       "sy_attr_ref": BANK_REFERENCE}.items():
        st.session_state.setdefault(key, value)


TRAIN_ASKED = "syntax_train_asked"  # session state: the visitor asked for a structural probe
FIRST_LOOK = 100  # training sentences of the probe a first tree is drawn with while a larger one trains


def _stored(model, layer: int, n_train: int, rank: int, treebank: str) -> bool:
    """Whether the probe is trained already (in this server, or on disk)."""
    # lazy: imports torch (first paint)
    from probing.syntax.structural import stored_tree_probe

    return has_resource("tree_probe", tree_probe_key(model, layer, n_train, rank, treebank)) \
        or stored_tree_probe(model, layer, data_root(), config=syntax_config(n_train, rank, treebank)) is not None


def _test_size(treebank: str) -> int:
    """The test sentences of the treebank the tree is drawn from."""
    # lazy: probing.syntax.trees imports scipy (first paint)
    from probing.syntax.trees import read_treebank_trees

    return 2077 if treebank == "en_ewt" else len(read_treebank_trees(treebank, "test", data_root()))


def _tree_section(model) -> None:
    st.subheader("The probe's tree against the gold tree")
    found, note = model_treebank("the tree probe")
    if note:
        st.info(note)
        return
    treebank = "en_ewt" if found is None else found.code
    if found is not None:
        st.caption(f"The chosen model reads {found.language}: the probe learns the gold trees of {found.title}.")
    left, right = st.columns([1, 2])
    n_layers = model.config.n_output_layers
    with left:
        st.selectbox("Layer", list(range(n_layers)), key="sy_layer", persist_state="session",
                     format_func=lambda j: f"layer {j}" + (" (character CNN)" if j == 0 else ""))
        st.selectbox("Training sentences", TRAIN_SIZES, key="sy_train", persist_state="session",
                     help="The first N training sentences of the treebank the probe learns from (more: better, "
                          "slower).")
        st.selectbox("Rank of B", RANKS, key="sy_rank", persist_state="session")
    with right:
        st.radio("Sentence", list(SOURCES), key="sy_source", format_func=SOURCES.get, horizontal=True,
                 persist_state="session")
        if st.session_state.sy_source in ("ewt", "nonsense"):
            st.number_input("Test sentence number", 0, _test_size(treebank) - 1, key="sy_index",
                            persist_state="session")
        else:
            st.text_input("Your sentence", key="sy_text", max_chars=MAX_CHARS, persist_state="session")
    layer = int(st.session_state.sy_layer) if int(st.session_state.sy_layer) < n_layers else 1
    n_train, rank = int(st.session_state.sy_train), int(st.session_state.sy_rank)
    first = st.empty()
    try:
        stored = _stored(model, layer, n_train, rank, treebank)
        if not stored and not st.session_state.get(TRAIN_ASKED):  # nothing trains before it is asked for
            st.info(f"The structural probe of layer {layer} is not trained yet on {n_train:,} sentences: "
                    "about half a minute on elmo-mini, then kept on disk.")
            if not st.button("Train the structural probe", key="sy_train_probe", type="primary"):
                return
            st.session_state[TRAIN_ASKED] = True  # from now on a changed setting trains at once
        if not stored and n_train > FIRST_LOOK:
            with first.container():  # the first sentences are not embedded again: the activation store copies them
                _draw_tree(model, tree_probe(model, layer, FIRST_LOOK, rank, treebank), layer, treebank,
                           key="syntax_fig_tree_first")
                st.caption(f"A first look from a probe trained on the first {FIRST_LOOK} sentences; the probe on "
                           f"the {n_train:,} you chose trains below, and replaces this tree when it is ready.")
        probe = tree_probe(model, layer, n_train, rank, treebank)
    except Exception as err:
        show_failure(err, "Training the structural probe")
        return
    first.empty()
    _draw_tree(model, probe, layer, treebank, key="syntax_fig_tree")


def _draw_tree(model, probe, layer: int, treebank: str, key: str) -> None:
    """The chosen sentence's gold tree above the probe's (or the typed sentence's tree alone)."""
    # lazy: torch and scipy load only when a tree is drawn (first paint)
    from probing.syntax.sections import tree_figure
    from probing.syntax.structural import nonsense_test, parse_with_probe
    from probing.syntax.trees import gold_edges, read_treebank_trees

    real_found = None
    try:
        if st.session_state.sy_source in ("ewt", "nonsense"):
            index = int(st.session_state.sy_index)
            tree = read_treebank_trees(treebank, "test", data_root(), limit=index + 1)[index]
            if st.session_state.sy_source == "nonsense":
                real_found = len(gold_edges(tree) & parse_with_probe(model, probe, tree.tokens, layer, tree.upos)[1])
                tree = nonsense_test([tree], 0, data_root(), treebank)[0]
            tokens, upos = tree.tokens, tree.upos
        else:
            # lazy: the tokenizer imports NLTK and sklearn; only for a typed sentence (first paint)
            from elmo_model.text.tokenizer import tokenize_words

            tree, upos = None, None
            tokens = tokenize_words(st.session_state.sy_text)
            if len(tokens) < 2:
                st.info("Type a sentence of two words or more.")
                return
        _, edges = parse_with_probe(model, probe, tokens, layer, upos)
    except Exception as err:
        show_failure(err, "Parsing with the structural probe")
        return
    figure(tree_figure(tree if tree is not None else tokens, edges,
                       f"Layer {layer}: gold tree (above) and the probe's minimum spanning tree (below)"),
           "structural-tree", key=key)
    if tree is not None:
        gold = gold_edges(tree)
        st.markdown(f"This sentence: the probe's tree has **{len(gold & edges)} of {len(gold)}** gold arcs "
                    f"(punctuation left out), probe trained on {probe.n_epochs_} epochs."
                    + ("" if real_found is None else f" The real sentence: {real_found} of {len(gold)}."))
    if real_found is not None:
        # lazy: with the rest of the syntax code (first paint)
        from probing.syntax.structural import JABBERWOCKY_SENTENCE

        st.caption(JABBERWOCKY_SENTENCE + " The probe was trained on real sentences only; the report's syntax "
                   "section measures the drop over the whole test set.")
    st.caption("The probe is a linear map B trained so that squared distances ||B(h_i − h_j)||² match distances "
               "in the gold tree (Hewitt & Manning 2019); its tree is the minimum spanning tree of those distances. "
               "Undirected: the probe says which words are linked, not which is the head.")


def _attribution_section(model) -> None:
    st.subheader("Which words move a token's vector?")
    a, b = st.columns([3, 1])
    a.text_input("Sentence", key="sy_attr_text", max_chars=MAX_CHARS, persist_state="session")
    b.text_input("Word", key="sy_attr_word", max_chars=60, persist_state="session")
    st.text_input("Reference sentence (the same word in the sense to compare with)", key="sy_attr_ref",
                  max_chars=MAX_CHARS, persist_state="session")
    text, word, ref = (st.session_state.sy_attr_text.strip(), st.session_state.sy_attr_word.strip(),
                       st.session_state.sy_attr_ref.strip())
    if not text or not word:
        st.info("Type a sentence and one of its words.")
        return
    attribution_panel(model, text, word, ref or None, key="syntax_attribution")


st.title("Syntax: does a layer encode the parse tree?")
st.markdown("Pick a layer and a sentence: a structural probe turns the layer's vectors into distances between words, "
            "and the tree those distances span is drawn under the gold UD tree. Below, which words of a sentence "
            "change one token's vector, layer by layer.")
data_root_caption()
_init_state()
model = require_model()
_tree_section(model)
_attribution_section(model)
