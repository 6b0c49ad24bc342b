"""The content of a report: blocks that both renderers (HTML, Markdown) and the app's Reports page
draw (headings, paragraphs, tables, notes and :class:`ReportFigure` objects), built from a
:class:`~probing.report.config.ReportResult` by :func:`report_blocks`; and the key numbers as
sentences (:func:`summary_lines`). The figure builders (plotly, the ``[report]`` extra) are imported by
the functions that draw, so the tables and summary lines need no extra."""

from __future__ import annotations

from probing.report.config import ReportResult
from probing.report.elements import ReportFigure, _ci, _Code, _f, _Heading, _Notes, _seconds, _slug, _Table, _Text
from probing.report.provenance import reproduce_command, settings_table
from probing.senses.wsd import FOUR_SETS
from probing.syntax.sections import (SyntaxSection, attribution_figure, edges_figure, nonsense_table,
                                     structural_figure)
from probing.syntax.structural import JABBERWOCKY_SENTENCE


def summary_lines(result: ReportResult) -> list[str]:
    """The report's key numbers as sentences (``**bold**`` marks what each is about)."""
    out = []
    if result.suite is not None:
        for t in result.suite.tasks:
            best = t.best_layer
            unit = "accuracy" if t.metric == "accuracy" else "F1"
            line = (f"**{t.task}**: best layer on dev is {best.layer}, test {unit} {_ci(best.probe.test)} "
                    f"(majority class {_f(t.baselines.majority.estimate)}, word-conditional majority "
                    f"{_f(t.baselines.word_majority.estimate)})")
            if t.mix is not None:
                top = max(range(len(t.mix.weights_mean)), key=lambda j: t.mix.weights_mean[j])
                line += (f"; the learned mix puts most weight on layer {t.mix.layers[top]} "
                         f"(s_j = {t.mix.weights_mean[top]:.2f})")
            out.append(line + ".")
    if result.wsd is not None and any(r.representation.startswith("layer ") for r in result.wsd.rows):
        best = result.wsd.best_layer(FOUR_SETS)
        first = result.wsd.first_sense.f1(FOUR_SETS)
        out.append(f"**all-words WSD** (four test sets): best is {best.representation} with F1 "
                   f"{best.f1(FOUR_SETS):.1f} vs WordNet first sense {first:.1f} ({best.f1(FOUR_SETS) - first:+.1f}); "
                   f"the paper's biLM: layer 1 {result.wsd.paper.get('biLM layer 1', float('nan')):.1f}, "
                   f"layer 2 {result.wsd.paper.get('biLM layer 2', float('nan')):.1f}.")
    for p in result.projections:
        scored = [l for l in p.layers if l.loo_1nn_accuracy is not None]
        if scored:
            out.append(_separation_line(p.lemma, scored, len(p.points)))
    if result.word_senses is not None:
        for r in result.word_senses.results:
            top = max(range(len(r.weights_mean)), key=lambda j: r.weights_mean[j])
            out.append(f"**learned s_j for “{r.lemma}”**: most weight on layer {top} ({r.weights_mean[top]:.2f}); "
                       f"best single layer {r.best_layer} ({_f(r.layer_accuracy_mean[r.best_layer])}% vs majority "
                       f"{_f(r.majority_accuracy_mean)}%).")
    if result.contextuality is not None:
        adjusted = result.contextuality.self_similarity_adjusted
        j = min(range(len(adjusted)), key=lambda i: adjusted[i])
        out.append(f"**contextuality**: the most context-specific layer is {j} (self-similarity − anisotropy "
                   f"{adjusted[j]:.3f}).")
    return out


