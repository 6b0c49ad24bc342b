"""Figures of the information probes: online codelength and compression, the bits a layer adds
beyond layer 0, and what the removal of a task costs against a random removal."""

from __future__ import annotations

from typing import TYPE_CHECKING

import plotly.graph_objects as go
from plotly.subplots import make_subplots

if TYPE_CHECKING:  # imported for annotations only: building a figure needs none of them
    from probing.information.results import TaskInformation

from probing.figures.style import GREY, LAYER_AXIS, _empty, _finish, color, layer_label


def _titled(task: "TaskInformation", what: str, model_name: str) -> str:
    return f"{task.task}: {what}" + (f" ({model_name})" if model_name else "")


def mdl_figure(task: "TaskInformation", model_name: str = "") -> go.Figure:
    """Online codelength (kbits) and compression (uniform / online) per layer, for the task's
    labels and for its control labels: a layer that gives a property up easily has a short code
    for the task and a long one for the control."""
    title = _titled(task, "MDL online code per layer", model_name)
    if not task.codes:
        return _empty(title, "MDL was not run for this task")
    xs = [layer_label(c.layer) for c in task.codes]
    fig = make_subplots(rows=1, cols=2, subplot_titles=("online codelength", "compression"),
                        horizontal_spacing=0.14)
    series = [("task labels", [c.task for c in task.codes], color(0))]
    if all(c.control is not None for c in task.codes):
        series.append(("control labels", [c.control for c in task.codes], GREY))
    for name, codes, colour in series:
        fig.add_trace(go.Bar(x=xs, y=[c.online_bits / 1000 for c in codes], name=name, legendgroup=name,
                             marker_color=colour,
                             hovertemplate=f"{name}, %{{x}}: %{{y:.1f}} kbits<extra></extra>"), row=1, col=1)
        fig.add_trace(go.Scatter(x=xs, y=[c.compression for c in codes], name=name, legendgroup=name,
                                 showlegend=False, mode="lines+markers", line=dict(color=colour),
                                 hovertemplate=f"{name}, %{{x}}: %{{y:.2f}}x<extra></extra>"), row=1, col=2)
    uniform = task.codes[0].task.uniform_bits / 1000
    fig.add_trace(go.Scatter(x=xs, y=[uniform] * len(xs), mode="lines", name="uniform code",
                             line=dict(color=GREY, dash="dot"),
                             hovertemplate="uniform code: %{y:.1f} kbits<extra></extra>"), row=1, col=1)
    fig.update_yaxes(title_text="kbits (lower: learnt from fewer examples)", row=1, col=1)
    fig.update_yaxes(title_text="uniform / online (higher: easier)", row=1, col=2)
    fig.update_xaxes(title_text=LAYER_AXIS, row=1, col=1)
    n = task.codes[0].task.n_examples
    return _finish(fig, f"{title}; {n:,} training tokens", None, None, barmode="group")


def conditional_figure(task: "TaskInformation", model_name: str = "") -> go.Figure:
    """Bits per token each layer j >= 1 adds beyond layer 0 (95% bootstrap intervals), beside what
    the layer alone and layer 0 alone carry (V-information) and the labels' entropy H(Y)."""
    title = _titled(task, "information beyond layer 0", model_name)
    if not task.conditional:
        return _empty(title, "conditional probing was not run for this task (it needs a layer above 0)")
    results = task.conditional
    xs = [layer_label(c.layer) for c in results]
    fig = go.Figure()
    fig.add_trace(go.Bar(
        x=xs, y=[c.conditional.estimate for c in results], name="beyond layer 0: I(layer j; Y | layer 0)",
        marker_color=color(0),
        error_y=dict(type="data", symmetric=False, array=[c.conditional.high - c.conditional.estimate for c in results],
                     arrayminus=[c.conditional.estimate - c.conditional.low for c in results]),
        hovertemplate="%{x} adds %{y:.3f} bits/token beyond layer 0<extra></extra>"))
    fig.add_trace(go.Bar(x=xs, y=[c.layer_information for c in results], name="layer j alone: I(layer j; Y)",
                         marker_color=color(1),
                         hovertemplate="%{x} alone: %{y:.3f} bits/token<extra></extra>"))
    fig.add_trace(go.Scatter(x=xs, y=[results[0].baseline_information] * len(xs), mode="lines",
                             name="layer 0 alone", line=dict(color=GREY, dash="dash"),
                             hovertemplate="layer 0 alone: %{y:.3f} bits/token<extra></extra>"))
    fig.add_trace(go.Scatter(x=xs, y=[results[0].label_entropy] * len(xs), mode="lines",
                             name="H(Y): all there is to know", line=dict(color=GREY, dash="dot"),
                             hovertemplate="H(Y) = %{y:.3f} bits/token<extra></extra>"))
    return _finish(fig, title, LAYER_AXIS, "bits per test token", barmode="group")


