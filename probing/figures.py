"""Plotly figures of probe results: the report writer and the app draw exactly these.

Every builder takes typed result objects (``probing.suite_results``, ``probing.wsd``,
``probing.projections``, ``probing.word_senses``, ``probing.contextuality``) and returns a
``plotly.graph_objects.Figure`` with a title, axis titles with units, hover text and a legend.
Nothing here computes a number that is not already in the result.

Light and dark themes: the figures use :data:`TEMPLATE`: transparent backgrounds, grid lines
and baselines in a mid grey, trace colours of middle lightness (:data:`PALETTE`) that read on
white and on near-black, and no font colour, so the host decides it (Streamlit's theme in the
app; the report's page script in ``report.html``, which follows ``prefers-color-scheme``).
:func:`themed` gives a copy with explicit colours for a static export (PNG on white).

Scores are plotted in percent (results hold fractions in [0, 1]); cosine-based figures stay
unitless in -1..1; s_j are softmax weights summing to 1.

    >>> from probing.figures import task_layers_figure, themed
    >>> fig = task_layers_figure(suite.task("pos"))     # an interactive figure
    >>> themed(fig, "light").write_image("pos.png")     # on white, for a PNG (needs kaleido)
"""

from __future__ import annotations

import textwrap
from collections import Counter
from typing import TYPE_CHECKING, Callable, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

if TYPE_CHECKING:  # imported for annotations only: building a figure needs none of them
    from probing.contextuality import ContextualityResult
    from probing.projections import ProjectionResult
    from probing.suite_results import SuiteResult, TaskResult
    from probing.wsd import LexicalSampleResult, WsdResult
    from probing.word_senses import WordSensesComparison

PALETTE = ("#3b82f6", "#f97316", "#10b981", "#a855f7", "#ef4444", "#06b6d4", "#eab308", "#ec4899",
           "#84cc16", "#6366f1")
"""Trace colours of middle lightness: each keeps a contrast of at least ~2.5:1 on white and on
near-black backgrounds (blue, orange, green, purple, red, cyan, yellow, pink, lime, indigo)."""

GREY = "#8b949e"
"""Baselines (majority class, first sense, ...) and "other" groups: mid grey, readable on both."""

GRID = "rgba(139, 148, 158, 0.28)"
AXIS = "rgba(139, 148, 158, 0.75)"
FONT = "system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif"

THEMES = {
    "light": {"font": "#1f2328", "paper": "#ffffff"},
    "dark": {"font": "#e6edf3", "paper": "#0d1117"},
}
"""Explicit colours for static exports (:func:`themed`) and for the report page's script."""

_AXIS = dict(gridcolor=GRID, zerolinecolor=AXIS, linecolor=AXIS, showline=True, ticks="outside",
             tickcolor=AXIS, automargin=True, title=dict(standoff=8))

TEMPLATE = go.layout.Template(layout=go.Layout(
    colorway=list(PALETTE),
    font=dict(family=FONT, size=13),
    paper_bgcolor="rgba(0,0,0,0)",
    plot_bgcolor="rgba(0,0,0,0)",
    xaxis=_AXIS,
    yaxis=_AXIS,
    legend=dict(bgcolor="rgba(0,0,0,0)", font=dict(size=12)),
    hoverlabel=dict(namelength=-1),
    margin=dict(l=70, r=30, t=80, b=60),
    title=dict(x=0.01, xanchor="left", font=dict(size=16)),
))
"""The figures' template: no background, grey grid, :data:`PALETTE`, no font colour."""

PAPER_NAME = "Peters et al. (2018)"


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def themed(fig: go.Figure, theme: str = "light") -> go.Figure:
    """A copy of ``fig`` with explicit font and background colours for ``theme`` ("light" or
    "dark"), for exports that have no host to supply them (PNG files)."""
    if theme not in THEMES:
        raise ValueError(f"theme must be one of {sorted(THEMES)}, got {theme!r}")
    colours = THEMES[theme]
    out = go.Figure(fig)
    out.update_layout(font_color=colours["font"], paper_bgcolor=colours["paper"],
                      plot_bgcolor=colours["paper"])
    return out


def color(i: int) -> str:
    """The ``i``-th palette colour (cycling)."""
    return PALETTE[i % len(PALETTE)]


