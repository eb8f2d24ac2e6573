"""Griffe extension: constructor signatures for attrs classes in the API reference.

attrs writes a class's ``__init__`` when the class is created, so static analysis sees
none and the reference would show ``Sender`` without its keyword arguments. For every
documented class that is an attrs class at run time, this extension adds the
``__init__`` that attrs generated (names, annotations as written, defaults, keyword-only
markers), which ``merge_init_into_class`` then shows as the class's signature.
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

import attrs
from griffe import Class, Extension, Function, Module, Parameter, ParameterKind, Parameters

_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: ParameterKind.positional_only,
    inspect.Parameter.POSITIONAL_OR_KEYWORD: ParameterKind.positional_or_keyword,
    inspect.Parameter.VAR_POSITIONAL: ParameterKind.var_positional,
    inspect.Parameter.KEYWORD_ONLY: ParameterKind.keyword_only,
    inspect.Parameter.VAR_KEYWORD: ParameterKind.var_keyword,
}


def _runtime(cls: Class) -> Any:
    try:
        module = importlib.import_module(cls.module.path)
    except ImportError:  # an optional extra that is not installed
        return None
    obj: Any = module
    for part in cls.path[len(cls.module.path) + 1:].split("."):
        obj = getattr(obj, part, None)
    return obj


def _annotation(value: Any) -> str | None:
    if value is inspect.Parameter.empty:
        return None
    return value if isinstance(value, str) else inspect.formatannotation(value)


def _defaults(runtime: type) -> dict[str, str]:
    """What each parameter defaults to, as it would be written (factories as calls)."""
    found = {}
    for field in attrs.fields(runtime):
        default = field.default
        if default is attrs.NOTHING:
            continue
        if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            factory = default.factory  # type: ignore[attr-defined]
            found[field.alias] = f"{getattr(factory, '__name__', 'factory')}()"
        else:
            found[field.alias] = _written(default)
    return found


def _written(value: Any) -> str:
    """A default as a reader would write it: a function by its name, a long value
    elided (the docstring says what it is).
    """
    if callable(value) and hasattr(value, "__name__"):
        return str(value.__name__)
    text = repr(value)
    return text if len(text) <= 40 and not text.startswith("<") else "..."


def _add_init(cls: Class) -> None:
    runtime = _runtime(cls)
    if not (isinstance(runtime, type) and attrs.has(runtime)):
        return
    signature = inspect.signature(runtime.__init__)
    defaults = _defaults(runtime)
    parameters = [
        Parameter(name, annotation=_annotation(param.annotation), kind=_KINDS[param.kind],
                  default=None if param.default is inspect.Parameter.empty
                  else defaults.get(name, _written(param.default)))
        for name, param in signature.parameters.items()
    ]
    cls.set_member("__init__", Function("__init__", parameters=Parameters(*parameters),
                                        returns="None", parent=cls))


def _walk(obj: Module | Class, seen: set[str]) -> None:
    if obj.path in seen:
        return
    seen.add(obj.path)
    if isinstance(obj, Class) and "__init__" not in obj.members:
        _add_init(obj)
    for member in list(obj.members.values()):
        if not member.is_alias and isinstance(member, Module | Class):
            _walk(member, seen)


class AttrsSignatures(Extension):
    """Adds the attrs-generated ``__init__`` to attrs classes."""

    def on_package(self, *, pkg: Module, **kwargs: Any) -> None:
        """Walk the loaded package once it is complete."""
        _walk(pkg, set())
