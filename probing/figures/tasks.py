"""Figures of the tagging suite: a task across layers, selectivity, the learned mix weights s_j."""

from __future__ import annotations

from typing import TYPE_CHECKING

import plotly.graph_objects as go

if TYPE_CHECKING:  # imported for annotations only: building a figure needs none of them
    from probing.tagging.results import SuiteResult, TaskResult

from probing.figures.style import (
    GREY,
    LAYER_AXIS,
    _empty,
    _finish,
    _hline_trace,
    _interval_errors,
    color,
    layer_label,
    metric_axis,
    wrap,
)


def task_layers_figure(task: "TaskResult", model_name: str = "") -> go.Figure:
    """Test score per layer with 95% bootstrap intervals, the scalar mix (each seed), the
    direction halves (hidden until clicked), the baselines (majority class, word-conditional
    majority, random-initialised biLM, the model on the random biLM's training subset) and the
    published reference figures (markers at their layer; whole systems as dotted lines)."""
    layers = [r.layer for r in task.layers]
    xs = [layer_label(j) for j in layers]
    categories = xs + (["scalar mix"] if task.mix is not None else [])
    fig = go.Figure()
    metric = task.metric
    axis = metric_axis(metric)
    unit_name = "accuracy" if metric == "accuracy" else "F1"

    b = task.baselines
    fig.add_trace(_hline_trace(categories, 100 * b.majority.estimate, "majority class", GREY, "dot",
                               group="baselines"))
    fig.add_trace(_hline_trace(categories, 100 * b.word_majority.estimate, "word-conditional majority", GREY,
                               "dash", group="baselines"))
    if b.random_bilm:
        fig.add_trace(go.Scatter(
            x=[layer_label(p.layer) for p in b.random_bilm], y=[100 * p.test.estimate for p in b.random_bilm],
            error_y=_interval_errors([p.test for p in b.random_bilm]), mode="lines+markers",
            name=f"random-init biLM ({b.random_bilm_train_tokens:,} training tokens)", legendgroup="baselines",
            line=dict(color=GREY, dash="dashdot"), marker=dict(symbol="x", size=8),
            hovertemplate="random biLM %{x}: %{y:.2f}%<extra></extra>"))
    if b.same_data:
        fig.add_trace(go.Scatter(
            x=[layer_label(p.layer) for p in b.same_data], y=[100 * p.test.estimate for p in b.same_data],
            error_y=_interval_errors([p.test for p in b.same_data]), mode="lines+markers",
            name=f"this model, same {b.random_bilm_train_tokens:,} tokens", legendgroup="baselines",
            line=dict(color=color(0), dash="dot", width=1.5), marker=dict(size=6), visible="legendonly",
            hovertemplate="model on the random biLM's subset, %{x}: %{y:.2f}%<extra></extra>"))
    for k, direction in enumerate(("forward", "backward")):
        halves = [h for r in task.layers for h in r.halves if h.direction == direction]
        if halves:
            fig.add_trace(go.Scatter(
                x=[layer_label(h.layer) for h in halves], y=[100 * h.test.estimate for h in halves],
                error_y=_interval_errors([h.test for h in halves]), mode="lines+markers",
                name=f"{direction} LSTM half", line=dict(color=color(2 + k), dash="dash", width=1.5),
                visible="legendonly", hovertemplate=f"{direction} half, %{{x}}: %{{y:.2f}}%<extra></extra>"))
    fig.add_trace(go.Scatter(
        x=xs, y=[100 * r.probe.test.estimate for r in task.layers],
        error_y=_interval_errors([r.probe.test for r in task.layers]), mode="lines+markers",
        name=f"{model_name or 'model'}: linear probe", line=dict(color=color(0), width=2.5), marker=dict(size=9),
        customdata=[[100 * r.probe.test.low, 100 * r.probe.test.high, 100 * r.probe.dev_score, r.probe.alpha]
                    for r in task.layers],
        hovertemplate=(f"%{{x}}: test {unit_name} %{{y:.2f}}% (95% CI %{{customdata[0]:.2f}}–%{{customdata[1]:.2f}})"
                       "<br>dev %{customdata[2]:.2f}%, alpha %{customdata[3]:g}<extra></extra>")))
    if task.mix is not None:
        fig.add_trace(go.Scatter(
            x=["scalar mix"] * len(task.mix.probes), y=[100 * p.test.estimate for p in task.mix.probes],
            error_y=_interval_errors([p.test for p in task.mix.probes]), mode="markers",
            name=f"scalar mix (s_j learned; {len(task.mix.probes)} seeds)",
            marker=dict(color=color(1), size=10, symbol="diamond"),
            customdata=[[p.seed] for p in task.mix.probes],
            hovertemplate=f"scalar mix, seed %{{customdata[0]}}: {unit_name} %{{y:.2f}}%<extra></extra>"))
    for k, ref in enumerate(b.reference):
        name = f"{ref.source}: {ref.system}" + (f" layer {ref.layer}" if ref.layer is not None else "")
        hover = f"{name}: %{{y:.1f}}%<br>{wrap(ref.note, 60)}"
        if ref.layer is not None and layer_label(ref.layer) in xs:
            fig.add_trace(go.Scatter(
                x=[layer_label(ref.layer)], y=[100 * ref.value], mode="markers", name=name, legendgroup="reference",
                marker=dict(symbol="star", size=13, color=color(4) if ref.system == "biLM" else color(6),
                            line=dict(width=1, color=GREY)),
                hovertemplate=hover + "<extra></extra>"))
        else:
            fig.add_trace(_hline_trace(categories, 100 * ref.value, name, color(4 + k % 3), "dot",
                                       group="reference", hover=hover, width=1.2))
    title = (f"{task.task}: {unit_name} per layer ({task.dataset}, {task.n_sentences.get('test', 0):,} test "
             f"sentences; 95% bootstrap intervals)")
    fig.update_xaxes(categoryorder="array", categoryarray=categories)
    return _finish(fig, title, LAYER_AXIS, axis, height=480)


