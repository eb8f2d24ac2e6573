"""Sphinx configuration: Furo, the Markdown pages through MyST, the API reference
through autodoc, the command line through sphinx-click.

Built in CI with ``sphinx-build -n -W --keep-going -b html docs <out>``: a
cross-reference that does not resolve fails the build.
"""

from __future__ import annotations

import importlib
import logging as std_logging
import re
from pathlib import Path
from typing import Any, TypeVar

from sphinx.ext.napoleon.docstring import GoogleDocstring
from sphinx.util import logging

import handoffs

logger = logging.getLogger(__name__)

project = "handoffs"
author = "handoffs developers"
copyright = "handoffs developers"
release = handoffs.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx_click",
]

# The pages are Markdown (MyST); README-style fences with a title (```python
# title="deploy.py") keep working, and links to a heading (page.md#a-heading) resolve.
source_suffix = {".md": "markdown"}
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3
exclude_patterns = ["_build"]
root_doc = "index"

html_theme = "furo"
html_title = "handoffs"

# autodoc: attrs writes each class's __init__ at run time; autodoc reads its signature
# from the class, keyword-only arguments and defaults included.
autodoc_default_options = {
    "members": True,
    "member-order": "bysource",
    "show-inheritance": True,
    # Every name in a namespace's __all__ is listed, constants without a docstring too,
    # and every attrs field (a target for :attr: references; the class's Attributes:
    # section describes it).
    "undoc-members": True,
}
autodoc_class_signature = "mixed"
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
# Defaults as values: attrs' generated source would read ``attr_dict['clock'].default``.
autodoc_preserve_defaults = False
autodoc_inherit_docstrings = True
# Docstrings are Google style (Args:, Raises:, Attributes:). Attributes: becomes a
# field list, so that it does not describe an attrs field a second time beside autodoc.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_ivar = True
napoleon_use_rtype = False

# The machine that builds the docs has no network, so there is no intersphinx: names
# from other libraries (the standard library, attrs, cryptography, the frameworks) are
# listed here, and only those. A handoffs name that does not resolve fails the build.
nitpicky = True
_ELSEWHERE = (
    # the standard library
    "collections", "concurrent", "datetime", "enum", "fractions", "os", "pathlib",
    "typing", "typing_extensions", "asyncio", "json", "contextlib", "types", "difflib",
    # the libraries handoffs builds on, and the frameworks its adapters gate
    "attrs", "attr", "cattrs", "cryptography", "jsonschema", "click", "hypothesis",
    "distributed", "psycopg", "psycopg_pool", "starlette", "httpx", "opentelemetry",
    "agents", "langgraph", "langchain_core", "pydantic_ai", "pydantic", "a2a", "a2a_pb2",
    "mcp", "mcp_types", "google", "agent_framework",
)
nitpick_ignore_regex = [
    (r"py:.*", rf"(?:{'|'.join(_ELSEWHERE)})(?:\..+)?"),
    # annotations written as strings under TYPE_CHECKING, and a protobuf enum's repr
    (r"py:class", r"Starlette|st\.SearchStrategy|timedelta|<google\.protobuf\..*>"),
    # Pydantic AI's names in a capability hook's signature, shown short
    (r"py:class", r"RunContext|WrapRunHandler|AgentRunResult"),
]


def _type_variable(app: Any, env: Any, node: Any, contnode: Any) -> Any:
    """Show a type variable of handoffs (``A`` in ``Policy[A]``) as its name: it has
    no page of its own. Any other reference that does not resolve stays an error."""
    if node.get("refdomain") != "py":
        return None
    module, _, name = str(node.get("reftarget", "")).rpartition(".")
    if not module.startswith("handoffs"):
        return None
    try:
        value = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None
    return contnode if isinstance(value, TypeVar) else None


def _public_bases(app: Any, name: str, obj: Any, options: Any, bases: list[type]) -> None:
    """Show a class's public ancestors in place of a private helper base (``_Junction``),
    which is not part of the API and has no page."""
    def public(base: type) -> list[type]:
        if not base.__name__.startswith("_"):
            return [base]
        return [b for parent in base.__bases__ for b in public(parent)
                if b is not object]
    bases[:] = [b for base in list(bases) for b in public(base)] or [object]


_SHARED_FIELD = re.compile(r"^(?P<indent>\s+)(?P<names>\w+(?:\s*/\s*\w+)+):(?P<rest>.*)$")


def _shared_fields(*args: Any) -> None:
    """``a / b / c: text`` in an Args: or Attributes: section is one description of
    three fields: give each field its own entry with that description (napoleon would
    read ``a / b /`` as a type). The handler's arguments end with the lines."""
    lines: list[str] = args[-1]
    out: list[str] = []
    i = 0
    while i < len(lines):
        match = _SHARED_FIELD.match(lines[i])
        if not match:
            out.append(lines[i])
            i += 1
            continue
        indent = match["indent"]
        more = []
        i += 1
        while i < len(lines) and lines[i].strip() and (
                len(lines[i]) - len(lines[i].lstrip()) > len(indent)):
            more.append(lines[i])
            i += 1
        for field in re.split(r"\s*/\s*", match["names"]):
            out += [f"{indent}{field}:{match['rest']}", *more]
    lines[:] = out


