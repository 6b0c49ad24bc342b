"""Keyword arguments that were renamed, still accepted under their older spelling.

    >>> @renamed_keywords(root="data_root")
    ... def read(name, data_root=None): ...
    >>> read("semcor", root="/data")          # the same call as read("semcor", data_root="/data")

The signature (and ``help()``) shows only the current names; a call that gives both spellings
of one argument is a ``TypeError``, as a repeated keyword is.
"""

from __future__ import annotations

import functools
from typing import Callable, TypeVar

F = TypeVar("F", bound=Callable)


def renamed_keywords(**old_to_new: str) -> Callable[[F], F]:
    """Decorate a function so that each keyword ``old`` in ``old_to_new`` is passed on as
    ``old_to_new[old]``."""

    def decorate(function: F) -> F:
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            for old, new in old_to_new.items():
                if old in kwargs:
                    if new in kwargs:
                        raise TypeError(f"{function.__name__}() got both {old}= and {new}= "
                                        f"(the same argument); give {new}= only")
                    kwargs[new] = kwargs.pop(old)
            return function(*args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorate


__all__ = ["renamed_keywords"]
