"""The experiment's own code, called so that a failure names it.

Every call the lab makes into code the experiment supplies (an encoder, the case id,
state, evidence-reference, reference and case-JSON functions) goes through here or
through :func:`user_error`: an exception becomes a :class:`UserCodeError` naming the
role, the callable's qualified name, the case and the exception, never an
``internal`` error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from handoffs._callables import qualified_name
from handoffs._errors import UserCodeError
from handoffs.lab._experiment import Strategy

__all__ = ["case_id_of", "encoded", "evidence_refs_of", "user_error"]


def case_id_of(function: Callable[[Any], Any], evidence: Any) -> str:
    """The case id of ``evidence``, by the experiment's function."""
    try:
        return str(function(evidence))
    except Exception as exc:
        raise user_error("case id function", function, None, exc) from exc


def evidence_refs_of(function: Callable[[Any], Any], evidence: Any,
                     case_id: str) -> tuple[Any, ...]:
    """The evidence references of ``evidence``, by the experiment's function."""
    try:
        return tuple(function(evidence))
    except Exception as exc:
        raise user_error("evidence_refs function", function, case_id, exc) from exc


def encoded(strategy: Strategy, evidence: Any, case_id: str) -> dict[str, Any]:
    """The strategy's encoder on one case; an encoder that raises is named."""
    try:
        return strategy.encoder.encode(evidence)
    except Exception as exc:
        raise user_error(f"encoder of strategy {strategy.name!r}", strategy.encoder.encode,
                         case_id, exc) from exc


def user_error(role: str, function: Any, case_id: str | None, exc: Exception) -> Exception:
    """The error to raise for ``exc`` from the experiment's own ``function`` (one
    already naming its code passes as it is).
    """
    if isinstance(exc, UserCodeError):
        return exc
    return UserCodeError(role=role, callable_name=qualified_name(function), case_id=case_id,
                         error=exc)