def _rgba(hex_colour: str, alpha: float) -> str:
    h = hex_colour.lstrip("#")
    r, g, b = (int(h[k:k + 2], 16) for k in (0, 2, 4))
    return f"rgba({r}, {g}, {b}, {alpha})"


def _finish(fig: go.Figure, title: str, x_title: str | None, y_title: str | None,
            height: int = 440, **layout) -> go.Figure:
    fig.update_layout(template=TEMPLATE, title=dict(text=title), height=height, **layout)
    if x_title is not None:
        fig.update_layout(xaxis_title_text=x_title)
    if y_title is not None:
        fig.update_layout(yaxis_title_text=y_title)
    return fig


def _cell_centre(fig: go.Figure, row: int, col: int, height: float = 0.5) -> tuple[float, float]:
    """Paper coordinates of a subplot's horizontal centre, ``height`` of the way up (for
    annotations in cells that may hold no trace)."""
    cell = fig.get_subplot(row, col)
    x0, x1 = cell.xaxis.domain
    y0, y1 = cell.yaxis.domain
    return (x0 + x1) / 2, y0 + height * (y1 - y0)


def silhouette_shown(layer) -> float | None:
    """A layer's silhouette, or None when the layer collapsed onto one point (every distance
    is float noise there, so the backend's number carries no information)."""
    return None if layer.collapsed else layer.silhouette


def layer_label(j: int) -> str:
    """"layer 0" ... the x categories of per-layer figures."""
    return f"layer {j}"


LAYER_AXIS = "representation (layer 0 = character CNN, 1..L = LSTM layers)"


def _pct(x: float | None) -> float | None:
    return None if x is None else 100.0 * x


def _interval_errors(intervals) -> dict:
    """Asymmetric error bars (percent) from BootstrapIntervals."""
    return dict(type="data", symmetric=False,
                array=[100 * (i.high - i.estimate) for i in intervals],
                arrayminus=[100 * (i.estimate - i.low) for i in intervals], thickness=1.5, width=5)


def _hline_trace(xs: Sequence, y: float, name: str, colour: str, dash: str, *, group: str | None = None,
                 hover: str | None = None, visible: bool | str = True, width: float = 1.6) -> go.Scatter:
    """A horizontal reference line across categorical ``xs`` as a legend entry."""
    return go.Scatter(x=list(xs), y=[y] * len(xs), mode="lines", name=name, legendgroup=group,
                      line=dict(color=colour, dash=dash, width=width), visible=visible,
                      hovertemplate=(hover or f"{name}: %{{y:.1f}}%") + "<extra></extra>")


def wrap(text: str, width: int = 70) -> str:
    """``text`` wrapped for hover labels (``<br>`` between lines)."""
    return "<br>".join(textwrap.wrap(str(text), width)) or ""


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1].rstrip() + "…"


def _empty(title: str, message: str) -> go.Figure:
    fig = go.Figure()
    fig.add_annotation(text=message, showarrow=False, x=0.5, y=0.5, xref="paper", yref="paper")
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return _finish(fig, title, None, None, height=260)


# --------------------------------------------------------------------------------------------
# The probing suite
# --------------------------------------------------------------------------------------------

_METRIC_AXIS = {"accuracy": "accuracy (%)", "chunk_f1": "chunk F1 (%)"}


def metric_axis(metric: str) -> str:
    """Axis title of a task metric ("accuracy (%)", "chunk F1 (%)")."""
    return _METRIC_AXIS.get(metric, f"{metric} (%)")


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


def _wsd_short(column: str) -> str:
    return "4 test sets" if "+" in column else column


