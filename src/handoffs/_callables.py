"""Shared internal (not public): the identity of a piece of user code, for fingerprints
and for errors that name it.

A callable's module, qualified name and a digest of its source. Used by the contracts
(the policy fingerprint of an opaque predicate) and the receivers (the fingerprint of a
code receiver, which the lab's run log and cache key on); the lab names the user code
that raised (:class:`~handoffs.errors.UserCodeError`) by :func:`qualified_name`.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import weakref
from typing import Any

__all__ = ["callable_digest", "qualified_name"]


def callable_digest(fn: Any) -> dict[str, Any]:
    """A callable's identity for a fingerprint: ``{"callable": "module:qualname",
    "source": "sha256:<hex>" or None}`` (``None`` when its source cannot be read,
    a builtin or code typed at a prompt).
    """
    module = getattr(fn, "__module__", None) or "?"
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    return {"callable": f"{module}:{name}", "source": _source_digest(fn)}


_SOURCE_DIGESTS: weakref.WeakKeyDictionary[Any, str | None] = weakref.WeakKeyDictionary()
"""Source digests by callable: ``inspect.getsource`` parses a class's whole module, and
a run asks for the same callables' digests when it starts and when it reports. A
function or class reloaded from changed source is a new object, with a new entry."""


def _source_digest(fn: Any) -> str | None:
    try:
        return _SOURCE_DIGESTS[fn]
    except (KeyError, TypeError):  # not seen yet, or neither hashable nor weakly held
        pass
    try:
        source = inspect.getsource(fn)
    except (OSError, TypeError):
        found = None
    else:
        found = "sha256:" + hashlib.sha256(source.encode("utf-8")).hexdigest()
    with contextlib.suppress(TypeError):
        _SOURCE_DIGESTS[fn] = found
    return found


def qualified_name(obj: Any) -> str:
    """``module.qualname`` of a function, class or bound method; the class's for an
    instance (a callable object, an encoder).
    """
    target = obj
    func = getattr(obj, "__func__", None)
    if func is not None:
        target = func
    name = getattr(target, "__qualname__", None)
    if name is None:
        target = type(obj)
        name = target.__qualname__
    module = getattr(target, "__module__", None)
    return f"{module}.{name}" if module else str(name)
