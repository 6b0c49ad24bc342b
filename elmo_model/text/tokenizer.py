"""The one tokenizer for raw text: text -> sentences -> word tokens.

Used by the trainer, the app and the reports alike, so that a word means the same thing
everywhere. Nothing is downloaded and nothing is unpickled:

- **Sentences**: NLTK's Punkt (Kiss & Strunk, 2006) with parameters trained on our own LM
  corpus by ``python -m elmo_model.text.build_punkt`` and shipped as plain text in
  ``data/tokenizer/`` (NLTK's pickle-free ``punkt_tab`` layout, read here by
  :func:`read_punkt_params`; ``data/tokenizer/README.md`` says how they were made).
  A newline is always a paragraph boundary: no sentence spans two lines. One addition to
  Punkt: a ``?`` or ``!`` (plus closing quotes) followed by a lower-case word does not end
  the sentence (``"Are you coming?" she asked.`` is one sentence; Punkt splits it).
- **Words**: NLTK's Treebank-style word tokenizer (``NLTKWordTokenizer``, the one behind
  ``nltk.word_tokenize``), made span-based: every token is the substring of the input it
  came from, so a ``"`` stays ``"`` (Treebank would rewrite it to two backticks or two
  apostrophes) and ``"".join(tokens)`` equals the sentence without its whitespace.

A token never contains whitespace; tokens are substrings of the input, in order, and
together they cover every non-whitespace character exactly once.

Speed, :func:`tokenize` line by line over ``lm_corpus/wiki-valid.txt.gz`` (2,899 paragraphs,
1.39 MB, 9,782 sentences, 258,761 tokens) in one process on a 2-core CPU (AMD EPYC, load
about 2.4 from other jobs; Python 3.11, nltk 3.10.4), 2026-11-22: 1,500-2,200 paragraphs/s,
i.e. 130k-200k tokens/s or 0.7-1.0 MB of text/s (4 runs); sentence splitting alone about
9,000 paragraphs/s. Plain nltk (``PunktSentenceTokenizer`` + ``NLTKWordTokenizer.
span_tokenize``, same parameters) ran 90k-110k tokens/s in the same runs: the gain is
nltk's fixed regexes run without its per-call timeout, and a C whitespace scan in Punkt.
Time grows linearly with input length (a 1.4 MB single line: 1.5 s). For the whole LM
corpus (32M whitespace tokens) that is about 3-4 minutes; split it across processes if
that matters.

Example::

    >>> from elmo_model.text.tokenizer import tokenize
    >>> tokenize('Dr. Smith said "hi." He left.\\nNew paragraph')
    [['Dr.', 'Smith', 'said', '"', 'hi', '.', '"'], ['He', 'left', '.'], ['New', 'paragraph']]
"""

from __future__ import annotations

import functools
import logging
import os
import re
import string
from collections.abc import Iterable
from pathlib import Path

import regex
from nltk.tokenize.destructive import NLTKWordTokenizer
from nltk.tokenize.punkt import PunktLanguageVars, PunktParameters, PunktSentenceTokenizer

from ..plumbing.io_safety import atomic_write_text
from ..plumbing.resources import shipped_data

log = logging.getLogger(__name__)

#: Where the shipped Punkt parameters live (``data/tokenizer/`` at the repository root).
DEFAULT_PARAMS_DIR = shipped_data("tokenizer")

#: The command that (re)builds the shipped parameters; named in error messages.
BUILD_COMMAND = "python -m elmo_model.text.build_punkt"

# The four files of NLTK's punkt_tab layout (nltk.tokenize.punkt.load_punkt_params).
ABBREV_TYPES_FILE = "abbrev_types.txt"
COLLOCATIONS_FILE = "collocations.tab"
SENT_STARTERS_FILE = "sent_starters.txt"
ORTHO_CONTEXT_FILE = "ortho_context.tab"
PUNKT_FILES = (ABBREV_TYPES_FILE, COLLOCATIONS_FILE, SENT_STARTERS_FILE, ORTHO_CONTEXT_FILE)

