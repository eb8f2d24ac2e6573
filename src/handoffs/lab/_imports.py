"""Import roots for experiment files: a TOML file names the modules beside it.

An experiment declared in TOML names its Python parts as ``module:attribute``.
:func:`ensure_importable` puts the TOML file's import root at the front of
``sys.path`` (once), so those names resolve from any working directory and without
``PYTHONPATH``:

- a TOML file in a plain directory imports the modules beside it
  (``mymodule:MY_CONTRACT`` for ``mymodule.py`` next to the file);
- a TOML file inside a package (a directory with ``__init__.py``, such as a project's
  ``examples/``) imports from the directory *above* the topmost package, so
  ``examples/scout.toml`` says ``examples.scout:scout_v2_experiment``.

The path stays on ``sys.path`` for the rest of the process, so that worker processes
started with ``spawn`` (which inherit the parent's ``sys.path``) can unpickle the same
modules.
"""

from __future__ import annotations

import sys
from pathlib import Path

__all__ = ["ensure_importable", "import_root"]


def import_root(path: Path | str) -> Path:
    """The directory the modules a TOML file names import from.

    The file's own directory, unless it is a package: then walks up while each
    directory holds ``__init__.py`` and returns the first directory above the topmost
    package.
    """
    directory = Path(path).resolve().parent
    if not (directory / "__init__.py").is_file():
        return directory
    while (directory.parent / "__init__.py").is_file() and directory.parent != directory:
        directory = directory.parent
    return directory.parent


def ensure_importable(path: Path | str) -> Path:
    """Put :func:`import_root` of ``path`` at the front of ``sys.path`` unless it is
    already there; return it.
    """
    root = import_root(path)
    text = str(root)
    if text not in sys.path:
        sys.path.insert(0, text)
    return root
