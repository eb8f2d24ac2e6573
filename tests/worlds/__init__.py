"""Shared test worlds: what several test modules build on, imported from here (not
from one another)."""
