"""The command line: ``python -m probing.report`` and the console script ``elmo-probe-report`` (see ``--help``).

``--help`` and argument errors need no extra; a run that needs the [report] extra (plotly, UMAP) says so in
one line (exit code 2, no traceback) before it imports them."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Sequence

from elmo_model.bilm import fused_step
from elmo_model.bilm.devices import check_device
from elmo_model.plumbing.flags import (
    EXIT_CODES,
    add_device_argument,
    add_models_dir_argument,
    add_precision_argument,
    add_quiet_argument,
)
from elmo_model.bilm.precision import precision_line
from elmo_model.models.names import model_files
from elmo_model.models.published import MODEL_HELP
from elmo_model.models.registry import load_bilm
from elmo_model.plumbing.extras import missing_message
from elmo_model.plumbing.commands import error_exit, run_command
from elmo_model.plumbing.io_safety import check_output_dir, data_root_argument
from elmo_model.plumbing.progress import TerminalProgress, log_through_bars
from elmo_model.plumbing.resources import command_name
from probing.engine.activations import default_cache_dir
from probing.report.blocks import summary_lines
from probing.report.elements import _seconds
from probing.report.config import REPORT_TASKS, REPORT_TRAIN_FRACTION, ReportConfig, ReportResult
from probing.report.write import build_report, compare_reports
from probing.syntax.structural import SyntaxConfig
from probing.tagging.suite_config import SuiteConfig, add_train_fraction_argument


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=command_name("elmo-probe-report", "python -m probing.report"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Write a probe report for a biLM: report.html (self-contained, interactive, works offline), "
                    "report.md (tables + PNG figures) and results.json (everything, reloadable). "
                    "Or, with --compare, put two saved results side by side.",
        epilog="examples:\n"
               "  python -m probing.report --model elmo-mini --tasks pos chunk wsd --out reports/mini\n"
               "  python -m probing.report --model path/to/model --tasks pos wsd --words bank play --limit 200 "
               "--semcor-limit 1000 --out reports/quick\n"
               "  python -m probing.report --compare reports/a/results.json reports/b/results.json \\\n"
               "      --out reports/a-vs-b\n"
               "\ntasks: pos, upos (UD EWT tags), chunk (CoNLL-2000), wsd (all-words WSD on SemCor centroids,\n"
               "with the bank/play projections and nearest-neighbour tables), lexsample (Senseval-2 lexical-sample\n"
               "probe), structural (Hewitt & Manning's tree-distance and depth probes on UD EWT), arcs (edge probes\n"
               "on gold dependency arcs: head or not, relation label). Activations, probes and the SemCor index are cached, so a second run is much faster.\n"
               "PNG figures need kaleido and Chromium (bash scripts/install_browser.sh); --no-png skips them.\n\n"
               + EXIT_CODES)
    parser.add_argument("--model", default="elmo-mini",
                        help=MODEL_HELP + " (default: %(default)s)")
    parser.add_argument("--tasks", nargs="+", default=["pos", "chunk", "wsd"], choices=REPORT_TASKS, metavar="TASK",
                        help=f"any of {', '.join(REPORT_TASKS)} (default: pos chunk wsd)")
    parser.add_argument("--words", nargs="+", default=[], metavar="LEMMA",
                        help="lemmas for the learned-s_j panel, e.g. bank play, or play:VERB")
    parser.add_argument("--out", type=Path, required=True, help="folder to write the report into (created if needed)")
    parser.add_argument("--data-root", type=data_root_argument, default=None,
                        help="data root (default: $ELMO_WORKBENCH_DATA or the user cache; see python -m probing.data)")
    add_models_dir_argument(parser)
    parser.add_argument("--cache-dir", type=Path, default=None,
                        help="activation / probe / SemCor-index cache (default: $ELMO_WORKBENCH_CACHE or the "
                             "user cache)")
    parser.add_argument("--limit", type=int, default=None, metavar="N",
                        help="only the first N sentences of each dataset but SemCor, which --semcor-limit "
                             "cuts (a quick run gives both)")
    parser.add_argument("--semcor-limit", type=_sentences, default=ReportConfig.semcor_limit, metavar="N",
                        help="the first N SemCor sentences to index for WSD, the sense panels and --words, 0 for "
                             "all 37,176 (default: %(default)s; --limit does not change it)")
    parser.add_argument("--seed", type=int, default=0, help="seed of every random choice (default: %(default)s)")
    parser.add_argument("--no-png", action="store_true", help="skip the PNG figures of report.md (no Chromium needed)")
    parser.add_argument("--no-contextuality", action="store_true", help="leave out the contextuality section")
    parser.add_argument("--no-random-bilm", action="store_true", help="skip the random-initialised biLM baseline")
    parser.add_argument("--no-information", action="store_true",
                        help="leave out the information sections (MDL, conditional and amnesic probing)")
    parser.add_argument("--erasure", action="store_true",
                        help="add the erasure comparison to the information sections: LEACE, the mean projection "
                             "and INLP side by side, with the damage each does (minutes more)")
    parser.add_argument("--syntax-train-sentences", type=_sentences, default=SyntaxConfig.train_sentences, metavar="N",
                        help="EWT training sentences of the structural probes, 0 for all 12,544 (default: "
                             "%(default)s; more is better and slower: docs/syntax.md has the curve)")
    parser.add_argument("--edge-train-sentences", type=_sentences, default=SyntaxConfig.edge_train_sentences,
                        metavar="N", help="EWT training sentences of the edge probes, 0 for all (default: %(default)s)")
    parser.add_argument("--no-jabberwocky", action="store_true",
                        help="leave out the syntax sections' control on nonsense (the probes scored on the test "
                             "sentences with their content words replaced by pseudo-words, trees kept)")
    parser.add_argument("--compare", nargs=2, type=Path, default=None, metavar=("A", "B"),
                        help="instead of running: two saved results.json files (or their folders) side by side")
    parser.add_argument("--labels", nargs=2, default=None, metavar=("NAME_A", "NAME_B"),
                        help="with --compare: names for A and B (default: the model names)")
    add_train_fraction_argument(parser, None, shown=REPORT_TRAIN_FRACTION)
    parser.add_argument("--paper-grade", action="store_true",
                        help="the run the published figures come from: every training sentence and fp32 products "
                             "(--train-fraction 1 --precision fp32)")
    add_precision_argument(parser, default=SuiteConfig.precision)
    add_device_argument(parser)
    add_quiet_argument(parser)
    return parser


def _sentences(text: str) -> int:
    """argparse type: a number of sentences, 0 meaning all of them."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of sentences (0 for all), got {text!r}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.labels is not None and args.compare is None:
        parser.error("--labels names the two sides of --compare A B; give --compare too, or leave --labels out")
    if args.paper_grade and (args.precision == "bf16" or args.train_fraction not in (None, 1.0)):
        parser.error("--paper-grade trains every probe on all the training sentences in fp32; leave out "
                     "--train-fraction and --precision bf16 (or --paper-grade)")
    if args.paper_grade:
        args.precision, args.train_fraction = "fp32", 1.0
    elif args.train_fraction is None:
        args.train_fraction = REPORT_TRAIN_FRACTION
    if args.erasure and args.no_information:
        parser.error("--erasure adds to the information sections, which --no-information leaves out; give one")
    # the figures and projections need the [report] extra; --help and the checks above do not
    missing = missing_message("report", f"{parser.prog} (the report's figures and projections)")
    if missing:
        return error_exit(missing)
    log_through_bars(args.quiet)
    try:  # $ELMO_WORKBENCH_CACHE naming a file or looping: one line, as --cache-dir would be
        cache_dir = args.cache_dir if args.cache_dir is not None else default_cache_dir()
    except ValueError as err:
        return error_exit(err)
    try:  # where the files go, before any work: never over an input, never a traceback at the end
        if args.compare is not None:
            check_output_dir(args.out, args.compare, flag="--out", what="folder for the comparison")
        else:
            inputs = model_files(args.model, args.data_root, args.models_dir)
            check_output_dir(args.out, inputs, flag="--out", what="folder for the report")
            check_output_dir(cache_dir, inputs, flag="--cache-dir", what="cache directory")
    except ValueError as err:
        return error_exit(err)
    if args.compare is not None:
        return _compare(args)

    bar = TerminalProgress("probe report", single=True, unit="%", quiet=args.quiet,
                           bar_format="{desc}{percentage:3.0f}%|{bar}| [{elapsed}<{remaining}]")

    def kept() -> str:
        return (f"{args.out} is as it was; the activations, probes and SemCor index finished so far are kept in "
                f"the cache {cache_dir}; rerun the same command to go on from them")

    return run_command(lambda: _report(args, bar), _print_summary, bar=bar, kept=kept,
                       errors=(ValueError, FileNotFoundError, RuntimeError))


