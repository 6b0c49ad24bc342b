"""Are two probe reports' ``results.json`` the same, apart from when they ran and how long it took?

    python scripts/same_report.py reports/before/results.json reports/after/results.json

Both files are read as JSON, the keys that only say when and how long (``created``,
``timings``, ``seconds``: ``probing.report.VOLATILE_KEYS``) are removed wherever they occur, and
the rest is written back exactly as the report writes it (indent 1, keys in their order, no ASCII
escaping); the two texts must then be equal byte for byte. Prints one line saying so and exits
0, or prints the first differing places (JSON paths with both values) and exits 1. A folder means
its results.json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Iterator, Sequence

IGNORED_KEYS = frozenset({"created", "timings", "seconds"})
"""Keys left out of the comparison: the same as ``probing.report.VOLATILE_KEYS`` (kept here as a
literal so the script runs without the project's dependencies; a test checks the two agree)."""


def _strip(value: Any, counts: dict[str, int]) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in IGNORED_KEYS:
                counts[key] = counts.get(key, 0) + 1
            else:
                out[key] = _strip(item, counts)
        return out
    if isinstance(value, list):
        return [_strip(item, counts) for item in value]
    return value


def comparable_text(path: str | Path) -> tuple[str, dict[str, int]]:
    """``results.json`` at ``path`` (or in the folder ``path``) without the ignored keys, as the
    report writes JSON; and how many of each ignored key were removed."""
    path = Path(path)
    if path.is_dir():
        path = path / "results.json"
    counts: dict[str, int] = {}
    data = _strip(json.loads(path.read_text(encoding="utf-8")), counts)
    return json.dumps(data, indent=1, ensure_ascii=False) + "\n", counts


def differences(a: Any, b: Any, where: str = "$") -> Iterator[str]:
    """JSON paths where ``a`` and ``b`` differ, with both values (shortened)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if list(a) != list(b):
            yield f"{where}: keys {list(a)} vs {list(b)}"
        for key in a:
            if key in b:
                yield from differences(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            yield f"{where}: {len(a)} vs {len(b)} items"
        for k, (x, y) in enumerate(zip(a, b)):
            yield from differences(x, y, f"{where}[{k}]")
    elif a != b or type(a) is not type(b):
        yield f"{where}: {json.dumps(a)[:80]} vs {json.dumps(b)[:80]}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python scripts/same_report.py",
        description="Compare two probe reports' results.json byte for byte, apart from the keys that say when "
                    f"they ran and how long it took ({', '.join(sorted(IGNORED_KEYS))}).")
    parser.add_argument("a", type=Path, help="results.json of the first report (or its folder)")
    parser.add_argument("b", type=Path, help="results.json of the second report (or its folder)")
    parser.add_argument("--show", type=int, default=20, metavar="N", help="differences to print at most (default: 20)")
    args = parser.parse_args(argv)
    try:
        (text_a, counts_a), (text_b, counts_b) = comparable_text(args.a), comparable_text(args.b)
    except (OSError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    ignored = ", ".join(f"{key} x{n}" for key, n in sorted(counts_a.items())) or "nothing"
    if text_a == text_b:
        print(f"same: {len(text_a.encode()):,} bytes identical once {ignored} are left out")
        return 0
    found = list(differences(json.loads(text_a), json.loads(text_b)))
    print(f"different: {len(found)} place(s) differ (ignored: {ignored}; in B: "
          f"{', '.join(f'{k} x{n}' for k, n in sorted(counts_b.items())) or 'nothing'})")
    for line in found[:args.show]:
        print("  " + line)
    if not found:
        print("  (the same values, written differently)")
    return 1


if __name__ == "__main__":
    sys.exit(main())
