"""Shared internal (not public): z3 for every part that asks it, in one place.

:func:`z3_module` imports z3-solver (the ``lab`` extra) or names the extra that is
missing; :func:`fresh_context` runs z3 work on a main context of its own and
:func:`main_context` on the process's own, one such run at a time per process. The
policy analysis (``contracts._analysis``) and the lab's row proofs (``lab._proofs``, in
their worker process) both use them.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from typing import Any

from handoffs._errors import MissingExtra

__all__ = ["fresh_context", "main_context", "z3_module"]


def z3_module() -> Any:
    """The ``z3`` module.

    Raises:
        MissingExtra: z3-solver is not installed (``pip install 'handoffs[lab]'``).
    """
    try:
        import z3  # type: ignore[import-untyped]
    except ImportError as exc:  # pragma: no cover - z3-solver is in the lab extra
        raise MissingExtra("policy analysis", extra="lab", module="z3") from exc
    return z3


_FRESH: list[threading.RLock] = [threading.RLock()]  # one a process: a child's is its own
os.register_at_fork(after_in_child=lambda: _FRESH.__setitem__(0, threading.RLock()))


@contextlib.contextmanager
def fresh_context() -> Iterator[None]:
    """Run the enclosed z3 work on a main context of its own, one such run at a time
    per process (the previous main context is back afterwards).

    Which model z3 answers for a satisfiable query depends on what was asked before on
    the same context (the order its terms were made in), so the states an analysis
    finds, and the cases and figures built on them, would depend on what else the
    process did first. Started fresh, they are the same in any process.

    Raises:
        MissingExtra: z3-solver is not installed.
    """
    z3 = z3_module()
    with _FRESH[0]:
        saved = z3.z3._main_ctx
        z3.z3._main_ctx = None
        try:
            yield
        finally:
            z3.z3._main_ctx = saved


@contextlib.contextmanager
def main_context() -> Iterator[None]:
    """Run the enclosed z3 work on the process's main context, not at the same time as
    a :func:`fresh_context` run (which swaps the main context: terms made meanwhile
    would belong to another context than the work's own).
    """
    with _FRESH[0]:
        yield
