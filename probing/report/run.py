"""Running a report: every section measured in order (:func:`run_report`), with one progress bar
whose fraction is each section's expected share of the work (:class:`_Progress`)."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.metadata as metadata
import json
import logging
import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

import torch

from elmo_model import BiLM, load_bilm
from elmo_model.models.names import resolve_model
from elmo_model.bilm.identity import model_identity
from elmo_model.bilm.precision import resolve_precision
from elmo_model.plumbing.progress import ProgressCallback
from probing.context.contextuality import contextuality
from probing.context.playground import demo_set_names, load_demo_set
from probing.context.static import static_baselines
from probing.data import DatasetMissing
from probing.information.run import run_information
from probing.report.config import REPORT_TASKS, SUITE_TASKS, SYNTAX_TASKS, ReportConfig, ReportResult
from probing.senses.corpora import normalize_pos, wordnet
from probing.senses.projections import project_lemma
from probing.senses.retrieval import SenseRetriever
from probing.senses.wsd import build_semcor_index, evaluate_wsd, lexical_sample_probe
from probing.syntax.sections import run_syntax_section
from probing.tagging.scalar_mix import lemma_mixes
from probing.tagging.suite import run_suite

log = logging.getLogger(__name__)

#: Expected share of a cold report's time per section: the per-section seconds (``timings`` in
#: results.json) of a cold report of elmo-mini (``python bench/report_time.py --model elmo-mini``,
#: 2-core AMD EPYC Zen 4, 2026-12-07). The bar's fraction is then the expected work done, so its
#: ETA holds; a section without a measurement here (the lexical sample) counts 10 s. The SemCor
#: index's seconds are for the report's default slice and scale with the slice indexed
#: (:data:`SEMCOR_SECONDS_SENTENCES`).
SECTION_SECONDS = {"probing suite": 606.0, "SemCor index": 65.0, "all-words WSD": 7.0, "projections": 14.0,
                   "nearest neighbours": 3.0, "learned s_j per lemma": 22.0, "contextuality": 12.0,
                   "information probes": 54.0}
SEMCOR_SECONDS_SENTENCES = 10_000  # the slice the SemCor index's seconds above were measured on
SEMCOR_SENTENCES = 37_176  # all of SemCor (--semcor-limit 0)

#: The syntax section's expected seconds per syntax task: the cold wall seconds of each task's
#: part of the section (``syntax.structural.timings`` / ``syntax.edges.timings`` in results.json)
#: in a full report of elmo-mini at the default SyntaxConfig (docs/syntax.md, "Time of the sections").
SYNTAX_TASK_SECONDS = {"structural": 176.0, "arcs": 111.0}


class _Progress:
    """Turns each section's own progress into one ``progress(label, done, 100, "%")``, each
    section weighted by its expected share of the work (:data:`SECTION_SECONDS`)."""

    def __init__(self, callback: ProgressCallback | None, sections: Sequence[str],
                 tasks: Sequence[str] = (), semcor_sentences: int | None = SEMCOR_SECONDS_SENTENCES) -> None:
        self.callback = callback
        self.sections = list(sections)
        expected = dict(SECTION_SECONDS, syntax=sum(SYNTAX_TASK_SECONDS.get(t, 10.0) for t in tasks
                                                     if t in SYNTAX_TASKS) or 10.0)
        indexed = min(semcor_sentences or SEMCOR_SENTENCES, SEMCOR_SENTENCES)
        expected["SemCor index"] *= indexed / SEMCOR_SECONDS_SENTENCES
        weights = [expected.get(name, 10.0) for name in self.sections]
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
    out = {"python": platform.python_version()}
    for name in ("torch", "numpy", "scikit-learn", "scipy", "h5py", "nltk", "umap-learn", "plotly", "kaleido"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return out


def model_reference(model, data_root: str | os.PathLike | None = None) -> str:
    """What ``--model`` takes to load ``model`` again: its name where that name resolves to the same
    weight file (a shipped or published model), else the folder of its weights (``.source``)."""
    name = str(getattr(model, "name", "") or "")
    source = getattr(model, "source", "")
    if not source:
        return name or "biLM"
    if name:
        try:
            if resolve_model(name, data_root).weights.resolve() == Path(source).resolve():
                return name
        except (ValueError, OSError):  # a directory's last name is no model name
            pass
    return str(Path(source).resolve().parent)


def parse_word(item: str) -> tuple[str, str | None]:
    """"bank" -> ("bank", None); "play:VERB" or "play:v" -> ("play", "VERB")."""
    lemma, _, pos = str(item).partition(":")
    lemma = lemma.strip()
    if not lemma:
        raise ValueError(f"--words: empty lemma in {item!r}")
    return lemma, (normalize_pos(pos.strip()) if pos.strip() else None)


def _sections(tasks: Sequence[str], words: Sequence[str], senses: bool, contextuality: bool,
              information: bool = False) -> list[str]:
    out = []
    if any(t in SUITE_TASKS for t in tasks):
        out.append("probing suite")
    if senses or "wsd" in tasks or words:
        out.append("SemCor index")
    if "wsd" in tasks:
        out.append("all-words WSD")
    if "lexsample" in tasks:
        out.append("lexical sample")
    if information and any(t in (*SUITE_TASKS, "lexsample") for t in tasks):
        out.append("information probes")
    if senses:
        out += ["projections", "nearest neighbours"]
    if words:
        out.append("learned s_j per lemma")
    if contextuality:
        out.append("contextuality")
    if any(t in SYNTAX_TASKS for t in tasks):
        out.append("syntax")
    return out


def check_request(tasks: Sequence[str], words: Sequence[str], limit: int | None
                  ) -> tuple[list[str], list[tuple[str, str | None]]]:
    """The tasks (repeats dropped) and the parsed words of a report request; ValueError naming
    the fix for an unknown task, no task, a bad word or a limit below 1. Cheap: runs before any
    work."""
    tasks = list(dict.fromkeys(tasks))
    unknown = [t for t in tasks if t not in REPORT_TASKS]
    if unknown or not tasks:
        raise ValueError(f"unknown or no tasks {unknown or tasks}; choose from {', '.join(REPORT_TASKS)}")
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be a positive number of sentences, got {limit}")
    return tasks, [parse_word(w) for w in words]


def run_report(model, tasks: Sequence[str], words: Sequence[str] = (), data_root: str | os.PathLike | None = None,
               seed: int = 0, limit: int | None = None, progress: ProgressCallback | None = None, *,
               cache_dir: str | os.PathLike | None = None, config: ReportConfig | None = None) -> ReportResult:
    """Measure everything a report shows (no files written; see :func:`build_report`).

    ``model``: a ``BiLM``, a shipped model name or a model directory. ``tasks``: any of
    :data:`REPORT_TASKS`. ``words``: lemmas for the learned-s_j panel ("play" or "play:VERB").
    ``limit``: the first N sentences of every dataset. ``cache_dir``: activation, probe and
    SemCor-index caches (default: the user cache). ``progress(label, done, total, unit)`` with
    ``done`` of ``total`` = 100 percent of the report. Every section computes in
    ``config.suite.precision``, resolved for the model's device (a name or directory is loaded on
    the GPU when torch sees one, else the CPU); a ``BiLM`` passed in runs where it is and is
    given back in the precision it came with.
    """
    if not isinstance(model, BiLM):
        return _run_report(model, tasks, words, data_root, seed, limit, progress, cache_dir, config)
    with model.computing_in(resolve_precision((config or ReportConfig()).suite.precision, model.device)):
        return _run_report(model, tasks, words, data_root, seed, limit, progress, cache_dir, config)


def _run_report(model, tasks, words, data_root, seed, limit, progress, cache_dir, config) -> ReportResult:
    config = config or ReportConfig()
    tasks, parsed_words = check_request(tasks, words, limit)
    model, config = _model_in_precision(model, config)
    senses = ("wsd" in tasks) if config.senses is None else bool(config.senses)
    settings = _report_settings(config, tasks, limit, senses)
    steps = _Progress(progress, _sections(tasks, words, senses, config.contextuality, config.information is not None),
                      tasks, config.semcor_limit)
    started = time.perf_counter()
    result = _empty_result(model, tasks, words, data_root, seed, limit, config, settings)

    def timed(name: str):
        return _Timer(result.timings, name)

    suite_tasks = [t for t in tasks if t in SUITE_TASKS]
    if suite_tasks:
        steps.start("probing suite")
        with timed("suite"):
            result.suite = run_suite(model, suite_tasks, data_root=data_root, cache_dir=cache_dir, seed=seed,
                                     limit=limit, progress=steps.suite, config=config.suite)

    index = None
    if "SemCor index" in steps.sections:
        steps.start("SemCor index")
        with timed("semcor_index"):
            index = _semcor_index(model, data_root, config, cache_dir, steps)
        result.semcor = {"sentences": index.n_sentences, "instances": index.n_instances,
                         "senses": len(index.sense_keys)}

    if "wsd" in tasks:
        steps.start("all-words WSD")
        with timed("wsd"):
            result.wsd = evaluate_wsd(model, data_root, index=index, cache_dir=cache_dir,
                                      batch_size=config.batch_size, progress=steps)

    if "lexsample" in tasks:
        steps.start("lexical sample")
        with timed("lexsample"):
            result.lexsample = lexical_sample_probe(
                model, data_root, words=config.lexsample_words, max_instances=settings["lexsample_max_instances"],
                seed=seed, cache_dir=cache_dir, batch_size=config.batch_size, progress=steps)

    information_tasks = suite_tasks + (["lexsample"] if "lexsample" in tasks else [])
    if config.information is not None and information_tasks:
        steps.start("information probes")  # after the suite and the lexical sample: their activations are cached
        with timed("information"):
            result.information = run_information(
                model, information_tasks, config=_information_config(config), data_root=data_root,
                cache_dir=cache_dir, seed=seed, limit=limit, progress=steps.suite)

    if senses:
        steps.start("projections")
        with timed("projections"):
            _measure_projections(result, model, index, data_root, config, seed, steps)
        steps.start("nearest neighbours")
        with timed("retrieval"):
            result.retrieval = _retrieve(model, index, data_root, config, steps)

    if parsed_words:
        steps.start("learned s_j per lemma")
        with timed("word_senses"), _torch_threads(1):
            result.word_senses = lemma_mixes(
                model, parsed_words, source="auto", index=index, data_root=data_root,
                max_occurrences=config.word_max_occurrences, seeds=[seed + i for i in range(config.word_seeds)],
                folds=config.word_folds, steps=config.word_steps, cache=True, cache_dir=cache_dir, progress=steps)

    if config.contextuality:
        steps.start("contextuality")
        with timed("contextuality"):
            _measure_contextuality(result, model, data_root, cache_dir, config, seed, steps)
    if any(t in SYNTAX_TASKS for t in tasks):
        steps.start("syntax")
        with timed("syntax"):
            result.syntax = run_syntax_section(
                model, tasks, data_root=data_root, cache_dir=cache_dir, seed=seed, limit=limit,
                config=_syntax_config(config), suite_config=config.suite,
                progress=lambda label, fraction: steps.fraction(label, fraction))
    result.timings["total"] = time.perf_counter() - started
    steps.finish()
    return result


def _model_in_precision(model, config: ReportConfig) -> tuple[BiLM, ReportConfig]:
    """The model (loaded when given by name or folder) set to the precision every section
    computes in, and the config with that precision resolved for the model's device."""
    if not isinstance(model, BiLM):
        model = load_bilm(model, device=None)  # the GPU when torch sees one
    config = dataclasses.replace(config, suite=dataclasses.replace(
        config.suite, precision=resolve_precision(config.suite.precision, model.device)))
    model.set_precision(config.suite.precision)  # every section: the suite's, WSD, senses, contextuality
    return model, config


