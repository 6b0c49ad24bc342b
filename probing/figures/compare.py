"""Two models side by side: the comparison figures of a report's ``compare``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

if TYPE_CHECKING:  # imported for annotations only: building a figure needs none of them
    from probing.context.contextuality import ContextualityResult
    from probing.senses.projections import ProjectionResult
    from probing.senses.word_senses import WordSensesComparison
    from probing.senses.wsd import WsdResult
    from probing.tagging.results import SuiteResult, TaskResult

from probing.figures.context import contextuality_figure
from probing.figures.senses import (
    _projection_name,
    _wsd_short,
    lexical_sample_figure,
    projection_figure,
    sense_label,
    separability_figure,
    word_senses_figure,
    wsd_layers_figure,
    wsd_sets_figure,
)
from probing.figures.style import (
    GREY,
    LAYER_AXIS,
    PALETTE,
    TEMPLATE,
    THEMES,
    _empty,
    _finish,
    _hline_trace,
    _interval_errors,
    _pct,
    color,
    layer_label,
    metric_axis,
    themed,
    wrap,
)
from probing.figures.tasks import mix_weights_figure, selectivity_figure, task_layers_figure


def _pair_colours() -> tuple[str, str]:
    return color(0), color(1)


def compare_task_figure(task_a: "TaskResult", task_b: "TaskResult", labels: Sequence[str]) -> go.Figure:
    """One task, two models: the test score per layer with 95% intervals, each with its
    majority and word-majority baselines (the same data gives the same baselines)."""
    fig = go.Figure()
    categories: list[str] = []
    for task, label, c in zip((task_a, task_b), labels, _pair_colours()):
        xs = [layer_label(r.layer) for r in task.layers]
        categories += [x for x in xs if x not in categories]
        fig.add_trace(go.Scatter(
            x=xs, y=[100 * r.probe.test.estimate for r in task.layers],
            error_y=_interval_errors([r.probe.test for r in task.layers]), mode="lines+markers", name=label,
            legendgroup=label, line=dict(color=c, width=2.5), marker=dict(size=9),
            hovertemplate=f"{label}, %{{x}}: %{{y:.2f}}%<extra></extra>"))
        if task.mix is not None:
            fig.add_trace(go.Scatter(
                x=["scalar mix"] * len(task.mix.probes), y=[100 * p.test.estimate for p in task.mix.probes],
                mode="markers", name=f"{label}: scalar mix", legendgroup=label,
                marker=dict(color=c, size=10, symbol="diamond"),
                hovertemplate=f"{label}, scalar mix: %{{y:.2f}}%<extra></extra>"))
    if any(t.mix is not None for t in (task_a, task_b)):
        categories.append("scalar mix")
    same = (task_a.baselines.majority.estimate == task_b.baselines.majority.estimate
            and task_a.baselines.word_majority.estimate == task_b.baselines.word_majority.estimate)
    for task, label, c in zip((task_a, task_b), labels, _pair_colours()):
        suffix = "" if same else f" ({label}'s data)"
        fig.add_trace(_hline_trace(categories, 100 * task.baselines.majority.estimate, f"majority class{suffix}",
                                   GREY if same else c, "dot", group="baselines"))
        fig.add_trace(_hline_trace(categories, 100 * task.baselines.word_majority.estimate,
                                   f"word-conditional majority{suffix}", GREY if same else c, "dash",
                                   group="baselines"))
        if same:
            break
    fig.update_xaxes(categoryorder="array", categoryarray=categories)
    return _finish(fig, f"{task_a.task}: {labels[0]} vs {labels[1]} (95% bootstrap intervals)", LAYER_AXIS,
                   metric_axis(task_a.metric))


def compare_mix_figure(suite_a: "SuiteResult", suite_b: "SuiteResult", labels: Sequence[str]) -> go.Figure:
    """s_j per task for two models: one panel per task both have a scalar mix for."""
    names = [t.task for t in suite_a.tasks if t.mix is not None
             and any(u.task == t.task and u.mix is not None for u in suite_b.tasks)]
    if not names:
        return _empty("Scalar-mix weights s_j", "no task has a scalar mix in both results")

    def weights(suite: "SuiteResult", name: str) -> tuple[list[str], list[float], list[float]]:
        mix = suite.task(name).mix
        return [layer_label(j) for j in mix.layers], list(mix.weights_mean), list(mix.weights_std)

    return _paired_weight_panels(names, names, (suite_a, suite_b), weights, labels,
                                 f"Learned s_j per task: {labels[0]} vs {labels[1]}")


def _paired_weight_panels(keys: Sequence[str], titles: Sequence[str], sources: Sequence, weights_of: Callable,
                          labels: Sequence[str], title: str) -> go.Figure:
    """Grouped s_j bars (mean ± sd) of two results, one panel per key; ``weights_of(source, key)``
    -> (layer labels, means, standard deviations)."""
    fig = make_subplots(rows=1, cols=len(keys), subplot_titles=list(titles), shared_yaxes=True)
    for col, key in enumerate(keys, start=1):
        for source, label, c in zip(sources, labels, _pair_colours()):
            xs, means, stds = weights_of(source, key)
            fig.add_trace(go.Bar(
                x=xs, y=list(means), name=label, legendgroup=label, showlegend=col == 1, marker_color=c,
                error_y=dict(type="data", array=list(stds), thickness=1.5, width=4),
                hovertemplate=f"{label}, {key}, %{{x}}: s_j = %{{y:.3f}}<extra></extra>"), row=1, col=col)
        fig.update_xaxes(title_text="layer", row=1, col=col)
    fig.update_yaxes(title_text="s_j (softmax weight)", row=1, col=1)
    fig.update_layout(template=TEMPLATE, barmode="group", height=420, title=dict(text=title))
    return fig


def compare_wsd_figure(wsd_a: "WsdResult", wsd_b: "WsdResult", labels: Sequence[str]) -> go.Figure:
    """WSD F1 per layer on the four test sets (solid) and ALL (dashed) for two models, with
    each model's first-sense baseline on the four sets (dotted)."""
    fig = go.Figure()
    categories: list[str] = []
    for wsd, label, c in zip((wsd_a, wsd_b), labels, _pair_colours()):
        four = next((col for col in wsd.columns if "+" in col), None)
        xs = [r.representation if not r.representation.startswith("mix") else "scalar mix" for r in wsd.rows]
        categories += [x for x in xs if x not in categories]
        for column, dash in ((four, "solid"), ("ALL", "dash")):
            if column is None:
                continue
            fig.add_trace(go.Scatter(
                x=xs, y=[r.f1(column) for r in wsd.rows], mode="lines+markers", name=f"{label}, {_wsd_short(column)}",
                legendgroup=label, line=dict(color=c, dash=dash, width=2.5 if dash == "solid" else 1.8),
                hovertemplate=f"{label}, {_wsd_short(column)}, %{{x}}: F1 %{{y:.1f}}%<extra></extra>"))
    first_four = [w.first_sense.f1(next(col for col in w.columns if "+" in col)) for w in (wsd_a, wsd_b)
                  if any("+" in col for col in w.columns)]
    if first_four:
        fig.add_trace(_hline_trace(categories, first_four[0], "WordNet first sense, 4 test sets", GREY, "dot"))
    fig.update_xaxes(categoryorder="array", categoryarray=categories)
    return _finish(fig, f"All-words WSD F1 per layer: {labels[0]} vs {labels[1]}", LAYER_AXIS, "F1 (%)")


