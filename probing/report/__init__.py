"""Scripted probe reports: everything the workbench measures about one biLM, in three files.

    python -m probing.report --model elmo-mini --tasks pos chunk wsd --out reports/NAME
    python -m probing.report --model elmo-mini --tasks pos wsd --words bank play --out reports/NAME
    python -m probing.report --compare reports/A/results.json reports/B/results.json --out reports/A-vs-B

writes, under ``--out``:

- ``report.html``: one self-contained page (plotly.js inlined once, no CDN, no network) with
  interactive figures (:mod:`probing.figures`) and tables; follows the reader's light or dark
  colour scheme.
- ``report.md``: the same tables, and the figures as PNG files in ``figures/`` (rendered by
  plotly through kaleido and Debian's Chromium, on white so they read in light and dark
  viewers).
- ``results.json``: the whole :class:`ReportResult` (``ReportResult.from_json`` reads it back,
  equal to what was written).

What a report holds, by task (any subset of :data:`REPORT_TASKS`):

- ``pos``, ``upos``, ``chunk``: the probing suite (``probing.tagging.suite.run_suite``): accuracy or F1
  per layer with 95% bootstrap intervals, the baselines (majority class, word-conditional
  majority, random-initialised biLM) and the paper's reference figures; selectivity per layer
  (control tasks); the learned s_j per task with their spread over seeds.
- ``wsd``: all-words 1-NN WSD on SemCor sense centroids (``probing.senses.wsd.evaluate_wsd``), F1 per
  evaluation set against the first-sense baseline and the paper; and, on the same SemCor
  index, the sense panels: per-layer UMAP and PCA projections of "bank" and "play" coloured by
  sense with separability scores (``probing.senses.projections``) and nearest-neighbour tables in the
  style of the paper's Table 4 for "play" (``probing.senses.retrieval``).
- ``lexsample``: the Senseval-2 lexical-sample probe (hard, interest, line, serve).
- ``words`` (``--words bank play ...``): learned s_j per lemma side by side with each lemma's
  single-layer sense accuracy (``probing.senses.word_senses``). A lemma SemCor cannot fit
  (too few occurrences or one sense) falls back to the shipped demo sentences when there is a
  set for it (bank, play, bark), else it is listed with the reason.
- always (unless turned off): contextuality per layer (Ethayarajh 2019) on LM-corpus test
  sentences (``probing.context.contextuality``).

Seeds: ``seed`` seeds the probes, control labels, the random biLM, the bootstrap, the scalar
mixes (seed, seed+1, ...), the projections (UMAP), the lexical-sample split and the word-sense
folds; two runs with the same seed give the same numbers (:meth:`ReportResult.numbers`
leaves out only timings and the creation time). ``limit`` slices every dataset to its first N
sentences for a quick run; SemCor has its own slice, ``ReportConfig.semcor_limit`` (the first
10,000 sentences unless told otherwise).

From Python (what the app's Reports page calls)::

    >>> from probing.report import build_report
    >>> result = build_report("elmo-mini", ["pos", "wsd"], "reports/mini", words=["bank", "play"])
    >>> result.files.html, result.wsd.best_layer().representation

The package, one idea a module:

- :mod:`~probing.report.config`: :class:`ReportConfig`, :class:`ReportResult` (JSON round trip),
  :class:`ReportFiles`, :func:`load_results`.
- :mod:`~probing.report.run`: :func:`run_report`, every section measured in order, and the
  progress bar's weighting of the sections.
- :mod:`~probing.report.elements`: the pieces (headings, text, tables, notes, figures) content is made of;
- :mod:`~probing.report.blocks`: the content of a report;
  :mod:`~probing.report.compare`: of two results side by side.
- :mod:`~probing.report.render`: HTML, Markdown and PNG figures from the blocks.
- :mod:`~probing.report.write`: :func:`build_report`, :func:`write_report`,
  :func:`compare_reports`: the files, written atomically, one run at a time per folder.
- :mod:`~probing.report.cli` (and ``__main__``): the command line.
"""

from probing.report.blocks import report_blocks, report_figures, summary_lines
from probing.report.cli import main
from probing.report.compare import compare_blocks
from probing.report.config import (PAPER_PLAY_QUERIES, REPORT_FORMAT, REPORT_TASKS, REPORT_VERSION, SUITE_TASKS,
                                   SYNTAX_TASKS, VOLATILE_KEYS, ReportConfig, ReportFiles, ReportResult, load_results)
from probing.report.elements import ReportFigure
from probing.report.render import chromium_path, export_pngs, render_html, render_markdown, require_png_renderer
from probing.report.run import _Progress  # noqa: F401  (the reliability tests check the bar's weighting)
from probing.report.run import SECTION_SECONDS, check_request, parse_word, run_report
from probing.report.write import build_report, compare_reports, folder_lock, write_report

__all__ = ["PAPER_PLAY_QUERIES", "REPORT_FORMAT", "REPORT_TASKS", "REPORT_VERSION", "SECTION_SECONDS", "SUITE_TASKS",
           "SYNTAX_TASKS", "VOLATILE_KEYS", "ReportConfig", "ReportFigure", "ReportFiles", "ReportResult",
           "build_report", "check_request", "chromium_path", "compare_blocks", "compare_reports", "export_pngs",
           "folder_lock", "load_results", "main", "parse_word", "render_html", "render_markdown", "report_blocks",
           "report_figures", "require_png_renderer", "run_report", "summary_lines", "write_report"]
