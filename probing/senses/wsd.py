"""All-words word-sense disambiguation the way Peters et al. (2018, Table 5) did it, and its CLI.

:func:`evaluate_wsd`: a test instance gets, among its lemma's WordNet candidate senses that
SemCor has a centroid for, the one whose centroid is nearest by cosine (:func:`nearest_sense_predict`);
lemmas (or lemma + POS) with no such sense back off to WordNet's first sense. F1 per evaluation
set, on the four test sets of Peters et al. together, and on ALL, per layer and on a scalar mix,
beside the first-sense baseline and the paper's figures.

The centroids come from the SemCor index (``probing.senses.semcor_index``); the supervised Senseval-2
lexical-sample probe lives in ``probing.senses.lexical_sample``. Their public names are importable from
here too, so ``from probing.senses.wsd import build_semcor_index`` keeps working.

Reference figures (Peters et al. 2018, Table 5, F1 on senseval2 + senseval3 + semeval2013 +
semeval2015): WordNet first sense 65.9, biLM layer 1 67.4, layer 2 69.0 (:data:`PAPER_2018`).

CLI::

    python -m probing.senses.wsd --model elmo-mini [--layers 0 1 2] [--limit-semcor N] [--json OUT]
    python -m probing.senses.wsd --model elmo-mini --lexical-sample [--max-instances 600]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

import numpy as np

from elmo_model import load_bilm
from elmo_model.bilm.config import number_problem
from elmo_model.bilm import fused_step
from elmo_model.bilm.devices import check_device
from elmo_model.plumbing.flags import (
    EXIT_CODES,
    add_device_argument,
    add_models_dir_argument,
    add_precision_argument,
    add_quiet_argument,
)
from elmo_model.bilm.identity import model_identity
from elmo_model.bilm.precision import precision_line
from elmo_model.models.names import model_files
from elmo_model.models.published import MODEL_HELP
from elmo_model.plumbing.io_safety import (
    atomic_write_text,
    data_root_argument,
    positive_int,
)
from elmo_model.plumbing.commands import check_outputs, error_exit, kept_in_cache, run_command
from elmo_model.plumbing.progress import ProgressCallback, TerminalProgress, log_through_bars
from probing.data import dataset_folders
from probing.engine.activations import default_cache_dir, extract_activations
from probing.engine.envelope import JsonDataclass, from_plain, to_plain, with_model_identity
from probing.engine.renamed_keywords import renamed_keywords
from probing.senses.corpora import (
    EVALUATION_SETS,
    PETERS_2018_TEST_SETS,
    WsdScore,
    WsdSentence,
    candidate_senses,
    first_sense,
    gold_keys,
    iter_instances,
    read_wsd_corpus,
    wordnet,
    wsd_f1,
)
from probing.senses.instance_vectors import sense_centroids, span_vectors, unit_rows
from probing.senses.lexical_sample import (
    SENSEVAL_WORDS,
    LexicalSampleInstance,
    LexicalSampleResult,
    LexicalSampleWord,
    control_labels,
    format_lexical_sample_table,
    lexical_sample_features,
    lexical_sample_probe,
    probe_accuracy,
    read_lexical_sample,
)
from probing.senses.semcor_index import (
    INDEX_VERSION,
    IndexedInstance,
    SemcorIndex,
    as_count_callback,
    build_semcor_index,
    index_path,
    normalize_lemma,
    report_progress,
    semcor_sentences,
)

log = logging.getLogger(__name__)

RESULT_VERSION = 1

FOUR_SETS = "+".join(PETERS_2018_TEST_SETS)
"""Column name of the four test sets of Peters et al. (2018) scored together."""

PAPER_2018: dict[str, float] = {
    "WordNet first sense": 65.9,
    "Raganato et al. (2017)": 69.9,
    "Iacobacci et al. (2016)": 70.1,
    "CoVe layer 1": 59.4,
    "CoVe layer 2": 64.7,
    "biLM layer 1": 67.4,
    "biLM layer 2": 69.0,
}
"""Peters et al. (2018) Table 5: all-words WSD F1 (percent) on the four test sets together."""


# --------------------------------------------------------------------------------------------
# 1-NN on sense centroids
# --------------------------------------------------------------------------------------------


@dataclass
class NearestSensePredictions:
    """What :func:`nearest_sense_predict` decided. ``predictions``: {instance id: sense key or
    None}; ``backoff``: ids that got WordNet's first sense because none of their lemma's
    senses has a centroid; ``unanswered``: ids WordNet has no sense for at all."""

    predictions: dict[str, str | None]
    backoff: set[str]
    unanswered: set[str]


def nearest_sense_predict(instances: Sequence[tuple[str, str, str]], vectors: np.ndarray, sense_keys: Sequence[str],
                          centroids: np.ndarray, candidates: Callable[[str, str], Sequence[str]] = candidate_senses,
                          backoff: Callable[[str, str], str | None] = first_sense) -> NearestSensePredictions:
    """1-NN WSD: each instance gets the nearest (cosine) centroid among its candidate senses.

    ``instances``: (instance id, lemma, pos) per row of ``vectors`` (N, D); ``sense_keys``
    (S,) name the rows of ``centroids`` (S, D). ``candidates(lemma, pos)`` gives the lemma's
    senses (WordNet's by default); only those with a centroid compete. When none has one, the
    instance backs off to ``backoff(lemma, pos)`` (WordNet's first sense). Ties go to the
    candidate listed first (WordNet order: the more frequent sense).
    """
    vectors = unit_rows(vectors)
    centroids = unit_rows(centroids)
    if len(instances) != len(vectors):
        raise ValueError(f"{len(instances)} instances but {len(vectors)} vectors")
    if len(sense_keys) != len(centroids):
        raise ValueError(f"{len(sense_keys)} sense keys but {len(centroids)} centroids")
    row_of = {k: i for i, k in enumerate(sense_keys)}
    out = NearestSensePredictions({}, set(), set())
    for (instance_id, lemma, pos), vector in zip(instances, vectors):
        seen = [k for k in candidates(lemma, pos) if k in row_of]
        if not seen:
            key = backoff(lemma, pos)
            out.predictions[instance_id] = key
            (out.backoff if key is not None else out.unanswered).add(instance_id)
            continue
        sims = centroids[[row_of[k] for k in seen]] @ vector
        out.predictions[instance_id] = seen[int(np.argmax(sims))]
    return out


@dataclass
class WsdRow(JsonDataclass):
    """One representation's F1 per column. ``scores``: {column: WsdScore} where a column is an
    evaluation set name, :data:`FOUR_SETS` or ``ALL``. ``n_backoff``: ALL instances that got
    the first sense because their lemma has no SemCor centroid among its senses;
    ``n_unanswered``: instances WordNet has no sense for. ``weights``: the s_j of a mix row."""

    representation: str
    scores: dict[str, WsdScore]
    n_backoff: int = 0
    n_unanswered: int = 0
    weights: list[float] | None = None

    def f1(self, column: str) -> float:
        """F1 in percent for ``column``."""
        return 100.0 * self.scores[column].f1

    def to_dict(self) -> dict:
        return {"representation": self.representation, "n_backoff": self.n_backoff,
                "n_unanswered": self.n_unanswered, "weights": self.weights,
                "scores": {k: v.to_dict() for k, v in self.scores.items()}}


@dataclass
class WsdResult:
    """All-words 1-NN WSD of one model (see :func:`evaluate_wsd`).

    ``columns``: the evaluation sets, then :data:`FOUR_SETS`, then ``ALL``; ``rows``: one per
    layer evaluated and one for the scalar mix; ``first_sense``: the WordNet first-sense
    baseline in the same columns; ``paper``: :data:`PAPER_2018` (percent, four sets).
    ``semcor``: counts of the SemCor index used (sentences, instances, senses).
    """

    model_name: str
    model_identity: str
    columns: list[str]
    rows: list[WsdRow]
    first_sense: WsdRow
    semcor: dict[str, int]
    paper: dict[str, float] = field(default_factory=lambda: dict(PAPER_2018))
    notes: list[str] = field(default_factory=list)

    def row(self, representation: str) -> WsdRow:
        for r in self.rows:
            if r.representation == representation:
                return r
        raise KeyError(f"no row {representation!r}; rows: {[r.representation for r in self.rows]}")

    def best_layer(self, column: str = FOUR_SETS) -> WsdRow:
        """The single-layer row with the highest F1 on ``column``."""
        layers = [r for r in self.rows if r.representation.startswith("layer ")]
        return max(layers, key=lambda r: r.scores[column].f1)

    def table(self) -> list[dict]:
        """Rows for display: representation, F1 (percent) per column, backoffs."""
        out = []
        for r in [self.first_sense, *self.rows]:
            row = {"representation": r.representation}
            row.update({c: round(r.f1(c), 1) for c in self.columns})
            row["backoff"] = r.n_backoff
            out.append(row)
        return out

    def to_json(self) -> str:
        return json.dumps({"kind": "wsd", "version": RESULT_VERSION, **to_plain(self)})

    @classmethod
    def from_json(cls, text: str) -> "WsdResult":
        d = json.loads(text)
        if d.get("kind") != "wsd" or d.get("version") != RESULT_VERSION:
            raise ValueError(f"not a WSD result (kind {d.get('kind')!r}, version {d.get('version')!r})")
        return from_plain(cls, with_model_identity(d))


def _set_of(instance_id: str) -> str:
    return instance_id.split(".", 1)[0]


def score_columns(gold: Mapping[str, Iterable[str]], pred: Mapping[str, str | None],
                  sets: Sequence[str]) -> dict[str, WsdScore]:
    """F1 per evaluation set (instances whose id starts with ``SET.``, as in ALL's files), on
    the four sets of Peters et al. together (:data:`FOUR_SETS`) and on every id (``ALL``)."""
    out: dict[str, WsdScore] = {}
    groups = {name: {name} for name in sets}
    groups[FOUR_SETS] = set(PETERS_2018_TEST_SETS)
    for column, members in groups.items():
        g = {i: k for i, k in gold.items() if _set_of(i) in members}
        out[column] = wsd_f1(g, {i: p for i, p in pred.items() if i in g})
    out["ALL"] = wsd_f1(gold, pred)
    return out


def _mix_label(weights: Sequence[float]) -> str:
    return "mix (s_j = " + ", ".join(f"{w:.2f}" for w in weights) + ")"


@renamed_keywords(root="data_root", limit_semcor="semcor_limit")
def evaluate_wsd(model, data_root: str | os.PathLike | None = None, *, layers: Sequence[int] | None = None,
                 mix_weights: Sequence[float] | str | None = "uniform", index: SemcorIndex | None = None,
                 semcor_limit: int | None = None, cache_dir: str | os.PathLike | None = None, batch_size: int = 32,
                 progress: ProgressCallback | None = None) -> WsdResult:
    """All-words WSD by 1-NN on SemCor sense centroids, per layer and on a scalar mix.

    - ``layers``: which layers get a row (default: all, 0..L).
    - ``mix_weights``: s_j over all L+1 layers for the mix row ("uniform": 1/(L+1) each, the
      average of the layers; None: no mix row). The mix of the centroids is the centroid of
      the mixes, so the mix needs no second pass; gamma does not change a cosine.
    - ``index``: a SemCor index of this model (built with :func:`build_semcor_index` when
      None, with the first ``semcor_limit`` SemCor sentences).

    Evaluates on ALL (senseval2, senseval3, semeval2007, semeval2013, semeval2015 with ids
    prefixed by the set name) embedded once through the activation cache; each set's F1 is
    ALL restricted to its ids. ``progress(label, done, total, unit)``.
    """
    wordnet(data_root)
    if index is None:
        index = build_semcor_index(model, data_root, semcor_limit=semcor_limit, cache_dir=cache_dir,
                                   batch_size=batch_size, progress=progress)
    if index.model_identity != model_identity(model):
        raise ValueError(f"the SemCor index {index.path} was built with another model "
                         f"({index.model_identity[:12]}, this one is {model_identity(model)[:12]})")
    n_layers = index.n_layers
    layers = list(range(n_layers)) if layers is None else [int(j) for j in layers]
    for j in layers:
        index._check_layer(j)
    weights = _normalised_mix(mix_weights, n_layers)

    sentences = read_wsd_corpus("ALL", data_root)
    needed = sorted(set(layers) | (set(range(n_layers)) if weights else set()))
    instances, test_vectors = _evaluation_vectors(model, sentences, needed, cache_dir, batch_size, progress)
    gold = gold_keys(sentences)
    sets = [name for name in EVALUATION_SETS if name != "ALL"]
    columns = [*sets, FOUR_SETS, "ALL"]

    rows: list[WsdRow] = []
    plans = [(f"layer {j}", {j: 1.0}) for j in layers]
    if weights:
        plans.append((_mix_label(weights), dict(enumerate(weights))))
    for k, (name, mix) in enumerate(plans):
        report_progress(progress, "1-NN WSD", k, len(plans), "representations")
        vectors = sum(w * test_vectors[j] for j, w in mix.items() if w)
        centroids = sum(w * index.centroids(j) for j, w in mix.items() if w)
        decided = nearest_sense_predict(instances, vectors, index.sense_keys, centroids)
        rows.append(WsdRow(name, score_columns(gold, decided.predictions, sets),
                           len(decided.backoff), len(decided.unanswered),
                           [float(w) for w in weights] if name.startswith("mix") else None))
    report_progress(progress, "1-NN WSD", len(plans), len(plans), "representations")
    baseline = {}
    for instance_id, lemma, pos in instances:
        baseline[instance_id] = first_sense(lemma, pos)
    first = WsdRow("WordNet first sense", score_columns(gold, baseline, sets), 0,
                   sum(1 for v in baseline.values() if v is None))

    return WsdResult(
        model_name=str(getattr(model, "name", "") or index.model_name or "biLM"),
        model_identity=index.model_identity, columns=columns, rows=rows, first_sense=first,
        semcor={"sentences": index.n_sentences, "instances": index.n_instances,
                "senses": len(index.sense_keys)},
        notes=_wsd_notes(rows, len(instances), index, weights))


def _normalised_mix(mix_weights: Sequence[float] | str | None, n_layers: int) -> list[float] | None:
    """The mix row's s_j, summing to 1 ("uniform": 1/(L+1) each; None: no mix row);
    ValueError for anything else."""
    if isinstance(mix_weights, str):
        if mix_weights != "uniform":
            raise ValueError(f"mix_weights must be 'uniform', None or {n_layers} numbers")
        return [1.0 / n_layers] * n_layers
    if mix_weights is None:
        return None
    weights = [float(w) for w in mix_weights]
    if len(weights) != n_layers or any(number_problem(w, 0) for w in weights) or sum(weights) <= 0:
        raise ValueError(f"mix_weights: expected {n_layers} finite non-negative weights, got {weights}")
    total = sum(weights)
    return [w / total for w in weights]


def _evaluation_vectors(model, sentences: Sequence[WsdSentence], layers: Sequence[int], cache_dir, batch_size: int,
                        progress: ProgressCallback | None) -> tuple[list[tuple[str, str, str]], dict[int, np.ndarray]]:
    """ALL's instances as (id, lemma, pos), and per layer of ``layers`` their (N, dim) vectors
    (a span's mean), through the activation cache."""
    tokens = [list(s.tokens) for s in sentences]
    cache = extract_activations(model, tokens, "wsd_framework", "ALL", cache_dir=cache_dir,
                                batch_size=batch_size, progress=as_count_callback(progress, "embedding ALL"))
    number = {id(s): i for i, s in enumerate(sentences)}
    pairs = list(iter_instances(sentences))
    token_start = np.array([cache.offsets[number[id(s)]] + i.start for s, i in pairs])
    token_end = np.array([cache.offsets[number[id(s)]] + i.end for s, i in pairs])
    instances = [(i.instance_id, i.lemma, i.pos) for _s, i in pairs]
    test_vectors = {}
    for k, j in enumerate(layers):
        report_progress(progress, "WSD instance vectors", k, len(layers), "layers")
        test_vectors[j] = span_vectors(cache, j, token_start, token_end)
    cache.close()
    return instances, test_vectors


def _wsd_notes(rows: list[WsdRow], n_instances: int, index: SemcorIndex, weights: list[float] | None) -> list[str]:
    """What a reader of the WSD table should know: the backoff, a SemCor slice, the mix row."""
    notes = []
    n_backoff = rows[0].n_backoff if rows else 0
    notes.append(f"{n_backoff:,} of {n_instances:,} ALL instances have no SemCor centroid "
                 f"among their lemma's senses and back off to WordNet's first sense.")
    if index.n_sentences < 37176:
        notes.append(f"Centroids from the first {index.n_sentences:,} SemCor sentences only "
                     f"(of 37,176): expect more backoff and lower F1 than with all of SemCor.")
    if weights:
        notes.append("The mix row averages the layers' vectors with the s_j shown (unnormalised "
                     "layers, as ELMo's scalar mix without layer norm); gamma does not change a cosine.")
    return notes


def format_wsd_table(result: WsdResult) -> str:
    """The F1 table as text (percent): one line per representation, one column per set."""
    short = {FOUR_SETS: "4 sets"}
    headers = ["representation"] + [short.get(c, c) for c in result.columns] + ["backoff"]
    lines = []
    body = []
    for r in [result.first_sense, *result.rows]:
        body.append([r.representation] + [f"{r.f1(c):.1f}" for c in result.columns]
                    + [str(r.n_backoff)])
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(headers)]
    fmt = lambda cells: "  ".join(c.ljust(w) if i == 0 else c.rjust(w)  # noqa: E731
                                  for i, (c, w) in enumerate(zip(cells, widths)))
    lines.append(fmt(headers))
    lines.append("  ".join("-" * w for w in widths))
    lines.extend(fmt(b) for b in body)
    paper = result.paper
    lines.append("")
    lines.append(f"Peters et al. (2018), 4 sets: WordNet first sense {paper['WordNet first sense']:.1f}, "
                 f"biLM layer 1 {paper['biLM layer 1']:.1f}, layer 2 {paper['biLM layer 2']:.1f} "
                 f"(their 2x4096-512 biLM on the 1B Word Benchmark)")
    best = result.best_layer() if any(r.representation.startswith("layer ") for r in result.rows) else None
    if best is not None:
        margin = best.f1(FOUR_SETS) - result.first_sense.f1(FOUR_SETS)
        lines.append(f"best layer on the 4 sets: {best.representation} {best.f1(FOUR_SETS):.1f} "
                     f"({margin:+.1f} vs first sense)")
    lines.extend(f"note: {n}" for n in result.notes)
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------



def main(argv: Sequence[str] | None = None) -> int:
    """``python -m probing.senses.wsd``: the all-words WSD table (and optionally the lexical sample)."""
    parser = argparse.ArgumentParser(
        prog="python -m probing.senses.wsd",
        epilog=EXIT_CODES,
        description="All-words WSD the way Peters et al. (2018) did it: 1-NN on SemCor sense "
                    "centroids per biLM layer and on a scalar mix, first-sense backoff; F1 per "
                    "Raganato evaluation set, on the paper's four test sets together and on ALL, "
                    "beside the WordNet first-sense baseline and the paper's numbers. The SemCor "
                    "pass is cached (activation cache + SemCor index) and resumes if interrupted.")
    parser.add_argument("--model", default="elmo-mini",
                        help=MODEL_HELP + " (default: %(default)s)")
    parser.add_argument("--layers", type=int, nargs="+", default=None, metavar="J",
                        help="layers to score (default: all, 0..L)")
    parser.add_argument("--mix", type=float, nargs="+", default=None, metavar="S",
                        help="s_j of the scalar-mix row, one per layer (default: uniform)")
    parser.add_argument("--no-mix", action="store_true", help="leave out the scalar-mix row")
    parser.add_argument("--limit-semcor", dest="semcor_limit", type=positive_int, default=None, metavar="N",
                        help="build centroids from the first N SemCor sentences only (faster, weaker)")
    parser.add_argument("--lexical-sample", action="store_true",
                        help="also run the Senseval-2 lexical-sample probe (hard, interest, line, serve)")
    parser.add_argument("--max-instances", type=positive_int, default=600,
                        help="lexical sample: contexts sampled per word (default: %(default)s)")
    parser.add_argument("--data-root", type=data_root_argument, default=None, help="the data root (default: $ELMO_WORKBENCH_DATA or the user cache)")
    add_models_dir_argument(parser)
    parser.add_argument("--cache-dir", default=None, help="activation cache directory (default: $ELMO_WORKBENCH_CACHE or the user cache)")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="sentences per biLM batch (default: %(default)s)")
    add_precision_argument(parser)
    add_device_argument(parser)
    add_quiet_argument(parser)
    parser.add_argument("--json", type=Path, default=None, metavar="FILE", help="also write the result as JSON")
    args = parser.parse_args(argv)
    if args.no_mix and args.mix:
        parser.error("--mix gives the scalar-mix row's s_j and --no-mix leaves that row out; give one of them")
    log_through_bars(args.quiet)
    try:  # $ELMO_WORKBENCH_CACHE naming a file or looping: one line, as --cache-dir would be
        cache_dir = Path(args.cache_dir) if args.cache_dir is not None else default_cache_dir()
    except ValueError as err:
        return error_exit(err)
    progress = TerminalProgress(quiet=args.quiet)

    def work() -> tuple[WsdResult, LexicalSampleResult | None]:
        device = check_device(args.device, "--device")
        inputs = model_files(args.model, args.data_root, args.models_dir)
        check_outputs(inputs, cache_dir, out=args.json, out_flag="--json", more_inputs=dataset_folders(args.data_root))
        model = load_bilm(args.model, args.precision, device=str(device), data_root=args.data_root,
                          cache_dir=args.models_dir)
        fused_step.enable(wait=True)  # a long run: the compiled LSTM step pays, the same every run
        print(precision_line(model, args.precision), flush=True)
        mix: Sequence[float] | str | None = None if args.no_mix else (args.mix or "uniform")
        result = evaluate_wsd(model, args.data_root, layers=args.layers, mix_weights=mix,
                              semcor_limit=args.semcor_limit, cache_dir=args.cache_dir,
                              batch_size=args.batch_size, progress=progress)
        lexical = (lexical_sample_probe(model, args.data_root, max_instances=args.max_instances,
                                        cache_dir=args.cache_dir, batch_size=args.batch_size, progress=progress)
                   if args.lexical_sample else None)
        return result, lexical

    return run_command(work, lambda results: _print_and_write(args.json, *results), bar=progress,
                       errors=(ValueError, FileNotFoundError, IndexError),
                       kept=kept_in_cache("activations and SemCor index", cache_dir))


def _print_and_write(json_out: Path | None, result: WsdResult, lexical: LexicalSampleResult | None) -> None:
    print(f"\nAll-words WSD, F1 (%), model {result.model_name} "
          f"(SemCor: {result.semcor['sentences']:,} sentences, {result.semcor['instances']:,} instances)")
    print(format_wsd_table(result))
    outputs = {"wsd": json.loads(result.to_json())}
    if lexical is not None:
        print("\nSenseval-2 lexical sample, probe accuracy (%) per layer")
        print(format_lexical_sample_table(lexical))
        outputs["lexical_sample"] = json.loads(lexical.to_json())
    if json_out:
        atomic_write_text(json_out, json.dumps(outputs, indent=1))
        print(f"wrote {json_out}")


__all__ = [
    # all-words WSD
    "FOUR_SETS", "PAPER_2018", "RESULT_VERSION", "NearestSensePredictions", "WsdResult", "WsdRow",
    "evaluate_wsd", "format_wsd_table", "main", "nearest_sense_predict", "score_columns",
    # the SemCor index (probing.senses.semcor_index)
    "INDEX_VERSION", "IndexedInstance", "SemcorIndex", "as_count_callback", "build_semcor_index",
    "index_path", "normalize_lemma", "report_progress", "semcor_sentences", "sense_centroids",
    "span_vectors", "unit_rows",
    # the lexical sample (probing.senses.lexical_sample)
    "SENSEVAL_WORDS", "LexicalSampleInstance", "LexicalSampleResult", "LexicalSampleWord",
    "control_labels", "format_lexical_sample_table", "lexical_sample_features",
    "lexical_sample_probe", "probe_accuracy", "read_lexical_sample",
]


if __name__ == "__main__":
    sys.exit(main())