def wsd_sets_figure(wsd: "WsdResult") -> go.Figure:
    """All-words WSD F1 per evaluation set (and the paper's four sets together, and ALL) for
    each layer, the scalar mix and the WordNet first-sense baseline, with the paper's figures
    (four sets) as stars."""
    columns = list(wsd.columns)
    xs = [_wsd_short(c) for c in columns]
    fig = go.Figure()
    rows = [wsd.first_sense, *wsd.rows]
    for k, row in enumerate(rows):
        first = row is wsd.first_sense
        fig.add_trace(go.Scatter(
            x=xs, y=[row.f1(c) for c in columns], mode="markers", name=row.representation,
            marker=dict(size=10 if not first else 12, color=GREY if first else color(k - 1),
                        symbol="line-ew-open" if first else "circle", line=dict(width=3 if first else 0)),
            customdata=[[row.scores[c].n_correct, row.scores[c].n_total] for c in columns],
            hovertemplate=(f"{row.representation}, %{{x}}: F1 %{{y:.1f}}%<br>%{{customdata[0]:,}} of "
                           "%{customdata[1]:,} correct<extra></extra>")))
    four = next((x for x in xs if x == "4 test sets"), None)
    if four is not None:
        for k, (name, value) in enumerate(_paper_wsd(wsd)):
            fig.add_trace(go.Scatter(
                x=[four], y=[value], mode="markers", name=f"{PAPER_NAME}: {name}", legendgroup="paper",
                marker=dict(symbol="star", size=13, color=GREY if "first sense" in name else color(4 + k),
                            line=dict(width=1, color=GREY)),
                hovertemplate=f"{PAPER_NAME}, {name}: %{{y:.1f}}% (four test sets)<extra></extra>"))
    fig.update_layout(scattermode="group", scattergap=0.5)
    return _finish(fig, f"All-words WSD: F1 per evaluation set (1-NN on SemCor sense centroids; "
                        f"{wsd.semcor.get('sentences', 0):,} SemCor sentences)",
                   "evaluation set (Raganato et al. 2017)", "F1 (%)", height=460)


def _paper_wsd(wsd: "WsdResult") -> list[tuple[str, float]]:
    keys = ("WordNet first sense", "biLM layer 1", "biLM layer 2")
    return [(k, float(wsd.paper[k])) for k in keys if k in wsd.paper]


def wsd_layers_figure(wsd: "WsdResult") -> go.Figure:
    """WSD F1 per layer (and the scalar mix) on the paper's four test sets together and on ALL,
    against the WordNet first-sense baseline and the paper's biLM layers 1 and 2."""
    four = next((c for c in wsd.columns if "+" in c), None)
    columns = [c for c in (four, "ALL") if c is not None and c in wsd.columns]
    xs = [r.representation if not r.representation.startswith("mix") else "scalar mix" for r in wsd.rows]
    fig = go.Figure()
    for k, column in enumerate(columns):
        fig.add_trace(go.Scatter(
            x=xs, y=[r.f1(column) for r in wsd.rows], mode="lines+markers", name=f"this model, {_wsd_short(column)}",
            line=dict(color=color(k), width=2.5), marker=dict(size=9),
            hovertemplate=f"{_wsd_short(column)}, %{{x}}: F1 %{{y:.1f}}%<extra></extra>"))
        fig.add_trace(_hline_trace(xs, wsd.first_sense.f1(column), f"WordNet first sense, {_wsd_short(column)}",
                                   color(k), "dot"))
    paper = dict(_paper_wsd(wsd))
    if four is not None and paper:
        for j in (1, 2):
            name = f"biLM layer {j}"
            if name in paper and layer_label(j) in xs:
                fig.add_trace(go.Scatter(
                    x=[layer_label(j)], y=[paper[name]], mode="markers", name=f"{PAPER_NAME}: {name} (4 test sets)",
                    legendgroup="paper",
                    marker=dict(symbol="star", size=14, color=color(4), line=dict(width=1, color=GREY)),
                    hovertemplate=f"{PAPER_NAME}, {name}: %{{y:.1f}}% (their full-size biLM)<extra></extra>"))
        if "WordNet first sense" in paper:
            fig.add_trace(_hline_trace(xs, paper["WordNet first sense"], f"{PAPER_NAME}: first sense (4 test sets)",
                                       GREY, "dashdot", group="paper"))
    fig.update_xaxes(categoryorder="array", categoryarray=xs)
    return _finish(fig, "All-words WSD F1 per layer: the four test sets and ALL vs the first-sense baseline",
                   LAYER_AXIS, "F1 (%)")