def compare_separability_figure(proj_a: Sequence["ProjectionResult"], proj_b: Sequence["ProjectionResult"],
                                labels: Sequence[str]) -> go.Figure:
    """Leave-one-out 1-NN sense accuracy per layer for the lemmas both results projected."""
    lemmas = [p.lemma for p in proj_a if any(q.lemma == p.lemma for q in proj_b)]
    if not lemmas:
        return _empty("Sense separability", "no lemma was projected in both results")
    fig = make_subplots(rows=1, cols=len(lemmas), subplot_titles=[f"“{l}”" for l in lemmas], shared_yaxes=True)
    for col, lemma in enumerate(lemmas, start=1):
        for projs, label, c in zip((proj_a, proj_b), labels, _pair_colours()):
            proj = next(p for p in projs if p.lemma == lemma)
            xs = [layer_label(l.layer) for l in proj.layers]
            fig.add_trace(go.Scatter(
                x=xs, y=[_pct(l.loo_1nn_accuracy) for l in proj.layers], mode="lines+markers",
                name=label, legendgroup=label, showlegend=col == 1, line=dict(color=c, width=2.5),
                hovertemplate=f"{label}, {lemma}, %{{x}}: 1-NN %{{y:.1f}}% ({_projection_name(proj)})<extra></extra>"),
                row=1, col=col)
        fig.update_xaxes(title_text="layer", row=1, col=col)
    fig.update_yaxes(title_text="leave-one-out 1-NN sense accuracy (%)", row=1, col=1)
    fig.update_layout(template=TEMPLATE, height=420,
                      title=dict(text=f"Sense separability per layer: {labels[0]} vs {labels[1]}"))
    return fig