def amnesic_figure(task: "TaskInformation", model_name: str = "") -> go.Figure:
    """What removing the task from a layer (INLP) costs, against removing as many random
    directions: each task's probe accuracy drop per layer (percentage points) and, at the top
    layer, the language model's cross-entropy rise (bits per prediction)."""
    title = _titled(task, f"amnesic probing: {task.task} removed", model_name)
    if not task.amnesic:
        return _empty(title, "amnesic probing was not run for this task")
    layers = task.amnesic
    xs = [layer_label(a.layer) for a in layers]
    lm_layers = [a for a in layers if a.lm is not None]
    fig = make_subplots(rows=1, cols=2, column_widths=[0.7, 0.3], horizontal_spacing=0.14,
                        subplot_titles=("probe accuracy lost (points)", "language model loss added (bits)"))
    names = [task.task] + sorted({name for a in layers for name in a.other_tasks})
    for i, name in enumerate(names):
        scores = [a.task_accuracy if name == task.task else a.other_tasks.get(name) for a in layers]
        for kind, dash in (("amnesic", "solid"), ("random", "dot")):
            drop = [None if s is None else 100 * (s["original"] - s[kind]) for s in scores]
            label = f"{name}, {task.task} removed" if kind == "amnesic" else f"{name}, random control"
            fig.add_trace(go.Scatter(x=xs, y=drop, name=label, mode="lines+markers", legendgroup=name,
                                     line=dict(color=color(i), dash=dash),
                                     hovertemplate=f"{label}, %{{x}}: %{{y:.1f}} points<extra></extra>"),
                          row=1, col=1)
    if lm_layers:
        a = lm_layers[-1]
        rise = [a.lm[kind]["mean"] - a.lm["original"]["mean"] for kind in ("amnesic", "random")]
        fig.add_trace(go.Bar(x=[f"{task.task} removed", "random control"], y=rise, showlegend=False,
                             marker_color=[color(0), GREY],
                             hovertemplate="%{x}: +%{y:.3f} bits/prediction<extra></extra>"), row=1, col=2)
    else:
        note = next((a.lm_note for a in reversed(layers) if a.lm_note), "not measured")
        fig.add_annotation(text=note if len(note) < 60 else "no softmax: not measured", showarrow=False,
                           row=1, col=2, x=0.5, y=0.5, xref="x2 domain", yref="y2 domain")
    short = [a.layer for a in layers if not a.reached_majority]
    if short:  # an incomplete removal: what is lost is a lower bound, and the figure says so
        title += f"; INLP stopped above the majority level at layer {', '.join(map(str, short))}"
    fig.update_yaxes(title_text="points lost (original - projected)", row=1, col=1)
    fig.update_yaxes(title_text="bits per prediction", row=1, col=2)
    fig.update_xaxes(title_text=LAYER_AXIS, row=1, col=1)
    return _finish(fig, title, None, None, height=460)


METHOD_DASH = {"leace": "solid", "mean projection": "dash", "inlp": "dot"}


