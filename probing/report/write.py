"""Writing a report into a folder: :func:`build_report` (run, then write), :func:`write_report`
and :func:`compare_reports`. Every file goes through ``elmo_model.plumbing.io_safety`` (temporary file,
fsync, rename), and one run at a time writes into a folder (:func:`folder_lock`)."""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Sequence

from elmo_model.plumbing import io_safety
from elmo_model.plumbing.progress import ProgressCallback
from probing.report.blocks import report_blocks
from probing.report.elements import ReportFigure
from probing.report.compare import _labels, compare_blocks
from probing.report.config import ReportConfig, ReportFiles, ReportResult, load_results
from probing.report.render import export_pngs, render_html, render_markdown, require_png_renderer
from probing.report.run import check_request, run_report

log = logging.getLogger(__name__)


def _write_documents(blocks: Sequence, out_dir: Path, title: str, subtitle: str, png: bool,
                     result_json: str | None) -> ReportFiles:
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = [b for b in blocks if isinstance(b, ReportFigure)]
    names = [f.name for f in figures]
    if len(set(names)) != len(names):
        raise ValueError(f"figure names repeat: {names}")
    paths: dict[str, Path] = {}
    renderer = None
    figure_dir = out_dir / "figures"
    if png:
        paths, renderer = export_pngs(figures, figure_dir)
        for old in figure_dir.glob("*.png"):  # figures of an earlier report in the same folder
            if old.stem not in paths:
                old.unlink()
    json_path = None
    if result_json is not None:
        json_path = out_dir / "results.json"
        io_safety.atomic_write_text(json_path, result_json)
    relative = {name: f"figures/{p.name}" for name, p in paths.items()}
    md_path, html_path = out_dir / "report.md", out_dir / "report.html"
    io_safety.atomic_write_text(md_path, render_markdown(blocks, title, subtitle, relative))
    io_safety.atomic_write_text(html_path, render_html(blocks, title, subtitle))
    return ReportFiles(str(out_dir.resolve()), str(html_path.resolve()), str(md_path.resolve()),
                       None if json_path is None else str(json_path.resolve()),
                       {k: str(p.resolve()) for k, p in paths.items()}, renderer)


def folder_lock(out_dir: str | os.PathLike):
    """The one-writer lock of a report folder (``<out_dir>.lock`` beside it, gone when released):
    a second run into the same folder stops at once with one line naming the folder and the
    other run (``io_safety.OutputBusy``, a ValueError) instead of interleaving its files."""
    folder = Path(out_dir).resolve()
    folder.parent.mkdir(parents=True, exist_ok=True)
    return io_safety.output_lock(folder, what="report folder")


def write_report(result: ReportResult, out_dir: str | os.PathLike, *, png: bool = True) -> ReportFiles:
    """Write ``results.json``, ``report.md`` (+ ``figures/*.png`` unless ``png=False``) and
    ``report.html`` for ``result`` into ``out_dir``; each file appears complete or not at all,
    and one run at a time writes into a folder (:func:`folder_lock`). Sets and returns
    ``result.files``."""
    with folder_lock(out_dir):
        return _write_report(result, out_dir, png=png)


def _write_report(result: ReportResult, out_dir: str | os.PathLike, *, png: bool) -> ReportFiles:
    blocks = report_blocks(result)
    title = f"Probe report: {result.model_name}"
    subtitle = (f"ELMo Workbench · tasks {', '.join(result.tasks)} · seed {result.seed}"
                + (f" · limit {result.limit}" if result.limit is not None else "") + f" · {result.created}")
    result.files = _write_documents(blocks, Path(out_dir), title, subtitle, png, result.to_json())
    return result.files


def build_report(model, tasks: Sequence[str], out_dir: str | os.PathLike, words: Sequence[str] = (),
                 data_root: str | os.PathLike | None = None, seed: int = 0, limit: int | None = None,
                 progress: ProgressCallback | None = None, *, cache_dir: str | os.PathLike | None = None,
                 config: ReportConfig | None = None, png: bool = True) -> ReportResult:
    """Run a report (:func:`run_report`) and write it (:func:`write_report`) into ``out_dir``.
    Returns the :class:`ReportResult`; ``result.files`` says where everything went.
    ``progress(label, done, total, unit)`` runs to 100 percent (writing included). The folder
    is locked from the start (:func:`folder_lock`): a second run into it stops before its work."""
    if png:
        require_png_renderer()  # a missing Chromium must not surface after a 15-minute cold run
    check_request(tasks, words, limit)
    inner = None if progress is None else (lambda label, done, total, unit: progress(label, 0.95 * done, total, unit))
    with folder_lock(out_dir):
        result = run_report(model, tasks, words, data_root, seed, limit, inner, cache_dir=cache_dir, config=config)
        if progress is not None:
            progress("writing report.html, report.md, results.json" + (" and PNG figures" if png else ""), 95.0,
                     100.0, "%")
        started = time.perf_counter()
        _write_report(result, out_dir, png=png)
    log.info("report written to %s in %.1f s", out_dir, time.perf_counter() - started)
    if progress is not None:
        progress("done", 100.0, 100.0, "%")
    return result


def compare_reports(a: ReportResult | str | os.PathLike, b: ReportResult | str | os.PathLike,
                    out_dir: str | os.PathLike, *, labels: Sequence[str] | None = None,
                    png: bool = True) -> ReportFiles:
    """Two saved results side by side (``report.html``, ``report.md`` + PNGs, and
    ``comparison.json`` naming the two inputs) in ``out_dir``. ``a``/``b``: results or paths to
    ``results.json`` files (a report's or a probing suite's) or their folders."""
    sources = [str(x) if not isinstance(x, ReportResult) else None for x in (a, b)]
    ra = a if isinstance(a, ReportResult) else load_results(a)
    rb = b if isinstance(b, ReportResult) else load_results(b)
    la, lb = _labels(ra, rb, labels)
    blocks = compare_blocks(ra, rb, (la, lb))
    title = f"Probe reports side by side: {la} vs {lb}"
    out = Path(out_dir)
    with folder_lock(out):
        files = _write_documents(blocks, out, title, "ELMo Workbench · Δ = B − A", png, None)
        comparison = {"format": "elmo-workbench/report-comparison", "version": 1, "labels": [la, lb],
                      "sources": sources, "a": ra.numbers(), "b": rb.numbers()}
        path = out / "comparison.json"
        io_safety.atomic_write_text(path, json.dumps(comparison, indent=1, ensure_ascii=False) + "\n")
    files.json = str(path.resolve())
    return files