def compare_word_senses_figure(a: "WordSensesComparison", b: "WordSensesComparison",
                               labels: Sequence[str]) -> go.Figure:
    """Learned s_j per layer for the lemmas both results fitted, one panel per lemma."""
    lemmas = [r.lemma for r in a.results if any(s.lemma == r.lemma for s in b.results)]
    if not lemmas:
        return _empty("Learned s_j per lemma", "no lemma was fitted in both results")

    def weights(comparison: "WordSensesComparison", lemma: str) -> tuple[list[str], list[float], list[float]]:
        r = next(x for x in comparison.results if x.lemma == lemma)
        return [layer_label(j) for j in range(r.n_layers)], r.weights_mean, r.weights_std

    return _paired_weight_panels(lemmas, [f"“{l}”" for l in lemmas], (a, b), weights, labels,
                                 f"Learned s_j per lemma: {labels[0]} vs {labels[1]}")


def compare_contextuality_figure(a: "ContextualityResult", b: "ContextualityResult",
                                 labels: Sequence[str]) -> go.Figure:
    """Self-similarity and intra-sentence similarity minus anisotropy, per layer, two models."""
    fig = go.Figure()
    for ctx, label, c in zip((a, b), labels, _pair_colours()):
        xs = [layer_label(j) for j in range(len(ctx.self_similarity))]
        fig.add_trace(go.Scatter(x=xs, y=ctx.self_similarity_adjusted, mode="lines+markers",
                                 name=f"{label}: self-similarity − anisotropy", line=dict(color=c, width=2.5),
                                 hovertemplate=f"{label}, %{{x}}: %{{y:.3f}}<extra></extra>"))
        fig.add_trace(go.Scatter(x=xs, y=ctx.intra_sentence_adjusted, mode="lines+markers",
                                 name=f"{label}: intra-sentence − anisotropy", line=dict(color=c, dash="dash"),
                                 hovertemplate=f"{label}, %{{x}}: %{{y:.3f}}<extra></extra>"))
    return _finish(fig, f"Contextuality per layer: {labels[0]} vs {labels[1]}", LAYER_AXIS,
                   "cosine similarity minus anisotropy (−1…1)")


__all__ = [
    "GREY", "PALETTE", "TEMPLATE", "THEMES", "color", "compare_contextuality_figure", "compare_mix_figure",
    "compare_separability_figure", "compare_task_figure", "compare_word_senses_figure", "compare_wsd_figure",
    "contextuality_figure", "layer_label", "lexical_sample_figure", "metric_axis", "mix_weights_figure",
    "projection_figure", "selectivity_figure", "sense_label", "separability_figure", "task_layers_figure",
    "themed", "word_senses_figure", "wsd_layers_figure", "wsd_sets_figure", "wrap",
]
