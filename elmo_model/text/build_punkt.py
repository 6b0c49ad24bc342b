"""Train the Punkt sentence-splitter parameters shipped in ``data/tokenizer/``.

    python -m elmo_model.text.build_punkt                 # data root from $ELMO_WORKBENCH_DATA
    python -m elmo_model.text.build_punkt --data-root ../shared --out data/tokenizer

Punkt (Kiss & Strunk, 2006) is unsupervised: it learns abbreviations ("dr", "u.s"),
collocations, frequent sentence starters and each word's capitalisation habits from raw text.
This draws a seeded random sample of paragraphs from each LM-corpus training shard, trains
``nltk.tokenize.punkt.PunktTrainer`` on them in one pass, drops the orthographic entries of
rare words (to keep the shipped files small) and writes the four plain-text files that
:func:`elmo_model.text.tokenizer.read_punkt_params` reads, plus a README.md that records how they
were made. Same inputs and seed, same bytes.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import logging
import os
import random
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import nltk
from nltk.tokenize.punkt import PunktTrainer
from tqdm import tqdm

from ..plumbing.flags import EXIT_CODES, add_quiet_argument
from ..plumbing.io_safety import data_root_argument
from ..plumbing.progress import log_through_bars
from .tokenizer import (
    BUILD_COMMAND,
    DEFAULT_PARAMS_DIR,
    PUNKT_FILES,
    OrthoContextTable,
    PunktLanguageVarsEn,
    Tokenizer,
    write_punkt_params,
    write_text_files_atomically,
)

log = logging.getLogger(__name__)

DATA_ROOT_ENV = "ELMO_WORKBENCH_DATA"
DEFAULT_SOURCES = ("lm_corpus/wiki-train-00.txt.gz", "lm_corpus/gutenberg-train-00.txt.gz")
DEFAULT_CHARS_PER_SOURCE = 2_500_000
DEFAULT_MIN_ORTHO_COUNT = 5
DEFAULT_SEED = 0

# Sentences printed after training, as a quick look at what the parameters do.
EXAMPLES = ("Dr. Smith went to Washington. He left.",
            "The U.S. Army was founded in 1775. It fought the British.",
            "Mr. and Mrs. Jones arrived at 5 p.m. on Tuesday. They stayed, e.g. for tea.",
            "“Are you coming?” she asked. “No.” He shut the door.",
            "J. R. R. Tolkien wrote it in ch. 3. St. Paul's is in London.")


@dataclass(frozen=True)
class SourceSample:
    """The paragraphs drawn from one source file."""

    path: Path
    sha256: str
    n_lines: int  # paragraphs in the file
    paragraphs: list[str]  # the sample, in file order

    @property
    def n_chars(self) -> int:
        return sum(len(p) for p in self.paragraphs)


def default_data_root() -> Path:
    """``$ELMO_WORKBENCH_DATA`` if set, else the user cache directory the app uses."""
    if os.environ.get(DATA_ROOT_ENV):
        return Path(os.environ[DATA_ROOT_ENV])
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "elmo_workbench"


def sample_paragraphs(path: Path, n_chars: int, seed: int) -> SourceSample:
    """Draw random paragraphs (lines) of the gzip text file ``path`` until they hold at
    least ``n_chars`` characters (or the file runs out); return them in file order."""
    if not path.is_file():
        raise FileNotFoundError(f"LM corpus file {path} not found; point --data-root (or ${DATA_ROOT_ENV}) at a "
                                "data root with lm_corpus/, or fill one with `python -m probing.data download`")
    raw = path.read_bytes()
    lines = gzip.decompress(raw).decode("utf-8").split("\n")
    lines = [line.strip() for line in lines if line.strip()]
    order = list(range(len(lines)))
    random.Random(seed).shuffle(order)
    chosen, total = [], 0
    for index in order:
        if total >= n_chars:
            break
        chosen.append(index)
        total += len(lines[index])
    if total < n_chars:
        log.warning("%s holds only %d characters; using all of it", path, total)
    return SourceSample(path=path, sha256=hashlib.sha256(raw).hexdigest(), n_lines=len(lines),
                        paragraphs=[lines[i] for i in sorted(chosen)])


def train_punkt(paragraphs: list[str], ignore_abbrev_penalty: bool = True,
                min_ortho_count: int = DEFAULT_MIN_ORTHO_COUNT):
    """Train Punkt on ``paragraphs`` (one pass; paragraphs joined by blank lines, which
    Punkt reads as paragraph starts). Returns ``(params, n_tokens)``.

    ``ignore_abbrev_penalty``: Punkt's default scores an abbreviation down by a factor
    ``len ** -count`` for every occurrence *without* its period; in the default sample 12
    British "Mr Smith" against 361 "Mr." are enough to lose ``mr`` (and ``mrs``, ``dr``,
    ``st``), so the penalty is off by default.
    ``min_ortho_count``: orthographic contexts are kept only for word types seen at least
    this often (with or without a final period); the rest read as "never seen". With the
    defaults, 5 instead of 1 shrinks the file from 607 KB to 140 KB and changes none of the
    21,502 sentence boundaries of wiki-valid + gutenberg-valid.
    """
    trainer = PunktTrainer(lang_vars=PunktLanguageVarsEn())
    trainer.IGNORE_ABBREV_PENALTY = ignore_abbrev_penalty
    trainer.train("\n\n".join(paragraphs), finalize=True)
    params = trainer.get_params()
    counts = trainer._type_fdist  # type -> count, the only record of word frequencies
    kept = OrthoContextTable()
    for typ, flags in params.ortho_context.items():
        if flags and counts[typ] + counts[typ + "."] >= min_ortho_count:
            kept[typ] = flags
    params.ortho_context = kept
    return params, counts.N()


def _readme(args, data_root: Path, samples: list[SourceSample], params, n_tokens: int, sizes: dict[str, int]) -> str:
    """The README.md written beside the parameters: how they were made (no timings, so
    that a rebuild with the same inputs gives the same bytes)."""
    rows = "\n".join(f"| `{s.path.name}` | {s.n_lines:,} | {len(s.paragraphs):,} | {s.n_chars:,} | `{s.sha256}` |"
                     for s in samples)
    return f"""# Punkt sentence-splitter parameters

