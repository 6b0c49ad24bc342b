"""The JSON envelopes of the workbench's result files, so a file written by another result type or
an older format is refused with a message instead of being half-read. Two tags exist, both kept
for the files already on disk:

- ``kind`` + ``version`` (:func:`to_tagged_json` / :func:`from_tagged_json`): the small result
  types (contextuality, projection, retrieval, mix view, word senses).
- ``format`` + ``version`` (:func:`check_format`): the probe-suite result, the probe report and
  the playground result, whose writers put the tag first in their own JSON layout.

And the one (de)serialiser of the result dataclasses behind them: :func:`to_plain` and
:func:`from_plain`, by the fields and their annotations (nested dataclasses, tuples, lists, dicts,
``X | None``, numbers, numpy arrays), which :class:`JsonDataclass` (``to_dict`` / ``from_dict``) and
:class:`TaggedJson` (``to_json`` / ``from_json`` in the kind/version envelope) give a class.

Writing the files is :mod:`elmo_model.plumbing.io_safety`'s job (atomic, fsynced).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import types
import typing
from pathlib import Path
from typing import Any, ClassVar, Mapping, TypeVar

Record = TypeVar("Record")


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


def with_model_identity(data: Mapping) -> dict:
    """``data`` with its model identity under ``model_identity`` (:func:`identity_of`; an older file's
    ``model_checksum`` moved there); as it is when it holds neither."""
    if "model_identity" not in data and "model_checksum" in data:
        return {**data, "model_identity": data["model_checksum"]}
    return dict(data)


def to_plain(record: Any) -> dict[str, Any]:
    """A dataclass instance as a JSON-ready dict, its fields in their order: a nested dataclass as
    its own ``to_dict`` gives it (else the same way), tuples as lists, numpy arrays as nested lists."""
    return {f.name: _plain(getattr(record, f.name)) for f in dataclasses.fields(record)}


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return value.to_dict() if hasattr(value, "to_dict") else to_plain(value)
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if hasattr(value, "tolist"):  # a numpy array or scalar (numpy itself is not imported here)
        return value.tolist()
    return value


def from_plain(cls: type[Record], data: Mapping, *, strict: bool = False) -> Record:
    """The inverse of :func:`to_plain`: ``cls`` from a dict, each field made what its annotation
    says (a nested dataclass through its ``from_dict``, tuples, numbers, ``X | None``); a field the
    dict lacks takes its default, and one without a default is a KeyError naming it (the first
    in field order). ``strict``: a key ``cls`` does not know is a ValueError naming the
    class (a saved config from another version must not load half-read); else it is ignored."""
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    if strict and (unknown := set(data) - names):
        raise ValueError(f"unknown {cls.__name__} keys: {sorted(unknown)}")
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        if f.init and f.name not in data and f.default is dataclasses.MISSING \
                and f.default_factory is dataclasses.MISSING:
            raise KeyError(f.name)
    return cls(**{name: _typed(hints[name], data[name]) for name in names if name in data})


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _typed(hint: Any, value: Any) -> Any:
    """``value`` (as JSON gave it) as the annotation ``hint`` says."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if value is None:
        return None
    if origin in (typing.Union, types.UnionType):
        options = [a for a in args if a is not type(None)]
        return _typed(options[0], value) if len(options) == 1 else value
    if dataclasses.is_dataclass(hint):
        return hint.from_dict(value) if hasattr(hint, "from_dict") else from_plain(hint, value)
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_typed(args[0], v) for v in value)
        return tuple(_typed(a, v) for a, v in zip(args, value)) if args else tuple(value)
    if origin is list:
        return [_typed(args[0], v) for v in value]
    if origin is dict:
        return {k: _typed(args[1], v) for k, v in value.items()}
    if hint in (tuple, list, dict):
        return hint(value)
    if hint in (int, float, str):
        return hint(value)
    if getattr(hint, "__module__", None) == "numpy" and getattr(hint, "__name__", "") == "ndarray":
        import numpy as np  # only for a record that holds an array

        return np.asarray(value)
    return value


class JsonDataclass:
    """A dataclass's ``to_dict`` / ``from_dict`` (:func:`to_plain` / :func:`from_plain`). A class
    that refuses keys it does not know says ``strict=True`` in its bases' keywords."""

    _strict: ClassVar[bool] = False

    def __init_subclass__(cls, strict: bool | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if strict is not None:
            cls._strict = strict

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict, the fields in their order."""
        return to_plain(self)

    @classmethod
    def from_dict(cls, data: Mapping) -> Any:
        """The inverse of ``to_dict``."""
        return from_plain(cls, data, strict=cls._strict)


class TaggedJson(JsonDataclass):
    """A :class:`JsonDataclass` written as JSON in the ``kind`` / ``version`` envelope
    (:func:`to_tagged_json`): ``class Result(TaggedJson, kind="retrieval", version=1)``."""

    _kind: ClassVar[str] = ""
    _version: ClassVar[int] = 0

    def __init_subclass__(cls, kind: str | None = None, version: int | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if kind is not None:
            cls._kind, cls._version = kind, int(version or 0)

    def to_json(self) -> str:
        """The JSON text, tagged with the kind and version."""
        return to_tagged_json(self._kind, self._version, self.to_dict())

    @classmethod
    def from_json(cls, text: str) -> Any:
        """The inverse of ``to_json``; ValueError for another kind or version."""
        return cls.from_dict(from_tagged_json(text, cls._kind, cls._version))
