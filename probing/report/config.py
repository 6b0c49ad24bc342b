"""A report's configuration and its result: :class:`ReportConfig` (what to measure beyond the
tasks), :class:`ReportResult` (everything measured, JSON round trip), :class:`ReportFiles` (where
it was written) and :func:`load_results` (a saved report's or probe suite's ``results.json``)."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass, field
from typing import Any, Mapping

from elmo_model.plumbing import io_safety
from probing.context.contextuality import ContextualityResult
from probing.engine.envelope import JsonDataclass, check_format, identity_of, read_json_object
from probing.information.results import InformationResult
from probing.information.run import InformationConfig
from probing.senses.projections import ProjectionResult
from probing.senses.retrieval import RetrievalResult
from probing.senses.word_senses import WordSensesComparison
from probing.senses.wsd import LexicalSampleResult, WsdResult
from probing.syntax.sections import SYNTAX_TASKS, SyntaxSection
from probing.syntax.structural import SyntaxConfig
from probing.tagging.results import SuiteResult
from probing.tagging.suite_config import RUN_RECORD_KEYS, SuiteConfig

log = logging.getLogger(__name__)

REPORT_FORMAT = "elmo-workbench/report"
REPORT_VERSION = 1

SUITE_TASKS = ("pos", "upos", "chunk")
REPORT_TASKS = (*SUITE_TASKS, "wsd", "lexsample", *SYNTAX_TASKS)
"""Tasks a report can hold: the probing suite's, all-words WSD, the Senseval-2 lexical sample, and
the syntax probes (structural probe; edge probes on gold arcs: ``probing.syntax.sections``)."""

PAPER_PLAY_QUERIES: tuple[tuple[str, str], ...] = (
    ("Chico Ruiz made a spectacular play on Alusik's grounder.", "play"),
    ("Olivia De Havilland signed to do a Broadway play for Garson.", "play"),
)
"""The two source sentences of Peters et al. (2018), Table 4 (a play in a game; a stage play)."""

DEFAULT_SEMCOR_LIMIT = 10_000
"""SemCor sentences a report indexes unless told otherwise (the app's sense pages' default slice
too): enough for most words' senses (SemCor's first 1,000 sentences hold "bank" 4 times, the first
10,000 26 times); the cost is in docs/app.md, *SemCor's slice*."""

REPORT_TRAIN_FRACTION = 1.0
"""The share of each task's training sentences (evenly spaced) a report's probes train on unless
told otherwise (``--train-fraction``): all of them. A share is there for a quicker look; measured,
60% kept 31 of 32 suite figures inside the whole splits' intervals but saved only a tenth of a
cold report (docs/probe-results.md, *Time*), so the default stays the published figures' run."""

PNG_WIDTH = 1100  # px: wide enough for a three-layer projection grid
VOLATILE_KEYS = frozenset({"seconds", "timings", "created"})
"""Keys :meth:`ReportResult.numbers` leaves out: how long things took and when, not what they found."""