def _suite_table(task) -> _Table:
    headers = ["probe", "dev", "test [95% CI]", "token acc.", "control acc.", "selectivity", "alpha"]
    rows = [["majority class", "", _ci(task.baselines.majority), "", "", "", ""],
            ["word-conditional majority", "", _ci(task.baselines.word_majority), "", "", "", ""]]
    for r in task.layers:
        rows.append([r.probe.name, _f(r.probe.dev_score), _ci(r.probe.test), _f(r.probe.test_accuracy),
                     _f(r.control.test_accuracy), _f(r.selectivity, signed=True), f"{r.probe.alpha:g}"])
        for h in r.halves:
            rows.append([f"  {h.name}", _f(h.dev_score), _ci(h.test), _f(h.test_accuracy), "", "", f"{h.alpha:g}"])
    if task.mix is not None:
        for p in task.mix.probes:
            rows.append([p.name, _f(p.dev_score), _ci(p.test), _f(p.test_accuracy), "", "", f"{p.alpha:g}"])
    n = task.baselines.random_bilm_train_tokens
    for p, same in zip(task.baselines.random_bilm, task.baselines.same_data):
        rows.append([f"{p.name} ({n:,} train tokens)", _f(p.dev_score), _ci(p.test), _f(p.test_accuracy), "", "",
                     f"{p.alpha:g}"])
        rows.append([f"  this model, same {n:,} tokens", _f(same.dev_score), _ci(same.test), _f(same.test_accuracy),
                     "", "", f"{same.alpha:g}"])
    for ref in task.baselines.reference:
        layer = f" layer {ref.layer}" if ref.layer is not None else ""
        rows.append([f"reference: {ref.system}{layer}", "", f"{100 * ref.value:.1f}", "", "", "",
                     f"{ref.source}; {ref.note}"])
    unit = "accuracy" if task.metric == "accuracy" else "chunk F1"
    caption = (f"{task.task} ({task.dataset}): {unit} ×100 on {task.n_sentences.get('test', 0):,} test sentences "
               f"({task.n_tokens.get('test', 0):,} tokens), 95% bootstrap interval over sentences; probes trained on "
               f"{task.n_tokens.get('train', 0):,} tokens; control accuracy and selectivity in token accuracy.")
    return _Table(headers, rows, caption, [False, True, True, True, True, True, False])


def _mix_table(suite) -> _Table | None:
    tasks = [t for t in suite.tasks if t.mix is not None]
    if not tasks:
        return None
    n = max(len(t.mix.layers) for t in tasks)
    headers = ["task"] + [f"s_{j}" for j in range(n)] + ["gamma"]
    rows = []
    for t in tasks:
        cells = [f"{m:.3f} ± {s:.3f}" for m, s in zip(t.mix.weights_mean, t.mix.weights_std)]
        rows.append([t.task] + cells + [""] * (n - len(cells)) + [f"{t.mix.gamma_mean:.2f} ± {t.mix.gamma_std:.2f}"])
    return _Table(headers, rows, f"learned s_j (softmax over layers) and gamma, mean ± sd over seeds "
                                 f"{list(tasks[0].mix.seeds)}", [False] + [True] * (n + 1))


def _wsd_table(wsd) -> _Table:
    short = {c: ("4 test sets" if "+" in c else c) for c in wsd.columns}
    headers = ["representation"] + [short[c] for c in wsd.columns] + ["first-sense backoff"]
    rows = [[r.representation] + [f"{r.f1(c):.1f}" for c in wsd.columns] + [f"{r.n_backoff:,}"]
            for r in [wsd.first_sense, *wsd.rows]]
    for name, value in wsd.paper.items():
        four = next((c for c in wsd.columns if "+" in c), None)
        rows.append([f"{name} (Peters et al. 2018)"]
                    + [f"{value:.1f}" if c == four else "" for c in wsd.columns] + [""])
    return _Table(headers, rows, f"F1 (%) per evaluation set; 1-NN on SemCor sense centroids "
                                 f"({wsd.semcor.get('sentences', 0):,} SemCor sentences), first-sense backoff.",
                  [False] + [True] * (len(wsd.columns) + 1))


def _lexsample_table(lex) -> _Table:
    n = len(lex.words[0].layer_accuracy) if lex.words else 0
    headers = ["word", "instances", "majority"] + [f"layer {j}" for j in range(n)] + \
              [f"selectivity {j}" for j in range(n)]
    rows = [[w.word, f"{w.n_train + w.n_test:,}", _f(w.majority_accuracy)] + [_f(a) for a in w.layer_accuracy]
            + [_f(s, signed=True) for s in w.selectivity] for w in lex.words]
    return _Table(headers, rows, "test accuracy (%) of a logistic-regression sense probe per layer; selectivity = "
                                 "accuracy − control-task accuracy (points).", [False] + [True] * (2 + 2 * n))


