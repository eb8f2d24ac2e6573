"""Shared test worlds: what several test modules build on, imported from here (not
from one another)."""

#: Population draws for the test worlds' generated-case experiments. Without a declared
#: population a run draws the library's default 1,000 states on top of its cases, which
#: cost 85 % of a 60-case credit run's CPU; 200 draws keep the population figures these
#: tests read, at a fifth of the work. Tests of the population figures themselves
#: (tests/unit/test_population.py, the credit merges' gate) keep the default.
TEST_DRAWS = 200
