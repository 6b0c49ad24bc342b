"""Plotly figures only the app draws (the report's figures are in ``probing.figures``).

Same conventions as ``probing.figures`` (its template, palette, axis titles with units, no font
colour so Streamlit's light and dark themes both read): scores in percent, cosines unitless.

- :func:`gamma_figure`: the learned scale γ of the scalar mix per task, with its seed spread.
- :func:`hand_mix_figure`: the s_j a user set with the sliders (beside the learned ones) and
  the probe's score for them against each single layer and the uniform mix.
- :func:`retrieval_figure`: per layer, the cosine similarity of the nearest SemCor occurrences
  to the query word, coloured by sense (the paper's Table 4 as a picture).
- :func:`highlight_points`: marks the user's own sentences on a ``projection_figure``.
- :func:`wilson_interval`: an interval for an accuracy that comes without one.
- :func:`projection_verdict`: what a projection's within-SemCor 1-NN scores say, against the majority
  sense and against layer 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from probing.figures import (GREY, LAYER_AXIS, TEMPLATE, color, layer_label, marked_sentence, metric_axis, sense_label,
                             wrap)
from probing.figures.style import _interval_errors

if TYPE_CHECKING:
    from probing.senses.projections import ProjectionResult
    from probing.senses.retrieval import RetrievalResult
    from probing.tagging.results import SuiteResult
    from probing.tagging.scalar_mix import MixView


def wilson_interval(accuracy: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval (95% for z = 1.96) of an accuracy measured on ``n`` independent
    test items, as fractions; (0, 1) when ``n`` is 0. For results that carry no interval of
    their own (the lexical-sample probe scores single contexts, so items are independent)."""
    if n <= 0:
        return 0.0, 1.0
    p = min(1.0, max(0.0, float(accuracy)))
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def gamma_figure(suite: "SuiteResult") -> go.Figure:
    """The learned scale γ of the scalar mix per task (mean ± sd over the seeds), beside
    ``probing.figures.mix_weights_figure``'s s_j. γ multiplies the whitened, mixed layers, so it
    is unitless; with ``ScalarMixProbe``'s shared L2 penalty it settles where γ² = |W|²."""
    tasks = [t for t in suite.tasks if t.mix is not None]
    fig = go.Figure(go.Bar(
        x=[t.task for t in tasks], y=[t.mix.gamma_mean for t in tasks],
        marker_color=[color(k) for k in range(len(tasks))],
        error_y=dict(type="data", array=[t.mix.gamma_std for t in tasks], thickness=1.5, width=6),
        customdata=[[t.mix.gamma_std, len(t.mix.seeds)] for t in tasks], showlegend=False,
        hovertemplate="%{x}: γ = %{y:.2f} ± %{customdata[0]:.2f} (%{customdata[1]} seeds)<extra></extra>"))
    fig.update_xaxes(title_text="task")
    fig.update_yaxes(title_text="γ (scale of the mix, unitless)", rangemode="tozero")
    fig.update_layout(template=TEMPLATE, height=440, title=dict(text="Learned γ per task (mean ± sd over seeds)"))
    return fig


