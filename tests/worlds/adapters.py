"""The adapter modules the package ships, which the adapter tests each check one by one.
Test modules import it from here rather than from one another.
"""

from __future__ import annotations

import pkgutil

import handoffs.adapters

__all__ = ["adapter_modules"]


def adapter_modules() -> set[str]:
    """The public adapter modules, dashed (``openai-agents``, ``a2a``, ``mcp``, ...)."""
    return {info.name.replace("_", "-") for info in pkgutil.iter_modules(
        handoffs.adapters.__path__) if not info.name.startswith("_")}
