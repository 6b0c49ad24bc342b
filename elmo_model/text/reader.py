"""Reading text a user gives: UTF-8, strictly, with one clear line naming the file and the line.

Plain text a user gives or a dataset holds is read through :func:`read_text_lines`: the
trainer's corpus, the embedder's sentence file, ``kneser_ney``'s corpus and vocabulary, the
LM-corpus samplers, the CoNLL-U and gold-key readers of the data root. :func:`check_text_file` is the same
reader run over a file's first megabyte, for a command that checks its inputs before the work. So
a binary file, a Latin-1 file or a truncated ``.gz`` is refused the same way everywhere, before a
replacement character or half a file can reach a model:

    corpus.txt:3: not valid UTF-8 (invalid continuation byte at byte 12 of the line); re-encode the file as UTF-8
    --vocab random.bin:1: holds a NUL byte: a binary file, not text; give UTF-8 text
    corpus.txt.gz: not a readable gzip file (...); it may be truncated or damaged
    --train corpus: is a directory; give the text file itself

(a command's flag, where it names one, comes before the file). Lines come as text mode gives them
(universal newlines, the line end kept); ``.gz`` files are decompressed on the fly. The check
costs nothing extra: decoding is what reading text does anyway.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import logging
import os
import stat
import zlib
from pathlib import Path
from typing import Iterator, TextIO

#: how much of a file :func:`check_text_file` reads (characters, about as many bytes)
CHECKED_CHARS = 1 << 20
#: the UTF-8 byte-order mark as text: some editors write it first; it is never part of a word
BOM = "\ufeff"
_BOM_NOTED: set[str] = set()
log = logging.getLogger(__name__)


class TextFileError(ValueError):
    """A file given as text cannot be read as UTF-8 text (the message names the file and, where
    known, the line)."""


def _open_text(path: Path) -> TextIO:
    """``.txt`` or ``.txt.gz`` as UTF-8 text; undecodable bytes raise (strict)."""
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return open(path, encoding="utf-8")


def _undecodable_line(path: Path, name: str, error: UnicodeDecodeError) -> TextFileError:
    """The error naming the first line whose bytes are not UTF-8 (text mode decodes in blocks, so
    the line is found again from the raw bytes)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as raw_lines:
        for number, raw in enumerate(raw_lines, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as line_error:
                return TextFileError(f"{name}:{number}: not valid UTF-8 ({line_error.reason} at byte "
                                     f"{line_error.start} of the line); re-encode the file as UTF-8")
    return TextFileError(f"{name}: not valid UTF-8 ({error.reason}); re-encode the file as UTF-8")


@contextlib.contextmanager
def _as_text_file_error(path: Path, name: str, what: str) -> Iterator[None]:
    """Every way reading ``path`` as text fails, as one :class:`TextFileError` line."""
    try:
        yield
    except UnicodeDecodeError as err:
        raise _undecodable_line(path, name, err) from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as err:
        raise TextFileError(f"{name}: not a readable gzip file ({err}); it may be truncated or damaged") from None
    except IsADirectoryError:
        raise TextFileError(f"{name}: is a directory; give the {what} itself") from None
    except FileNotFoundError:
        raise TextFileError(f"{name}: no such file") from None
    except OSError as err:
        raise TextFileError(f"{name}: not readable ({err.strerror or err})") from None


def _note_bom(name: str) -> None:
    if name not in _BOM_NOTED:
        _BOM_NOTED.add(name)
        log.info("%s: starts with a UTF-8 byte-order mark; it is not part of the text (dropped)", name)


def _numbered_lines(handle: TextIO, name: str, max_chars: int | None = None) -> Iterator[str]:
    """The lines of an open text file; a NUL byte raises, naming its line. ``max_chars``: stop
    after about that many characters (a line longer than the rest of the budget comes cut). A
    UTF-8 byte-order mark at the start is dropped (said once per file), so the first word is the
    word, not ``\ufeffThe``."""
    number, read = 1, 0
    while max_chars is None or read < max_chars:
        line = handle.readline(-1 if max_chars is None else max_chars - read)
        if not line:
            return
        read += len(line)
        if number == 1 and read == len(line) and line.startswith(BOM):
            line = line[len(BOM):]
            _note_bom(name)
        if "\x00" in line:
            raise TextFileError(f"{name}:{number}: holds a NUL byte: a binary file, not text; give UTF-8 text")
        yield line
        if line.endswith("\n"):  # universal newlines: every line end reads as "\n"
            number += 1


def _name(path: Path, flag: str) -> str:
    return f"{flag} {path}" if flag else str(path)


def read_text_lines(path: str | os.PathLike, *, flag: str = "", what: str = "text file") -> Iterator[str]:
    """The lines of a UTF-8 text file (``.gz`` transparently), each with its line end. Raises
    :class:`TextFileError` (a ``ValueError``) naming the file and line of bytes that are not
    UTF-8 or of a NUL byte (a binary file), or naming a damaged or truncated gzip file, a
    directory (``what``: what to give instead) or a missing file. ``flag``: the option that named
    the file, put before it in the message."""
    path = Path(path)
    name = _name(path, flag)
    with _as_text_file_error(path, name, what), _open_text(path) as handle:
        yield from _numbered_lines(handle, name)


def check_text_file(path: str | os.PathLike, flag: str = "", what: str = "text file",
                    max_chars: int = CHECKED_CHARS) -> Path:
    """``path`` if its first ``max_chars`` characters (after gunzip for ``.gz``) read as UTF-8
    text, else :class:`TextFileError` with :func:`read_text_lines`'s line: a command checks its
    inputs with it before the work, so a wrong file is one line, not a traceback minutes later.
    A pipe or other stream is not read here (what the check read would be gone for the work);
    the work's own :func:`read_text_lines` refuses it the same way, line by line."""
    path = Path(path)
    name = _name(path, flag)
    with contextlib.suppress(OSError):
        if not stat.S_ISREG(os.stat(path).st_mode) and not path.is_dir():
            return path  # a pipe (<(cat f), /dev/stdin) is read once, by the work: read_text_lines checks it there
    with _as_text_file_error(path, name, what), _open_text(path) as handle:
        for _ in _numbered_lines(handle, name, max_chars):
            pass
    return path


__all__ = ["CHECKED_CHARS", "TextFileError", "check_text_file", "read_text_lines"]
