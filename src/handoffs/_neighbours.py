"""Shared internal (not public): the values at and just across a policy threshold.

One statement of the rule for the three places that probe a boundary: the lab's
minimal-message search (``handoffs.lab._minimal``), the falsehood perturbation's value
pool (``handoffs.lab.perturbations._falsehood``) and the Hypothesis strategies of
:mod:`handoffs.testing`.
"""

from __future__ import annotations

import math

__all__ = ["neighbours"]


def neighbours(threshold: float, *, integer: bool) -> tuple[float, ...]:
    """The values around ``threshold``, in increasing order: for an integer field the
    integers on either side (``floor - 1, floor, ceil, ceil + 1``), else the threshold
    with the floats adjacent to it (:func:`math.nextafter` each way).
    """
    if integer:
        return (math.floor(threshold) - 1, math.floor(threshold), math.ceil(threshold),
                math.ceil(threshold) + 1)
    return (math.nextafter(threshold, -math.inf), threshold,
            math.nextafter(threshold, math.inf))
