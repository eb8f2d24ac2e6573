"""The adapter tests' fixtures (defined in tests/adapter_fixtures.py)."""

from adapter_fixtures import make_receiver, receiver, replayer, signer, world  # noqa: F401