@dataclass(frozen=True)
class ReportConfig(JsonDataclass, strict=True):
    """What goes into a report beyond the tasks (defaults: the full report).

    - ``suite``: the probing suite's configuration (``probing.tagging.suite_config.SuiteConfig``;
      a report's default trains the probes on :data:`REPORT_TRAIN_FRACTION` of each training split).
    - ``semcor_limit``: the first N SemCor sentences indexed for WSD, projections, retrieval
      and the words panel (default :data:`DEFAULT_SEMCOR_LIMIT`; None: all of SemCor, 37,176).
      The report's ``limit`` does not cut SemCor: a quick run passes a small ``semcor_limit`` too.
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
    - ``syntax``: the structural and edge probes' settings (``probing.syntax.structural.SyntaxConfig``: how
      many EWT training sentences, ranks, ...); their random-biLM baseline follows the suite's.
    - ``information``: MDL, conditional and amnesic probing of the suite's tasks and the lexical
      sample (``probing.information.run.InformationConfig``: slices, methods; the lexical sample's
      words and instances are the ones above); None leaves the section out.
      The report's default slices are smaller than the command's (100 training sentences, 50 dev
      and test, 4 INLP rounds): the section's cost is in docs/probe-results.md.
    """

    suite: SuiteConfig = SuiteConfig(train_fraction=REPORT_TRAIN_FRACTION)
    semcor_limit: int | None = DEFAULT_SEMCOR_LIMIT
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
    syntax: SyntaxConfig = SyntaxConfig()
    information: InformationConfig | None = InformationConfig(train_limit=100, eval_limit=50)

    def __post_init__(self) -> None:
        if self.projection_source not in ("auto", "semcor", "demo"):
            raise ValueError(f"projection_source must be 'auto', 'semcor' or 'demo', got {self.projection_source!r}")
        for name in ("retrieval_k", "word_seeds", "word_folds", "word_steps", "contextuality_sentences",
                     "batch_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"ReportConfig.{name} must be positive, got {getattr(self, name)}")


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

    - ``model_*``: name, weight checksum, architecture (``model_config`` plus ``n_parameters``);
      ``model_reference``: what ``--model`` takes to load it again (a name, else its folder).
    - ``tasks``, ``words``, ``seed``, ``limit``, ``config``: what was asked.
    - ``settings``: the effective sizes (SemCor sentences, lexical-sample instances,
      contextuality sentences) after ``limit`` was applied.
    - ``suite``, ``wsd``, ``lexsample``, ``projections``, ``retrieval``, ``word_senses``,
      ``contextuality``, ``syntax``, ``information``: the backend's own result objects.
    - ``semcor``: counts of the SemCor index used (sentences, instances, senses), if any.
    - ``notes``: what was skipped, replaced or approximated, in plain words.
    - ``files``: where :func:`build_report` wrote it (not part of the JSON, not compared).
    """

    model_name: str
    model_identity: str
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
    wsd: WsdResult | None = None
    lexsample: LexicalSampleResult | None = None
    projections: list[ProjectionResult] = field(default_factory=list)
    retrieval: list[RetrievalResult] = field(default_factory=list)
    word_senses: WordSensesComparison | None = None
    contextuality: ContextualityResult | None = None
    syntax: SyntaxSection | None = None
    information: InformationResult | None = None
    semcor: dict[str, int] | None = None
    notes: list[str] = field(default_factory=list)
    model_reference: str = ""
    files: ReportFiles | None = field(default=None, compare=False, repr=False)

    # -- JSON ---------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """A JSON-ready dict (each section as its own class writes it)."""
        section = lambda obj: None if obj is None else json.loads(obj.to_json())  # noqa: E731
        return {
            "format": REPORT_FORMAT, "version": REPORT_VERSION,
            "model_name": self.model_name, "model_identity": self.model_identity,
            "model_reference": self.model_reference,
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
            "information": None if self.information is None else self.information.to_dict(),
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> "ReportResult":
        """The inverse of :meth:`to_dict`; ValueError for another format or version."""
        check_format(data, REPORT_FORMAT, REPORT_VERSION, "probe report")

        def section(kind, value):
            return None if value is None else kind.from_json(json.dumps(value))

        return cls(
            model_name=str(data["model_name"]), model_identity=identity_of(data),
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
            notes=list(data.get("notes", [])), syntax=_syntax_section(data.get("syntax")),
            model_reference=str(data.get("model_reference") or ""),
            information=None if data.get("information") is None else InformationResult.from_dict(data["information"]))

    def to_json(self, path: str | os.PathLike | None = None) -> str:
        """The JSON text; with ``path``, also written there atomically (temp file + rename)."""
        text = json.dumps(self.to_dict(), indent=1, ensure_ascii=False) + "\n"
        if path is not None:
            io_safety.atomic_write_text(path, text)
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
    return SyntaxSection.from_json(json.dumps(value))


def _strip(value, keys: frozenset[str]):
    if isinstance(value, dict):
        return {k: _strip(v, keys) for k, v in value.items() if k not in keys}
    if isinstance(value, list):
        return [_strip(v, keys) for v in value]
    return value


def _read_json(text_or_path: str | os.PathLike, what: str) -> dict:
    return read_json_object(text_or_path, what, file_in_folder="results.json")


def load_results(path: str | os.PathLike) -> ReportResult:
    """A saved ``results.json``: a report's, or a probing suite's (``python -m probing.tagging.suite
    --out``), which becomes a report holding only the suite. A folder means its results.json."""
    data = _read_json(path, "probe report or probe-suite result")
    if data.get("format") == REPORT_FORMAT:
        return ReportResult.from_dict(data)
    try:
        suite = SuiteResult.from_dict(data)
    except (ValueError, KeyError, TypeError) as err:  # another format, or a damaged result
        where = "" if str(path).lstrip().startswith("{") else f"{path}: "
        reason = (str(err) if isinstance(err, ValueError) else
                  f"a damaged result: no {err.args[0]!r} field" if isinstance(err, KeyError) else f"a damaged result ({err})")
        raise ValueError(f"{where}{reason}") from None
    return ReportResult(
        model_name=suite.model_name, model_identity=suite.model_identity, model_config=dict(suite.model_config),
        tasks=[t.task for t in suite.tasks], words=[], seed=int(suite.seeds.get("seed", 0)), limit=suite.limit,
        config=ReportConfig(suite=SuiteConfig.from_dict({k: v for k, v in suite.config.items() if k not in RUN_RECORD_KEYS})),
        settings={}, created=suite.created, versions=dict(suite.versions), timings=dict(suite.timings),
        suite=suite, notes=[f"read from a probe-suite result ({path})"])
