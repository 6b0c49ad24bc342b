"""The syntax sections of a probe report, and their figures.

Report tasks (``python -m probing.report --tasks structural arcs``):

- ``structural``: Hewitt & Manning's distance and depth probes per layer, on the model and a
  random-initialised biLM, with layer 0 and the linear chain as baselines (``probing.syntax.structural``).
- ``arcs``: edge probes on gold arcs: is j the head of i, and the relation of a gold arc
  (``probing.syntax.edges``).

Both sections add a context-attribution panel for "bank" in "We pulled the canoe onto the muddy
bank of the river" (``probing.context.attribution``): one sentence, a second or two.

Figures are plotly, in the style of :mod:`probing.figures` (its template and palette); plotly is
imported by the functions that draw, so running a section, and reading a saved one, need no
``[report]`` extra.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from probing.context.attribution import AttributionResult, attribute_context
from probing.syntax.edges import EdgeResult, run_edges
from probing.syntax.structural import StructuralResult, run_structural
from probing.syntax.trees import ARC_LENGTHS, DependencyTree

if TYPE_CHECKING:  # annotations only: plotly is imported where a figure is drawn
    import plotly.graph_objects as go

SYNTAX_TASKS = ("structural", "arcs")
"""Report task names of the syntax probes."""

BANK_SENTENCE = "We pulled the canoe onto the muddy bank of the river"
BANK_REFERENCE = "They fished from the grassy bank of the stream"
"""The attribution example and its reference occurrence (a river bank in another sentence)."""

HEWITT_MANNING = {"uuas": 0.770, "dspr": 0.83, "root_acc": 0.900, "nspr": 0.87}
"""Hewitt & Manning (2019), ELMo layer 1 on PTB (WSJ, Stanford dependencies): the best layer."""


@dataclass(frozen=True)
class SyntaxSection:
    """What the syntax sections of a report measured (each part None when not asked for)."""

    structural: StructuralResult | None = None
    edges: EdgeResult | None = None
    attribution: AttributionResult | None = None

    def to_json(self) -> str:
        return json.dumps({"structural": None if self.structural is None else self.structural.to_dict(),
                           "edges": None if self.edges is None else self.edges.to_dict(),
                           "attribution": None if self.attribution is None else json.loads(self.attribution.to_json())})

    @classmethod
    def from_json(cls, text: str) -> "SyntaxSection":
        d = json.loads(text)
        return cls(None if d["structural"] is None else StructuralResult.from_dict(d["structural"]),
                   None if d["edges"] is None else EdgeResult.from_dict(d["edges"]),
                   None if d["attribution"] is None else AttributionResult.from_json(json.dumps(d["attribution"])))


def run_syntax_section(model, tasks: Sequence[str], data_root=None, cache_dir=None, seed: int = 0,
                       limit: int | None = None, config=None, suite_config=None, progress=None) -> SyntaxSection:
    """Run the syntax probes of ``tasks`` (any of :data:`SYNTAX_TASKS`) and the attribution example.
    ``progress(label, fraction)`` with fraction in [0, 1]."""
    wanted = [t for t in tasks if t in SYNTAX_TASKS]
    parts = len(wanted) + 1
    structural = edges = None
    for k, task in enumerate(wanted):
        def inner(label: str, done: int, total: int, k=k) -> None:
            if progress:
                progress(label, (k + done / max(1, total)) / parts)

        if task == "structural":
            structural = run_structural(model, data_root=data_root, cache_dir=cache_dir, seed=seed, limit=limit,
                                        config=config, progress=inner)
        else:
            edges = run_edges(model, data_root=data_root, cache_dir=cache_dir, seed=seed, limit=limit, config=config,
                              suite_config=suite_config, progress=inner)
    if progress:
        progress("context attribution", (parts - 1) / parts)
    attribution = attribute_context(model, BANK_SENTENCE, "bank", reference=BANK_REFERENCE)
    return SyntaxSection(structural, edges, attribution)


# --------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------


def nonsense_table(result: StructuralResult) -> tuple[list[str], list[list[str]], str]:
    """(headers, rows, caption) of the Jabberwocky control: per layer UUAS and DSpr. on the real and
    the nonsense test sentences, and UUAS per gold arc's linear length (real / nonsense), beside the
    linear chain's."""
    bins = [name for name, _, _ in ARC_LENGTHS]

    def cells(real: dict, fake: dict | None) -> list[str]:
        return ["–" if b not in real else f"{100 * real[b]:.1f}" + ("" if fake is None or b not in fake
                                                                    else f" / {100 * fake[b]:.1f}") for b in bins]

    rows = [[name, f"layer {r.layer}", f"{100 * r.uuas:.1f}", f"{100 * f.uuas:.1f}", f"{r.dspr:.3f}", f"{f.dspr:.3f}",
             *cells(r.uuas_by_arc_length, f.uuas_by_arc_length)]
            for name, real, fake in ((result.model_name, result.model, result.nonsense),
                                     ("random biLM", result.random_bilm, result.random_bilm_nonsense))
            for r, f in zip(real, fake)]
    chain = f"{100 * result.linear_chain_uuas:.1f}"
    rows.append(["linear chain", "–", chain, chain, "–", "–", *cells(result.linear_chain_by_arc_length, None)])
    headers = ["model", "layer", "UUAS real (%)", "UUAS nonsense (%)", "DSpr. real", "DSpr. nonsense",
               *(f"arcs of {b} (real / nonsense)" for b in bins)]
    caption = (f"EWT test and its Jabberwocky twin ({100 * result.nonsense_replaced:.0f}% of the tokens replaced: "
               "nouns, verbs, adjectives, -ly adverbs; endings and trees kept); the probes were trained on real "
               "sentences only. Arc length: words between head and dependent, plus one.")
    return headers, rows, caption


