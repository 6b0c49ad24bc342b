"""The contextuality figure."""

from __future__ import annotations

from typing import TYPE_CHECKING

import plotly.graph_objects as go

if TYPE_CHECKING:  # imported for annotations only: building a figure needs none of them
    from probing.context.contextuality import ContextualityResult

from probing.figures.style import GREY, LAYER_AXIS, _finish, color, layer_label


def contextuality_figure(ctx: "ContextualityResult") -> go.Figure:
    """Ethayarajh (2019) per layer: self-similarity and intra-sentence similarity, raw (solid)
    and minus the anisotropy baseline (dashed), and the baseline itself (grey)."""
    xs = [layer_label(j) for j in range(len(ctx.self_similarity))]
    fig = go.Figure()
    series = [
        ("self-similarity", ctx.self_similarity, color(0), "solid"),
        ("self-similarity − anisotropy", ctx.self_similarity_adjusted, color(0), "dash"),
        ("intra-sentence similarity", ctx.intra_sentence_similarity, color(1), "solid"),
        ("intra-sentence − anisotropy", ctx.intra_sentence_adjusted, color(1), "dash"),
        ("anisotropy baseline (random pairs)", ctx.anisotropy, GREY, "dot"),
    ]
    for name, values, c, dash in series:
        fig.add_trace(go.Scatter(x=xs, y=values, mode="lines+markers", name=name,
                                 line=dict(color=c, dash=dash, width=2),
                                 hovertemplate=f"{name}, %{{x}}: %{{y:.3f}}<extra></extra>"))
    return _finish(fig, f"How contextual is each layer? (Ethayarajh 2019; {len(ctx.words)} words, "
                        f"{ctx.n_sentences:,} sentences)", LAYER_AXIS, "mean cosine similarity (−1…1)")


# --------------------------------------------------------------------------------------------
# Two results side by side
# --------------------------------------------------------------------------------------------
