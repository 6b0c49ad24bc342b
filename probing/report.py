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

- ``pos``, ``upos``, ``chunk``: the probing suite (``probing.suite.run_suite``): accuracy or F1
  per layer with 95% bootstrap intervals, the baselines (majority class, word-conditional
  majority, random-initialised biLM) and the paper's reference figures; selectivity per layer
  (control tasks); the learned s_j per task with their spread over seeds.
- ``wsd``: all-words 1-NN WSD on SemCor sense centroids (``probing.wsd.evaluate_wsd``), F1 per
  evaluation set against the first-sense baseline and the paper; and, on the same SemCor
  index, the sense panels: per-layer UMAP and PCA projections of "bank" and "play" coloured by
  sense with separability scores (``probing.projections``) and nearest-neighbour tables in the
  style of the paper's Table 4 for "play" (``probing.retrieval``).
- ``lexsample``: the Senseval-2 lexical-sample probe (hard, interest, line, serve).
- ``words`` (``--words bank play ...``): learned s_j per lemma side by side with each lemma's
  single-layer sense accuracy (``probing.word_senses``). A lemma SemCor cannot fit
  (too few occurrences or one sense) falls back to the shipped demo sentences when there is a
  set for it (bank, play, bark), else it is listed with the reason.
- always (unless turned off): contextuality per layer (Ethayarajh 2019) on LM-corpus test
  sentences (``probing.contextuality``).

Seeds: ``seed`` seeds the probes, control labels, the random biLM, the bootstrap, the scalar
mixes (seed, seed+1, ...), the projections (UMAP), the lexical-sample split and the word-sense
folds; two runs with the same seed give the same numbers (:meth:`ReportResult.numbers`
leaves out only timings and the creation time). ``limit`` slices every dataset to its first N
sentences (SemCor too unless ``ReportConfig.semcor_limit`` says otherwise) for a quick run.

