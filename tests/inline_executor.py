"""A synchronous ``concurrent.futures.Executor`` for the runner tests: each chunk has run
when ``submit`` returns, so chunks finish in order (any executor must do for the lab).
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable
from typing import Any


class Inline(cf.Executor):
    """Runs ``fn`` in ``submit``; the future carries its result or its failure."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> cf.Future[Any]:
        future: cf.Future[Any] = cf.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # a future carries any failure
            future.set_exception(exc)
        return future
