"""The data root's command line: ``python -m probing.data status | download`` (``elmo-data``).

``status`` lists which datasets and published ELMo models the data root holds (``probing.data``);
``download`` fetches the missing datasets, or the datasets and models it is given by name
(``probing.data.downloads``).
"""

from __future__ import annotations

import argparse
import shlex
import sys
import textwrap
from typing import Iterable, TextIO

from elmo_model.plumbing.flags import EXIT_CODES, add_quiet_argument
from elmo_model.models import published
from elmo_model.plumbing.io_safety import data_root_argument
from elmo_model.plumbing.progress import TerminalProgress, log_through_bars
from elmo_model.plumbing.resources import command_name
from elmo_model.plumbing.settings import folder_setting_text
from elmo_model.models.published_archives import PUBLISHED_ARCHIVES, archive_named, downloaded_archives
from probing.data import (
    DATASETS,
    ENV_VAR,
    MODELS,
    SIBLING_ROOT,
    DatasetStatus,
    ModelStatus,
    data_root,
    default_cache_root,
    download_root,
    is_present,
    model_download_command,
    model_home,
    model_status,
    root_origin,
    status,
    unreadable_archive,
)
from probing.data.downloads import DownloadError, download
from probing.data.registry import TREEBANKS, UD_RELEASE, find_treebank
from probing.data.treebanks import TreebankStatus, download_treebank, treebank_status


def _print_status(rows: list[DatasetStatus], origin: str, out: TextIO) -> None:
    root = rows[0].root if rows else data_root()
    checked = ", sha256 checked" if rows and rows[0].verified else ""
    print(f"data root: {root}  ({origin}{checked})", file=out)
    width = max(len(name) for name in DATASETS)
    print(f"{'dataset':<{width}}  {'state':<8} {'files':>7}  source", file=out)
    for row in rows:
        dataset = DATASETS[row.name]
        have = row.n_files - len(row.missing)
        state = row.state + ("*" if row.differs else "")
        print(f"{row.name:<{width}}  {state:<8} {have:>3}/{row.n_files:<3}  {dataset.source}", file=out)
        for path in row.missing[:3]:
            print(f"{'':<{width}}    missing: {path}", file=out)
        if len(row.missing) > 3:
            print(f"{'':<{width}}    ... and {len(row.missing) - 3} more missing", file=out)
        for path in row.corrupt:
            problem = unreadable_archive(row.root / path)
            label = f"DAMAGED, {problem}" if problem else "CHECKSUM MISMATCH"
            print(f"{'':<{width}}    {label}: {path}", file=out)
    if any(row.differs for row in rows):
        print("* present, but some files differ from the reference copy (allowed for this dataset)", file=out)
    absent = [row.name for row in rows if row.missing and not row.corrupt and DATASETS[row.name].downloadable]
    if absent:
        print(f"fetch the missing ones with: python -m probing.data download {' '.join(absent)} "
              f"--data-root {shlex.quote(str(root))}", file=out)
    damaged = [row.name for row in rows if row.corrupt and DATASETS[row.name].downloadable]
    if damaged:
        print(f"fetch the damaged ones again with: python -m probing.data download {' '.join(damaged)} --force "
              f"--data-root {shlex.quote(str(root))}", file=out)


def _print_models(rows: list[ModelStatus], models_dir, out: TextIO) -> None:
    print(f"\npublished ELMo models (models home: {published.models_home(models_dir)}; load_bilm and --model take "
          "their names):", file=out)
    width = max(len(name) for name in MODELS)
    print(f"{'model':<{width}}  {'state':<8} {'weights':>16}  AllenNLP name / folder", file=out)
    for row in rows:
        model = MODELS[row.name]
        where = str(row.folder) if not row.missing else model.allennlp_name
        checked = ", sha256 checked" if row.sha256_ok else ""
        print(f"{row.name:<{width}}  {row.state:<8} {model.size_text():>16}  {where}{checked}", file=out)
        if row.sha256_ok is False:
            print(f"{'':<{width}}    weights.hdf5 differs from the sha256 its model_card.json records; fetch it "
                  f"again with: {model_download_command(row.name, models_dir)} --force", file=out)
    absent = [row.name for row in rows if row.missing]
    if absent:
        where = f" --models-dir {shlex.quote(str(published.models_home(models_dir)))}" if models_dir else ""
        print(f"fetch them with: python -m probing.data download {' '.join(absent)}{where}", file=out)


def _print_archives(models_dir, out: TextIO) -> None:
    """The other families' published models: which are downloaded, and how to fetch the rest."""
    present = downloaded_archives(models_dir)
    print(f"\nother families' published models (archives in {published.models_home(models_dir)}): "
          f"{len(present)} of {len(PUBLISHED_ARCHIVES)} downloaded", file=out)
    for name in present:
        entry = PUBLISHED_ARCHIVES[name]
        print(f"  {name}  {entry.family}, {entry.language}: {entry.archive_path(models_dir)}", file=out)
    print(f"  fetch one with: python -m probing.data download NAME; names: {_archive_names_text()}", file=out)


