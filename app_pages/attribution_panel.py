"""The context-attribution panel: for one token, per layer, a bar per context word.

``attribution_panel(model, sentence, target, reference)`` computes
``probing.context.attribution.attribute_context`` (cached per model and input) and draws
``probing.syntax.sections.attribution_figure``: how far replacing each other word by ``<UNK>``
moves the token's vector (1 - cosine), and, with a reference occurrence of the word, gradient x
input of the token's similarity to it. ``playground_attribution(model, result)`` is the
Playground's call: the token is the compared word in the sentence of the token-by-token matrix,
and the reference a sentence of the Playground's list that holds the word too (the user picks).

Not a page: a module the Playground and the Syntax page import (st.navigation lists pages by
path in app.py, so this file is never one).
"""

from __future__ import annotations

from typing import Sequence

import streamlit as st

from app_pages.display import escape_markdown, figure, table
from app_pages.model_choice import model_key
from app_pages.running import cache_key, cached_result, show_failure

NO_REFERENCE = "no reference (leave one out only)"
MAX_TOKENS = 80
"""Longest sentence attributed: leave one out runs the biLM once per word."""

EXPLANATION = ("Leave one out: each other word replaced by <UNK>, and 1 − cosine between the token's old and new "
               "vector. Gradient × input: how each word's input vector pushes the token's cosine similarity to the "
               "reference occurrence up (positive) or down. Layer 0 reads only the word's own characters, so its "
               "bars are zero.")


def attribution_panel(model, sentence: str | Sequence[str], target: int | str,
                      reference: str | Sequence[str] | None = None, reference_target: int | str | None = None,
                      key: str = "attribution"):
    """Draw the attribution of ``sentence``'s token ``target`` (an index or a word) for ``model``
    (a ``BiLM``): the bar figure and a table of the words that move it most per layer. Returns
    the ``AttributionResult`` (None when it could not be computed: the reason is shown)."""
    # lazy: imported when the panel is drawn: the Playground imports this module on every run, and the
    # figure's module brings in the syntax probes (scipy, the report sections)
    from probing.context.attribution import attribute_context
    from probing.syntax.sections import attribution_figure

    from elmo_model.text.tokenizer import tokenize_words  # as attribute_context tokenises a typed sentence

    tokens = list(sentence) if not isinstance(sentence, str) else sentence
    ref = list(reference) if reference is not None and not isinstance(reference, str) else reference
    for what, words in (("sentence", tokens), ("reference sentence", ref)):
        # leave one out runs the biLM once per token: a typed sentence is counted before any work too
        count = 0 if words is None else len(tokenize_words(words) if isinstance(words, str) else words)
        if count > MAX_TOKENS:
            st.info(f"The {what} has {count} tokens; attribution runs for sentences of up to {MAX_TOKENS}.")
            return None
    what = f"'{tokens[target]}'" if isinstance(target, int) and not isinstance(tokens, str) else f"'{target}'"
    try:
        result = cached_result("attribution", cache_key(model_key(model), tokens, target, ref, reference_target),
                               f"Attributing {what} to its context",
                               lambda progress: attribute_context(model, tokens, target, reference=ref or None,
                                                                  reference_target=reference_target))
    except Exception as err:
        show_failure(err, f"Attributing {what}")
        return None
    figure(attribution_figure(result), f"attribution-{result.tokens[result.target]}", key=f"{key}_fig")
    top = result.top_words()
    table([{"layer": j, "moved most by (leave one out)": ", ".join(f"{w} ({v:.3f})" for w, v in top[j])}
           for j in range(result.n_layers)], hide_index=True, width="stretch")
    st.caption(escape_markdown(EXPLANATION))
    return result


def playground_attribution(model, result, key: str = "pg_attr"):
    """The panel under the Playground's token-by-token matrix: the compared word (its first
    occurrence) in the focus sentence of ``result`` (a ``PlaygroundResult``); the reference is
    picked among the other sentences that hold the word. Behind a toggle (off by default): leave
    one out runs the biLM once per word."""
    k = result.focus_sentence
    if k is None:
        return None
    st.toggle(f"Which words of S{k + 1} move '{escape_markdown(result.word)}'? (context attribution per layer)",
              key=f"{key}_on", help="Runs the biLM once more per word of the sentence: off until asked for.")
    if not st.session_state[f"{key}_on"]:
        return None
    if not result.positions[k]:
        st.info(f"'{escape_markdown(result.word)}' is not in S{k + 1}: pick a sentence that holds it "
                "for the token-by-token matrix.")
        return None
    others = [i for i, found in enumerate(result.positions) if found and i != k]
    options = [NO_REFERENCE] + others
    if st.session_state.get(f"{key}_ref") not in options:
        st.session_state[f"{key}_ref"] = others[0] if others else NO_REFERENCE
    st.selectbox("Reference occurrence (for gradient × input)", options, key=f"{key}_ref",
                 format_func=lambda i: i if i == NO_REFERENCE else f"S{i + 1}: {result.sentences[i][:60]}",
                 help="Another sentence with the word, e.g. one in the other sense: gradient × input says which "
                      "words pull the token towards that occurrence and which push it away.")
    choice = st.session_state[f"{key}_ref"]
    reference, reference_target = ((None, None) if choice == NO_REFERENCE
                                   else (result.tokens[choice], result.positions[choice][0]))
    return attribution_panel(model, result.tokens[k], result.positions[k][0], reference, reference_target, key=key)


__all__ = ["MAX_TOKENS", "NO_REFERENCE", "attribution_panel", "playground_attribution"]
