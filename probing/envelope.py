"""The JSON envelope of the small result types (contextuality, projection, retrieval, mix view,
word senses): the payload plus ``kind`` and ``version``, so a file written by another result
type or an older format is refused with a message instead of being half-read."""

from __future__ import annotations

import json
from typing import Any


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
