"""Two results side by side: the blocks of a comparison report (:func:`compare_blocks`), each
difference given as B − A."""

from __future__ import annotations

from typing import Sequence

from probing.report.provenance import architecture_line
from probing.report.config import ReportResult
from probing.report.elements import ReportFigure, _ci, _f, _Heading, _Notes, _Table


def _labels(a: ReportResult, b: ReportResult, labels: Sequence[str] | None) -> list[str]:
    if labels:
        if len(labels) != 2 or labels[0] == labels[1]:
            raise ValueError(f"--labels needs two different names, got {list(labels)}")
        return list(labels)
    if a.model_name != b.model_name:
        return [a.model_name, b.model_name]
    return [f"A: {a.model_name} ({a.model_identity[:8]})", f"B: {b.model_name} ({b.model_identity[:8]})"]


def _delta(a: float | None, b: float | None, digits: int = 1) -> str:
    if a is None or b is None:
        return "–"
    return f"{100 * (b - a):+.{digits}f}"


def _overview_blocks(a: ReportResult, b: ReportResult, la: str, lb: str) -> list:
    """The two models, their settings side by side, and warnings where the runs differ."""
    blocks: list = []
    rows = [["model", f"{a.model_name} (identity {a.model_identity[:12]})",
             f"{b.model_name} (identity {b.model_identity[:12]})"],
            ["architecture", architecture_line(a.model_config), architecture_line(b.model_config)],
            ["tasks", ", ".join(a.tasks), ", ".join(b.tasks)],
            ["seed", str(a.seed), str(b.seed)],
            ["limit", str(a.limit), str(b.limit)],
            ["SemCor sentences", str((a.semcor or {}).get("sentences", "–")),
             str((b.semcor or {}).get("sentences", "–"))],
            ["created", a.created, b.created]]
    blocks.append(_Table(["", la, lb], rows))
    warnings = []
    if a.limit != b.limit or (a.semcor or {}).get("sentences") != (b.semcor or {}).get("sentences"):
        warnings.append("the two results were run on different slices of the data: differences are not like for like.")
    if a.seed != b.seed:
        warnings.append(f"different seeds ({a.seed} vs {b.seed}).")
    if warnings:
        blocks.append(_Notes(warnings))
    return blocks


def _suite_blocks(a: ReportResult, b: ReportResult, la: str, lb: str) -> list:
    """The probing tasks both ran: per task its figure and a table of layers and baselines."""
    from probing import figures as F  # plotly: the [report] extra

    blocks: list = []
    shared = [t.task for t in a.suite.tasks if any(u.task == t.task for u in b.suite.tasks)]
    if shared:
        blocks.append(_Heading("Probing tasks"))
    for name in shared:
        ta, tb = a.suite.task(name), b.suite.task(name)
        blocks.append(_Heading(name, 3))
        blocks.append(ReportFigure(f"compare-{name}", f"{name}: {la} vs {lb}",
                                   F.compare_task_figure(ta, tb, (la, lb))))
        layers = sorted({r.layer for r in ta.layers} | {r.layer for r in tb.layers})
        table_rows = []
        for j in layers:
            ra = next((r for r in ta.layers if r.layer == j), None)
            rb = next((r for r in tb.layers if r.layer == j), None)
            table_rows.append([f"layer {j}", _ci(ra.probe.test) if ra else "–",
                               _ci(rb.probe.test) if rb else "–",
                               _delta(ra.probe.test.estimate if ra else None,
                                      rb.probe.test.estimate if rb else None),
                               _f(ra.selectivity, signed=True) if ra else "–",
                               _f(rb.selectivity, signed=True) if rb else "–"])
        for label, task in (("majority class", None), ("word-conditional majority", None)):
            key = "majority" if label == "majority class" else "word_majority"
            ia, ib = getattr(ta.baselines, key), getattr(tb.baselines, key)
            table_rows.append([label, _ci(ia), _ci(ib), _delta(ia.estimate, ib.estimate), "", ""])
        blocks.append(_Table(["probe", f"{la} [95% CI]", f"{lb} [95% CI]", "Δ (B − A)", f"selectivity {la}",
                              f"selectivity {lb}"], table_rows,
                             f"{name}: {'accuracy' if ta.metric == 'accuracy' else 'chunk F1'} ×100 on test.",
                             [False, True, True, True, True, True]))
    if shared:
        blocks.append(ReportFigure("compare-mix-weights", "Learned s_j per task",
                                   F.compare_mix_figure(a.suite, b.suite, (la, lb))))
    return blocks