def _projection_table(proj) -> _Table:
    rows = [[f"layer {l.layer}", f"{l.n_distinct}", _f(l.loo_1nn_accuracy), _f(l.majority_baseline),
             "–" if l.collapsed else f"{l.silhouette:+.3f}",  # as probing.figures' silhouette_shown
             " + ".join(f"{100 * e:.0f}%" for e in l.pca_explained), l.note or ""] for l in proj.layers]
    return _Table(["layer", "distinct points", "1-NN accuracy (%)", "majority sense (%)", "silhouette",
                   "PCA variance", "note"], rows,
                  f"sense separability of “{proj.lemma}” per layer on the full vectors ({len(proj.points)} "
                  f"occurrences, {len(proj.senses)} senses)", [False, True, True, True, True, True, False])


def _bold_target(sentence: str, start: int, end: int) -> str:
    words = sentence.split(" ")
    return " ".join(words[:start] + ["**" + " ".join(words[start:end]) + "**"] + words[end:])


def _retrieval_blocks(result) -> list:
    blocks: list = []
    tokens = list(result.query_tokens)
    source = " ".join(tokens[:result.token_index] + ["**" + tokens[result.token_index] + "**"]
                      + tokens[result.token_index + 1:])
    blocks.append(_Text(f"Source: {source}  (lemma “{result.lemma}”, scope: {result.scope})"))
    rows = []
    for layer in result.layers:
        for n in layer.neighbours:
            rows.append([f"biLM layer {layer.layer}", str(n.rank), f"{n.similarity:.3f}",
                         _bold_target(n.sentence, n.start, n.end), ", ".join(n.sense_keys), n.gloss])
        if layer.neighbours:
            verdict = "agree" if layer.majority_agrees else "do not agree"
            rows.append([f"biLM layer {layer.layer}", "", "", f"majority sense {layer.majority_sense} "
                         f"({100 * layer.majority_share:.0f}% of {len(layer.neighbours)}: the neighbours {verdict})",
                         "", layer.majority_gloss or ""])
    for s in result.static:
        words = ", ".join(w for w, _ in s.neighbours) if s.neighbours else (s.note or "–")
        rows.append([s.embedding, "", "", f"nearest word types to “{s.word}”: {words}", "", ""])
    blocks.append(_Table(["representation", "rank", "cosine", "nearest neighbour sentence (SemCor)", "sense key",
                          "WordNet gloss"], rows, "", [False, True, True, False, False, False]))
    if result.notes:
        blocks.append(_Notes(list(result.notes)))
    return blocks


def _word_senses_table(comparison) -> _Table:
    n = max((r.n_layers for r in comparison.results), default=0)
    headers = (["lemma", "source", "occurrences", "senses"] + [f"s_{j}" for j in range(n)]
               + ["mix acc. (%)"] + [f"layer {j} acc. (%)" for j in range(n)] + ["majority (%)"])
    rows = []
    for r in comparison.results:
        rows.append([r.lemma + (f" ({r.pos})" if r.pos else ""), "SemCor" if r.source == "semcor" else "demo sentences",
                     f"{sum(r.senses.values())}", f"{len(r.senses)}"]
                    + [f"{m:.2f} ± {s:.2f}" for m, s in zip(r.weights_mean, r.weights_std)]
                    + [f"{100 * r.mix_accuracy_mean:.1f} ± {100 * r.mix_accuracy_std:.1f}"]
                    + [f"{100 * m:.1f}" for m in r.layer_accuracy_mean] + [f"{100 * r.majority_accuracy_mean:.1f}"])
    caption = ("s_j (softmax weights) and sense accuracies, mean ± sd over seeds × cross-validation folds.")
    return _Table(headers, rows, caption, [False, False, True, True] + [True] * (2 * n + 2))


def _contextuality_table(ctx) -> _Table:
    rows = [[f"layer {j}", f"{ctx.self_similarity[j]:.3f}", f"{ctx.self_similarity_adjusted[j]:.3f}",
             f"{ctx.intra_sentence_similarity[j]:.3f}", f"{ctx.intra_sentence_adjusted[j]:.3f}",
             f"{ctx.anisotropy[j]:.3f}"] for j in range(len(ctx.self_similarity))]
    return _Table(["layer", "self-similarity", "− anisotropy", "intra-sentence", "− anisotropy", "anisotropy"],
                  rows, f"mean cosine similarities over {len(ctx.words)} frequent words in {ctx.n_sentences:,} "
                  f"LM-corpus test sentences (Ethayarajh 2019).", [False] + [True] * 5)