# Double-quote spellings the Treebank tokenizer may rewrite a quote token to / from.
_QUOTE_RE = re.compile(r"``|''|\"")
_QUOTE_TOKENS = frozenset(('"', "``", "''"))
_NON_SPACE_RUN_RE = re.compile(r"\S+")
_SPACE_PREFIX_RE = re.compile(r"\s*")
# A sentence ending in ? or ! (and closing quotes / brackets); searched with endpos.
_QUESTION_END_RE = re.compile("[?!][\"'\u201d\u2019\u00bb)\\]}]*\\Z")


# --------------------------------------------------------------------------------------------
# Punkt parameters as plain text
# --------------------------------------------------------------------------------------------


class OrthoContextTable(dict):
    """Punkt's word type -> orthographic-context bit flags (``int``).

    An unseen type reads as 0 *without being inserted*: Punkt's own ``defaultdict(int)``
    would grow by one entry for every new word it is asked about, i.e. without bound while
    it splits millions of lines.
    """

    def __missing__(self, key: str) -> int:
        return 0


def read_punkt_params(directory: str | os.PathLike) -> PunktParameters:
    """Read Punkt parameters from ``directory`` in NLTK's pickle-free ``punkt_tab`` layout.

    The files are UTF-8 text, one entry a line (Punkt word types are lower-cased, contain
    no whitespace, and numbers are spelled ``##number##``):

    - ``abbrev_types.txt``: a known abbreviation, without its final period (``dr``, ``u.s``);
    - ``collocations.tab``: ``type1<TAB>type2``, a pair whose period is not a sentence
      break (``e<TAB>coli``);
    - ``sent_starters.txt``: a word that frequently starts a sentence (``however``);
    - ``ortho_context.tab``: ``type<TAB>flags``, the orthographic contexts (bit flags for
      upper/lower case at sentence start / middle / unknown) the type was seen in.

    Blank lines are ignored. Nothing comes from ``nltk.data`` and nothing is unpickled.

    Raises:
        FileNotFoundError: a file is missing (names it and the command that builds it).
        ValueError: a line does not have the expected fields (names the file and line).
    """
    directory = Path(directory)
    params = PunktParameters()
    params.abbrev_types = set(_read_rows(directory / ABBREV_TYPES_FILE, n_fields=1))
    params.collocations = set(_read_rows(directory / COLLOCATIONS_FILE, n_fields=2))
    params.sent_starters = set(_read_rows(directory / SENT_STARTERS_FILE, n_fields=1))
    ortho = OrthoContextTable()
    path = directory / ORTHO_CONTEXT_FILE
    for line_no, (typ, flags) in enumerate(_read_rows(path, n_fields=2), start=1):
        try:
            ortho[typ] = int(flags)
        except ValueError:
            raise ValueError(f"{path}: entry {line_no} ({typ!r}): flags {flags!r} is not an integer; "
                             f"rebuild the parameters with `{BUILD_COMMAND}`") from None
    params.ortho_context = ortho
    return params


