"""Names a package exports but imports on first use (PEP 562).

A package lists its lazy names with the module that defines each; ``from package
import name`` and ``package.name`` then import that module only when asked, so that
importing the package costs only what its eager names need. Type checkers and the API
reference see the names through ``if TYPE_CHECKING:`` imports beside the table.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["attach"]


def attach(
    package: str, lazy: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``, resolving ``lazy`` names
    (``{name: module}``) on first use and caching them in the package's namespace.
    """

    def __getattr__(name: str) -> Any:  # noqa: N807 - the module hook's name
        module = lazy.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        setattr(importlib.import_module(package), name, value)
        return value

    def __dir__() -> list[str]:  # noqa: N807 - the module hook's name
        return sorted({*vars(importlib.import_module(package)), *lazy})

    return __getattr__, __dir__