def _information_config(config: ReportConfig):
    """The information probes' config, with the report's lexical-sample words and cap."""
    return dataclasses.replace(config.information, lexsample_words=tuple(config.lexsample_words),
                               lexsample_instances=config.lexsample_max_instances)


def _syntax_config(config: ReportConfig):
    """The syntax section's config: its random-biLM baseline only where the suite's is on too."""
    return dataclasses.replace(config.syntax, random_bilm=config.syntax.random_bilm and config.suite.random_bilm)


def _report_settings(config: ReportConfig, tasks: list[str], limit: int | None, senses: bool) -> dict:
    """The sizes a run used, as the result records them (SemCor slice, lexical-sample and
    contextuality caps)."""
    return {
        "semcor_sentences": config.semcor_limit, "senses": senses,
        "lexsample_max_instances": (_min_opt(config.lexsample_max_instances, limit) if "lexsample" in tasks else None),
        "contextuality_sentences": (min(config.contextuality_sentences, limit or config.contextuality_sentences)
                                    if config.contextuality else None),
    }


def _empty_result(model, tasks: list[str], words: Sequence[str], data_root, seed: int, limit: int | None,
                  config: ReportConfig, settings: dict) -> ReportResult:
    """The result before any section: the model, the request, the versions, no timings or notes yet."""
    model_config = json.loads(json.dumps(model.config.describe()))
    model_config["n_parameters"] = int(sum(p.numel() for p in model.parameters()))
    return ReportResult(
        model_name=str(getattr(model, "name", "") or "biLM"), model_identity=model_identity(model),
        model_reference=model_reference(model, data_root),
        model_config=model_config, tasks=tasks, words=list(words), seed=int(seed), limit=limit, config=config,
        settings=settings, created=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        versions=_versions(), timings={}, notes=[])


