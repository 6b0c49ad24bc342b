"""Reading text a user gives: UTF-8, strictly, with one clear line naming the file and the line.

Every command that reads plain text (the trainer's corpus, the embedder's sentence file,
``kneser_ney``'s corpus, the LM-corpus samplers) reads it through :func:`read_text_lines`, so a
binary file, a Latin-1 file or a truncated ``.gz`` is refused the same way everywhere, before a
replacement character or half a file can reach a model:

    corpus.txt:3: not valid UTF-8 (invalid continuation byte at byte 12 of the line); re-encode the file as UTF-8
    random.bin:1: holds a NUL byte: a binary file, not text; give UTF-8 text
    corpus.txt.gz: not a readable gzip file (...); it may be truncated or damaged

Lines come as text mode gives them (universal newlines, the line end kept); ``.gz`` files are
decompressed on the fly. The check costs nothing extra: decoding is what reading text does anyway.
"""

from __future__ import annotations

import gzip
import io
import zlib
from pathlib import Path
from typing import Iterator, TextIO


class TextFileError(ValueError):
    """A file given as text is not UTF-8 text (the message names the file and, where known, the line)."""


def open_text(path: str | Path) -> TextIO:
    """Open ``.txt`` or ``.txt.gz`` as UTF-8 text for reading; undecodable bytes raise (strict)."""
    path = Path(path)
    if path.suffix == ".gz":
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    return open(path, encoding="utf-8")


def _undecodable_line(path: Path, error: UnicodeDecodeError) -> TextFileError:
    """The error naming the first line whose bytes are not UTF-8 (text mode decodes in blocks, so
    the line is found again from the raw bytes)."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as raw_lines:
        for number, raw in enumerate(raw_lines, start=1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as line_error:
                return TextFileError(f"{path}:{number}: not valid UTF-8 ({line_error.reason} at byte "
                                     f"{line_error.start} of the line); re-encode the file as UTF-8")
    return TextFileError(f"{path}: not valid UTF-8 ({error.reason}); re-encode the file as UTF-8")


def read_text_lines(path: str | Path) -> Iterator[str]:
    """The lines of a UTF-8 text file (``.gz`` transparently), each with its line end. Raises
    :class:`TextFileError` (a ``ValueError``) naming the file and line of bytes that are not
    UTF-8 or of a NUL byte (a binary file), or naming a damaged or truncated gzip file."""
    path = Path(path)
    try:
        with open_text(path) as f:
            for number, line in enumerate(f, start=1):
                if "\x00" in line:
                    raise TextFileError(f"{path}:{number}: holds a NUL byte: a binary file, not text; give UTF-8 text")
                yield line
    except UnicodeDecodeError as err:
        raise _undecodable_line(path, err) from None
    except (EOFError, zlib.error, gzip.BadGzipFile) as err:
        raise TextFileError(f"{path}: not a readable gzip file ({err}); it may be truncated or damaged") from None
    except IsADirectoryError:
        raise TextFileError(f"{path}: is a directory, expected a text file") from None


__all__ = ["TextFileError", "open_text", "read_text_lines"]
