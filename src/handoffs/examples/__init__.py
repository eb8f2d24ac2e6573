"""Shipped examples: the essay's payment case, written on top of the library.

Nothing in :mod:`handoffs.contracts`, :mod:`handoffs.receivers` or :mod:`handoffs.lab`
imports this package; a program that wants the essay's contract names it:

- :mod:`handoffs.examples.payment`: the ``payment-release`` 1.0.0 contract, its
  synthetic cases, the four encodings the essay compares and its governance stamp;
- :mod:`handoffs.examples.payment_lab`: the essay's release experiment, which
  ``handoffs lab run`` runs when given no experiment file.
"""

__all__: list[str] = []