def _semcor_index(model, data_root, config: ReportConfig, cache_dir, steps: "_Progress"):
    """The SemCor index of the configured slice (WordNet checked first)."""
    wordnet(data_root)
    return build_semcor_index(model, data_root, semcor_limit=config.semcor_limit, cache_dir=cache_dir,
                              batch_size=config.batch_size, progress=steps)


def _measure_projections(result: ReportResult, model, index, data_root, config: ReportConfig, seed: int,
                         steps: "_Progress") -> None:
    """Each configured lemma's projection, appended to ``result.projections`` (a lemma with
    nothing to project leaves a note instead)."""
    for k, lemma in enumerate(config.projection_lemmas):
        steps.fraction(f"projecting {lemma!r}", k / max(1, len(config.projection_lemmas)))
        with _torch_threads():
            projection = _project(model, lemma, index, data_root, config, seed, result.notes)
        if projection is not None:
            result.projections.append(projection)


def _measure_contextuality(result: ReportResult, model, data_root, cache_dir, config: ReportConfig, seed: int,
                           steps: "_Progress") -> None:
    """The contextuality section, or a note saying why it was left out (no LM corpus, too few sentences)."""
    try:
        result.contextuality = contextuality(
            model, data_root=data_root, n_sentences=result.settings["contextuality_sentences"], cache_dir=cache_dir,
            batch_size=config.batch_size, seed=seed, progress=steps)
    except (DatasetMissing, ValueError) as err:
        result.notes.append(f"contextuality left out: {err}")
        log.warning("contextuality left out: %s", err)


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
    operation, which makes a step many times slower than on one thread, so they run on one
    thread, which also makes their numbers independent of the caller's thread setting.
    """
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
    methods = ("pca", "umap") if config.umap else ("pca",)
    demo = load_demo_set(lemma) if lemma in demo_set_names() else None
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
            return project_lemma(model, lemma, index=index, data_root=data_root,
                                 max_semcor=config.projection_max_points, methods=methods, seed=seed)
        if demo is not None and source in ("auto", "demo"):
            return project_lemma(model, lemma, data_root=data_root, sentences=demo.texts, senses=demo.senses,
                                 sense_glosses=demo.glosses, methods=methods, seed=seed)
    except ValueError as err:
        notes.append(f"“{lemma}”: no projection ({err}).")
        return None
    notes.append(f"“{lemma}”: no projection: SemCor has {len(rows)} occurrences and there is no demo set.")
    return None


def _retrieve(model, index, data_root, config: ReportConfig, steps: _Progress) -> list:
    """Table 4: nearest SemCor occurrences of each query word, per LSTM layer."""
    steps.fraction("static embeddings", 0.0)
    retriever = SenseRetriever(model, index, static=static_baselines(model), data_root=data_root)
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
