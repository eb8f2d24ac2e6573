"""Shared test configuration: Hypothesis profiles.

``HYPOTHESIS_PROFILE=thorough`` for a long local or nightly run; CI uses ``ci``;
the default ``fast`` keeps the suite quick.
"""

import os

from hypothesis import HealthCheck, settings

settings.register_profile("fast", max_examples=40, deadline=None)
settings.register_profile(
    "ci", max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile("thorough", max_examples=1000, deadline=None)
_DEFAULT = "ci" if os.environ.get("CI") else "fast"
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", _DEFAULT))