def _read_rows(path: Path, n_fields: int) -> Iterable:
    """Yield the rows of a punkt_tab file: a str per line (n_fields=1) or a tuple of str."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"Punkt parameter file {path} is missing (expected the files "
                                f"{', '.join(PUNKT_FILES)} in {path.parent}); build them with `{BUILD_COMMAND}`") from None
    for line_no, line in enumerate(text.split("\n"), start=1):
        line = line.rstrip("\r")
        if not line:
            continue
        fields = line.split("\t")
        if len(fields) != n_fields or not all(fields):
            raise ValueError(f"{path}:{line_no}: expected {n_fields} non-empty tab-separated field(s), "
                             f"got {len(fields)} in {line!r}; rebuild the parameters with `{BUILD_COMMAND}`")
        yield fields[0] if n_fields == 1 else tuple(fields)


def write_punkt_params(params: PunktParameters, directory: str | os.PathLike) -> list[Path]:
    """Write ``params`` to ``directory`` in the layout :func:`read_punkt_params` reads.

    Entries are sorted, so the same parameters always give the same bytes. Every file is
    written to a temporary file first and renamed into place only once all four are
    complete, so a failure never leaves a half-written file behind. Returns the paths.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    contents = {
        ABBREV_TYPES_FILE: sorted(params.abbrev_types),
        COLLOCATIONS_FILE: sorted("\t".join(pair) for pair in params.collocations),
        SENT_STARTERS_FILE: sorted(params.sent_starters),
        ORTHO_CONTEXT_FILE: [f"{typ}\t{flags}" for typ, flags in sorted(params.ortho_context.items()) if flags],
    }
    for name, rows in contents.items():
        for row in rows:
            # A row with whitespace inside a field would not read back as written.
            if not row or any(ch.isspace() and ch != "\t" for ch in row):
                raise ValueError(f"cannot write Punkt entry {row!r} to {name}: whitespace")
    return write_text_files_atomically(directory, {name: "".join(row + "\n" for row in rows)
                                                   for name, rows in contents.items()})


def write_text_files_atomically(directory: Path, files: dict[str, str]) -> list[Path]:
    """Write ``{file name: UTF-8 text}`` into ``directory``, each file atomically (no reader ever
    sees a half-written file)."""
    written = []
    for name, text in files.items():
        atomic_write_text(directory / name, text)
        written.append(directory / name)
    return written


# --------------------------------------------------------------------------------------------
# The NLTK pieces, adapted
# --------------------------------------------------------------------------------------------


def _untimed(pattern):
    """``pattern`` compiled by the ``regex`` engine without nltk's per-call wall-clock limit.

    This nltk routes every regex through ``nltk.redos`` with a 5 s timeout per call: a
    guard for caller-supplied patterns. These are nltk's own fixed, linear patterns; the
    guard halves the speed and would make a legitimately long paragraph raise
    ``TimeoutError`` on a busy machine. Same source, same flags, same engine, same matches.
    """
    if isinstance(pattern, (re.Pattern, regex.Pattern)):
        return pattern
    return regex.compile(pattern.pattern, pattern.flags)


class PunktLanguageVarsEn(PunktLanguageVars):
    """Punkt's English language variables, with two changes.

    - Opening curly quotes and guillemets (``“ ‘ « „``) cannot start a Punkt word, like the
      ASCII ``"``: otherwise ``“Mr.`` is the type ``“mr`` and never meets the abbreviation
      ``mr`` (in training or in use).
    - The regexes run without nltk's per-call timeout (see :func:`_untimed`).

    Training (``build_punkt``) and splitting use this same class, so the shipped
    parameters match the tokens they are looked up with.
    """

    __slots__ = ()
    _re_word_start = PunktLanguageVars._re_word_start[:-1] + "\u201c\u2018\u00ab\u201e]"
    re_boundary_realignment = _untimed(PunktLanguageVars.re_boundary_realignment)

    def _word_tokenizer_re(self):
        try:
            return self._re_word_tokenizer
        except AttributeError:
            self._re_word_tokenizer = _untimed(super()._word_tokenizer_re())
            return self._re_word_tokenizer

    def period_context_re(self):
        try:
            return self._re_period_context
        except AttributeError:
            self._re_period_context = _untimed(super().period_context_re())
            return self._re_period_context


class _PunktSplitter(PunktSentenceTokenizer):
    """Punkt's sentence tokenizer with its per-character whitespace scan done in C."""

    def _get_last_whitespace_index(self, text: str) -> int:
        # Same result as nltk's right-to-left Python loop over the characters (including
        # its quirk of answering 0 both for "none" and for "at index 0").
        return max(0, max(text.rfind(ch) for ch in string.whitespace))