def lexical_sample_figure(lex: "LexicalSampleResult") -> go.Figure:
    """Senseval-2 lexical-sample probe accuracy per layer and word, with its control task
    (dotted) and the majority sense (dashed)."""
    if not lex.words:
        return _empty("Senseval-2 lexical sample", "no words were probed")
    fig = go.Figure()
    n_layers = len(lex.words[0].layer_accuracy)
    xs = [layer_label(j) for j in range(n_layers)]
    for k, w in enumerate(lex.words):
        c = color(k)
        fig.add_trace(go.Scatter(
            x=xs, y=[100 * a for a in w.layer_accuracy], mode="lines+markers",
            name=f"{w.word} (n = {w.n_train + w.n_test})",
            legendgroup=w.word, line=dict(color=c, width=2.5),
            customdata=[100 * s for s in w.selectivity],
            hovertemplate=(f"{w.word}, %{{x}}: accuracy %{{y:.1f}}%, selectivity %{{customdata:+.1f}} points"
                           "<extra></extra>")))
        fig.add_trace(go.Scatter(
            x=xs, y=[100 * a for a in w.control_accuracy], mode="lines", name=f"{w.word}: control task",
            legendgroup=w.word, line=dict(color=c, dash="dot", width=1.5),
            hovertemplate=f"{w.word} control, %{{x}}: %{{y:.1f}}%<extra></extra>"))
        fig.add_trace(_hline_trace(xs, 100 * w.majority_accuracy, f"{w.word}: majority sense", c, "dash",
                                   group=w.word, width=1.2))
    return _finish(fig, "Senseval-2 lexical sample: linear sense probe per layer (test accuracy)",
                   LAYER_AXIS, "accuracy (%)")


# --------------------------------------------------------------------------------------------
# Senses of one word: projections, separability, learned s_j
# --------------------------------------------------------------------------------------------


def sense_label(sense: str | None, gloss: str | None, width: int = 48) -> str:
    """A legend label: the sense (key or user label) and the start of its gloss."""
    if sense is None:
        return "no sense label"
    return _short(f"{sense} — {gloss}" if gloss else sense, width)


def _marked_sentence(sentence: str, start: int, end: int) -> str:
    words = sentence.split(" ")
    return " ".join(words[:start] + ["[" + " ".join(words[start:end]) + "]"] + words[end:])