def selectivity_figure(suite: "SuiteResult") -> go.Figure:
    """Selectivity per layer and task (Hewitt & Liang 2019): task token accuracy minus the
    accuracy of the same probe on control labels, in accuracy points."""
    fig = go.Figure()
    categories: list[str] = []
    for k, task in enumerate(suite.tasks):
        xs = [layer_label(r.layer) for r in task.layers]
        categories += [x for x in xs if x not in categories]
        fig.add_trace(go.Bar(
            x=xs, y=[100 * r.selectivity for r in task.layers], name=task.task, marker_color=color(k),
            customdata=[[100 * r.probe.test_accuracy, 100 * r.control.test_accuracy] for r in task.layers],
            hovertemplate=(f"{task.task}, %{{x}}: selectivity %{{y:+.2f}} points<br>task accuracy "
                           "%{customdata[0]:.2f}%, control accuracy %{customdata[1]:.2f}%<extra></extra>")))
    fig.update_xaxes(categoryorder="array", categoryarray=categories)
    return _finish(fig, "Selectivity per layer: task accuracy − control-task accuracy (Hewitt & Liang 2019)",
                   LAYER_AXIS, "selectivity (accuracy points)", barmode="group")


def mix_weights_figure(suite: "SuiteResult") -> go.Figure:
    """The learned scalar-mix weights s_j per task (mean ± sd over the seeds), with the
    uniform weight 1/(L+1) as a reference line."""
    tasks = [t for t in suite.tasks if t.mix is not None]
    if not tasks:
        return _empty("Scalar-mix weights s_j", "no task has a scalar-mix probe (one layer probed, or mix disabled)")
    fig = go.Figure()
    categories: list[str] = []
    for k, task in enumerate(tasks):
        mix = task.mix
        xs = [layer_label(j) for j in mix.layers]
        categories += [x for x in xs if x not in categories]
        fig.add_trace(go.Bar(
            x=xs, y=list(mix.weights_mean), name=f"{task.task} (γ = {mix.gamma_mean:.2f} ± {mix.gamma_std:.2f})",
            marker_color=color(k), error_y=dict(type="data", array=list(mix.weights_std), thickness=1.5, width=5),
            customdata=list(mix.weights_std),
            hovertemplate=f"{task.task}, %{{x}}: s_j = %{{y:.3f}} ± %{{customdata:.3f}}<extra></extra>"))
    n = max(len(t.mix.layers) for t in tasks)
    fig.add_trace(_hline_trace(categories, 1.0 / n, f"uniform (1/{n})", GREY, "dot",
                               hover=f"uniform weight 1/{n} = %{{y:.3f}}"))
    fig.update_xaxes(categoryorder="array", categoryarray=categories)
    seeds = len(tasks[0].mix.seeds)
    return _finish(fig, f"Learned scalar-mix weights s_j per task (mean ± sd over {seeds} seeds)",
                   LAYER_AXIS, "s_j (softmax weight, sums to 1)", barmode="group")


# --------------------------------------------------------------------------------------------
# Word-sense disambiguation
# --------------------------------------------------------------------------------------------
