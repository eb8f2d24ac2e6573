"""MkDocs hook: render the Sphinx-style roles used in docstrings as plain code.

Docstrings say ``:class:`Gate``` (so that they read well in ``help()`` and IDEs);
mkdocstrings renders the backticked part as code but keeps the role's prefix. This
hook drops the prefix from the rendered page.
"""

from __future__ import annotations

import re
from typing import Any

_ROLE = re.compile(r":(?:class|func|mod|meth|attr|data|exc|obj):(?=<code>)")
# Sphinx's ``~a.b.C`` shows the last component only.
_TILDE = re.compile(r"<code>~(?:[\w]+\.)*([\w]+)</code>")


def on_page_content(html: str, **_: Any) -> str:
    """Strip ``:role:`` prefixes before inline code, and ``~`` path prefixes."""
    return _TILDE.sub(r"<code>\1</code>", _ROLE.sub("", html))