def _archive_names_text() -> str:
    """The other families' names, short: "efml-arabic ... efml-chinese (ELMoForManyLangs; or nlpl-136 ...
    nlpl-179), tfhub-elmo-2, tfhub-elmo-3"."""
    efml = [a for a in PUBLISHED_ARCHIVES.values() if a.family == "ELMoForManyLangs"]
    ids = sorted(a.nlpl_id for a in efml)
    others = [f"{a.name} ({a.language})" if a.family == "NLPL" else a.name
              for a in PUBLISHED_ARCHIVES.values() if a.family != "ELMoForManyLangs"]
    return (f"efml-LANGUAGE for {len(efml)} languages ({efml[0].name} ... {efml[-1].name}; ELMoForManyLangs, also "
            f"nlpl-{ids[0]} ... nlpl-{ids[-1]}), " + ", ".join(others))


def _print_treebanks(rows: list[TreebankStatus], root, out: TextIO) -> None:
    languages = sorted({t.language.lower() for t in TREEBANKS.values()})
    print(f"\nUD treebanks by language (download ud:LANGUAGE, e.g. ud:french; UD {UD_RELEASE}; English is "
          f"ud_english_ewt): {', '.join(languages)}", file=out)
    for row in rows:
        state = "DAMAGED" if row.missing or row.changed else "present"
        checked = ", sha256 checked against the first fetch" if row.verified and state == "present" else ""
        print(f"  {row.code:<14}{state:<9}{row.language}, {row.ref}, {row.licence}{checked}", file=out)
        for path in row.missing:
            print(f"    missing: {path}", file=out)
        for path in row.changed:
            print(f"    DIFFERS FROM THE FIRST FETCH: {path}", file=out)
    damaged = [row.code for row in rows if row.missing or row.changed]
    if damaged:
        print(f"fetch them again with: python -m probing.data download {' '.join('ud:' + c for c in damaged)} "
              f"--force --data-root {shlex.quote(str(root))}", file=out)


class _NamesFormatter(argparse.HelpFormatter):
    """Help wrapped between words only: a name (elmo-original-5.5b, efml-old-church-slavonic) is
    never split at its hyphens, so it can be copied from the help."""

    def _split_lines(self, text: str, width: int) -> list[str]:
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)


def _parser() -> argparse.ArgumentParser:
    root_help = (f"the data root (default: ${ENV_VAR}, else {default_cache_root()} if it holds a dataset, "
                 f"else {SIBLING_ROOT} if it holds one)")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--data-root", type=data_root_argument, metavar="DIR", default=None, help=root_help)
    add_quiet_argument(common)
    common.add_argument("--models-dir", metavar="DIR", default=None,
                        help=f"the models home, where published models are downloaded to and looked for "
                             f"(default: ${published.MODELS_ENV_VAR}, else "
                             f"{folder_setting_text(published.MODELS_ENV_VAR, 'models')}; "
                             "an explicit --data-root's models/ is looked in first)")
    parser = argparse.ArgumentParser(
        prog=command_name("elmo-data", "python -m probing.data"),
        description="List and fetch the datasets of the ELMo Workbench data root.",
        epilog="datasets: " + "; ".join(f"{d.name} ({d.title})" for d in DATASETS.values())
        + ". published ELMo models: " + "; ".join(f"{m.name} ({m.allennlp_name}, {m.size_text()})"
                                                  for m in MODELS.values()) + ". " + EXIT_CODES)
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    st = commands.add_parser("status", parents=[common], help="show which datasets and models are present",
                             description="Show, per dataset and per published ELMo model, whether its files are in "
                                         "the data root.")
    st.add_argument("--verify", action="store_true",
                    help="also check every file's sha256 against the reference, and each model's weights against "
                         "the sha256 its model_card.json records (reads all bytes)")
    dl = commands.add_parser(
        "download", parents=[common], help="fetch datasets and published ELMo models", formatter_class=_NamesFormatter,
        description="Fetch datasets from their official sources into the data root, with "
        "checksums, and the ELMo models AllenNLP published into the models home's NAME/ (--models-dir; "
        "with only --data-root, into <data root>/models/NAME/), each "
        "weight file checked against its options before it is put there; UD treebanks by language into "
        "<data root>/ud/CODE/ with a manifest of what was fetched; files already present "
        "are kept. Interrupted downloads resume. lm_corpus has no automatic download.")
    dl.add_argument("names", nargs="*", metavar="NAME",
                    help="datasets, models or UD treebanks to fetch (default: every missing dataset that can be "
                    f"downloaded; models and treebanks only by name); datasets: {', '.join(DATASETS)}; models: "
                    f"{', '.join(MODELS)}; other families' models: {_archive_names_text()}; treebanks: ud:LANGUAGE "
                    f"(ud:french, ud:fr) or ud:CODE (ud:fr_sequoia), fetched from UD's GitHub at {UD_RELEASE}; the "
                    "first fetch is trusted and its sha256 recorded")
    dl.add_argument("--force", action="store_true", help="fetch again even if present")
    dl.add_argument("--from", dest="source", metavar="DIR|URL", default=None,
                    help="models and treebanks only: a treebank's three .conllu files from a folder, or from a "
                         "base URL laid out as GitHub's raw files (BASE/UD_French-GSD/TAG/fr_gsd-ud-train.conllu); "
                         "a model's files from a folder (AllenNLP's file names, e.g. "
                         "elmo_2x4096_512_2048cnn_2xhighway_weights.hdf5, or options.json + weights.hdf5) or from a "
                         f"mirror's base URL in AllenNLP's layout (default: ${published.MODELS_URL_ENV_VAR}, else "
                         "AllenNLP's server); every copy is checked against the name's architecture")
    return parser


