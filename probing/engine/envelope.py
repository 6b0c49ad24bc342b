"""The JSON envelopes of the workbench's result files, so a file written by another result type or
an older format is refused with a message instead of being half-read. Two tags exist, both kept
for the files already on disk:

- ``kind`` + ``version`` (:func:`to_tagged_json` / :func:`from_tagged_json`): the small result
  types (contextuality, projection, retrieval, mix view, word senses).
- ``format`` + ``version`` (:func:`check_format`): the probe-suite result, the probe report and
  the playground result, whose writers put the tag first in their own JSON layout.

Writing the files is :mod:`elmo_model.plumbing.io_safety`'s job (atomic, fsynced).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Mapping


def to_tagged_json(kind: str, version: int, data: dict[str, Any]) -> str:
    """``data`` as JSON with ``kind`` and ``version`` added (``data`` is not modified)."""
    return json.dumps({**data, "kind": kind, "version": version}, ensure_ascii=False)


def from_tagged_json(text: str, kind: str, version: int) -> dict[str, Any]:
    """The payload of ``to_tagged_json``; ValueError if the kind or version differ."""
    data = json.loads(text)
    found_kind, found_version = data.pop("kind", None), data.pop("version", None)
    if found_kind != kind or found_version != version:
        raise ValueError(f"not a {kind.replace('_', ' ')} result of version {version} "
                         f"(found kind {found_kind!r}, version {found_version!r})")
    return data


def check_format(data: Mapping, expected_format: str, expected_version: int, what: str) -> None:
    """ValueError unless ``data`` carries this ``format`` tag and ``version`` (``what`` names it)."""
    if data.get("format") != expected_format:
        raise ValueError(f"not a {what} (format {data.get('format')!r}, expected {expected_format!r})")
    if data.get("version") != expected_version:
        raise ValueError(f"{what} version {data.get('version')!r}; this code reads {expected_version}")


def read_json_object(text_or_path: str | os.PathLike, what: str, *, file_in_folder: str | None = None) -> dict:
    """A JSON object from JSON text (it starts with ``{``) or from a file (with ``file_in_folder``,
    a folder means that file in it). Every failure is one ValueError (FileNotFoundError for a
    missing file) that names the file and ``what`` was expected."""
    text = str(text_or_path)
    where = what
    if not text.lstrip().startswith("{"):
        path = Path(text_or_path)
        if file_in_folder is not None and path.is_dir():
            path = path / file_in_folder
        where = f"{path}: {what}"
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise FileNotFoundError(f"no {what} at {path}") from None
        except UnicodeDecodeError:
            raise ValueError(f"{where} is not UTF-8 text") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"{where} is not valid JSON: {err}") from err
    if not isinstance(data, dict):
        raise ValueError(f"{where} is not a JSON object")
    return data


def identity_of(data: Mapping) -> str:
    """The model identity a results file records (``elmo_model.bilm.identity.model_identity``).
    Files written before the field was named for what it holds call it ``model_checksum``."""
    if "model_identity" in data:
        return str(data["model_identity"])
    if "model_checksum" in data:
        return str(data["model_checksum"])
    raise KeyError("model_identity")
