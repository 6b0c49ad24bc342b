"""The JSON envelopes of the workbench's result files, so a file written by another result type or
an older format is refused with a message instead of being half-read. Two tags exist, both kept
for the files already on disk:

- ``kind`` + ``version`` (:func:`to_tagged_json` / :func:`from_tagged_json`): the small result
  types (contextuality, projection, retrieval, mix view, word senses).
- ``format`` + ``version`` (:func:`check_format`): the probe-suite result, the probe report and
  the playground result, whose writers put the tag first in their own JSON layout.

Writing the files is :mod:`elmo_model.io_safety`'s job (atomic, fsynced).
"""

from __future__ import annotations

import json
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