def _suite_blocks(result: ReportResult) -> list:
    """The probing suite's section: per task its layers, then selectivity and the learned s_j."""
    from probing import figures as F  # plotly: the [report] extra

    blocks: list = [_Heading("Probing tasks: what each layer encodes")]
    blocks.append(_Text("A linear probe per layer (alpha chosen on dev, scored on test), the same probe on "
                        "Hewitt & Liang control labels, a learned scalar mix over the layers, and baselines: "
                        "the majority class, the word-conditional majority, and probes on a random-initialised "
                        "biLM of the same architecture. Reference figures are Peters et al. (2018) on PTB WSJ "
                        "with the full-size ELMo: other data, other scale."))
    for t in result.suite.tasks:
        blocks.append(_Heading(f"{t.task}: {('accuracy' if t.metric == 'accuracy' else 'chunk F1')} per layer", 3))
        blocks.append(ReportFigure(f"{t.task}-layers", f"{t.task} per layer",
                                   F.task_layers_figure(t, result.model_name)))
        blocks.append(_suite_table(t))
    blocks.append(_Heading("Selectivity (control tasks)", 3))
    blocks.append(ReportFigure("selectivity", "Selectivity per layer", F.selectivity_figure(result.suite),
                               "Task accuracy minus the accuracy of the same probe on control labels (a random "
                               "label per word type): high selectivity = the layer encodes the property, not "
                               "just word identity."))
    blocks.append(_Heading("Learned scalar-mix weights s_j", 3))
    blocks.append(ReportFigure("mix-weights", "Learned s_j per task", F.mix_weights_figure(result.suite)))
    table = _mix_table(result.suite)
    if table is not None:
        blocks.append(table)
    return blocks


def _wsd_blocks(wsd) -> list:
    """The all-words WSD section: F1 per layer and per set, the table, the best layer first in the notes."""
    from probing import figures as F  # plotly: the [report] extra

    blocks: list = [_Heading("Word-sense disambiguation (all words, Peters et al. 2018 Table 5)")]
    blocks.append(ReportFigure("wsd-layers", "WSD F1 per layer", F.wsd_layers_figure(wsd)))
    blocks.append(ReportFigure("wsd-sets", "WSD F1 per evaluation set", F.wsd_sets_figure(wsd)))
    blocks.append(_wsd_table(wsd))
    notes = list(wsd.notes)
    if any(r.representation.startswith("layer ") for r in wsd.rows):
        best = wsd.best_layer(FOUR_SETS)
        notes.insert(0, f"best layer on the four test sets: {best.representation}, F1 {best.f1(FOUR_SETS):.1f} "
                        f"({best.f1(FOUR_SETS) - wsd.first_sense.f1(FOUR_SETS):+.1f} vs first sense).")
    blocks.append(_Notes(notes))
    return blocks


def _lexsample_blocks(lex) -> list:
    """The Senseval-2 lexical-sample section."""
    from probing import figures as F  # plotly: the [report] extra

    blocks: list = [_Heading("Senseval-2 lexical sample: a supervised sense probe")]
    blocks.append(ReportFigure("lexical-sample", "Lexical-sample probe per layer", F.lexical_sample_figure(lex)))
    if lex.words:
        blocks.append(_lexsample_table(lex))
    if lex.notes:
        blocks.append(_Notes(list(lex.notes)))
    return blocks


def _projection_blocks(projections) -> list:
    """The senses of each lemma layer by layer (UMAP and PCA), then their separability."""
    from probing import figures as F  # plotly: the [report] extra

    names = " and ".join(f"“{p.lemma}”" for p in projections)
    blocks: list = [_Heading(f"The senses of {names}, layer by layer")]
    blocks.append(_Text("Each occurrence is one point, coloured by its sense; UMAP (cosine, fixed seed) and "
                        "PCA per layer. The separability numbers are computed on the full vectors: "
                        "leave-one-out 1-nearest-neighbour sense accuracy (vs always guessing the commonest "
                        "sense) and the silhouette of the sense groups."))
    for p in projections:
        blocks.append(_Heading(f"“{p.lemma}”", 3))
        blocks.append(ReportFigure(f"projection-{_slug(p.lemma)}", f"Projections of {p.lemma}",
                                   F.projection_figure(p)))
        blocks.append(_projection_table(p))
        if p.notes:
            blocks.append(_Notes(list(p.notes)))
    blocks.append(ReportFigure("separability", "Sense separability per layer", F.separability_figure(projections)))
    return blocks