def structural_figure(result: StructuralResult) -> go.Figure:
    """UUAS and distance Spearman (DSpr.) per layer, the model beside the random biLM, with the
    linear chain and Hewitt & Manning's ELMo layer-1 figures as reference lines."""
    import plotly.graph_objects as go  # plotly: when a figure is drawn (the [report] extra)
    from plotly.subplots import make_subplots

    from probing.figures import GREY, TEMPLATE, color, layer_label

    fig = make_subplots(rows=1, cols=2, subplot_titles=("UUAS (%)", "distance Spearman (DSpr.)"))
    for k, (name, scores) in enumerate(((result.model_name, result.model), ("random biLM", result.random_bilm))):
        if not scores:
            continue
        x = [layer_label(s.layer) for s in scores]
        fig.add_trace(go.Scatter(x=x, y=[100 * s.uuas for s in scores], mode="lines+markers", name=name,
                                 legendgroup=name, line=dict(color=color(k)),
                                 hovertemplate="%{x}: UUAS %{y:.1f}%<extra>" + name + "</extra>"), 1, 1)
        fig.add_trace(go.Scatter(x=x, y=[s.dspr for s in scores], mode="lines+markers", name=name, legendgroup=name,
                                 showlegend=False, line=dict(color=color(k)),
                                 hovertemplate="%{x}: DSpr %{y:.3f}<extra>" + name + "</extra>"), 1, 2)
    fig.add_hline(y=100 * result.linear_chain_uuas, line=dict(color=GREY, dash="dot"), row=1, col=1,
                  annotation_text="linear chain", annotation_position="bottom right")
    fig.add_hline(y=100 * HEWITT_MANNING["uuas"], line=dict(color=GREY, dash="dash"), row=1, col=1,
                  annotation_text="H&M ELMo layer 1 (PTB)", annotation_position="top left")
    fig.add_hline(y=HEWITT_MANNING["dspr"], line=dict(color=GREY, dash="dash"), row=1, col=2,
                  annotation_text="H&M ELMo layer 1 (PTB)", annotation_position="top left")
    fig.update_layout(template=TEMPLATE, title="Structural probe per layer (EWT test)", height=420)
    fig.update_yaxes(title_text="UUAS (%)", row=1, col=1)
    fig.update_yaxes(title_text="Spearman ρ", row=1, col=2)
    fig.update_xaxes(title_text="layer")
    return fig


def edges_figure(result: EdgeResult) -> go.Figure:
    """Accuracy per layer of the arc and label probes: model, control task, random biLM, majority."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from probing.figures import GREY, TEMPLATE, color, layer_label

    titles = {"arc": "arc: is j the head of i? (%)", "label": "relation of a gold arc (%)"}
    fig = make_subplots(rows=1, cols=len(result.tasks), subplot_titles=[titles[t.task] for t in result.tasks])
    for c, task in enumerate(result.tasks, 1):
        x = [layer_label(r.layer) for r in task.layers]
        series = [(result.model_name, [r.probe.test for r in task.layers], 0, "solid"),
                  ("control task", [r.control.test for r in task.layers], 3, "dot")]
        if all(r.random_bilm is not None for r in task.layers):
            series.append(("random biLM", [r.random_bilm.test for r in task.layers], 1, "solid"))
        for name, intervals, colour, dash in series:
            fig.add_trace(go.Scatter(
                x=x, y=[100 * i.estimate for i in intervals], mode="lines+markers", name=name, legendgroup=name,
                showlegend=c == 1, line=dict(color=color(colour), dash=dash),
                error_y=dict(type="data", symmetric=False, array=[100 * (i.high - i.estimate) for i in intervals],
                             arrayminus=[100 * (i.estimate - i.low) for i in intervals]),
                hovertemplate="%{x}: %{y:.1f}%<extra>" + name + "</extra>"), 1, c)
        fig.add_hline(y=100 * task.majority.estimate, line=dict(color=GREY, dash="dash"), row=1, col=c,
                      annotation_text="majority", annotation_position="bottom right")
        fig.update_yaxes(title_text="accuracy (%)", row=1, col=c)
    fig.update_xaxes(title_text="layer")
    fig.update_layout(template=TEMPLATE, title="Edge probes on gold dependency arcs (EWT test, 95% intervals)",
                      height=420)
    return fig


def attribution_figure(result: AttributionResult) -> go.Figure:
    """A bar per context word and layer: leave-one-out cosine change (top row) and gradient x
    input of the similarity to the reference occurrence (bottom row, when there is one)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from probing.figures import TEMPLATE, color, layer_label

    rows = 2 if result.gradient_x_input.size else 1
    words = [f"{w} ({i})" if result.tokens.count(w) > 1 else w for i, w in enumerate(result.tokens)]
    target = result.tokens[result.target]
    fig = make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.12, subplot_titles=(
        [f"leave one out: 1 − cos of “{target}” when the word is replaced by <UNK>"]
        + ([f"gradient × input of cos(“{target}”, the reference “{target}”)"] if rows == 2 else [])))
    for j in range(result.n_layers):
        name = layer_label(j)
        fig.add_trace(go.Bar(x=words, y=np.nan_to_num(result.leave_one_out[j]), name=name, legendgroup=name,
                             marker_color=color(j), hovertemplate="%{x}: %{y:.4f}<extra>" + name + "</extra>"), 1, 1)
        if rows == 2:
            fig.add_trace(go.Bar(x=words, y=result.gradient_x_input[j], name=name, legendgroup=name, showlegend=False,
                                 marker_color=color(j),
                                 hovertemplate="%{x}: %{y:.4f}<extra>" + name + "</extra>"), 2, 1)
    fig.update_yaxes(title_text="cosine change", row=1, col=1)
    if rows == 2:
        fig.update_yaxes(title_text="contribution", row=2, col=1)
    subtitle = " ".join(result.reference_tokens)
    fig.update_layout(template=TEMPLATE, barmode="group", height=300 + 220 * rows,
                      title=f"Which words move “{target}”?" + (f" (reference: “{subtitle}”)" if subtitle else ""))
    return fig


