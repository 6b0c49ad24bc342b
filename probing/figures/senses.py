"""Figures of word senses: WSD per test set and layer, the lexical sample, projections, separability, word-sense mixes."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

if TYPE_CHECKING:  # imported for annotations only: building a figure needs none of them
    from probing.senses.projections import ProjectionResult
    from probing.senses.word_senses import WordSensesComparison
    from probing.senses.wsd import LexicalSampleResult, WsdResult

from probing.figures.style import (
    GREY,
    LAYER_AXIS,
    PAPER_NAME,
    TEMPLATE,
    _cell_centre,
    _empty,
    _finish,
    _hline_trace,
    _pct,
    _rgba,
    _short,
    color,
    layer_label,
    marked_sentence,
    silhouette_shown,
    wrap,
)


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


#: marker shapes of the word forms in a projection, commonest form first (the rest share the last)
FORM_SYMBOLS = ("circle", "diamond", "square", "triangle-up", "x")


def _projection_titles(proj: "ProjectionResult", rows: Sequence[str]) -> list[str]:
    """Each cell's title: the layer and method; the first row also the layer's separability."""
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
    return titles


def _form_symbols(proj: "ProjectionResult") -> tuple[list[str], dict[str, str]]:
    """Each point's word form (case-folded), and each form's marker shape, commonest form first."""
    forms = [p.words.casefold() for p in proj.points]
    ranked = [f for f, _ in Counter(forms).most_common()]
    return forms, {f: FORM_SYMBOLS[min(k, len(FORM_SYMBOLS) - 1)] for k, f in enumerate(ranked)}


def _add_form_key(fig: go.Figure, symbol_of: dict[str, str]) -> None:
    """A key to the shapes where there is more than one form: one legend entry a form, drawn nowhere."""
    if len(symbol_of) < 2:
        return
    for form in list(symbol_of)[:len(FORM_SYMBOLS)]:
        fig.add_trace(go.Scatter(x=[None], y=[None], mode="markers", name=f"shape: word form '{form}'",
                                 marker=dict(symbol=symbol_of[form], color=GREY, size=8), hoverinfo="skip"),
                      row=1, col=1)


def projection_figure(proj: "ProjectionResult", methods: Sequence[str] = ("umap", "pca"),
                      max_senses: int = 8) -> go.Figure:
    """One column per layer, one row per method (UMAP, PCA): the lemma's occurrences coloured
    by sense (the ``max_senses`` commonest; the rest grey), hover with the sentence and gloss.
    Each column's title carries the layer's sense separability (leave-one-out 1-NN accuracy vs
    the majority sense, silhouette), computed on the full vectors, not on the picture."""

    rows = [m for m in methods if m == "pca" or any(l.umap is not None for l in proj.layers)]
    n_cols = len(proj.layers)
    titles = _projection_titles(proj, rows)
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
    forms, symbol_of = _form_symbols(proj)
    hover = [f"<b>{p.sense or 'no label'}</b> ({p.source}), form '{p.words}'<br>{wrap(p.gloss or '', 60)}<br>"
             f"{wrap(marked_sentence(p.sentence, p.start, p.end), 70)}" for p in proj.points]
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
                    marker=dict(color=colour, size=8, opacity=0.85, line=dict(width=0.5, color=GREY),
                                symbol=[symbol_of[forms[i]] for i in idx]),
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
    _add_form_key(fig, symbol_of)
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