def _word_senses_blocks(comparison) -> list:
    """The learned s_j per lemma, with each lemma's notes and the lemmas not fitted."""
    from probing import figures as F  # plotly: the [report] extra

    blocks: list = [_Heading("Learned s_j per lemma: which layers separate the senses?")]
    blocks.append(ReportFigure("word-senses", "Learned s_j per lemma", F.word_senses_figure(comparison)))
    if comparison.results:
        blocks.append(_word_senses_table(comparison))
    notes = [f"“{r.lemma}”: {n}" for r in comparison.results for n in r.notes]
    notes += [f"“{lemma}” not fitted: {reason}" for lemma, reason in comparison.refused.items()]
    if notes:
        blocks.append(_Notes(notes))
    return blocks


def _contextuality_blocks(ctx) -> list:
    """How contextual each layer is (Ethayarajh 2019)."""
    from probing import figures as F  # plotly: the [report] extra

    blocks: list = [_Heading("How contextual is each layer? (Ethayarajh 2019)")]
    blocks.append(ReportFigure("contextuality", "Contextuality per layer", F.contextuality_figure(ctx)))
    blocks.append(_contextuality_table(ctx))
    if ctx.notes:
        blocks.append(_Notes(list(ctx.notes)))
    return blocks


def report_blocks(result: ReportResult) -> list:
    """The report's content in order: headings, paragraphs, tables, notes and
    :class:`ReportFigure` objects, as both renderers draw it."""
    blocks: list = [settings_table(result)]
    summary = summary_lines(result)
    if summary:
        blocks += [_Heading("Summary"), _Notes(summary)]
    if result.suite is not None:
        blocks += _suite_blocks(result)
    if result.wsd is not None:
        blocks += _wsd_blocks(result.wsd)
    if result.lexsample is not None:
        blocks += _lexsample_blocks(result.lexsample)
    if result.projections:
        blocks += _projection_blocks(result.projections)
    if result.retrieval:
        blocks.append(_Heading("Nearest neighbours (Peters et al. 2018, Table 4)"))
        blocks.append(_Text("For each source sentence, the SemCor occurrences whose vectors are nearest (cosine) to "
                            "the source word's, per LSTM layer, with their sense; below, the nearest word types "
                            "under static embeddings (no context), as the paper's GloVe row."))
        for r in result.retrieval:
            blocks += _retrieval_blocks(r)
    if result.word_senses is not None:
        blocks += _word_senses_blocks(result.word_senses)
    if result.contextuality is not None:
        blocks += _contextuality_blocks(result.contextuality)
    if result.syntax is not None:
        blocks += syntax_blocks(result.syntax)
    if result.information is not None:
        blocks += information_blocks(result.information)
    if result.notes:
        blocks += [_Heading("Notes"), _Notes(list(result.notes))]
    timings = ", ".join(f"{k} {_seconds(v)}" for k, v in result.timings.items())
    blocks += [_Heading("Reproduce"), _Code(reproduce_command(result)), _Text(f"Time per section: {timings}.")]
    return blocks


def report_figures(result: ReportResult) -> list[ReportFigure]:
    """Every figure of the report of ``result``, in order (the app shows these)."""
    return [b for b in report_blocks(result) if isinstance(b, ReportFigure)]


# --------------------------------------------------------------------------------------------
# The syntax sections (structural probe, edge probes, context attribution)
# --------------------------------------------------------------------------------------------


