"""The public surface is each module's ``__all__``; names kept importable for code
written against earlier releases are resolved on first use and are not in it (see
docs/reference/compatibility.md)."""

from __future__ import annotations

import importlib

import pytest

import handoffs

PACKAGES = ["handoffs.contracts", "handoffs.receivers", "handoffs.lab"]
# Namespaces with a public face and no names kept for earlier releases.
FACES = [*PACKAGES, "handoffs.receivers.chains", "handoffs.lab.perturbations"]


@pytest.mark.parametrize("package", PACKAGES)
def test_names_that_are_not_public_stay_importable_and_out_of_all(package: str) -> None:
    module = importlib.import_module(package)
    hidden = module._NOT_PUBLIC
    assert hidden, "each package keeps its not-public names in _NOT_PUBLIC"
    assert not set(hidden) & set(module.__all__)
    for name, home in hidden.items():
        assert getattr(module, name) is getattr(importlib.import_module(home), name), name


def test_one_name_per_concept_across_the_packages() -> None:
    """No public name is exported by two of the packages, and the root error is public
    once, at the root."""
    seen: dict[str, str] = {}
    for package in FACES:
        for name in importlib.import_module(package).__all__:
            assert name not in seen, f"{name} is public in {seen.get(name)} and {package}"
            seen[name] = package
    assert "HandoffsError" in handoffs.__all__
    assert "HandoffsError" not in seen