def projection_figure(proj: "ProjectionResult", methods: Sequence[str] = ("umap", "pca"),
                      max_senses: int = 8) -> go.Figure:
    """One column per layer, one row per method (UMAP, PCA): the lemma's occurrences coloured
    by sense (the ``max_senses`` commonest; the rest grey), hover with the sentence and gloss.
    Each column's title carries the layer's sense separability (leave-one-out 1-NN accuracy vs
    the majority sense, silhouette), computed on the full vectors, not on the picture."""

    rows = [m for m in methods if m == "pca" or any(l.umap is not None for l in proj.layers)]
    n_cols = len(proj.layers)
    titles = []
    for m in rows:
        for layer in proj.layers:
            if m == rows[0]:
                sep = []
                if layer.loo_1nn_accuracy is not None:
                    sep.append(f"1-NN {100 * layer.loo_1nn_accuracy:.0f}% (maj. {100 * layer.majority_baseline:.0f}%)")
                if silhouette_shown(layer) is not None:
                    sep.append(f"sil. {layer.silhouette:+.2f}")
                titles.append(f"layer {layer.layer} · {m.upper()}" + ("<br>" + ", ".join(sep) if sep else ""))
            else:
                ev = sum(layer.pca_explained) * 100
                titles.append(f"layer {layer.layer} · PCA ({ev:.0f}% of variance)")
    fig = make_subplots(rows=len(rows), cols=n_cols, subplot_titles=titles, horizontal_spacing=0.04,
                        vertical_spacing=0.16 if len(rows) > 1 else 0.1)
    counts = Counter(p.sense for p in proj.points)
    ranked = [s for s, _ in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0])))]
    shown = ranked[:max_senses] if len(ranked) > max_senses else ranked
    other = [s for s in ranked if s not in shown]
    groups: list[tuple[str, list[int], str]] = []
    for k, sense in enumerate(shown):
        idx = [i for i, p in enumerate(proj.points) if p.sense == sense]
        gloss = proj.senses.get(sense) if sense is not None else None
        groups.append((f"{sense_label(sense, gloss)} ({len(idx)})", idx, GREY if sense is None else color(k)))
    if other:
        idx = [i for i, p in enumerate(proj.points) if p.sense in other]
        groups.append((f"{len(other)} other senses ({len(idx)})", idx, GREY))
    hover = [f"<b>{p.sense or 'no label'}</b> ({p.source})<br>{wrap(p.gloss or '', 60)}<br>"
             f"{wrap(_marked_sentence(p.sentence, p.start, p.end), 70)}" for p in proj.points]
    in_legend: set[str] = set()
    for r, method in enumerate(rows, start=1):
        for c, layer in enumerate(proj.layers, start=1):
            coords = layer.umap if method == "umap" else layer.pca
            if coords is None:
                x, y = _cell_centre(fig, r, c)
                fig.add_annotation(text=f"UMAP skipped<br>({layer.n_distinct} distinct points)", showarrow=False,
                                   xref="paper", yref="paper", x=x, y=y, xanchor="center")
                continue
            for name, idx, colour in groups:
                fig.add_trace(go.Scatter(
                    x=[coords[i][0] for i in idx], y=[coords[i][1] for i in idx], mode="markers", name=name,
                    legendgroup=name, showlegend=name not in in_legend,
                    marker=dict(color=colour, size=8, opacity=0.85, line=dict(width=0.5, color=GREY)),
                    text=[hover[i] for i in idx], hovertemplate="%{text}<extra></extra>"), row=r, col=c)
                in_legend.add(name)
            if layer.collapsed:
                n = len(proj.points)
                x, y = _cell_centre(fig, r, c, 0.12)
                fig.add_annotation(text=f"all {n} occurrences<br>on one point", showarrow=False,
                                   xref="paper", yref="paper", x=x, y=y, xanchor="center")
            unit = "arbitrary units" if method == "umap" else "units of the vectors"
            fig.update_xaxes(title_text=f"{'UMAP' if method == 'umap' else 'PC'} 1 ({unit})" if c == 1 else
                             f"{'UMAP' if method == 'umap' else 'PC'} 1",
                             showticklabels=False, ticks="", row=r, col=c, title_font_size=11)
            fig.update_yaxes(title_text=f"{'UMAP' if method == 'umap' else 'PC'} 2" if c == 1 else None,
                             showticklabels=False, ticks="", row=r, col=c, title_font_size=11)
    source = sorted({p.source for p in proj.points})
    title = (f"“{proj.lemma}”{' (' + proj.pos + ')' if proj.pos else ''}: {len(proj.points)} occurrences "
             f"({', '.join({'user': 'demo sentences', 'semcor': 'SemCor'}.get(s, s) for s in source)}) per layer, "
             "coloured by sense")
    fig.update_layout(template=TEMPLATE, title=dict(text=title), height=340 * len(rows) + 140,
                      legend=dict(orientation="h", yanchor="top", y=-0.08, x=0))
    fig.update_annotations(font_size=12, selector=dict(showarrow=False))
    return fig


def _projection_name(proj: "ProjectionResult") -> str:
    sources = {p.source for p in proj.points}
    where = "SemCor" if sources == {"semcor"} else ("demo sentences" if sources == {"user"} else "mixed")
    return f"{proj.lemma} ({where}, n = {len(proj.points)})"