def _best_layer_lines(section: SyntaxSection) -> list[str]:
    lines = []
    s = section.structural
    if s is not None and s.model:
        u, d = s.best_layer("uuas"), s.best_layer("dspr")
        lines.append(f"structural probe: most tree distance in layer {u.layer} (UUAS {100 * u.uuas:.1f}; "
                     f"linear chain {100 * s.linear_chain_uuas:.1f}); best DSpr. layer {d.layer} ({d.dspr:.3f}); "
                     f"best depth probe layer {s.best_layer('root_acc').layer} (root accuracy "
                     f"{100 * s.best_layer('root_acc').root_acc:.1f}).")
        fake = next((x for x in s.nonsense if x.layer == u.layer), None)
        if fake is not None:
            lines.append(f"on nonsense (Jabberwocky) sentences layer {u.layer}'s UUAS is {100 * fake.uuas:.1f} "
                         f"({100 * (fake.uuas - u.uuas):+.1f} points).")
    if section.edges is not None:
        for t in section.edges.tasks:
            b = t.best_layer()
            lines.append(f"{t.task}: best layer {b.layer}, accuracy {100 * b.probe.test.estimate:.1f} "
                         f"(selectivity {100 * b.selectivity:.1f}; majority {100 * t.majority.estimate:.1f}).")
    return lines


def syntax_blocks(section: SyntaxSection) -> list:
    """The report blocks of the syntax sections (headings, text, tables, figures)."""
    blocks: list = [_Heading("Syntax: trees, arcs and context")]
    lines = _best_layer_lines(section)
    if lines:
        blocks.append(_Notes(lines))
    s = section.structural
    if s is not None:
        blocks.append(_Heading("Structural probe (Hewitt & Manning 2019)", 3))
        blocks.append(_Text(
            f"A linear map B per layer trained so that ||B(h_i − h_j)||² approximates the distance of words i and j "
            f"in the gold UD tree (and ||B h_i||² the depth), rank chosen on dev from {', '.join(map(str, s.ranks))}. "
            f"UUAS: the minimum spanning tree of the predicted distances against the gold tree, punctuation left out; "
            f"DSpr./NSpr.: Spearman correlations averaged over sentence lengths 5–50. Trained on the first "
            f"{s.n_sentences['train']:,} EWT training sentences, rank chosen on {s.n_sentences['dev']:,} dev sentences, "
            f"scored on all {s.n_sentences['test']:,} test sentences. Hewitt & Manning report ELMo layer 1 best on PTB: "
            f"UUAS 77.0, DSpr. 0.83 (full-size ELMo, another treebank)."))
        blocks.append(ReportFigure("structural-layers", "Structural probe per layer", structural_figure(s)))
        rows = []
        for name, scores in ((s.model_name, s.model), ("random biLM", s.random_bilm)):
            for x in scores:
                rows.append([name, f"layer {x.layer}", f"{100 * x.uuas:.1f}", f"{x.dspr:.3f}", f"{100 * x.root_acc:.1f}",
                             f"{x.nspr:.3f}", f"{x.distance_rank} / {x.depth_rank}"])
        rows.append(["linear chain", "–", f"{100 * s.linear_chain_uuas:.1f}", "–", "–", "–", "–"])
        blocks.append(_Table(["model", "layer", "UUAS (%)", "DSpr.", "root acc. (%)", "NSpr.", "rank dist. / depth"],
                             rows, "EWT test.", [False, False, True, True, True, True, True]))
        if s.nonsense:
            headers, rows, caption = nonsense_table(s)
            blocks += [_Heading("Syntax on nonsense", 3), _Text(JABBERWOCKY_SENTENCE),
                       _Table(headers, rows, caption, [False, False] + [True] * (len(headers) - 2))]
    e = section.edges
    if e is not None:
        blocks.append(_Heading("Edge probes on gold arcs", 3))
        alphas = sorted({r.probe.alpha for t in e.tasks for r in t.layers})
        blocks.append(_Text(
            f"A linear probe on [h_i; h_j; h_i ∘ h_j] per layer (the tagging probes' whitened softmax regression, "
            f"L2 alpha {', '.join(f'{a:g}' for a in alphas)}), trained on the first {e.n_sentences['train']:,} EWT "
            f"training sentences: arc: is j the head of i (one gold head and one random other word per token, "
            f"chance 50%); label: the UD relation of a gold arc. Control tasks (Hewitt & Liang): a random label per "
            f"word pair (arc) or per dependent word (label), trained at the same alpha; selectivity = accuracy − "
            f"control accuracy."))
        blocks.append(ReportFigure("edge-layers", "Edge probes per layer", edges_figure(e)))
        rows = []
        for t in e.tasks:
            for r in t.layers:
                rows.append([t.task, f"layer {r.layer}", f"{100 * r.probe.test.estimate:.1f} "
                             f"[{100 * r.probe.test.low:.1f}, {100 * r.probe.test.high:.1f}]",
                             f"{100 * r.control.test_accuracy:.1f}", f"{100 * r.selectivity:+.1f}",
                             "–" if r.random_bilm is None else f"{100 * r.random_bilm.test.estimate:.1f}",
                             "–" if r.nonsense is None else _ci(r.nonsense.test)])
            rows.append([t.task, "majority", f"{100 * t.majority.estimate:.1f}", "–", "–", "–", "–"])
        blocks.append(_Table(["task", "layer", "accuracy (%) [95%]", "control (%)", "selectivity", "random biLM (%)",
                              "on nonsense (%) [95%]"],
                             rows, "EWT test items: " + ", ".join(f"{t.task} {t.n_items['test']:,}" for t in e.tasks)
                             + "; on nonsense: the same probe on the test sentences' Jabberwocky twins.",
                             [False, False, True, True, True, True, True]))
    a = section.attribution
    if a is not None:
        blocks.append(_Heading(f"Which words move “{a.tokens[a.target]}”?", 3))
        blocks.append(_Text(
            f"“{' '.join(a.tokens)}”: per layer, how far the vector of “{a.tokens[a.target]}” moves when each other "
            f"word is replaced by <UNK> (1 − cosine), and the gradient × input of its cosine similarity to "
            f"“{a.tokens[a.target]}” in “{' '.join(a.reference_tokens)}”. Layer 0 is context-free: its bars are zero."))
        blocks.append(ReportFigure("attribution-bank", "Context attribution", attribution_figure(a)))
        top = a.top_words()
        blocks.append(_Table(["layer", "words that move it most (leave one out)"],
                             [[f"layer {j}", ", ".join(f"{w} {v:.3f}" for w, v in top[j])] for j in range(1, a.n_layers)]))
    return blocks