def hand_mix_figure(view: "MixView", learned: Sequence[float] | None = None,
                    learned_std: Sequence[float] | None = None) -> go.Figure:
    """Left: the hand-set s_j per layer (bars) and, if given, the learned s_j (mean ± sd
    markers). Right: the probe's test score (95% bootstrap interval) on each single layer, on
    the uniform mix and on the hand-set mix."""
    n = len(view.weights)
    xs = [layer_label(j) for j in range(n)]
    fig = make_subplots(rows=1, cols=2, column_widths=[0.42, 0.58], horizontal_spacing=0.12,
                        subplot_titles=("s_j: your setting" + (" vs learned" if learned else ""),
                                        f"{view.task}: probe score on test"))
    fig.add_trace(go.Bar(x=xs, y=view.weights, name="your s_j", marker_color=color(1),
                         hovertemplate="%{x}: your s_j = %{y:.3f}<extra></extra>"), row=1, col=1)
    if learned:
        fig.add_trace(go.Scatter(
            x=xs, y=list(learned), mode="markers", name="learned s_j (mean ± sd over seeds)",
            marker=dict(symbol="diamond", size=11, color=color(0), line=dict(width=1, color=GREY)),
            error_y=dict(type="data", array=list(learned_std or [0.0] * n), thickness=1.5, width=5),
            hovertemplate="%{x}: learned s_j = %{y:.3f}<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Scatter(x=xs, y=[1.0 / n] * n, mode="lines", name=f"uniform (1/{n})",
                             line=dict(color=GREY, dash="dot"), hovertemplate="uniform: %{y:.3f}<extra></extra>"),
                  row=1, col=1)
    names = xs + ["uniform mix", "your mix"]
    scores = list(view.single_layer) + [view.uniform, view.score]
    colours = [color(0)] * n + [GREY, color(1)]
    fig.add_trace(go.Bar(
        x=names, y=[100 * s.estimate for s in scores], error_y=_interval_errors(scores), marker_color=colours,
        name="probe score", showlegend=False,
        customdata=[[100 * s.low, 100 * s.high] for s in scores],
        hovertemplate="%{x}: %{y:.2f}% (95% CI %{customdata[0]:.2f}–%{customdata[1]:.2f})<extra></extra>"),
        row=1, col=2)
    low = min(100 * s.low for s in scores)
    fig.update_yaxes(title_text="s_j (softmax weight, sums to 1)", range=[0, 1.02], row=1, col=1)
    fig.update_yaxes(title_text=metric_axis(view.metric), range=[max(0.0, low - 10), None], row=1, col=2)
    fig.update_xaxes(title_text="layer", row=1, col=1)
    fig.update_xaxes(title_text="representation the probe reads", row=1, col=2)
    fig.update_layout(template=TEMPLATE, height=430, barmode="overlay",
                      title=dict(text=f"Your scalar mix: {view.task} probe trained on "
                                      f"{view.n_train_tokens:,} tokens, scored on {view.n_test_sentences:,} "
                                      "test sentences"),
                      legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))
    return fig


def retrieval_figure(result: "RetrievalResult", max_senses: int = 8) -> go.Figure:
    """Per layer, the cosine similarity of each retrieved SemCor occurrence to the query word
    (one marker a neighbour, coloured by its sense; hover shows the sentence and gloss)."""
    senses: dict[str, str] = {}
    for layer in result.layers:
        for n in layer.neighbours:
            senses.setdefault(n.sense_keys[0], n.gloss)
    ranked = list(senses)
    shown = ranked[:max_senses]
    fig = go.Figure()
    xs_all = [layer_label(layer.layer) for layer in result.layers]
    for k, key in enumerate(ranked):
        in_group = key in shown
        # neighbours of one sense with equal cosines (layer 0: one spelling, one vector) would
        # hide each other: one marker per tie, labelled with how many it stands for
        ties: dict[tuple[str, float], list] = {}
        for layer in result.layers:
            for n in layer.neighbours:
                if n.sense_keys[0] == key:
                    ties.setdefault((layer_label(layer.layer), round(n.similarity, 6)), []).append(n)
        fig.add_trace(go.Scatter(
            x=[x for x, _ in ties], y=[group[0].similarity for group in ties.values()], mode="markers+text",
            name=sense_label(key, senses[key]) if in_group else "other senses",
            legendgroup=key if in_group else "other", showlegend=in_group or key == ranked[max_senses],
            marker=dict(size=[12 + 3 * min(len(g) - 1, 6) for g in ties.values()],
                        color=color(k) if in_group else GREY, opacity=0.9, line=dict(width=1, color=GREY)),
            text=[f"×{len(g)}" if len(g) > 1 else "" for g in ties.values()], textposition="middle right",
            customdata=[(f"{len(g)} tied: #" + ", #".join(str(n.rank) for n in g) + "<br>" if len(g) > 1 else "")
                        + f"#{g[0].rank} <b>{g[0].sense_keys[0]}</b><br>{wrap(g[0].gloss, 60)}<br>"
                        f"{wrap(marked_sentence(g[0].sentence, g[0].start, g[0].end), 70)}" for g in ties.values()],
            hovertemplate="%{x}: cosine %{y:.3f}<br>%{customdata}<extra></extra>"))
    fig.update_xaxes(categoryorder="array", categoryarray=xs_all, title_text=LAYER_AXIS)
    fig.update_yaxes(title_text="cosine similarity to the query word (−1…1)")
    where = "its lemma's" if result.scope == "lemma" else "all"
    fig.update_layout(template=TEMPLATE, height=420, scattermode="group",
                      title=dict(text=f"Nearest SemCor occurrences of “{result.word}” (lemma {result.lemma}) "
                                      f"per layer among {where} sense-tagged occurrences"),
                      legend=dict(orientation="h", yanchor="top", y=-0.22, x=0))
    return fig