def _attribute_docstring(self: GoogleDocstring) -> list[str]:
    """A property's or constant's docstring as written: napoleon would read the text
    before a first colon (``Stable name of the contract: ...``) as a type, and the
    types here come from the annotations."""
    return self.__class__(self._dedent(self._consume_to_end()), self._config).lines()


GoogleDocstring._parse_attribute_docstring = _attribute_docstring  # type: ignore[method-assign]


def _every_public_name(app: Any, env: Any) -> None:
    """Each page of ``reference/api/`` documents every name in its namespace's
    ``__all__`` (autodoc leaves out a constant that a namespace imports: the page then
    needs an ``autodata`` line for it)."""
    documented = env.get_domain("py").objects
    for page in sorted((Path(app.srcdir) / "reference" / "api").glob("*.md")):
        module = importlib.import_module(page.stem)
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name)
            if page.stem != "handoffs.errors" and _is_error(value):
                continue  # documented once, on the page of handoffs.errors
            canonical = f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', '')}"
            if f"{page.stem}.{name}" not in documented and canonical not in documented:
                logger.warning("%s.%s is public but not documented", page.stem, name,
                               location=str(page))


class _NotEmptyGlob(std_logging.Filter):
    """Each sidebar section names its pages in reading order and then globs its folder
    for the rest: a glob that finds nothing more is the usual case, not a mistake (Sphinx
    gives this warning no type, so ``suppress_warnings`` cannot name it)."""

    def filter(self, record: std_logging.LogRecord) -> bool:
        return "didn't match any documents" not in record.getMessage()


_REPR = re.compile(r"<(?:function|class|built-in function) '?([\w.]+?)'?(?: at 0x[0-9a-f]+)?>"
                   r"|<[^<>]* at 0x[0-9a-f]+>|<[^<>]*>")


def _readable_defaults(*args: Any) -> Any:
    """A default whose repr is ``<function utc_now>`` shows as ``utc_now`` (and any other
    ``<...>`` repr as ``...``), so that Sphinx can still read the signature as Python.
    The handler's arguments end with the signature and the return annotation."""
    signature, return_annotation = args[-2:]
    if signature is None:
        return None
    readable = _REPR.sub(lambda m: m.group(1) or "...", signature)
    return readable, return_annotation


_DOCUMENTING: list[str] = [""]


def _module_being_documented(app: Any, what: str, name: str, *args: Any) -> None:
    """Note which module an ``automodule`` is documenting (its docstring comes first)."""
    if what == "module":
        _DOCUMENTING[0] = name


def _is_error(obj: Any) -> bool:
    errors = importlib.import_module("handoffs.errors")
    return any(getattr(errors, n) is obj for n in errors.__all__)


def _error_reference(app: Any, env: Any, node: Any, contnode: Any) -> Any:
    """A reference to an error by a face's name or its short name (``ProofError`` in a
    docstring of :mod:`handoffs.contracts`) goes to its one entry in
    :mod:`handoffs.errors`."""
    if node.get("refdomain") != "py":
        return None
    name = str(node.get("reftarget", "")).rpartition(".")[2]
    errors = importlib.import_module("handoffs.errors")
    if name not in errors.__all__:
        return None
    return env.get_domain("py").resolve_xref(
        env, node["refdoc"], app.builder, node["reftype"], f"handoffs.errors.{name}",
        node, contnode)


def _errors_once(app: Any, what: str, name: str, obj: Any, *rest: Any) -> Any:
    """Every error is documented once, on the page of :mod:`handoffs.errors`: a face that
    re-exports one (``handoffs.contracts.ProofError``) lists it without a second entry
    (two entries would make each ``ProofError`` reference ambiguous)."""
    if what != "module" or _DOCUMENTING[0] == "handoffs.errors":
        return None
    return True if _is_error(obj) else None


def setup(app: Any) -> None:
    """Register the handlers above."""
    app.connect("autodoc-process-docstring", _module_being_documented)
    app.connect("autodoc-skip-member", _errors_once)
    app.connect("missing-reference", _error_reference)
    app.connect("autodoc-process-signature", _readable_defaults)
    std_logging.getLogger("sphinx.sphinx.directives.other").addFilter(_NotEmptyGlob())
    app.connect("env-check-consistency", _every_public_name)
    app.connect("autodoc-process-docstring", _shared_fields, priority=400)
    app.connect("missing-reference", _type_variable)
    app.connect("autodoc-process-bases", _public_bases)