def _wsd_blocks(a: ReportResult, b: ReportResult, la: str, lb: str) -> list:
    """All-words WSD: F1 per representation on the four test sets and on ALL."""
    from probing import figures as F  # plotly: the [report] extra

    blocks: list = [_Heading("Word-sense disambiguation")]
    blocks.append(ReportFigure("compare-wsd", "WSD F1 per layer", F.compare_wsd_figure(a.wsd, b.wsd, (la, lb))))
    four = next((c for c in a.wsd.columns if "+" in c), "ALL")
    reps = [r.representation for r in [a.wsd.first_sense, *a.wsd.rows]]
    reps += [r.representation for r in [b.wsd.first_sense, *b.wsd.rows] if r.representation not in reps]
    table_rows = []
    for rep in reps:
        ra = next((r for r in [a.wsd.first_sense, *a.wsd.rows] if r.representation == rep), None)
        rb = next((r for r in [b.wsd.first_sense, *b.wsd.rows] if r.representation == rep), None)
        cells = [rep]
        for column in (four, "ALL"):
            fa = ra.scores[column].f1 if ra and column in ra.scores else None
            fb = rb.scores[column].f1 if rb and column in rb.scores else None
            cells += [_f(fa), _f(fb), _delta(fa, fb)]
        table_rows.append(cells)
    blocks.append(_Table(["representation", f"4 sets {la}", f"4 sets {lb}", "Δ", f"ALL {la}", f"ALL {lb}", "Δ"],
                         table_rows, "F1 (%)", [False] + [True] * 6))
    return blocks


def _lexsample_blocks(a: ReportResult, b: ReportResult, la: str, lb: str) -> list:
    """The lexical-sample probe's accuracy per word both ran and layer."""
    blocks: list = [_Heading("Senseval-2 lexical sample")]
    table_rows = []
    for wa in a.lexsample.words:
        wb = next((w for w in b.lexsample.words if w.word == wa.word), None)
        if wb is None:
            continue
        for j in range(max(len(wa.layer_accuracy), len(wb.layer_accuracy))):
            xa = wa.layer_accuracy[j] if j < len(wa.layer_accuracy) else None
            xb = wb.layer_accuracy[j] if j < len(wb.layer_accuracy) else None
            table_rows.append([wa.word, f"layer {j}", _f(xa), _f(xb), _delta(xa, xb)])
    blocks.append(_Table(["word", "layer", la, lb, "Δ"], table_rows, "probe accuracy (%)",
                         [False, False, True, True, True]))
    return blocks


def _separability_blocks(a: ReportResult, b: ReportResult, la: str, lb: str) -> list:
    """Sense separability per lemma both projected and layer."""
    from probing import figures as F  # plotly: the [report] extra

    blocks: list = [_Heading("Sense separability")]
    blocks.append(ReportFigure("compare-separability", "Sense separability per layer",
                               F.compare_separability_figure(a.projections, b.projections, (la, lb))))
    table_rows = []
    for pa in a.projections:
        pb = next((p for p in b.projections if p.lemma == pa.lemma), None)
        if pb is None:
            continue
        for j in sorted({l.layer for l in pa.layers} | {l.layer for l in pb.layers}):
            xa = next((l.loo_1nn_accuracy for l in pa.layers if l.layer == j), None)
            xb = next((l.loo_1nn_accuracy for l in pb.layers if l.layer == j), None)
            table_rows.append([pa.lemma, f"layer {j}", _f(xa), _f(xb), _delta(xa, xb)])
    blocks.append(_Table(["lemma", "layer", f"1-NN {la}", f"1-NN {lb}", "Δ"], table_rows,
                         "leave-one-out 1-NN sense accuracy (%)", [False, False, True, True, True]))
    return blocks


