"""Worked examples of the decision-sufficiency essay, built on ``handoffs``.

Each module is runnable (``python examples/<name>.py``) and importable, so that the
matching ``examples/<name>.toml`` can name its contract, cases, encoders and receivers
as ``examples.<name>:<attribute>``.
"""