Plain-text parameters for NLTK's Punkt sentence splitter (Kiss & Strunk, 2006), in NLTK's
pickle-free `punkt_tab` layout, read by `elmo_model.text.tokenizer.read_punkt_params` (never via
`nltk.data`, never unpickled). Written by `elmo_model/text/build_punkt.py`; do not edit by hand.

## How they were made

```
{BUILD_COMMAND} --data-root {data_root} \\
    --chars-per-source {args.chars_per_source} --seed {args.seed} --min-ortho-count {args.min_ortho_count}{'' if args.ignore_abbrev_penalty else ' --abbrev-penalty'} \\
    --sources {' '.join(args.sources)}
```

run from the repository root (the data root as in docs/design.md). nltk {nltk.__version__}, `PunktTrainer` with
`IGNORE_ABBREV_PENALTY = {args.ignore_abbrev_penalty}` (with the penalty, a few British
"Mr Smith" make Punkt drop `mr`, `mrs`, `dr`, `st`), other settings at nltk's defaults, language variables
`elmo_model.text.tokenizer.PunktLanguageVarsEn` (opening curly quotes split off words).

Sample: from each file, paragraphs (lines) drawn at random (`random.Random({args.seed})`
shuffle of the line numbers) until at least {args.chars_per_source:,} characters, then put
back in file order and joined with blank lines (Punkt's paragraph starts); one training pass
over all of it: {sum(s.n_chars for s in samples):,} characters, {n_tokens:,} Punkt tokens.

| file | paragraphs in file | sampled | characters sampled | sha256 of the .txt.gz |
|---|---:|---:|---:|---|
{rows}

## Files

UTF-8, one entry a line, sorted; Punkt types are lower-cased, numbers are `##number##`.

| file | entries | bytes | content |
|---|---:|---:|---|
| `abbrev_types.txt` | {len(params.abbrev_types):,} | {sizes['abbrev_types.txt']:,} | abbreviations, without the final period (`dr`, `u.s`) |
| `collocations.tab` | {len(params.collocations):,} | {sizes['collocations.tab']:,} | `type1<TAB>type2`: the period after type1 is no sentence break |
| `sent_starters.txt` | {len(params.sent_starters):,} | {sizes['sent_starters.txt']:,} | words that often start a sentence |
| `ortho_context.tab` | {len(params.ortho_context):,} | {sizes['ortho_context.tab']:,} | `type<TAB>flags`: case seen at sentence start / middle / unknown (bit flags); only types seen at least {args.min_ortho_count} times |

Punkt is statistical: a few learned "abbreviations" are noise from the sample (a word seen
rarely, each time before a comma or a lower-case word). Rebuild with the command above.
"""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=BUILD_COMMAND.removeprefix("python -m "), description=__doc__,
                                     epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-root", type=data_root_argument, default=None,
                        help=f"data root holding lm_corpus/ (default: ${DATA_ROOT_ENV}, else ~/.cache/elmo_workbench)")
    parser.add_argument("--sources", nargs="+", default=list(DEFAULT_SOURCES), metavar="PATH",
                        help="gzip text files, one paragraph a line, relative to the data root "
                             f"(default: {' '.join(DEFAULT_SOURCES)})")
    parser.add_argument("--chars-per-source", type=int, default=DEFAULT_CHARS_PER_SOURCE, metavar="N",
                        help="characters of paragraphs to sample from each source (default: %(default)s; "
                             "training takes about 3 s and 100 MB of memory per million characters)")
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED,
                        help="seed of the paragraph sample (default: %(default)s)")
    parser.add_argument("--min-ortho-count", type=int, default=DEFAULT_MIN_ORTHO_COUNT, metavar="N",
                        help="keep a word's orthographic context only if it was seen at least N times "
                             "(default: %(default)s; 1 keeps all, a file of about 1 MB)")
    parser.add_argument("--abbrev-penalty", dest="ignore_abbrev_penalty", action="store_false",
                        help="use Punkt's penalty for abbreviations seen without their period (off by "
                             "default: it loses mr/mrs/dr on this corpus)")
    parser.add_argument("--out", type=Path, default=DEFAULT_PARAMS_DIR,
                        help="directory to write the parameter files and README.md to "
                             "(default: data/tokenizer/ of this repository)")
    add_quiet_argument(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.chars_per_source <= 0 or args.min_ortho_count <= 0:
        print("error: --chars-per-source and --min-ortho-count must be positive", file=sys.stderr)
        return 2
    log_through_bars(args.quiet)
    data_root = args.data_root or default_data_root()

    samples = []
    with tqdm(args.sources, desc="sampling", unit="file", disable=args.quiet) as bar:
        for source in bar:
            path = Path(source) if Path(source).is_absolute() else data_root / source
            try:
                samples.append(sample_paragraphs(path, args.chars_per_source, args.seed))
            except FileNotFoundError as error:
                print(f"error: {error}", file=sys.stderr)
                return 1
    for s in samples:
        print(f"{s.path.name}: {len(s.paragraphs):,} of {s.n_lines:,} paragraphs, {s.n_chars:,} characters")

    paragraphs = [p for s in samples for p in s.paragraphs]
    print(f"training Punkt on {sum(s.n_chars for s in samples):,} characters ...", flush=True)
    start = time.perf_counter()
    params, n_tokens = train_punkt(paragraphs, args.ignore_abbrev_penalty, args.min_ortho_count)
    seconds = time.perf_counter() - start

    written = write_punkt_params(params, args.out)
    sizes = {path.name: path.stat().st_size for path in written}
    write_text_files_atomically(args.out, {"README.md": _readme(args, data_root, samples, params, n_tokens, sizes)})
    print(f"trained in {seconds:.1f} s on {n_tokens:,} tokens; wrote {args.out}:")
    for name in PUNKT_FILES:
        print(f"  {name}: {sizes[name]:,} bytes")
    print(f"  {len(params.abbrev_types)} abbreviations, {len(params.collocations)} collocations, "
          f"{len(params.sent_starters)} sentence starters, {len(params.ortho_context)} "
          "orthographic contexts")

    tokenizer = Tokenizer.from_directory(args.out)
    print("examples:")
    for text in EXAMPLES:
        print("  " + " | ".join(tokenizer.split_sentences(text)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
