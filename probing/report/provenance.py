"""What a report ran and how to run it again: the settings table at its top
(:func:`settings_table`: model, tasks, slices, precision, what the probes trained on) and the
shell command that rebuilds it (:func:`reproduce_command`)."""

from __future__ import annotations

import shlex
from typing import Mapping

from probing.report.config import DEFAULT_SEMCOR_LIMIT, REPORT_TRAIN_FRACTION, ReportResult
from probing.report.elements import _seconds, _Table


def architecture_line(config: Mapping) -> str:
    """A model config (``BiLMConfig.describe()``) in one line."""
    cnn, lstm = config.get("char_cnn", {}), config.get("lstm", {})
    filters = sum(int(f[1]) for f in cnn.get("filters", ()))
    n_params = config.get("n_parameters")
    return (f"char CNN ({filters:,} filters, {cnn.get('n_highway', '?')} highway layers) → "
            f"{lstm.get('n_layers', '?')} biLSTM layers of {lstm.get('dim', '?')} units with "
            f"{lstm.get('projection_dim', '?')}-d projections"
            + (f"; {n_params:,} parameters" if n_params else ""))


def settings_table(result: ReportResult) -> _Table:
    """What the run was: model, tasks, seed, slices, precision, what the probes trained on, SemCor."""
    rows = [
        ["model", f"{result.model_name} (identity {result.model_identity[:12]})"],
        ["architecture", architecture_line(result.model_config)],
        ["tasks", ", ".join(result.tasks) + (f"; words: {', '.join(result.words)}" if result.words else "")],
        ["seed", str(result.seed)],
        ["limit", "none (full datasets)" if result.limit is None
         else f"first {result.limit:,} sentences of each dataset"],
    ]
    if result.suite is not None:
        precision, products = result.suite.config.get("precision"), result.suite.config.get("probe_products", "fp32")
        rows.append(["precision", f"the biLM's products {precision}, the probes' {products}"
                                  + (" (--precision fp32: both fp32)" if "bf16" in (precision, products) else "")])
        fraction = result.config.suite.train_fraction
        trained = ", ".join(f"{t.task} {t.n_sentences.get('train', 0):,}" for t in result.suite.tasks)
        rows.append(["probes' training sentences",
                     ("all of each training split" if fraction >= 1 else
                      f"{fraction:.0%} of each training split, evenly spaced (--train-fraction 1 for all; "
                      "dev and test whole)") + (f": {trained}" if trained else "")])
    if result.semcor:
        rows.append(["SemCor index", f"{result.semcor['sentences']:,} sentences, {result.semcor['instances']:,} "
                                     f"sense-tagged instances, {result.semcor['senses']:,} senses"])
    rows.append(["created", f"{result.created}; took {_seconds(result.timings.get('total'))}"])
    rows.append(["software", ", ".join(f"{k} {v}" for k, v in result.versions.items())])
    return _Table(["", ""], rows)


def reproduce_command(result: ReportResult) -> str:
    """The shell command that builds ``result``'s report again: every value quoted with
    ``shlex.quote`` (a word such as ``bank;touch x`` stays one argument and runs nothing), the
    model by the reference that loads it (a shipped or published name, else its folder)."""
    reference = result.model_reference or result.model_name
    words = ["python", "-m", "probing.report", "--model", reference, "--tasks", *result.tasks]
    if result.words:
        words += ["--words", *result.words]
    words += ["--seed", str(result.seed)]
    if result.limit is not None:
        words += ["--limit", str(result.limit)]
    # the slice the run indexed (a report written before SemCor had a slice of its own cut it by
    # --limit, and its settings say so); 0 is all of SemCor
    semcor = result.settings.get("semcor_sentences", result.config.semcor_limit)
    if semcor != DEFAULT_SEMCOR_LIMIT:
        words += ["--semcor-limit", str(semcor or 0)]
    if not result.config.contextuality:
        words.append("--no-contextuality")
    if result.config.suite.train_fraction != REPORT_TRAIN_FRACTION:
        words += ["--train-fraction", f"{result.config.suite.train_fraction:g}"]
    return " ".join(shlex.quote(str(w)) for w in words) + " --out DIR"