def _separation_line(lemma: str, scored: list, n_points: int) -> str:
    """The summary's line on one lemma's sense separation. Layer 0 (the char CNN) sees no
    context: where it scores best, it is telling the senses apart by spelling ("banks" vs
    "bank"), so the line says so and names the best contextual layer as well."""
    best = max(scored, key=lambda l: (l.loo_1nn_accuracy, -l.layer))

    def verdict(layer) -> str:
        return "above" if layer.loo_1nn_accuracy > layer.majority_baseline else "not above"

    line = (f"**“{lemma}”**: the best sense separation is in layer {best.layer}, leave-one-out 1-NN "
            f"{_f(best.loo_1nn_accuracy)}%, {verdict(best)} the majority sense {_f(best.majority_baseline)}%")
    contextual = [l for l in scored if l.layer > 0]
    if best.layer == 0 and contextual:
        ctx = max(contextual, key=lambda l: (l.loo_1nn_accuracy, -l.layer))
        line += (f", by spelling alone (layer 0 sees no context: its {best.n_distinct} points are the word's "
                 f"spellings); the best contextual layer is {ctx.layer}, {_f(ctx.loo_1nn_accuracy)}%, "
                 f"{verdict(ctx)} the majority")
    return line + f" ({n_points} occurrences)."


INFORMATION_TEXT = {
    "mdl": ("How easily each layer gives the property up: the online codelength (Voita & Titov 2020) of the "
            "labels of the training tokens, sent block by block with a probe trained on the blocks before, beside "
            "the same for control labels (a random label per word type). A short code for the task and a long one "
            "for the control means the layer holds the property itself, not a memorisable word identity; "
            "compression = uniform code / online code."),
    "conditional": ("What each LSTM layer adds beyond the character CNN (conditional probing, Hewitt et al. 2021): "
                    "the bits per test token a probe saves when it sees [layer 0; layer j] rather than layer 0 alone, "
                    "with a 95% bootstrap interval over test sentences; beside it, what each layer carries alone."),
    "amnesic": ("Whether the model uses the property (amnesic probing, Elazar et al. 2021): iterative nullspace "
                "projection removes the task's linear directions from a layer until a probe is near the majority "
                "label; then fresh probes measure what each task keeps, and at the top layer the biLM's own "
                "language model (when the model carries its softmax) measures its cross-entropy, against a random "
                "projection that removes as many directions."),
    "erasure": ("Three ways to remove the property, side by side: LEACE (Belrose et al. 2023: the least-squares "
                "affine eraser after which no linear probe beats a constant), the projection out of the class-mean "
                "differences, and INLP. For each: a fresh probe's accuracy after erasure (goal: the majority "
                "label's) and the rank removed; the damage: the other tasks' accuracy lost, how far the vectors "
                "moved (mean squared change), and the language model's loss at the top layer; a random projection "
                "of the same rank beside each."),
}