def main(argv: Iterable[str] | None = None) -> int:
    """Run the command line; return the exit status (0 ok, 1 a download failed, 2 bad usage)."""
    parser = _parser()
    args = parser.parse_args(None if argv is None else list(argv))
    log_through_bars(args.quiet, fmt="%(message)s")
    try:  # a setting that names a file, or loops: one line, as a flag's would be
        root = data_root(args.data_root)
        origin = root_origin(args.data_root)
        published.models_home(args.models_dir)
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.command == "status":
        _print_status(status(root, verify=args.verify), origin, sys.stdout)
        treebanks = treebank_status(root, verify=args.verify)
        _print_treebanks(treebanks, root, sys.stdout)
        rows = model_status(args.data_root, args.models_dir, verify=args.verify)
        _print_models(rows, args.models_dir, sys.stdout)
        _print_archives(args.models_dir, sys.stdout)
        return 1 if any(row.sha256_ok is False for row in rows) or any(r.changed for r in treebanks) else 0

    # AllenNLP's URL or file name of a published model, given where a name is expected, is that name
    args.names = [published.published_name(name) or name for name in args.names]
    treebanks = [name for name in args.names if name.startswith("ud:")]
    unknown = [name for name in args.names if name not in DATASETS and name not in MODELS and not archive_named(name)
               and not (name.startswith("ud:") and find_treebank(name))]
    if unknown:
        parser.error(f"unknown dataset(s), model(s) or treebank(s) {', '.join(unknown)}; datasets: "
                     f"{', '.join(DATASETS)}; models: {', '.join(MODELS)}; other families: {_archive_names_text()}; "
                     f"treebanks: ud:LANGUAGE or ud:CODE, "
                     f"{', '.join(sorted({t.language.lower() for t in TREEBANKS.values()}))}")
    if args.source is not None and (not args.names or any(n not in MODELS and n not in treebanks for n in args.names)):
        parser.error(f"--from takes the files of published models and UD treebanks only; name them: "
                     f"{', '.join(MODELS)}, ud:LANGUAGE")
    names = args.names or [
        d.name for d in DATASETS.values() if d.downloadable and (args.force or not is_present(d.name, root))
    ]
    if not names:
        print(f"nothing to download: every downloadable dataset is present in {root}")
        return 0
    target = download_root(args.data_root)  # never the read-only 'shared' folder beside the checkout
    progress = TerminalProgress(leave=True, quiet=args.quiet)
    failed = []
    for name in names:
        try:
            if name in treebanks:
                download_treebank(name, target, force=args.force, progress=progress, source=args.source)
            else:
                as_model = name in MODELS or archive_named(name) is not None
                download(name, args.data_root if as_model else target, force=args.force, progress=progress,
                         models_dir=args.models_dir, source=args.source)
        except (DownloadError, ValueError) as exc:
            progress.close()  # the bar ends its line first: the error gets a line of its own
            print(f"error: {name}: {exc}", file=sys.stderr)
            failed.append(name)
        finally:
            progress.close()
    if any(name not in MODELS and not archive_named(name) for name in names):
        print(f"data root: {target}" + (f"  ({origin})" if target == root else ""))
    if any(name in MODELS for name in names):
        print(f"models: {model_home(args.data_root, args.models_dir)}")
    if any(archive_named(name) for name in names):
        print(f"archives of other families: {published.models_home(args.models_dir)}")
    for name in names:
        print(f"  {name}: {'FAILED' if name in failed else 'ok'}")
    return 1 if failed else 0

