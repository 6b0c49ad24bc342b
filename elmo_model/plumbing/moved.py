"""Module paths that moved keep working: ``import elmo_model.registry`` and ``python -m probing.wsd``.

The packages were laid out by concern (``elmo_model.models.registry``, ``probing.senses.wsd``).
Their earlier paths are public: users' scripts import them, tutorials and the README run
``python -m elmo_model.train``, reports print ``python -m probing.report`` commands. Each package
lists its moved modules (old name -> new module) and calls :func:`install`; a finder on
``sys.meta_path`` then answers for the old names only:

- ``import OLD`` gives the very module object of ``NEW`` (one module, one set of globals, so
  ``isinstance`` checks and monkeypatching agree), registered under both names;
- ``python -m OLD`` runs ``NEW``'s code as ``__main__`` (runpy asks the loader for ``get_code``).

Nothing else is aliased; a name not in a table is looked up as usual.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys


class _AliasLoader(importlib.abc.Loader):
    def __init__(self, target: str):
        self.target = target

    def create_module(self, spec):
        return importlib.import_module(self.target)

    def exec_module(self, module) -> None:
        pass  # the target module ran when it was imported

    def get_code(self, fullname: str):
        """The target's code, for ``python -m OLD`` (runpy runs it as ``__main__``)."""
        spec = importlib.util.find_spec(self.target)
        return spec.loader.get_code(self.target)

    def is_package(self, fullname: str) -> bool:
        return False


class _AliasSpec(importlib.machinery.ModuleSpec):
    """An old name's spec whose package is the new module's, so that ``python -m OLD`` runs the
    target's relative imports from where the target lives (runpy sets ``__package__`` from it)."""

    def __init__(self, name: str, target: str, origin: str | None):
        super().__init__(name, _AliasLoader(target), origin=origin)
        self.target = target

    @property
    def parent(self) -> str:
        return self.target.rpartition(".")[0]


class _MovedModules(importlib.abc.MetaPathFinder):
    def __init__(self):
        self.targets: dict[str, str] = {}

    def find_spec(self, fullname, path=None, target=None):
        new = self.targets.get(fullname)
        if new is None:
            return None
        origin = importlib.util.find_spec(new).origin
        return _AliasSpec(fullname, new, origin)


_FINDER = _MovedModules()


def install(package: str, moved: dict[str, str]) -> None:
    """Answer ``package.OLD`` with ``package.NEW`` for every ``OLD: NEW`` in ``moved``."""
    _FINDER.targets.update({f"{package}.{old}": f"{package}.{new}" for old, new in moved.items()})
    if _FINDER not in sys.meta_path:
        sys.meta_path.append(_FINDER)
