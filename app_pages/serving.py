"""The app served to a class: who counts as local, the one setting for a public server, the caps on
what a visitor types, and how paths are shown to visitors from another machine.

Not a page. Imports nothing heavy (no Streamlit: every rule here is a plain function).

**Local or remote.** A visitor is local when the browser runs on the server's machine: the
connection's peer is a loopback address (``127.0.0.1``, ``::1``, or in IPv4-mapped IPv6 form,
``::ffff:127.0.0.1``, what a dual-stack socket reports). A peer that is unknown (no address, an
error reading it, anything not an address) counts as remote. A request that carries a
forwarding header (``X-Forwarded-For``, ``Forwarded``, ``X-Real-IP``) came through a proxy, and the
address Streamlit reports may be the header's, which anyone can forge: such a visitor is remote,
unless the host names its proxies in ``$ELMO_WORKBENCH_TRUSTED_PROXIES`` (addresses, comma
separated) and the connection comes from one of them. Then the visitor's address is the last one
of ``X-Forwarded-For`` that is no trusted proxy. A proxy or tunnel that adds no header makes everyone look local: that is what
``$ELMO_WORKBENCH_PUBLIC`` is for.

**The public setting.** ``ELMO_WORKBENCH_PUBLIC=1`` treats every visitor as remote (as the older
``ELMO_WORKBENCH_RESTRICT_MODEL_DIRS=1`` does): model folders only from the allowed roots, no
downloads (models or datasets) from the browser, relative paths, no process ids.
"""

from __future__ import annotations

import ipaddress
import os
import re
from pathlib import Path
from typing import Iterable, Mapping

PUBLIC_ENV_VAR = "ELMO_WORKBENCH_PUBLIC"
RESTRICT_ENV_VAR = "ELMO_WORKBENCH_RESTRICT_MODEL_DIRS"  # the earlier name: the same effect
TRUSTED_PROXIES_ENV_VAR = "ELMO_WORKBENCH_TRUSTED_PROXIES"
FORWARDING_HEADERS = ("x-forwarded-for", "forwarded", "x-real-ip")

#: What a visitor may type: at most this many characters in one box (free text), ...
MAX_TEXT_CHARS = 2000
#: ... this many in a box of labelled sentences (a long line is windowed around the word),
MAX_LINES_CHARS = 100_000
#: ... this many characters in one sense label (the text after ``|``: copied into every hover entry),
MAX_LABEL_CHARS = 60
#: ... this many characters in one word, and this many sentences in one box.
MAX_WORD_CHARS = 40
#: ... and this many in a typed model directory.
MAX_PATH_CHARS = 1000


def _flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no", "off")


def public_deployment() -> bool:
    """Whether the host declared a public server (``$ELMO_WORKBENCH_PUBLIC`` or
    ``$ELMO_WORKBENCH_RESTRICT_MODEL_DIRS``): every visitor is then remote."""
    return _flag(PUBLIC_ENV_VAR) or _flag(RESTRICT_ENV_VAR)


def trusted_proxies() -> list[str]:
    """The proxies' addresses the host named (``$ELMO_WORKBENCH_TRUSTED_PROXIES``, comma separated)."""
    return [p.strip() for p in os.environ.get(TRUSTED_PROXIES_ENV_VAR, "").split(",") if p.strip()]


def is_loopback(address: str) -> bool:
    """Whether ``address`` is the machine itself: 127.0.0.0/8, ``::1``, or either inside an
    IPv4-mapped IPv6 address (``::ffff:127.0.0.1``). False for anything that is no address."""
    try:
        ip = ipaddress.ip_address(address.strip().strip("[]"))
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return (mapped or ip).is_loopback


def _same_address(a: str, b: str) -> bool:
    try:
        ia, ib = ipaddress.ip_address(a.strip().strip("[]")), ipaddress.ip_address(b.strip().strip("[]"))
    except ValueError:
        return a.strip() == b.strip()
    return (getattr(ia, "ipv4_mapped", None) or ia) == (getattr(ib, "ipv4_mapped", None) or ib)