def _arc(i: int, j: int, up: bool, points: int = 24) -> tuple[list[float], list[float]]:
    t = np.linspace(0.0, np.pi, points)
    centre, radius = (i + j) / 2.0, abs(j - i) / 2.0
    height = (0.35 + 0.25 * abs(j - i)) * (1 if up else -1)
    return list(centre - radius * np.cos(t)), list(0.25 * (1 if up else -1) + height * np.sin(t))


def tree_figure(tree: DependencyTree | Sequence[str], predicted: set[tuple[int, int]], title: str = "") -> go.Figure:
    """The gold tree (arcs above the words, with relation labels) against a predicted undirected
    tree (arcs below: green where the gold tree has the arc, red where it has not). ``tree`` may be
    plain tokens (a sentence without a gold tree): then only the predicted arcs are drawn."""
    import plotly.graph_objects as go

    from probing.figures import GREY, PALETTE, TEMPLATE

    tokens = tuple(tree.tokens) if isinstance(tree, DependencyTree) else tuple(tree)
    gold = {} if not isinstance(tree, DependencyTree) else \
        {(min(i, h), max(i, h)): tree.relations[i] for i, h in enumerate(tree.heads) if h >= 0}
    fig = go.Figure()
    for (i, j), rel in gold.items():
        xs, ys = _arc(i, j, True)
        fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color=GREY, width=2), showlegend=False,
                                 hovertext=f"gold: {tokens[i]} – {tokens[j]} ({rel})", hoverinfo="text"))
        fig.add_annotation(x=(i + j) / 2, y=ys[len(ys) // 2], text=rel, showarrow=False, font=dict(size=10),
                           yshift=8)
    kinds = ((True, "#10b981", "predicted, in the gold tree"), (False, "#ef4444", "predicted, not in the gold tree")) \
        if gold else ((False, PALETTE[0], "predicted"),)
    for ok, colour, name in kinds:
        first = True
        for i, j in sorted(predicted):
            if gold and ((i, j) in gold) != ok:
                continue
            xs, ys = _arc(i, j, False)
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines", line=dict(color=colour, width=2), name=name,
                                     legendgroup=name, showlegend=first, hoverinfo="text",
                                     hovertext=f"predicted: {tokens[i]} – {tokens[j]}"))
            first = False
    fig.add_trace(go.Scatter(x=list(range(len(tokens))), y=[0] * len(tokens), mode="text", text=list(tokens),
                             textfont=dict(size=14), showlegend=False, hoverinfo="skip"))
    if gold:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="lines", line=dict(color=GREY, width=2), name="gold (above)"))
    span = max(2, len(tokens))
    fig.update_xaxes(visible=False, range=[-1, span])
    fig.update_yaxes(visible=False)
    fig.update_layout(template=TEMPLATE, title=title or "Gold tree (above) and the probe's tree (below)",
                      height=260 + 14 * span, legend=dict(orientation="h"))
    return fig


__all__ = ["BANK_REFERENCE", "BANK_SENTENCE", "HEWITT_MANNING", "SYNTAX_TASKS", "SyntaxSection", "attribution_figure",
           "edges_figure", "run_syntax_section", "structural_figure", "tree_figure"]