def highlight_points(fig: go.Figure, proj: "ProjectionResult", methods: Sequence[str], points: Sequence[int],
                     name: str = "your sentences") -> go.Figure:
    """Ring ``points`` (indices into ``proj.points``, e.g. the user's own sentences) on a
    ``probing.figures.projection_figure`` drawn with the same ``methods``: a large open star
    around each, one legend entry, the sentence on hover. Returns ``fig``."""
    idx = [i for i in points if 0 <= i < len(proj.points)]
    if not idx:
        return fig
    rows = [m for m in methods if m == "pca" or any(l.umap is not None for l in proj.layers)]
    for r, method in enumerate(rows, start=1):
        for c, layer in enumerate(proj.layers, start=1):
            coords = layer.umap if method == "umap" else layer.pca
            if coords is None:
                continue
            fig.add_trace(go.Scatter(
                x=[coords[i][0] for i in idx], y=[coords[i][1] for i in idx], mode="markers", name=name,
                legendgroup="highlight", showlegend=(r == 1 and c == 1),
                marker=dict(symbol="star-open", size=19, color=color(4), line=dict(width=2.5)),
                text=[f"<b>{name}</b>: " + wrap(marked_sentence(proj.points[i].sentence, proj.points[i].start,
                                                        proj.points[i].end), 70) for i in idx],
                hovertemplate="%{text}<extra></extra>"), row=r, col=c)
    return fig


__all__ = ["gamma_figure", "hand_mix_figure", "highlight_points", "retrieval_figure", "wilson_interval"]


def projection_verdict(proj: "ProjectionResult") -> tuple[bool, str] | None:
    """Whether the LSTM layers separate the senses within SemCor, and the sentence that says so:
    each layer's 1-NN accuracy against the majority sense and against layer 0 (the static character
    layer: it sees the spelling only), beyond the layer's 95% Wilson interval. True only where a
    layer beats both; None where no LSTM layer has a within-SemCor score."""
    scored = [l for l in proj.layers[1:] if l.semcor_loo_1nn_accuracy is not None]
    if not scored:
        return None
    low = {l.layer: wilson_interval(l.semcor_loo_1nn_accuracy, l.semcor_n)[0] for l in scored}
    beats = [l.layer for l in scored if low[l.layer] > l.semcor_majority_baseline]
    if not beats:
        return False, ("Within SemCor, no LSTM layer's 1-NN accuracy is above the majority sense beyond its 95% "
                       "interval: on these occurrences the model does not separate the senses of this word "
                       "measurably better than always guessing the commonest.")
    text = (f"Within SemCor, 1-NN beats the majority sense beyond its 95% interval at layer(s) "
            f"{', '.join(map(str, beats))}.")
    static = proj.layers[0].semcor_loo_1nn_accuracy
    if static is None:
        return True, text
    beyond = [j for j in beats if low[j] > static]
    if beyond:
        return True, (text + f" Against layer 0, the static character layer ({100 * static:.0f}%: it sees the "
                      f"spelling only), layer(s) {', '.join(map(str, beyond))} score higher beyond the interval: the "
                      "context adds sense.")
    return False, (text + f" But layer 0, the static character layer, scores {100 * static:.0f}% (it sees the "
                   "spelling only), and no LSTM layer beats it beyond its interval: what separates here, the static "
                   "layer already sees (the word's form), not the context.")