def separability_figure(projections: Sequence["ProjectionResult"]) -> go.Figure:
    """Sense separability per layer for each lemma: leave-one-out 1-NN sense accuracy (solid;
    the majority-sense share dotted) and the silhouette of the senses."""
    if not projections:
        return _empty("Sense separability per layer", "no lemma was projected")
    fig = make_subplots(rows=1, cols=2, subplot_titles=("leave-one-out 1-NN sense accuracy",
                                                        "silhouette of the sense groups"),
                        horizontal_spacing=0.12)
    categories: list[str] = []
    for k, proj in enumerate(projections):
        c = color(k)
        name = _projection_name(proj)
        xs = [layer_label(l.layer) for l in proj.layers]
        categories += [x for x in xs if x not in categories]
        fig.add_trace(go.Scatter(
            x=xs, y=[_pct(l.loo_1nn_accuracy) for l in proj.layers], mode="lines+markers", name=name,
            legendgroup=name, line=dict(color=c, width=2.5), connectgaps=False,
            hovertemplate=f"{proj.lemma}, %{{x}}: 1-NN %{{y:.1f}}%<extra></extra>"), row=1, col=1)
        majority = next((l.majority_baseline for l in proj.layers if l.majority_baseline is not None), None)
        if majority is not None:
            fig.add_trace(_hline_trace(xs, 100 * majority, f"{proj.lemma}: majority sense", c, "dot", group=name,
                                       width=1.2), row=1, col=1)
        fig.add_trace(go.Scatter(
            x=xs, y=[silhouette_shown(l) for l in proj.layers], mode="lines+markers", name=f"{proj.lemma}: silhouette",
            legendgroup=name, showlegend=False, line=dict(color=c, width=2.5),
            hovertemplate=f"{proj.lemma}, %{{x}}: silhouette %{{y:+.3f}}<extra></extra>"), row=1, col=2)
    fig.update_xaxes(categoryorder="array", categoryarray=categories)
    fig.update_xaxes(title_text="layer", row=1, col=1)
    fig.update_xaxes(title_text="layer", row=1, col=2)
    fig.update_yaxes(title_text="accuracy (%)", range=[0, 102], row=1, col=1)
    fig.update_yaxes(title_text="silhouette (cosine distance, −1…1)", row=1, col=2)
    fig.update_layout(template=TEMPLATE, title=dict(text="Sense separability per layer (on the full vectors)"),
                      height=430)
    return fig


def word_senses_figure(comparison: "WordSensesComparison") -> go.Figure:
    """The per-lemma panel: learned s_j per layer for several lemmas side by side (bars, mean ±
    sd over seeds × folds) with each lemma's single-layer sense accuracy as a line (right axis)."""
    results = comparison.results
    if not results:
        refused = "; ".join(f"{k}: {v}" for k, v in comparison.refused.items())
        return _empty("Learned s_j per lemma", wrap("no lemma could be fitted. " + refused, 90))
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    categories: list[str] = []
    for k, r in enumerate(results):
        c = color(k)
        xs = [layer_label(j) for j in range(r.n_layers)]
        categories += [x for x in xs if x not in categories]
        name = f"{r.lemma}{' (' + r.pos + ')' if r.pos else ''}"
        source = "SemCor" if r.source == "semcor" else "demo sentences"
        fig.add_trace(go.Bar(
            x=xs, y=r.weights_mean, name=f"{name}: s_j ({source}, n = {sum(r.senses.values())}, "
                                         f"{len(r.senses)} senses)",
            legendgroup=name, offsetgroup=str(k), marker_color=_rgba(c, 0.75), marker_line=dict(color=c, width=1.5),
            error_y=dict(type="data", array=r.weights_std, thickness=1.5, width=4),
            hovertemplate=f"{name}, %{{x}}: s_j = %{{y:.3f}}<extra></extra>"), secondary_y=False)
        fig.add_trace(go.Scatter(
            x=xs, y=[100 * a for a in r.layer_accuracy_mean], mode="lines+markers",
            name=f"{name}: single-layer accuracy (mix {100 * r.mix_accuracy_mean:.0f}%, "
                 f"majority {100 * r.majority_accuracy_mean:.0f}%)",
            legendgroup=name, line=dict(color=c, width=2.5), marker=dict(size=8, symbol="diamond"),
            error_y=dict(type="data", array=[100 * s for s in r.layer_accuracy_std], thickness=1, width=3),
            hovertemplate=f"{name}, %{{x}} alone: sense accuracy %{{y:.1f}}%<extra></extra>"), secondary_y=True)
    fig.update_xaxes(categoryorder="array", categoryarray=categories, title_text=LAYER_AXIS)
    # s_j in [0, 1] and accuracy in [0, 100] %: the two axes' grid lines coincide
    fig.update_yaxes(title_text="s_j (softmax weight, sums to 1)", secondary_y=False, range=[0, 1])
    fig.update_yaxes(title_text="single-layer sense accuracy (%)", secondary_y=True, showgrid=False,
                     range=[0, 100])
    fig.update_layout(template=TEMPLATE, barmode="group", height=480,
                      title=dict(text="Which layers separate the senses? Learned s_j per lemma (bars) and "
                                      "single-layer accuracy (lines)"),
                      legend=dict(orientation="h", yanchor="top", y=-0.2, x=0))
    return fig


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