def _information_table(task) -> _Table:
    rows = []
    codes = {c.layer: c for c in task.codes}
    conditional = {c.layer: c for c in task.conditional}
    amnesic = {a.layer: a for a in task.amnesic}
    for j in sorted(set(codes) | set(conditional) | set(amnesic)):
        code, cond, amn = codes.get(j), conditional.get(j), amnesic.get(j)
        rows.append([
            f"layer {j}",
            "–" if code is None else f"{code.task.online_bits / 1000:.1f} ({code.task.compression:.2f}×)",
            "–" if code is None or code.control is None else
            f"{code.control.online_bits / 1000:.1f} ({code.control.compression:.2f}×)",
            "–" if cond is None else f"{cond.conditional.estimate:.3f} [{cond.conditional.low:.3f}, "
                                     f"{cond.conditional.high:.3f}]",
            "–" if amn is None else
            f"{amn.rank} in {amn.iterations}" + ("" if amn.reached_majority else
                                                 f" (NOT at majority: last probe {_f(amn.dev_accuracies[-1])}, "
                                                 f"majority {_f(amn.majority)})"),
            "–" if amn is None else f"{_f(amn.task_accuracy['original'])} → {_f(amn.task_accuracy['amnesic'])} "
                                    f"(random {_f(amn.task_accuracy['random'])})",
        ])
    return _Table(["layer", "MDL task, kbits", "MDL control, kbits", "beyond layer 0, bits/token",
                   "INLP directions", f"{task.task} accuracy after removal"], rows,
                  f"{task.n_tokens.get('train', 0):,} training and {task.n_tokens.get('test', 0):,} test tokens.")


def _lm_notes(task) -> list[str]:
    out = []
    for a in task.amnesic:
        if a.lm is not None:
            lm = a.lm
            out.append(f"{task.task} removed from layer {a.layer} (ranks {lm['rank']['forward']} forward, "
                       f"{lm['rank']['backward']} backward): the language model's cross-entropy goes from "
                       f"{lm['original']['mean']:.3f} to {lm['amnesic']['mean']:.3f} bits per prediction; the random "
                       f"control to {lm['random']['mean']:.3f} ({lm['n_sentences']} test sentences).")
        elif a.lm_note and a.layer == max(x.layer for x in task.amnesic):
            out.append(f"layer {a.layer}: {a.lm_note}.")
    return out


def information_blocks(information) -> list:
    """The three information sections (MDL, conditional, amnesic) of an ``InformationResult``."""
    from probing import figures as F  # plotly: the [report] extra

    blocks: list = [_Heading("Beyond accuracy: how easily, beyond layer 0, and whether the model uses it")]
    methods = [("mdl", "How easily: MDL probing", F.mdl_figure),
               ("conditional", "Beyond layer 0: conditional probing", F.conditional_figure),
               ("amnesic", "Does the model use it: amnesic probing", F.amnesic_figure),
               ("erasure", "What removing it costs: LEACE, the mean projection and INLP", F.erasure_figure)]
    ran = set(information.config.get("methods", []))
    for key, heading, build in methods:
        if key not in ran:
            continue
        blocks += [_Heading(heading, 3), _Text(INFORMATION_TEXT[key])]
        for task in information.tasks:
            blocks.append(ReportFigure(f"{key}-{_slug(task.task)}", f"{task.task}: {heading}",
                                       build(task, information.model_name)))
        if key == "amnesic":
            notes = [n for task in information.tasks for n in _lm_notes(task)]
            if notes:
                blocks.append(_Notes(notes))
    for task in information.tasks:
        blocks.append(_information_table(task))
    seconds = ", ".join(f"{k} {_seconds(v)}" for k, v in information.seconds.items())
    blocks.append(_Text(f"Information probes: {seconds}."))
    return blocks