def erasure_figure(task: "TaskInformation", model_name: str = "") -> go.Figure:
    """LEACE, the mean projection and INLP side by side, every layer in one chart per measure: the
    task's probe accuracy after each erasure (the random control of the same rank beside it, the
    majority label dashed), the other tasks' accuracy lost, the vectors' mean squared change, and at
    the top layer the language model's loss added (bits per prediction)."""
    title = _titled(task, f"three erasers: {task.task} removed", model_name)
    if not task.erasure:
        return _empty(title, "the erasure comparison was not run for this task")
    layers = task.erasure
    xs = [layer_label(e.layer) for e in layers]
    lm = [e for e in layers if e.lm_original is not None]
    titles = [f"{task.task} accuracy after erasure (%)", "other tasks: points lost", "vectors moved (mean sq. change)"]
    fig = make_subplots(rows=1, cols=3 + bool(lm), horizontal_spacing=0.07,
                        subplot_titles=titles + (["LM loss added (bits)"] if lm else []))
    fig.add_trace(go.Scatter(x=xs, y=[100 * e.original for e in layers], name="before erasure", mode="lines+markers",
                             line=dict(color=GREY), hovertemplate="before, %{x}: %{y:.1f}%<extra></extra>"), row=1, col=1)
    fig.add_trace(go.Scatter(x=xs, y=[100 * e.majority for e in layers], name="majority label (the goal)",
                             mode="lines", line=dict(color=GREY, dash="dash"),
                             hovertemplate="majority, %{x}: %{y:.1f}%<extra></extra>"), row=1, col=1)
    for i, method in enumerate(o.method for o in layers[0].outcomes):
        outcomes = [e.outcome(method) for e in layers]
        style = dict(color=color(i), dash=METHOD_DASH.get(method, "solid"))
        fig.add_trace(go.Scatter(x=xs, y=[100 * o.task_accuracy for o in outcomes], name=method, legendgroup=method,
                                 mode="lines+markers", line=style,
                                 customdata=[o.rank for o in outcomes],
                                 hovertemplate=f"{method}, %{{x}}: %{{y:.1f}}% (rank %{{customdata}})<extra></extra>"),
                      row=1, col=1)
        fig.add_trace(go.Scatter(x=xs, y=[100 * o.random_accuracy for o in outcomes], legendgroup=method,
                                 name=f"{method}: random control", mode="markers", marker=dict(color=color(i),
                                                                                               symbol="x"),
                                 hovertemplate=f"random, rank of {method}, %{{x}}: %{{y:.1f}}%<extra></extra>"),
                      row=1, col=1)
        lost = [None if not o.other_tasks else sum(100 * (e.other_original[t] - v["after"])
                                                   for t, v in o.other_tasks.items()) / len(o.other_tasks)
                for e, o in zip(layers, outcomes)]
        fig.add_trace(go.Scatter(x=xs, y=lost, showlegend=False, legendgroup=method, mode="lines+markers", line=style,
                                 hovertemplate=f"{method}, %{{x}}: %{{y:.1f}} points<extra></extra>"), row=1, col=2)
        fig.add_trace(go.Scatter(x=xs, y=[o.mean_squared_change for o in outcomes], showlegend=False,
                                 legendgroup=method, mode="lines+markers", line=style,
                                 hovertemplate=f"{method}, %{{x}}: %{{y:.3g}}<extra></extra>"), row=1, col=3)
        if lm:
            top = lm[-1].outcome(method)
            fig.add_trace(go.Bar(x=[method, f"{method}: random"], y=[top.lm["after"] - lm[-1].lm_original,
                                                                     top.lm["random"] - lm[-1].lm_original],
                                 showlegend=False, marker_color=[color(i), GREY],
                                 hovertemplate="%{x}: %{y:+.3f} bits/prediction<extra></extra>"), row=1, col=4)
    for col in (1, 2, 3):
        fig.update_xaxes(title_text=LAYER_AXIS, row=1, col=col)
    return _finish(fig, title, None, None, height=460)


__all__ = ["amnesic_figure", "conditional_figure", "erasure_figure", "mdl_figure"]