def _compare(args: argparse.Namespace) -> int:
    try:
        files = compare_reports(args.compare[0], args.compare[1], args.out, labels=args.labels, png=not args.no_png)
    except (ValueError, FileNotFoundError, RuntimeError) as err:
        return error_exit(err)
    print(f"wrote {files.html}\nwrote {files.markdown}"
          + (f" (+ {len(files.figures)} PNG figures)" if files.figures else ""))
    return 0


def _information(args: argparse.Namespace):
    """The information sections' configuration: none, the default methods, or those and erasure."""
    if args.no_information:
        return None
    default = ReportConfig.information
    return dataclasses.replace(default, methods=(*default.methods, "erasure")) if args.erasure else default


def _report(args: argparse.Namespace, bar: TerminalProgress) -> ReportResult:
    config = ReportConfig(suite=SuiteConfig(random_bilm=not args.no_random_bilm, precision=args.precision,
                                            train_fraction=args.train_fraction),
                          semcor_limit=args.semcor_limit or None,
                          contextuality=not args.no_contextuality,
                          information=_information(args),
                          syntax=SyntaxConfig(train_sentences=args.syntax_train_sentences or None,
                                              edge_train_sentences=args.edge_train_sentences or None,
                                              jabberwocky=not args.no_jabberwocky))
    model = load_bilm(args.model, args.precision, device=str(check_device(args.device, "--device")),
                      data_root=args.data_root, cache_dir=args.models_dir)
    fused_step.enable(wait=True)  # a long run: the compiled LSTM step pays, the same every run
    print(precision_line(model, args.precision), flush=True)
    return build_report(model, args.tasks, args.out, words=args.words, data_root=args.data_root,
                        seed=args.seed, limit=args.limit, progress=bar, cache_dir=args.cache_dir,
                        config=config, png=not args.no_png)


def _print_summary(result: ReportResult) -> None:
    for line in summary_lines(result):
        print("- " + line.replace("**", ""))
    files = result.files
    print(f"wrote {files.html}\nwrote {files.markdown}" + (f" (+ {len(files.figures)} PNG figures, "
                                                            f"{files.png_renderer})" if files.figures else "")
          + f"\nwrote {files.json}\ntotal {_seconds(result.timings.get('total'))}")