class _TreebankWords(NLTKWordTokenizer):
    """``NLTKWordTokenizer`` with its fixed regexes untimed (see :func:`_untimed`)."""

    STARTING_QUOTES = [(_untimed(p), s) for p, s in NLTKWordTokenizer.STARTING_QUOTES]
    ENDING_QUOTES = [(_untimed(p), s) for p, s in NLTKWordTokenizer.ENDING_QUOTES]
    PUNCTUATION = [(_untimed(p), s) for p, s in NLTKWordTokenizer.PUNCTUATION]
    PARENS_BRACKETS = (_untimed(NLTKWordTokenizer.PARENS_BRACKETS[0]),
                       NLTKWordTokenizer.PARENS_BRACKETS[1])
    DOUBLE_DASHES = (_untimed(NLTKWordTokenizer.DOUBLE_DASHES[0]),
                     NLTKWordTokenizer.DOUBLE_DASHES[1])
    CONTRACTIONS2 = [_untimed(p) for p in NLTKWordTokenizer.CONTRACTIONS2]
    CONTRACTIONS3 = [_untimed(p) for p in NLTKWordTokenizer.CONTRACTIONS3]


# --------------------------------------------------------------------------------------------
# The tokenizer
# --------------------------------------------------------------------------------------------


class Tokenizer:
    """Text -> sentences (Punkt) -> word tokens (Treebank), all as substrings of the input.

    Args:
        punkt_params: trained Punkt parameters, e.g. from :func:`read_punkt_params`.
            Use :func:`get_tokenizer` for the shipped ones (loaded once, cached).

    Offsets are ``(start, end)`` character indices (Python ``str`` indices, i.e. code
    points) with ``text[start:end]`` the piece.
    """

    def __init__(self, punkt_params: PunktParameters):
        self.punkt_params = punkt_params
        self._sentences = _PunktSplitter(punkt_params, lang_vars=PunktLanguageVarsEn())
        self._words = _TreebankWords()

    @classmethod
    def from_directory(cls, directory: str | os.PathLike = DEFAULT_PARAMS_DIR) -> "Tokenizer":
        """A tokenizer with the Punkt parameters in ``directory`` (:func:`read_punkt_params`)."""
        params = read_punkt_params(directory)
        log.debug("loaded Punkt parameters from %s: %d abbreviations, %d collocations, %d sentence starters, "
                  "%d orthographic contexts", directory, len(params.abbrev_types), len(params.collocations),
                  len(params.sent_starters), len(params.ortho_context))
        return cls(params)

    # ---- sentences -------------------------------------------------------------------------

    def sentence_spans(self, text: str) -> list[tuple[int, int]]:
        """Offsets of the sentences of ``text``: a list of ``(start, end)``, in order.

        Every line (``str.splitlines`` boundaries: ``\\n``, ``\\r\\n``, ...) is a paragraph
        split on its own, so no sentence crosses a line break. A sentence has no leading or
        trailing whitespace; blank lines give nothing.
        """
        spans: list[tuple[int, int]] = []
        offset = 0
        for line in text.splitlines(keepends=True):
            if not line.isspace():
                paragraph = line.strip()
                base = offset + _SPACE_PREFIX_RE.match(line).end()
                previous_end = -1  # end of the last sentence of this paragraph, if any
                for start, end in self._sentences.span_tokenize(paragraph):
                    # Punkt's spans are already trimmed; make sure of it without copying.
                    start = _SPACE_PREFIX_RE.match(paragraph, start, end).end()
                    while end > start and paragraph[end - 1].isspace():
                        end -= 1
                    if start >= end:
                        continue
                    if (previous_end >= 0 and paragraph[start].islower()
                            and _QUESTION_END_RE.search(paragraph, max(0, previous_end - 8),
                                                        previous_end)):
                        # Punkt always breaks after ? and !; not before a lower-case word
                        # ('"Are you coming?" she asked.' is one sentence).
                        spans[-1] = (spans[-1][0], base + end)
                    else:
                        spans.append((base + start, base + end))
                    previous_end = end
            offset += len(line)
        return spans

    def split_sentences(self, text: str) -> list[str]:
        """The sentences of ``text`` (substrings of it, in order); blank text gives ``[]``."""
        return [text[start:end] for start, end in self.sentence_spans(text)]

    # ---- words -----------------------------------------------------------------------------

    def word_spans(self, sentence: str) -> list[tuple[int, int]]:
        """Offsets of the Treebank word tokens of one ``sentence``: a list of ``(start, end)``.

        The spans are in order, do not overlap, contain no whitespace and cover every
        non-whitespace character of ``sentence``. The whole string is tokenised as one
        sentence (line breaks inside it are plain whitespace here).
        """
        if not sentence or sentence.isspace():
            return []
        tokens = self._words.tokenize(sentence)
        spans = []
        point = 0
        for token in tokens:
            if token in _QUOTE_TOKENS:
                # The tokenizer rewrote a double quote: take the original spelling.
                match = _QUOTE_RE.search(sentence, point)
                if match is None:
                    break
                start, point = match.span()
            else:
                start = sentence.find(token, point)
                if start < 0:
                    break
                point = start + len(token)
            spans.append((start, point))
        covered = sum(end - start for start, end in spans)
        if len(spans) != len(tokens) or covered != _count_non_space(sentence):
            spans = self._repair_spans(sentence, spans, tokens)
        return spans

    def _repair_spans(self, sentence: str, spans: list[tuple[int, int]], tokens: list[str]):
        # Not seen on the LM corpus; kept so that a tokenizer quirk can cost a token
        # boundary but never a character. Characters no aligned token covers become tokens
        # of their own (one per whitespace-separated run).
        log.warning("word tokens do not align with the sentence (%d tokens, %d aligned); uncovered characters "
                    "become their own tokens: %r", len(tokens), len(spans), sentence[:200])
        repaired: list[tuple[int, int]] = []
        point = 0
        for start, end in spans + [(len(sentence), len(sentence))]:
            if start < point:  # overlapping: drop
                continue
            repaired.extend(m.span() for m in _NON_SPACE_RUN_RE.finditer(sentence, point, start))
            if start < end:
                repaired.append((start, end))
            point = end
        return repaired

    def tokenize_words(self, sentence: str) -> list[str]:
        """The Treebank word tokens of one ``sentence``, each a substring of it, in order."""
        return [sentence[start:end] for start, end in self.word_spans(sentence)]

    # ---- both ------------------------------------------------------------------------------

    def tokenize(self, text: str) -> list[list[str]]:
        """``text`` -> sentences of word tokens; empty or whitespace-only text gives ``[]``."""
        return [self.tokenize_words(sentence) for sentence in self.split_sentences(text)]

    def span_tokenize(self, text: str) -> list[list[tuple[int, int]]]:
        """Like :meth:`tokenize`, but each token as its ``(start, end)`` offsets in ``text``."""
        return [[(start + s, start + e) for s, e in self.word_spans(text[start:end])]
                for start, end in self.sentence_spans(text)]


def _count_non_space(text: str) -> int:
    """Characters of ``text`` that are not whitespace as ``str.split`` sees it (the word
    tokenizer's last step is ``str.split``, so exactly these end up in tokens)."""
    return len("".join(text.split()))


@functools.lru_cache(maxsize=1)
def get_tokenizer() -> Tokenizer:
    """The tokenizer with the shipped Punkt parameters (``data/tokenizer/``), loaded once."""
    return Tokenizer.from_directory(DEFAULT_PARAMS_DIR)


def split_sentences(text: str) -> list[str]:
    """Paragraph(s) -> sentences, each a substring of ``text``; a newline always ends one."""
    return get_tokenizer().split_sentences(text)


def tokenize_words(sentence: str) -> list[str]:
    """One sentence -> its Treebank word tokens, each a substring of ``sentence``."""
    return get_tokenizer().tokenize_words(sentence)


def tokenize(text: str) -> list[list[str]]:
    """Text -> sentences of word tokens; empty or whitespace-only text -> ``[]``."""
    return get_tokenizer().tokenize(text)
