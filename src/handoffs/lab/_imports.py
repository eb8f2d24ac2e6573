"""Import roots for experiment files: a TOML file inside a package can name that package.

An experiment declared in TOML names its Python parts as ``module:attribute``. When the
TOML file sits inside a package (a directory with ``__init__.py``, such as a project's
``examples/``), those modules are importable only from the directory *above* the
topmost package, which is not on ``sys.path`` when the ``handoffs`` command runs from an
installed script. :func:`ensure_importable` finds that directory and puts it on
``sys.path`` (once, at the front), so ``examples/scout.toml`` can say
``examples.scout:scout_v2_experiment`` and work from any working directory. A TOML file
outside any package changes nothing.

The path stays on ``sys.path`` for the rest of the process, so that worker processes
started with ``spawn`` (which inherit the parent's ``sys.path``) can unpickle the same
modules.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["ensure_importable", "import_root"]


def import_root(path: Path | str) -> Path | None:
    """The directory from which the package holding ``path`` imports, or ``None``.

    Walks up from the file's directory while each directory holds ``__init__.py`` and
    returns the first directory above the topmost package; ``None`` when the file's
    own directory is not a package.
    """
    directory = Path(path).resolve().parent
    if not (directory / "__init__.py").is_file():
        return None
    while (directory.parent / "__init__.py").is_file() and directory.parent != directory:
        directory = directory.parent
    return directory.parent


def ensure_importable(path: Path | str) -> Path | None:
    """Put :func:`import_root` of ``path`` at the front of ``sys.path`` unless it is
    already there; return it (``None`` when ``path`` is not inside a package).
    """
    root = import_root(path)
    if root is None:
        return None
    text = str(root)
    if text not in sys.path:
        sys.path.insert(0, text)
    return root