def address_is_local(address: str | None, headers: Mapping[str, str] | Iterable[tuple[str, str]],
                     proxies: list[str] | None = None, public: bool = False) -> bool:
    """The local/remote rule (see the module's text). ``address``: the connection's peer as the
    server saw it (``127.0.0.1``, ``::1``, ...; None or anything not an address: unknown, so
    remote); ``headers``: the request's; ``proxies``: the trusted proxies (None:
    :func:`trusted_proxies`); ``public``: every visitor is remote."""
    if public or not isinstance(address, str):
        return False  # unknown counts as remote: the rule fails closed
    try:
        ipaddress.ip_address(address.strip().strip("[]"))
    except ValueError:
        return False
    proxies = trusted_proxies() if proxies is None else proxies
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    forwarded = {str(k).lower(): str(v) for k, v in pairs if str(k).lower() in FORWARDING_HEADERS}
    if forwarded:
        # a header's word counts only when the connection itself comes from a proxy the host named
        if not proxies or not any(_same_address(address, p) for p in proxies):
            return False
        chain = [a.strip() for a in forwarded.get("x-forwarded-for", "").split(",") if a.strip()]
        client = next((a for a in reversed(chain) if not any(_same_address(a, p) for p in proxies)), None)
        return client is not None and is_loopback(client)
    return is_loopback(address)


# --------------------------------------------------------------------------------------------
# Caps on what a visitor types
# --------------------------------------------------------------------------------------------


def check_length(text: str, what: str, limit: int = MAX_TEXT_CHARS) -> str:
    """``text`` unchanged, or ValueError in one line naming ``what`` and the limit (checked before
    any work: a long text would be copied into every figure and message)."""
    if len(text) > limit:
        raise ValueError(f"{what}: {len(text):,} characters; at most {limit:,} are allowed")
    return text


def check_labelled_text(text: str, what: str) -> str:
    """A box of sentences, one a line, each perhaps ending ``| label``: ``text`` unchanged, or
    ValueError in one line naming ``what`` and the limit (the whole box at most
    :data:`MAX_LINES_CHARS` characters, each label at most :data:`MAX_LABEL_CHARS`)."""
    for number, line in enumerate(str(text).splitlines(), 1):
        _, bar, label = line.rpartition("|")
        if bar and len(label.strip()) > MAX_LABEL_CHARS:
            raise ValueError(f"{what}: the label of line {number} has {len(label.strip()):,} characters; "
                             f"a label (the text after |) may have at most {MAX_LABEL_CHARS}")
    return check_length(text, what, MAX_LINES_CHARS)


def check_count(items: list, what: str, limit: int) -> list:
    """``items`` unchanged, or ValueError in one line naming ``what`` and the limit."""
    if len(items) > limit:
        raise ValueError(f"{what}: {len(items):,} given; at most {limit:,} are allowed")
    return items


def check_words(words: list[str], what: str, limit: int, chars: int = MAX_WORD_CHARS) -> list[str]:
    """``words`` unchanged, or ValueError in one line: more than ``limit`` of them, or one longer
    than ``chars`` characters."""
    check_count(words, what, limit)
    for word in words:
        if len(word) > chars:
            raise ValueError(f"{what}: a word of {len(word):,} characters; at most {chars} are allowed")
    return words


# --------------------------------------------------------------------------------------------
# Paths shown to visitors
# --------------------------------------------------------------------------------------------


def shown_path(path: str | os.PathLike, local: bool, roots: dict[str, Path] | None = None) -> str:
    """``path`` as a visitor sees it: in full for a local visitor; for a remote one relative to the
    first of ``roots`` (label -> folder) holding it (``reports/…``), else only its last name."""
    path = Path(path)
    if local:
        return str(path)
    for label, root in (roots or {}).items():
        try:
            rel = path.resolve().relative_to(Path(root).resolve())
        except (ValueError, OSError):
            continue
        return label if str(rel) == "." else f"{label}/{rel.as_posix()}"
    return path.name


_ABSOLUTE_PATH = re.compile(r"(?<![\w.~:/])(?:/[^\s/'\"`:,;()]+)+/?")
_PID = re.compile(r"\bpid \d+", re.IGNORECASE)


def redacted(text: str, local: bool, roots: dict[str, Path] | None = None) -> str:
    """A message as a visitor may read it: unchanged for a local visitor; for a remote one, the
    folders of ``roots`` (label -> folder) named by their labels, any other absolute path by its
    last name, and no process id."""
    if local:
        return text
    for label, root in sorted((roots or {}).items(), key=lambda kv: -len(str(kv[1]))):
        for form in {str(root), str(Path(root).resolve())}:
            text = text.replace(form, label)
    text = _ABSOLUTE_PATH.sub(lambda m: "…/" + m.group(0).rstrip("/").rsplit("/", 1)[-1], text)
    return _PID.sub("another process", text)