From Python (what the app's Reports page calls)::

    >>> from probing.report import build_report
    >>> result = build_report("elmo-mini", ["pos", "wsd"], "reports/mini", words=["bank", "play"])
    >>> result.files.html, result.wsd.best_layer().representation
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import html
import json
import logging
import math
import os
import platform
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field, fields
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

from elmo_model.io_safety import atomic_write_text, read_checked_json, write_checked_json
from elmo_model.precision import PRECISION_CHOICES, resolve_precision
from elmo_model.progress import ProgressCallback, TerminalProgress
from probing.envelope import check_format
from probing.results import SuiteResult
from probing.suite import SuiteConfig, known_fields

logger = logging.getLogger(__name__)

REPORT_FORMAT = "elmo-workbench/report"
REPORT_VERSION = 1

SUITE_TASKS = ("pos", "upos", "chunk")
SYNTAX_TASKS = ("structural", "arcs")
REPORT_TASKS = (*SUITE_TASKS, "wsd", "lexsample", *SYNTAX_TASKS)
"""Tasks a report can hold: the probing suite's, all-words WSD, the Senseval-2 lexical sample, and
the syntax probes (structural probe; edge probes on gold arcs: ``probing.syntax_report``)."""

PAPER_PLAY_QUERIES: tuple[tuple[str, str], ...] = (
    ("Chico Ruiz made a spectacular play on Alusik's grounder.", "play"),
    ("Olivia De Havilland signed to do a Broadway play for Garson.", "play"),
)
"""The two source sentences of Peters et al. (2018), Table 4 (a play in a game; a stage play)."""

PNG_WIDTH = 1100  # px: wide enough for a three-layer projection grid
VOLATILE_KEYS = frozenset({"seconds", "timings", "created"})
"""Keys :meth:`ReportResult.numbers` leaves out: how long things took and when, not what they found."""


# --------------------------------------------------------------------------------------------
# Configuration and result
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReportConfig:
    """What goes into a report beyond the tasks (defaults: the full report).

    - ``suite``: the probing suite's configuration (``probing.suite.SuiteConfig``).
    - ``semcor_limit``: SemCor sentences indexed for WSD, projections, retrieval and the
      words panel (None: the report's ``limit``, i.e. all of SemCor when there is no limit).
    - ``senses``: include the sense panels (projections + nearest neighbours); None: when the
      ``wsd`` task is asked for (they share its SemCor index).
    - ``projection_lemmas``: lemmas projected per layer; ``projection_source``: "semcor",
      "demo" (the shipped demo sentences) or "auto" (SemCor when it has at least
      ``projection_min_semcor`` occurrences with two or more senses, else the demo set);
      ``projection_max_points``: SemCor occurrences sampled at most; ``umap``: add UMAP to PCA.
    - ``retrieval_queries``: (sentence, word) pairs for the nearest-neighbour tables;
      ``retrieval_k``: neighbours per layer.
    - ``lexsample_words``, ``lexsample_max_instances``: the Senseval-2 lexical sample.
    - ``word_seeds``, ``word_folds``, ``word_steps`` (Adam steps per fit),
      ``word_max_occurrences``: the learned s_j per lemma (seeds x folds x (1 + L+1) fits).
    - ``contextuality``, ``contextuality_sentences``: Ethayarajh's measures on LM test text.
    - ``batch_size``: sentences per biLM batch outside the suite.
    """

    suite: SuiteConfig = SuiteConfig()
    semcor_limit: int | None = None
    senses: bool | None = None
    projection_lemmas: tuple[str, ...] = ("bank", "play")
    projection_source: str = "auto"
    projection_min_semcor: int = 20
    projection_max_points: int = 300
    umap: bool = True
    retrieval_queries: tuple[tuple[str, str], ...] = PAPER_PLAY_QUERIES
    retrieval_k: int = 3
    lexsample_words: tuple[str, ...] = ("hard", "interest", "line", "serve")
    lexsample_max_instances: int | None = 600
    word_seeds: int = 3
    word_folds: int = 5
    word_steps: int = 300
    word_max_occurrences: int = 1000
    contextuality: bool = True
    contextuality_sentences: int = 2000
    batch_size: int = 32

    def __post_init__(self) -> None:
        if self.projection_source not in ("auto", "semcor", "demo"):
            raise ValueError(f"projection_source must be 'auto', 'semcor' or 'demo', got {self.projection_source!r}")
        for name in ("retrieval_k", "word_seeds", "word_folds", "word_steps", "contextuality_sentences",
                     "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"ReportConfig.{name} must be positive, got {getattr(self, name)}")

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out["suite"] = self.suite.to_dict()
        out["projection_lemmas"] = list(self.projection_lemmas)
        out["retrieval_queries"] = [list(q) for q in self.retrieval_queries]
        out["lexsample_words"] = list(self.lexsample_words)
        return out

    @classmethod
    def from_dict(cls, data: Mapping) -> "ReportConfig":
        values = known_fields(cls, data)
        if "suite" in values:
            values["suite"] = SuiteConfig.from_dict(values["suite"])
        for key in ("projection_lemmas", "lexsample_words"):
            if key in values:
                values[key] = tuple(values[key])
        if "retrieval_queries" in values:
            values["retrieval_queries"] = tuple((str(s), str(w)) for s, w in values["retrieval_queries"])
        return cls(**values)


@dataclass
class ReportFiles:
    """What :func:`write_report` / :func:`compare_reports` wrote: absolute paths."""

    out_dir: str
    html: str
    markdown: str
    json: str | None
    figures: dict[str, str]  # figure name -> PNG path
    png_renderer: str | None  # e.g. "kaleido 1.5.0 + /usr/bin/chromium", None without PNGs


@dataclass
class ReportResult:
    """Everything one report measured (see the module docstring); JSON round trip with
    :meth:`to_json` / :meth:`from_json`. Sections that were not asked for are None / empty.

    - ``model_*``: name, weight checksum, architecture (``model_config`` plus ``n_parameters``).
    - ``tasks``, ``words``, ``seed``, ``limit``, ``config``: what was asked.
    - ``settings``: the effective sizes (SemCor sentences, lexical-sample instances,
      contextuality sentences) after ``limit`` was applied.
    - ``suite``, ``wsd``, ``lexsample``, ``projections``, ``retrieval``, ``word_senses``,
      ``contextuality``: the backend's own result objects.
    - ``semcor``: counts of the SemCor index used (sentences, instances, senses), if any.
    - ``notes``: what was skipped, replaced or approximated, in plain words.
    - ``files``: where :func:`build_report` wrote it (not part of the JSON, not compared).
    """

    model_name: str
    model_checksum: str
    model_config: dict[str, Any]
    tasks: list[str]
    words: list[str]
    seed: int
    limit: int | None
    config: ReportConfig
    settings: dict[str, Any]
    created: str
    versions: dict[str, str]
    timings: dict[str, float]
    suite: SuiteResult | None = None
    wsd: Any = None  # probing.wsd.WsdResult
    lexsample: Any = None  # probing.wsd.LexicalSampleResult
    projections: list = field(default_factory=list)  # probing.projections.ProjectionResult
    retrieval: list = field(default_factory=list)  # probing.retrieval.RetrievalResult
    word_senses: Any = None  # probing.word_senses.WordSensesComparison
    contextuality: Any = None  # probing.contextuality.ContextualityResult
    syntax: Any = None  # probing.syntax_report.SyntaxSection
    semcor: dict[str, int] | None = None
    notes: list[str] = field(default_factory=list)
    files: ReportFiles | None = field(default=None, compare=False, repr=False)

    # -- JSON ---------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """A JSON-ready dict (each section as its own class writes it)."""
        section = lambda obj: None if obj is None else json.loads(obj.to_json())  # noqa: E731
        return {
            "format": REPORT_FORMAT, "version": REPORT_VERSION,
            "model_name": self.model_name, "model_checksum": self.model_checksum,
            "model_config": self.model_config, "tasks": list(self.tasks), "words": list(self.words),
            "seed": self.seed, "limit": self.limit, "config": self.config.to_dict(),
            "settings": self.settings, "created": self.created, "versions": self.versions,
            "timings": self.timings,
            "suite": None if self.suite is None else self.suite.to_dict(),
            "wsd": section(self.wsd), "lexsample": section(self.lexsample),
            "projections": [json.loads(p.to_json()) for p in self.projections],
            "retrieval": [json.loads(r.to_json()) for r in self.retrieval],
            "word_senses": section(self.word_senses), "contextuality": section(self.contextuality),
            "semcor": self.semcor, "notes": list(self.notes), "syntax": section(self.syntax),
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> "ReportResult":
        """The inverse of :meth:`to_dict`; ValueError for another format or version."""
        from probing.contextuality import ContextualityResult
        from probing.projections import ProjectionResult
        from probing.retrieval import RetrievalResult
        from probing.word_senses import WordSensesComparison
        from probing.wsd import LexicalSampleResult, WsdResult

        check_format(data, REPORT_FORMAT, REPORT_VERSION, "probe report")

        def section(kind, value):
            return None if value is None else kind.from_json(json.dumps(value))

        return cls(
            model_name=str(data["model_name"]), model_checksum=str(data["model_checksum"]),
            model_config=dict(data["model_config"]), tasks=list(data["tasks"]), words=list(data["words"]),
            seed=int(data["seed"]), limit=None if data["limit"] is None else int(data["limit"]),
            config=ReportConfig.from_dict(data["config"]), settings=dict(data["settings"]),
            created=str(data["created"]), versions={k: str(v) for k, v in data["versions"].items()},
            timings={k: float(v) for k, v in data["timings"].items()},
            suite=None if data["suite"] is None else SuiteResult.from_dict(data["suite"]),
            wsd=section(WsdResult, data["wsd"]), lexsample=section(LexicalSampleResult, data["lexsample"]),
            projections=[ProjectionResult.from_json(json.dumps(p)) for p in data["projections"]],
            retrieval=[RetrievalResult.from_json(json.dumps(r)) for r in data["retrieval"]],
            word_senses=section(WordSensesComparison, data["word_senses"]),
            contextuality=section(ContextualityResult, data["contextuality"]),
            semcor=None if data.get("semcor") is None else {k: int(v) for k, v in data["semcor"].items()},
            notes=list(data.get("notes", [])), syntax=_syntax_section(data.get("syntax")))

    def to_json(self, path: str | os.PathLike | None = None) -> str:
        """The JSON text; with ``path``, also written there atomically (temp file + rename)."""
        text = json.dumps(self.to_dict(), indent=1, ensure_ascii=False) + "\n"
        if path is not None:
            atomic_write_text(path, text)
        return text

    @classmethod
    def from_json(cls, text_or_path: str | os.PathLike) -> "ReportResult":
        """From JSON text or a path to ``results.json`` (or to the folder holding it)."""
        return cls.from_dict(_read_json(text_or_path, "probe report"))

    def numbers(self) -> dict:
        """:meth:`to_dict` without what differs between identical runs (timings, seconds,
        creation time): two runs with the same seed have equal ``numbers()``."""
        return _strip(self.to_dict(), VOLATILE_KEYS)


def _syntax_section(value):
    if value is None:
        return None
    from probing.syntax_report import SyntaxSection

    return SyntaxSection.from_json(json.dumps(value))


def _strip(value, keys: frozenset[str]):
    if isinstance(value, dict):
        return {k: _strip(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_strip(v, keys) for v in value]
    return value


def _read_json(text_or_path: str | os.PathLike, what: str) -> dict:
    text = str(text_or_path)
    if not text.lstrip().startswith("{"):
        path = Path(text_or_path)
        if path.is_dir():
            path = path / "results.json"
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise FileNotFoundError(f"no {what} at {path}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{what} is not valid JSON: {err}") from err


def load_results(path: str | os.PathLike) -> ReportResult:
    """A saved ``results.json``: a report's, or a probing suite's (``python -m probing.suite
    --out``), which becomes a report holding only the suite. A folder means its results.json."""
    data = _read_json(path, "probe report or probe-suite result")
    if data.get("format") == REPORT_FORMAT:
        return ReportResult.from_dict(data)
    suite = SuiteResult.from_dict(data)  # raises ValueError naming the expected formats
    return ReportResult(
        model_name=suite.model_name, model_checksum=suite.model_checksum, model_config=dict(suite.model_config),
        tasks=[t.task for t in suite.tasks], words=[], seed=int(suite.seeds.get("seed", 0)), limit=suite.limit,
        config=ReportConfig(suite=SuiteConfig.from_dict({k: v for k, v in suite.config.items() if k != "layers"})),
        settings={}, created=suite.created, versions=dict(suite.versions), timings=dict(suite.timings),
        suite=suite, notes=[f"read from a probe-suite result ({path})"])


# --------------------------------------------------------------------------------------------
# Progress
# --------------------------------------------------------------------------------------------


#: Expected share of a cold report's time per section: the per-section seconds (``timings`` in
#: results.json) of a cold full report of elmo-mini by bench/report_time.py on a 2-core machine.
#: The bar's fraction is then the expected work done, so its ETA holds; a section without a
#: measurement here (the lexical sample) counts 10 s.
SECTION_SECONDS = {"probing suite": 565.0, "SemCor index": 246.0, "all-words WSD": 9.0, "projections": 13.0,
                   "nearest neighbours": 3.0, "learned s_j per lemma": 25.0, "contextuality": 14.0}


class _Progress:
    """Turns each section's own progress into one ``progress(label, done, 100, "%")``, each
    section weighted by its expected share of the work (:data:`SECTION_SECONDS`)."""

    def __init__(self, callback: ProgressCallback | None, sections: Sequence[str]) -> None:
        self.callback = callback
        self.sections = list(sections)
        weights = [SECTION_SECONDS.get(name, 10.0) for name in self.sections]
        total = sum(weights) or 1.0
        self.shares = [w / total for w in weights]
        self.starts = [sum(self.shares[:i]) for i in range(len(self.shares))]
        self.index = 0
        self.name = ""
        self.last = 0.0  # sub-stages restart their own counts: the report's share never goes back

    def start(self, name: str) -> None:
        self.index = self.sections.index(name)
        self.name = name
        self.fraction(name, 0.0)

    def fraction(self, label: str, inner: float) -> None:
        if self.callback is not None:
            if self.sections:
                share = self.starts[self.index] + self.shares[self.index] * min(max(inner, 0.0), 1.0)
            else:
                share = min(max(inner, 0.0), 1.0)
            self.last = max(self.last, round(100 * share, 1))
            self.callback(f"{self.name}: {label}" if label != self.name else label, self.last, 100.0, "%")

    def __call__(self, label: str, done: float, total: float | None, unit: str = "") -> None:
        """A ``probing.data.ProgressCallback`` for the current section."""
        self.fraction(label, (done / total) if total else 0.0)

    def suite(self, label: str, done: int, total: int) -> None:
        """The probing suite's ``(label, done, total)``."""
        self.fraction(label, done / total if total else 0.0)

    def finish(self) -> None:
        if self.callback is not None:
            self.callback("done", 100.0, 100.0, "%")


# --------------------------------------------------------------------------------------------
# Running a report
# --------------------------------------------------------------------------------------------


def _versions() -> dict[str, str]:
    import importlib.metadata as metadata

    out = {"python": platform.python_version()}
    for name in ("torch", "numpy", "scikit-learn", "scipy", "h5py", "nltk", "umap-learn", "plotly", "kaleido"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def parse_word(item: str) -> tuple[str, str | None]:
    """"bank" -> ("bank", None); "play:VERB" or "play:v" -> ("play", "VERB")."""
    from probing.wsd_data import normalize_pos

    lemma, _, pos = str(item).partition(":")
    lemma = lemma.strip()
    if not lemma:
        raise ValueError(f"--words: empty lemma in {item!r}")
    return lemma, (normalize_pos(pos.strip()) if pos.strip() else None)


def _demo_set(lemma: str):
    from probing.playground import demo_set_names, load_demo_set

    return load_demo_set(lemma) if lemma in demo_set_names() else None


def _sections(tasks: Sequence[str], words: Sequence[str], senses: bool, contextuality: bool) -> list[str]:
    out = []
    if any(t in SUITE_TASKS for t in tasks):
        out.append("probing suite")
    if senses or "wsd" in tasks or words:
        out.append("SemCor index")
    if "wsd" in tasks:
        out.append("all-words WSD")
    if "lexsample" in tasks:
        out.append("lexical sample")
    if senses:
        out += ["projections", "nearest neighbours"]
    if words:
        out.append("learned s_j per lemma")
    if contextuality:
        out.append("contextuality")
    if any(t in SYNTAX_TASKS for t in tasks):
        out.append("syntax")
    return out


def run_report(model, tasks: Sequence[str], words: Sequence[str] = (), data_root: str | os.PathLike | None = None,
               seed: int = 0, limit: int | None = None, progress: ProgressCallback | None = None, *,
               cache_dir: str | os.PathLike | None = None, config: ReportConfig | None = None) -> ReportResult:
    """Measure everything a report shows (no files written; see :func:`build_report`).

    ``model``: a ``BiLM``, a shipped model name or a model directory. ``tasks``: any of
    :data:`REPORT_TASKS`. ``words``: lemmas for the learned-s_j panel ("play" or "play:VERB").
    ``limit``: the first N sentences of every dataset. ``cache_dir``: activation, probe and
    SemCor-index caches (default: the user cache). ``progress(label, done, total, unit)`` with
    ``done`` of ``total`` = 100 percent of the report.
    """
    from elmo_model import BiLM, load_bilm

    from probing.activations import model_checksum

    config = config or ReportConfig()
    tasks = list(dict.fromkeys(tasks))
    unknown = [t for t in tasks if t not in REPORT_TASKS]
    if unknown or not tasks:
        raise ValueError(f"unknown or no tasks {unknown or tasks}; choose from {', '.join(REPORT_TASKS)}")
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be a positive number of sentences, got {limit}")
    parsed_words = [parse_word(w) for w in words]
    config = dataclasses.replace(config, suite=dataclasses.replace(
        config.suite, precision=resolve_precision(config.suite.precision)))
    if not isinstance(model, BiLM):
        model = load_bilm(model)
    model.set_precision(config.suite.precision)  # every section: the suite's, WSD, senses, contextuality
    senses = ("wsd" in tasks) if config.senses is None else bool(config.senses)
    semcor_limit = config.semcor_limit if config.semcor_limit is not None else limit
    settings = {
        "semcor_sentences": semcor_limit, "senses": senses,
        "lexsample_max_instances": (_min_opt(config.lexsample_max_instances, limit) if "lexsample" in tasks else None),
        "contextuality_sentences": (min(config.contextuality_sentences, limit or config.contextuality_sentences)
                                    if config.contextuality else None),
    }
    steps = _Progress(progress, _sections(tasks, words, senses, config.contextuality))
    started = time.perf_counter()
    timings: dict[str, float] = {}
    notes: list[str] = []
    model_config = json.loads(json.dumps(model.config.describe()))
    model_config["n_parameters"] = int(sum(p.numel() for p in model.parameters()))
    result = ReportResult(
        model_name=str(getattr(model, "name", "") or "biLM"), model_checksum=model_checksum(model),
        model_config=model_config, tasks=tasks, words=list(words), seed=int(seed), limit=limit, config=config,
        settings=settings, created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        versions=_versions(), timings=timings, notes=notes)

    def timed(name: str):
        return _Timer(timings, name)

    suite_tasks = [t for t in tasks if t in SUITE_TASKS]
    if suite_tasks:
        from probing.suite import run_suite

        steps.start("probing suite")
        with timed("suite"):
            result.suite = run_suite(model, suite_tasks, data_root=data_root, cache_dir=cache_dir, seed=seed,
                                     limit=limit, progress=steps.suite, config=config.suite)

    index = None
    if "SemCor index" in steps.sections:
        from probing.wsd import build_semcor_index
        from probing.wsd_data import wordnet

        steps.start("SemCor index")
        with timed("semcor_index"):
            wordnet(data_root)
            index = build_semcor_index(model, data_root, limit_sentences=semcor_limit, cache_dir=cache_dir,
                                       batch_size=config.batch_size, progress=steps)
        result.semcor = {"sentences": index.n_sentences, "instances": index.n_instances,
                         "senses": len(index.sense_keys)}

    if "wsd" in tasks:
        from probing.wsd import evaluate_wsd

        steps.start("all-words WSD")
        with timed("wsd"):
            result.wsd = evaluate_wsd(model, data_root, index=index, cache_dir=cache_dir,
                                      batch_size=config.batch_size, progress=steps)

    if "lexsample" in tasks:
        from probing.wsd import lexical_sample_probe

        steps.start("lexical sample")
        with timed("lexsample"):
            result.lexsample = lexical_sample_probe(
                model, data_root, words=config.lexsample_words, max_instances=settings["lexsample_max_instances"],
                seed=seed, cache_dir=cache_dir, batch_size=config.batch_size, progress=steps)

    if senses:
        steps.start("projections")
        with timed("projections"):
            for k, lemma in enumerate(config.projection_lemmas):
                steps.fraction(f"projecting {lemma!r}", k / max(1, len(config.projection_lemmas)))
                with _torch_threads():
                    projection = _project(model, lemma, index, data_root, config, seed, notes)
                if projection is not None:
                    result.projections.append(projection)
        steps.start("nearest neighbours")
        with timed("retrieval"):
            result.retrieval = _retrieve(model, index, data_root, config, steps)

    if parsed_words:
        steps.start("learned s_j per lemma")
        with timed("word_senses"), _torch_threads(1):
            result.word_senses = _word_senses(model, index, parsed_words, data_root, config, seed, steps,
                                              cache_dir=cache_dir)

    if config.contextuality:
        from probing.contextuality import contextuality
        from probing.data import DatasetMissing

        steps.start("contextuality")
        with timed("contextuality"):
            try:
                result.contextuality = contextuality(
                    model, root=data_root, n_sentences=settings["contextuality_sentences"], cache_dir=cache_dir,
                    batch_size=config.batch_size, seed=seed, progress=steps)
            except (DatasetMissing, ValueError) as err:
                notes.append(f"contextuality left out: {err}")
                logger.warning("contextuality left out: %s", err)
    if any(t in SYNTAX_TASKS for t in tasks):
        from probing.syntax import SyntaxConfig
        from probing.syntax_report import run_syntax_section

        steps.start("syntax")
        with timed("syntax"):
            result.syntax = run_syntax_section(
                model, tasks, data_root=data_root, cache_dir=cache_dir, seed=seed, limit=limit,
                config=SyntaxConfig(random_bilm=config.suite.random_bilm), suite_config=config.suite,
                progress=lambda label, fraction: steps.fraction(label, fraction))
    timings["total"] = time.perf_counter() - started
    steps.finish()
    return result


def _min_opt(a: int | None, b: int | None) -> int | None:
    values = [v for v in (a, b) if v is not None]
    return min(values) if values else None


@contextlib.contextmanager
def _torch_threads(threads: int | None = None):
    """Run a block with torch's intra-op thread count set to ``threads`` (None: as it is), and
    put the count back as it was afterwards.

    Two reasons. UMAP (through numba's OpenMP layer, which shares the process's OpenMP runtime
    with torch) resets the OpenMP thread count: after the first UMAP fit, torch may compute with
    another number of threads than before, and a biLM forward pass with another thread count
    differs in the last float bits (~1e-7), enough to move a UMAP layout; keeping the count makes
    two runs with the same seed give the same numbers. And the learned-s_j fits are thousands
    of tiny Adam steps: on a busy machine two OpenMP threads wait on each other at every
    operation (measured: 9 ms a step with 2 threads vs 0.8 ms with 1 on this 2-core machine under
    load), so they run on one thread, which also makes their numbers independent of the
    caller's thread setting.
    """
    import torch

    before = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


class _Timer:
    def __init__(self, timings: dict[str, float], name: str) -> None:
        self.timings, self.name = timings, name

    def __enter__(self) -> "_Timer":
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        self.timings[self.name] = self.timings.get(self.name, 0.0) + time.perf_counter() - self.start


def _project(model, lemma: str, index, data_root, config: ReportConfig, seed: int, notes: list[str]):
    """One lemma's projection from SemCor or the demo sentences (see ReportConfig)."""
    from probing.projections import project_lemma

    methods = ("pca", "umap") if config.umap else ("pca",)
    demo = _demo_set(lemma)
    rows = index.lemma_rows(lemma) if index is not None else []
    n_senses = len({index.instance_keys(int(r))[0] for r in rows}) if len(rows) else 0
    source = config.projection_source
    use_semcor = index is not None and (source == "semcor" or (
        source == "auto" and len(rows) >= config.projection_min_semcor and n_senses >= 2))
    if source == "auto" and not use_semcor and demo is not None:
        notes.append(f"“{lemma}”: the SemCor index ({index.n_sentences if index else 0:,} sentences) has "
                     f"{len(rows)} sense-tagged occurrences ({n_senses} senses), fewer than "
                     f"{config.projection_min_semcor} with two senses: projected the shipped demo "
                     f"sentences ({len(demo.texts)}, senses {', '.join(demo.glosses)}) instead.")
    try:
        if use_semcor:
            return project_lemma(model, lemma, index=index, root=data_root, max_semcor=config.projection_max_points,
                                 methods=methods, seed=seed)
        if demo is not None and source in ("auto", "demo"):
            return project_lemma(model, lemma, root=data_root, sentences=demo.texts, senses=demo.senses,
                                 sense_glosses=demo.glosses, methods=methods, seed=seed)
    except ValueError as err:
        notes.append(f"“{lemma}”: no projection ({err}).")
        return None
    notes.append(f"“{lemma}”: no projection: SemCor has {len(rows)} occurrences and there is no demo set.")
    return None


def _retrieve(model, index, data_root, config: ReportConfig, steps: _Progress) -> list:
    """Table 4: nearest SemCor occurrences of each query word, per LSTM layer."""
    from probing.retrieval import SenseRetriever
    from probing.static import static_baselines

    steps.fraction("static embeddings", 0.0)
    retriever = SenseRetriever(model, index, static=static_baselines(model), root=data_root)
    n_layers = model.config.n_output_layers
    layers = list(range(1, n_layers)) or [0]
    out = []
    for k, (sentence, word) in enumerate(config.retrieval_queries):
        steps.fraction(f"query {k + 1} of {len(config.retrieval_queries)}", (k + 0.5) / len(config.retrieval_queries))
        result = retriever.query(sentence, word, k=config.retrieval_k, layers=layers)
        if all(not layer.neighbours for layer in result.layers):
            lemma = result.lemma
            result = retriever.query(sentence, word, k=config.retrieval_k, layers=layers, scope="any")
            result.notes.insert(0, f"no sense-tagged “{lemma}” in the {index.n_sentences:,} SemCor sentences "
                                   "indexed: the neighbours are the nearest instances of any word")
        out.append(result)
    return out


WORD_SENSES_CACHE_VERSION = 1


def _word_senses_cache_path(cache_dir, index, lemma: str, pos: str | None, demo, seeds: tuple[int, ...],
                            config: ReportConfig, seed: int) -> Path:
    """Where one lemma's outcome (fitted s_j, or why it was refused) is cached: keyed by
    everything the fit depends on (the index's model and tokens, the lemma, the demo sentences
    it may fall back to, the seeds and the fit's settings)."""
    import hashlib

    from probing.activations import default_cache_dir

    parts = [WORD_SENSES_CACHE_VERSION, index.model_checksum, index.tokens_digest, index.n_sentences, lemma, pos,
             None if demo is None else [demo.word, list(demo.texts), list(demo.senses)],
             list(seeds), config.word_folds, config.word_steps, config.word_max_occurrences, seed]
    key = hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()[:32]
    return Path(cache_dir or default_cache_dir()) / "word_senses" / f"{key}.json"


def _word_senses(model, index, words: Sequence[tuple[str, str | None]], data_root, config: ReportConfig,
                 seed: int, steps: _Progress, cache_dir=None):
    """The per-lemma panel: learned s_j per lemma from SemCor, else from the lemma's demo set. Each
    lemma's outcome is cached, so a warm rerun refits nothing."""
    from probing.word_senses import WordSensesComparison, WordSensesResult

    seeds = tuple(seed + i for i in range(config.word_seeds))
    results, refused = [], {}
    for k, (lemma, pos) in enumerate(words):
        label = lemma if pos is None else f"{lemma} ({pos})"
        steps.fraction(f"learning s_j for {label!r}", k / len(words))
        demo = _demo_set(lemma) if pos is None else None
        path = _word_senses_cache_path(cache_dir, index, lemma, pos, demo, seeds, config, seed)
        outcome = None
        if path.is_file():
            cached = read_checked_json(path)  # edited or damaged on disk: refitted, never reported
            try:
                if cached is not None:
                    outcome = (WordSensesResult.from_json(cached["result"]) if cached.get("result") is not None
                               else str(cached["refused"]))
            except (ValueError, KeyError, TypeError, AttributeError) as err:
                logger.warning("ignoring a damaged word-senses cache entry %s (%s)", path, err)
        if outcome is None:
            outcome = _fit_word_senses(model, index, lemma, pos, demo, data_root, config, seed, seeds)
            write_checked_json(path, {"result": outcome.to_json()} if isinstance(outcome, WordSensesResult)
                               else {"refused": outcome})
        if isinstance(outcome, str):
            refused[label] = outcome
        else:
            results.append(outcome)
    return WordSensesComparison(results, refused)


def _fit_word_senses(model, index, lemma: str, pos: str | None, demo, data_root, config: ReportConfig, seed: int,
                     seeds: tuple[int, ...]):
    """One lemma: the fitted ``WordSensesResult``, or the reason it was refused (a str)."""
    from probing.word_senses import (WordSensesRefused, learn_word_senses, semcor_occurrences,
                                     sentence_occurrences)

    try:
        occurrences = semcor_occurrences(index, lemma, pos, max_occurrences=config.word_max_occurrences, seed=seed)
        return learn_word_senses(occurrences, seeds=seeds, folds=config.word_folds, steps=config.word_steps)
    except WordSensesRefused as refusal:
        semcor_reason = refusal.reason
    if demo is None:
        return f"SemCor ({index.n_sentences:,} sentences): {semcor_reason}"
    try:
        occurrences = sentence_occurrences(model, demo.texts, demo.senses, demo.word, glosses=demo.glosses,
                                           root=data_root)
        fitted = learn_word_senses(occurrences, seeds=seeds, folds=config.word_folds, steps=config.word_steps)
    except WordSensesRefused as refusal:
        return f"SemCor: {semcor_reason}; demo sentences: {refusal.reason}"
    fitted.notes.insert(0, f"SemCor ({index.n_sentences:,} sentences): {semcor_reason}; fitted on the "
                           f"shipped demo sentences ({len(demo.texts)}) instead.")
    return fitted


# --------------------------------------------------------------------------------------------
# Content: blocks that both renderers (HTML, Markdown) draw
# --------------------------------------------------------------------------------------------


@dataclass
class ReportFigure:
    """One figure of a report: ``name`` (file-safe, the PNG's name), ``title``, the plotly
    ``figure`` (as :mod:`probing.figures` builds it) and a ``caption``."""

    name: str
    title: str
    figure: Any
    caption: str = ""


@dataclass
class _Heading:
    text: str
    level: int = 2

    @property
    def anchor(self) -> str:
        return "s-" + re.sub(r"[^a-z0-9]+", "-", self.text.lower()).strip("-")


@dataclass
class _Text:
    text: str  # ``**bold**`` is the only markup


@dataclass
class _Table:
    headers: list[str]
    rows: list[list[str]]
    caption: str = ""
    numeric: list[bool] | None = None  # right-align these columns


@dataclass
class _Notes:
    items: list[str]


def _f(x: float | None, digits: int = 1, scale: float = 100.0, signed: bool = False) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    return f"{scale * x:{'+' if signed else ''}.{digits}f}"


def _ci(interval, digits: int = 1) -> str:
    return f"{100 * interval.estimate:.{digits}f} [{100 * interval.low:.{digits}f}, {100 * interval.high:.{digits}f}]"


def _architecture(config: Mapping) -> str:
    cnn, lstm = config.get("char_cnn", {}), config.get("lstm", {})
    filters = sum(int(f[1]) for f in cnn.get("filters", ()))
    n_params = config.get("n_parameters")
    return (f"char CNN ({filters:,} filters, {cnn.get('n_highway', '?')} highway layers) → "
            f"{lstm.get('n_layers', '?')} biLSTM layers of {lstm.get('dim', '?')} units with "
            f"{lstm.get('projection_dim', '?')}-d projections"
            + (f"; {n_params:,} parameters" if n_params else ""))


def _seconds(s: float | None) -> str:
    if s is None:
        return "–"
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.1f} min"


def _meta_table(result: ReportResult) -> _Table:
    rows = [
        ["model", f"{result.model_name} (sha256 {result.model_checksum[:12]})"],
        ["architecture", _architecture(result.model_config)],
        ["tasks", ", ".join(result.tasks) + (f"; words: {', '.join(result.words)}" if result.words else "")],
        ["seed", str(result.seed)],
        ["limit", "none (full datasets)" if result.limit is None
         else f"first {result.limit:,} sentences of each dataset"],
    ]
    if result.semcor:
        rows.append(["SemCor index", f"{result.semcor['sentences']:,} sentences, {result.semcor['instances']:,} "
                                     f"sense-tagged instances, {result.semcor['senses']:,} senses"])
    rows.append(["created", f"{result.created}; took {_seconds(result.timings.get('total'))}"])
    rows.append(["software", ", ".join(f"{k} {v}" for k, v in result.versions.items())])
    return _Table(["", ""], rows)


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
        from probing.wsd import FOUR_SETS

        best = result.wsd.best_layer(FOUR_SETS)
        first = result.wsd.first_sense.f1(FOUR_SETS)
        out.append(f"**all-words WSD** (four test sets): best is {best.representation} with F1 "
                   f"{best.f1(FOUR_SETS):.1f} vs WordNet first sense {first:.1f} ({best.f1(FOUR_SETS) - first:+.1f}); "
                   f"the paper's biLM: layer 1 {result.wsd.paper.get('biLM layer 1', float('nan')):.1f}, "
                   f"layer 2 {result.wsd.paper.get('biLM layer 2', float('nan')):.1f}.")
    for p in result.projections:
        scored = [l for l in p.layers if l.loo_1nn_accuracy is not None]
        if scored:
            best = max(scored, key=lambda l: (l.loo_1nn_accuracy, -l.layer))
            verdict = "above" if best.loo_1nn_accuracy > best.majority_baseline else "not above"
            out.append(f"**“{p.lemma}”**: the best sense separation is in layer {best.layer}, leave-one-out 1-NN "
                       f"{_f(best.loo_1nn_accuracy)}%, {verdict} the majority sense {_f(best.majority_baseline)}% "
                       f"({len(p.points)} occurrences).")
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
    from probing.figures import silhouette_shown

    rows = [[f"layer {l.layer}", f"{l.n_distinct}", _f(l.loo_1nn_accuracy), _f(l.majority_baseline),
             "–" if silhouette_shown(l) is None else f"{l.silhouette:+.3f}",
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
                  f"LM-corpus test "
                  f"sentences (Ethayarajh 2019).", [False] + [True] * 5)


def report_blocks(result: ReportResult) -> list:
    """The report's content in order: headings, paragraphs, tables, notes and
    :class:`ReportFigure` objects, as both renderers draw it."""
    from probing import figures as F

    blocks: list = [_meta_table(result)]
    summary = summary_lines(result)
    if summary:
        blocks += [_Heading("Summary"), _Notes(summary)]
    if result.suite is not None:
        blocks.append(_Heading("Probing tasks: what each layer encodes"))
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
    if result.wsd is not None:
        from probing.wsd import FOUR_SETS

        blocks.append(_Heading("Word-sense disambiguation (all words, Peters et al. 2018 Table 5)"))
        blocks.append(ReportFigure("wsd-layers", "WSD F1 per layer", F.wsd_layers_figure(result.wsd)))
        blocks.append(ReportFigure("wsd-sets", "WSD F1 per evaluation set", F.wsd_sets_figure(result.wsd)))
        blocks.append(_wsd_table(result.wsd))
        notes = list(result.wsd.notes)
        if any(r.representation.startswith("layer ") for r in result.wsd.rows):
            best = result.wsd.best_layer(FOUR_SETS)
            notes.insert(0, f"best layer on the four test sets: {best.representation}, F1 {best.f1(FOUR_SETS):.1f} "
                            f"({best.f1(FOUR_SETS) - result.wsd.first_sense.f1(FOUR_SETS):+.1f} vs first sense).")
        blocks.append(_Notes(notes))
    if result.lexsample is not None:
        blocks.append(_Heading("Senseval-2 lexical sample: a supervised sense probe"))
        blocks.append(ReportFigure("lexical-sample", "Lexical-sample probe per layer",
                                   F.lexical_sample_figure(result.lexsample)))
        if result.lexsample.words:
            blocks.append(_lexsample_table(result.lexsample))
        if result.lexsample.notes:
            blocks.append(_Notes(list(result.lexsample.notes)))
    if result.projections:
        names = " and ".join(f"“{p.lemma}”" for p in result.projections)
        blocks.append(_Heading(f"The senses of {names}, layer by layer"))
        blocks.append(_Text("Each occurrence is one point, coloured by its sense; UMAP (cosine, fixed seed) and "
                            "PCA per layer. The separability numbers are computed on the full vectors: "
                            "leave-one-out 1-nearest-neighbour sense accuracy (vs always guessing the commonest "
                            "sense) and the silhouette of the sense groups."))
        for p in result.projections:
            blocks.append(_Heading(f"“{p.lemma}”", 3))
            blocks.append(ReportFigure(f"projection-{_slug(p.lemma)}", f"Projections of {p.lemma}",
                                       F.projection_figure(p)))
            blocks.append(_projection_table(p))
            if p.notes:
                blocks.append(_Notes(list(p.notes)))
        blocks.append(ReportFigure("separability", "Sense separability per layer",
                                   F.separability_figure(result.projections)))
    if result.retrieval:
        blocks.append(_Heading("Nearest neighbours (Peters et al. 2018, Table 4)"))
        blocks.append(_Text("For each source sentence, the SemCor occurrences whose vectors are nearest (cosine) to "
                            "the source word's, per LSTM layer, with their sense; below, the nearest word types "
                            "under static embeddings (no context), as the paper's GloVe row."))
        for r in result.retrieval:
            blocks += _retrieval_blocks(r)
    if result.word_senses is not None:
        blocks.append(_Heading("Learned s_j per lemma: which layers separate the senses?"))
        blocks.append(ReportFigure("word-senses", "Learned s_j per lemma", F.word_senses_figure(result.word_senses)))
        if result.word_senses.results:
            blocks.append(_word_senses_table(result.word_senses))
        notes = [f"“{r.lemma}”: {n}" for r in result.word_senses.results for n in r.notes]
        notes += [f"“{lemma}” not fitted: {reason}" for lemma, reason in result.word_senses.refused.items()]
        if notes:
            blocks.append(_Notes(notes))
    if result.contextuality is not None:
        blocks.append(_Heading("How contextual is each layer? (Ethayarajh 2019)"))
        blocks.append(ReportFigure("contextuality", "Contextuality per layer",
                                   F.contextuality_figure(result.contextuality)))
        blocks.append(_contextuality_table(result.contextuality))
        if result.contextuality.notes:
            blocks.append(_Notes(list(result.contextuality.notes)))
    if result.syntax is not None:
        from probing.syntax_report import syntax_blocks

        blocks += syntax_blocks(result.syntax, sys.modules[__name__])
    if result.notes:
        blocks += [_Heading("Notes"), _Notes(list(result.notes))]
    timings = ", ".join(f"{k} {_seconds(v)}" for k, v in result.timings.items())
    blocks += [_Heading("Reproduce"), _Text(f"python -m probing.report --model {result.model_name} --tasks "
                                            f"{' '.join(result.tasks)}"
                                            + (f" --words {' '.join(result.words)}" if result.words else "")
                                            + f" --seed {result.seed}"
                                            + (f" --limit {result.limit}" if result.limit is not None else "")
                                            + " --out DIR"), _Text(f"Time per section: {timings}.")]
    return blocks


def report_figures(result: ReportResult) -> list[ReportFigure]:
    """Every figure of the report of ``result``, in order (the app shows these)."""
    return [b for b in report_blocks(result) if isinstance(b, ReportFigure)]


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "x"


# --------------------------------------------------------------------------------------------
# Two results side by side
# --------------------------------------------------------------------------------------------


def _labels(a: ReportResult, b: ReportResult, labels: Sequence[str] | None) -> list[str]:
    if labels:
        if len(labels) != 2 or labels[0] == labels[1]:
            raise ValueError(f"--labels needs two different names, got {list(labels)}")
        return list(labels)
    if a.model_name != b.model_name:
        return [a.model_name, b.model_name]
    return [f"A: {a.model_name} ({a.model_checksum[:8]})", f"B: {b.model_name} ({b.model_checksum[:8]})"]


def _delta(a: float | None, b: float | None, digits: int = 1) -> str:
    if a is None or b is None:
        return "–"
    return f"{100 * (b - a):+.{digits}f}"


def compare_blocks(a: ReportResult, b: ReportResult, labels: Sequence[str] | None = None) -> list:
    """The content of a side-by-side report of two results (tables and figures)."""
    from probing import figures as F

    la, lb = _labels(a, b, labels)
    blocks: list = []
    rows = [["model", f"{a.model_name} (sha256 {a.model_checksum[:12]})",
             f"{b.model_name} (sha256 {b.model_checksum[:12]})"],
            ["architecture", _architecture(a.model_config), _architecture(b.model_config)],
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
    if a.suite is not None and b.suite is not None:
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
    if a.wsd is not None and b.wsd is not None:
        blocks.append(_Heading("Word-sense disambiguation"))
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
    if a.lexsample is not None and b.lexsample is not None:
        blocks.append(_Heading("Senseval-2 lexical sample"))
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
    if a.projections and b.projections:
        blocks.append(_Heading("Sense separability"))
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
    if a.word_senses is not None and b.word_senses is not None:
        blocks.append(_Heading("Learned s_j per lemma"))
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
    if a.contextuality is not None and b.contextuality is not None:
        blocks.append(_Heading("Contextuality"))
        blocks.append(ReportFigure("compare-contextuality", "Contextuality per layer",
                                   F.compare_contextuality_figure(a.contextuality, b.contextuality, (la, lb))))
    if len(blocks) <= 2:
        blocks.append(_Notes(["the two results have no section in common."]))
    return blocks


# --------------------------------------------------------------------------------------------
# Rendering
# --------------------------------------------------------------------------------------------

_CSS = """
:root { color-scheme: light dark; --fg: #1f2328; --bg: #ffffff; --muted: #59636e; --border: #d1d9e0;
        --stripe: #f6f8fa; --accent: #0969da; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6edf3; --bg: #0d1117; --muted: #9198a1; --border: #3d444d; --stripe: #151b23; --accent: #4493f8; }
}
html { background: var(--bg); color: var(--fg); }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       max-width: 1200px; margin: 0 auto; padding: 24px 28px 64px; }
h1 { font-size: 1.7em; margin-bottom: 0.2em; } h2 { border-bottom: 1px solid var(--border); padding-bottom: 0.2em;
     margin-top: 2em; } h3 { margin-top: 1.5em; }
a { color: var(--accent); } .muted, caption, figcaption { color: var(--muted); }
nav ul { columns: 2; padding-left: 1.2em; }
table { border-collapse: collapse; margin: 0.8em 0 1.2em; font-size: 0.88em; display: block; overflow-x: auto; }
th, td { border: 1px solid var(--border); padding: 4px 8px; vertical-align: top; }
th { background: var(--stripe); text-align: left; } td.num { text-align: right; font-variant-numeric: tabular-nums;
     white-space: nowrap; }
tbody tr:nth-child(even) { background: var(--stripe); }
caption { caption-side: bottom; text-align: left; padding-top: 4px; font-size: 0.95em; }
figure { margin: 1em 0 1.6em; } figcaption { font-size: 0.92em; margin-top: 4px; }
.plot { width: 100%; }
"""

_THEME_SCRIPT = """
(function () {
  var query = window.matchMedia ? window.matchMedia('(prefers-color-scheme: dark)') : null;
  function apply() {
    var dark = query && query.matches;
    var update = {'font.color': dark ? '%(dark)s' : '%(light)s',
                  'modebar.color': dark ? 'rgba(230, 237, 243, 0.5)' : 'rgba(31, 35, 40, 0.4)',
                  'modebar.activecolor': dark ? '#e6edf3' : '#1f2328'};
    document.querySelectorAll('.js-plotly-plot').forEach(function (div) { Plotly.relayout(div, update); });
  }
  apply();
  window.addEventListener('load', apply);
  if (query && query.addEventListener) { query.addEventListener('change', apply); }
})();
"""


def _html_inline(text: str) -> str:
    return re.sub(r"\*\*(.+?)\*\*", r"<b>\1</b>", html.escape(text))


def render_html(blocks: Sequence, title: str, subtitle: str = "") -> str:
    """A self-contained HTML page: plotly.js inlined once, every figure as a div + script."""
    import plotly.io as pio
    from plotly.offline import get_plotlyjs

    from probing.figures import THEMES

    headings = [b for b in blocks if isinstance(b, _Heading) and b.level == 2]
    body: list[str] = [f"<h1>{html.escape(title)}</h1>"]
    if subtitle:
        body.append(f'<p class="muted">{html.escape(subtitle)}</p>')
    if headings:
        body.append("<nav><ul>" + "".join(f'<li><a href="#{h.anchor}">{html.escape(h.text)}</a></li>'
                                            for h in headings) + "</ul></nav>")
    seen: set[str] = set()
    for block in blocks:
        if isinstance(block, _Heading):
            body.append(f'<h{block.level} id="{block.anchor}">{html.escape(block.text)}</h{block.level}>')
        elif isinstance(block, _Text):
            body.append(f"<p>{_html_inline(block.text)}</p>")
        elif isinstance(block, _Notes):
            body.append("<ul>" + "".join(f"<li>{_html_inline(n)}</li>" for n in block.items) + "</ul>")
        elif isinstance(block, _Table):
            numeric = block.numeric or [False] * len(block.headers)
            head = ("<thead><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in block.headers) + "</tr></thead>"
                    if any(block.headers) else "")
            rows = "".join("<tr>" + "".join(
                f'<td{" class=num" if k < len(numeric) and numeric[k] else ""}>{_html_inline(c)}</td>'
                for k, c in enumerate(row)) + "</tr>" for row in block.rows)
            caption = f"<caption>{_html_inline(block.caption)}</caption>" if block.caption else ""
            body.append(f"<table>{caption}{head}<tbody>{rows}</tbody></table>")
        elif isinstance(block, ReportFigure):
            div_id = f"fig-{block.name}"
            if div_id in seen:
                raise ValueError(f"two figures named {block.name!r}")
            seen.add(div_id)
            snippet = pio.to_html(block.figure, full_html=False, include_plotlyjs=False, div_id=div_id,
                                  config={"displaylogo": False, "responsive": True,
                                          "toImageButtonOptions": {"format": "png", "filename": block.name,
                                                                   "scale": 2}})
            caption = f"<figcaption>{_html_inline(block.caption)}</figcaption>" if block.caption else ""
            body.append(f'<figure class="plot">{snippet}{caption}</figure>')
    script = _THEME_SCRIPT % {"dark": THEMES["dark"]["font"], "light": THEMES["light"]["font"]}
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            "<meta name=\"color-scheme\" content=\"light dark\">\n"
            f"<title>{html.escape(title)}</title>\n<style>{_CSS}</style>\n"
            "<script type=\"text/javascript\">/* plotly.js, inlined so that this page works offline */\n"
            f"{get_plotlyjs()}\n</script>\n</head>\n<body>\n" + "\n".join(body)
            + f"\n<script type=\"text/javascript\">{script}</script>\n</body>\n</html>\n")


_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|])")


def _md_text(text: str) -> str:
    """``text`` with Markdown's special characters escaped, except the ``**bold**`` markup
    (SemCor sentences hold ``` `` ``` quotes, which Markdown would read as code)."""
    return "**".join(_MD_SPECIAL.sub(r"\\\1", part) for part in str(text).split("**"))


def _md_cell(text: str) -> str:
    return _md_text(text).replace("\n", " ")


def render_markdown(blocks: Sequence, title: str, subtitle: str = "",
                    figure_paths: Mapping[str, str] | None = None) -> str:
    """The report as Markdown: tables, and each figure as an image link to its PNG (relative
    path from ``figure_paths``) or, without one, a pointer to report.html."""
    lines = [f"# {_md_text(title)}", ""]
    if subtitle:
        lines += [_md_text(subtitle), ""]
    for block in blocks:
        if isinstance(block, _Heading):
            lines += ["#" * block.level + " " + _md_text(block.text), ""]
        elif isinstance(block, _Text):
            lines += [_md_text(block.text), ""]
        elif isinstance(block, _Notes):
            lines += [f"- {_md_text(n)}" for n in block.items] + [""]
        elif isinstance(block, _Table):
            numeric = block.numeric or [False] * len(block.headers)
            headers = [_md_cell(h) or " " for h in block.headers]
            lines.append("| " + " | ".join(headers) + " |")
            lines.append("|" + "|".join("---:" if k < len(numeric) and numeric[k] else "---"
                                        for k in range(len(headers))) + "|")
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in block.rows]
            if block.caption:
                lines += ["", f"*{_md_cell(block.caption)}*"]
            lines.append("")
        elif isinstance(block, ReportFigure):
            path = (figure_paths or {}).get(block.name)
            if path:
                lines += [f"![{_md_text(block.title)}]({path})", ""]
            else:
                lines += [f"*Figure “{_md_text(block.title)}”: interactive in report.html.*", ""]
            if block.caption:
                lines += [f"*{_md_text(block.caption)}*", ""]
    return "\n".join(lines).rstrip() + "\n"


# --------------------------------------------------------------------------------------------
# PNG export
# --------------------------------------------------------------------------------------------


def chromium_path() -> str | None:
    """The Chromium kaleido drives: ``$BROWSER_PATH``, else ``chromium`` / ``google-chrome`` on PATH."""
    env = os.environ.get("BROWSER_PATH")
    if env:
        return env
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def require_png_renderer() -> tuple[str, str]:
    """(kaleido version, Chromium path) for the PNG figures; RuntimeError naming the fix when
    either is missing. ``build_report`` asks before its long work, not after it."""
    try:
        import importlib.metadata as metadata

        import kaleido  # noqa: F401
        version = metadata.version("kaleido")
    except ImportError as err:
        raise RuntimeError(f"PNG figures need kaleido (pip install -r requirements.txt; {err}); "
                           "or pass --no-png") from None
    browser = chromium_path()
    if browser is None:
        raise RuntimeError("PNG figures need Chromium: run `bash scripts/install_browser.sh` (Debian's chromium), "
                           "or set $BROWSER_PATH to a Chrome/Chromium binary, or pass --no-png")
    return version, browser


def export_pngs(figures: Sequence[ReportFigure], folder: str | os.PathLike,
                width: int = PNG_WIDTH) -> tuple[dict[str, Path], str]:
    """Write each figure as ``<folder>/<name>.png`` on a white background (``themed(fig,
    "light")``) in one headless-Chromium session through kaleido, MathJax off (no network).
    Files appear only complete (rendered into a temporary folder, then renamed). Returns
    ({name: path}, a description of the renderer). RuntimeError naming the fix when kaleido
    or Chromium is missing or rendering fails."""
    from probing.figures import themed

    folder = Path(folder)
    if not figures:
        return {}, "none"
    import kaleido

    version, browser = require_png_renderer()
    folder.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".png-", dir=folder))
    try:
        specs = []
        for f in figures:
            fig = themed(f.figure, "light")
            height = int(fig.layout.height or 450)
            specs.append({"fig": fig.to_dict(), "path": staging / f"{f.name}.png",
                          "opts": {"format": "png", "width": width, "height": height, "scale": 1}})
        try:
            kaleido.write_fig_from_object_sync(specs, kopts={"mathjax": False, "path": browser},
                                               cancel_on_error=True)
        except Exception as err:  # kaleido raises its own and choreographer's errors
            raise RuntimeError(f"rendering PNG figures with kaleido {version} and {browser} failed: {err!r}; "
                               "pass --no-png to write the report without them") from err
        out = {}
        for f in figures:
            made = staging / f"{f.name}.png"
            if not made.is_file() or made.stat().st_size == 0:
                raise RuntimeError(f"kaleido wrote no PNG for figure {f.name!r}")
            target = folder / f"{f.name}.png"
            os.replace(made, target)
            out[f.name] = target
        return out, f"kaleido {version} + {browser}"
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# --------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------


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
        atomic_write_text(json_path, result_json)
    relative = {name: f"figures/{p.name}" for name, p in paths.items()}
    md_path, html_path = out_dir / "report.md", out_dir / "report.html"
    atomic_write_text(md_path, render_markdown(blocks, title, subtitle, relative))
    atomic_write_text(html_path, render_html(blocks, title, subtitle))
    return ReportFiles(str(out_dir.resolve()), str(html_path.resolve()), str(md_path.resolve()),
                       None if json_path is None else str(json_path.resolve()),
                       {k: str(p.resolve()) for k, p in paths.items()}, renderer)


