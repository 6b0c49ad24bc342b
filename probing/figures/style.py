"""The figures' shared style: palette, template, light and dark themes, layer labels and axis helpers."""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Sequence

import plotly.graph_objects as go

if TYPE_CHECKING:  # imported for annotations only: building a figure needs none of them
    pass


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


def marked_sentence(sentence: str, start: int, end: int) -> str:
    """A space-joined sentence with its words ``start:end`` in [brackets] (an occurrence's target)."""
    words = sentence.split(" ")
    return " ".join(words[:start] + ["[" + " ".join(words[start:end]) + "]"] + words[end:])


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
