"""Results kept on disk under a key of everything they depend on, so a rerun reads them back
instead of computing them again: the suite's probes and the information probes' tasks.

One checksummed JSON file per entry (``elmo_model.plumbing.io_safety``): an entry edited or
damaged on disk is computed again, never reported. ``version`` goes into every key: bump it
where a change to the code changes the results."""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any, Generic, TypeVar

from elmo_model.plumbing.io_safety import read_checked_json, write_checked_json

log = logging.getLogger(__name__)

Result = TypeVar("Result")


class ResultCache(Generic[Result]):
    """``kind`` results (a ``JsonDataclass``) as JSON files under ``cache_dir``; off when not
    ``enabled`` (every ``get`` misses, ``put`` writes nothing)."""

    def __init__(self, cache_dir: Path, kind: type[Result], enabled: bool = True, version: int = 1) -> None:
        self.cache_dir, self.kind, self.enabled, self.version = Path(cache_dir), kind, enabled, version

    def key(self, **parts: Any) -> str:
        payload = json.dumps([self.version, parts], sort_keys=True, default=str)
        return hashlib.sha256(payload.encode()).hexdigest()

    def get(self, key: str) -> Result | None:
        if not self.enabled:
            return None
        path = self.cache_dir / f"{key[:32]}.json"
        if not path.is_file():
            return None
        payload = read_checked_json(path)
        if payload is None:
            return None
        try:
            return self.kind.from_dict(payload)
        except (ValueError, KeyError, TypeError) as err:
            log.warning("ignoring a damaged result-cache entry %s (%s)", path, err)
            return None

    def put(self, key: str, result: Result) -> None:
        if self.enabled:
            write_checked_json(self.cache_dir / f"{key[:32]}.json", result.to_dict())


__all__ = ["ResultCache"]