def write_report(result: ReportResult, out_dir: str | os.PathLike, *, png: bool = True) -> ReportFiles:
    """Write ``results.json``, ``report.md`` (+ ``figures/*.png`` unless ``png=False``) and
    ``report.html`` for ``result`` into ``out_dir``; each file appears complete or not at all.
    Sets and returns ``result.files``."""
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
    ``progress(label, done, total, unit)`` runs to 100 percent (writing included)."""
    if png:
        require_png_renderer()  # a missing Chromium must not surface after a 15-minute cold run
    inner = None if progress is None else (lambda label, done, total, unit: progress(label, 0.95 * done, total, unit))
    result = run_report(model, tasks, words, data_root, seed, limit, inner, cache_dir=cache_dir, config=config)
    if progress is not None:
        progress("writing report.html, report.md, results.json" + (" and PNG figures" if png else ""), 95.0, 100.0, "%")
    started = time.perf_counter()
    write_report(result, out_dir, png=png)
    logger.info("report written to %s in %.1f s", out_dir, time.perf_counter() - started)
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
    files = _write_documents(blocks, out, title, "ELMo Workbench · Δ = B − A", png, None)
    comparison = {"format": "elmo-workbench/report-comparison", "version": 1, "labels": [la, lb],
                  "sources": sources, "a": ra.numbers(), "b": rb.numbers()}
    path = out / "comparison.json"
    atomic_write_text(path, json.dumps(comparison, indent=1, ensure_ascii=False) + "\n")
    files.json = str(path.resolve())
    return files


# --------------------------------------------------------------------------------------------
# CLI
# --------------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m probing.report",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Write a probe report for a biLM: report.html (self-contained, interactive, works offline), "
                    "report.md (tables + PNG figures) and results.json (everything, reloadable). "
                    "Or, with --compare, put two saved results side by side.",
        epilog="examples:\n"
               "  python -m probing.report --model elmo-mini --tasks pos chunk wsd --out reports/mini\n"
               "  python -m probing.report --model path/to/model --tasks pos wsd --words bank play --limit 200 "
               "--out reports/quick\n"
               "  python -m probing.report --compare reports/a/results.json reports/b/results.json \\\n"
               "      --out reports/a-vs-b\n"
               "\ntasks: pos, upos (UD EWT tags), chunk (CoNLL-2000), wsd (all-words WSD on SemCor centroids,\n"
               "with the bank/play projections and nearest-neighbour tables), lexsample (Senseval-2 lexical-sample\n"
               "probe), structural (Hewitt & Manning's tree-distance and depth probes on UD EWT), arcs (edge probes\n"
               "on gold dependency arcs: head or not, relation label). Activations, probes and the SemCor index are cached, so a second run is much faster.\n"
               "PNG figures need kaleido and Chromium (bash scripts/install_browser.sh); --no-png skips them.")
    parser.add_argument("--model", default="elmo-mini",
                        help="shipped model name or a directory with options.json and weights (default: %(default)s)")
    parser.add_argument("--tasks", nargs="+", default=["pos", "chunk", "wsd"], choices=REPORT_TASKS, metavar="TASK",
                        help=f"any of {', '.join(REPORT_TASKS)} (default: pos chunk wsd)")
    parser.add_argument("--words", nargs="+", default=[], metavar="LEMMA",
                        help="lemmas for the learned-s_j panel, e.g. bank play, or play:VERB")
    parser.add_argument("--out", type=Path, required=True, help="folder to write the report into (created if needed)")
    parser.add_argument("--data-root", type=Path, default=None,
                        help="data root (default: $ELMO_WORKBENCH_DATA or the user cache; see python -m probing.data)")
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="activation / probe / SemCor-index cache (default: $ELMO_WORKBENCH_CACHE or the "
                             "user cache)")
    parser.add_argument("--limit", type=int, default=None, metavar="N",
                        help="only the first N sentences of each dataset (a quick run; SemCor too)")
    parser.add_argument("--semcor-limit", type=int, default=None, metavar="N",
                        help="SemCor sentences to index (default: --limit, or all of SemCor)")
    parser.add_argument("--seed", type=int, default=0, help="seed of every random choice (default: %(default)s)")
    parser.add_argument("--no-png", action="store_true", help="skip the PNG figures of report.md (no Chromium needed)")
    parser.add_argument("--no-contextuality", action="store_true", help="leave out the contextuality section")
    parser.add_argument("--no-random-bilm", action="store_true", help="skip the random-initialised biLM baseline")
    parser.add_argument("--compare", nargs=2, type=Path, default=None, metavar=("A", "B"),
                        help="instead of running: two saved results.json files (or their folders) side by side")
    parser.add_argument("--labels", nargs=2, default=None, metavar=("NAME_A", "NAME_B"),
                        help="with --compare: names for A and B (default: the model names)")
    parser.add_argument("--precision", choices=PRECISION_CHOICES, default=SuiteConfig.precision,
                        help="the biLM's matrix products: fp32, bf16, or auto = bf16 where this CPU's bf16 units make "
                             "it faster, else fp32 (default: %(default)s)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar, warnings only")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING if args.quiet else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s")
    from probing.data import DatasetMissing

    if args.compare is not None:
        try:
            files = compare_reports(args.compare[0], args.compare[1], args.out, labels=args.labels, png=not args.no_png)
        except (ValueError, FileNotFoundError, RuntimeError) as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        print(f"wrote {files.html}\nwrote {files.markdown}"
              + (f" (+ {len(files.figures)} PNG figures)" if files.figures else ""))
        return 0

    bar = TerminalProgress("probe report", single=True, unit="%", quiet=args.quiet,
                           bar_format="{desc}{percentage:3.0f}%|{bar}| [{elapsed}<{remaining}]")

    config = ReportConfig(suite=SuiteConfig(random_bilm=not args.no_random_bilm, precision=args.precision),
                          semcor_limit=args.semcor_limit,
                          contextuality=not args.no_contextuality)
    try:
        result = build_report(args.model, args.tasks, args.out, words=args.words, data_root=args.data_root,
                              seed=args.seed, limit=args.limit, progress=bar, cache_dir=args.cache_dir,
                              config=config, png=not args.no_png)
    except (ValueError, DatasetMissing, FileNotFoundError, RuntimeError) as err:
        bar.close()
        print(f"error: {err}", file=sys.stderr)
        return 2
    bar.close()
    for line in summary_lines(result):
        print("- " + line.replace("**", ""))
    files = result.files
    print(f"wrote {files.html}\nwrote {files.markdown}" + (f" (+ {len(files.figures)} PNG figures, "
                                                            f"{files.png_renderer})" if files.figures else "")
          + f"\nwrote {files.json}\ntotal {_seconds(result.timings.get('total'))}")
    return 0


__all__ = ["PAPER_PLAY_QUERIES", "REPORT_TASKS", "ReportConfig", "ReportFigure", "ReportFiles", "ReportResult",
           "build_report", "compare_blocks", "compare_reports", "export_pngs", "load_results", "main", "parse_word",
           "render_html", "render_markdown", "report_blocks", "report_figures", "run_report", "summary_lines",
           "write_report"]


if __name__ == "__main__":
    sys.exit(main())