def _word_senses_blocks(a: ReportResult, b: ReportResult, la: str, lb: str) -> list:
    """Learned s_j per lemma both fitted, with the mixes' accuracy."""
    from probing import figures as F  # plotly: the [report] extra

    blocks: list = [_Heading("Learned s_j per lemma")]
    blocks.append(ReportFigure("compare-word-senses", "Learned s_j per lemma",
                               F.compare_word_senses_figure(a.word_senses, b.word_senses, (la, lb))))
    table_rows = []
    for ra in a.word_senses.results:
        rb = next((r for r in b.word_senses.results if r.lemma == ra.lemma), None)
        if rb is None:
            continue
        table_rows.append([ra.lemma, ", ".join(f"{w:.2f}" for w in ra.weights_mean),
                           ", ".join(f"{w:.2f}" for w in rb.weights_mean),
                           _f(ra.mix_accuracy_mean), _f(rb.mix_accuracy_mean)])
    blocks.append(_Table(["lemma", f"s_j {la}", f"s_j {lb}", f"mix acc. {la} (%)", f"mix acc. {lb} (%)"],
                         table_rows, "", [False, False, False, True, True]))
    return blocks


def compare_blocks(a: ReportResult, b: ReportResult, labels: Sequence[str] | None = None) -> list:
    """The content of a side-by-side report of two results (tables and figures)."""
    la, lb = _labels(a, b, labels)
    blocks = _overview_blocks(a, b, la, lb)
    if a.suite is not None and b.suite is not None:
        blocks += _suite_blocks(a, b, la, lb)
    if a.wsd is not None and b.wsd is not None:
        blocks += _wsd_blocks(a, b, la, lb)
    if a.lexsample is not None and b.lexsample is not None:
        blocks += _lexsample_blocks(a, b, la, lb)
    if a.projections and b.projections:
        blocks += _separability_blocks(a, b, la, lb)
    if a.word_senses is not None and b.word_senses is not None:
        blocks += _word_senses_blocks(a, b, la, lb)
    if a.contextuality is not None and b.contextuality is not None:
        from probing import figures as F  # plotly: the [report] extra

        blocks.append(_Heading("Contextuality"))
        blocks.append(ReportFigure("compare-contextuality", "Contextuality per layer",
                                   F.compare_contextuality_figure(a.contextuality, b.contextuality, (la, lb))))
    if a.information is not None and b.information is not None:
        blocks += _information_blocks(a.information, b.information, la, lb)
    if len(blocks) <= 2:
        blocks.append(_Notes(["the two results have no section in common."]))
    return blocks


def _information_blocks(a, b, la: str, lb: str) -> list:
    """The information probes of two results, per shared task and layer, in one table each."""
    out: list = []
    names = {t.task for t in b.tasks}
    for ta in [t for t in a.tasks if t.task in names]:
        tb = b.task(ta.task)
        rows = []
        for j in sorted({c.layer for c in ta.codes} | {x.layer for x in ta.amnesic}):
            def pick(task, j=j):
                code = next((c for c in task.codes if c.layer == j), None)
                cond = next((c for c in task.conditional if c.layer == j), None)
                amn = next((x for x in task.amnesic if x.layer == j), None)
                return [
                    "–" if code is None else f"{code.task.compression:.2f}×",
                    "–" if code is None or code.control is None else f"{code.control.compression:.2f}×",
                    "–" if cond is None else f"{cond.conditional.estimate:.3f}",
                    "–" if amn is None else _f(amn.task_accuracy["original"] - amn.task_accuracy["amnesic"]),
                ]
            pa, pb = pick(ta), pick(tb)
            rows.append([f"layer {j}"] + [x for pair in zip(pa, pb) for x in pair])
        if not out:
            out.append(_Heading("Beyond accuracy: MDL, conditional and amnesic probing"))
        headers = ["layer"] + [f"{what} {side}" for what in ("compression", "control compression",
                                                              "bits beyond layer 0", "points lost to INLP")
                               for side in (la, lb)]
        out.append(_Heading(ta.task, 3))
        out.append(_Table(headers, rows, "compression = uniform / online code; bits per test token; "
                                         "accuracy points a fresh probe loses once INLP removed the task"))
    return out
