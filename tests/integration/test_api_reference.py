"""The API reference (docs/reference/api/, Sphinx autodoc): one page per public
namespace, every public name on it, attrs classes with the constructor attrs wrote.

CI builds the whole site with ``sphinx-build -n -W``; these tests build one small page
each with the site's own ``docs/conf.py``.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import shutil
from pathlib import Path

import pytest

import handoffs

sphinx_build = pytest.importorskip("sphinx.cmd.build")

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
API = DOCS / "reference" / "api"
# Sphinx's own napoleon reads autodoc's options through the mapping interface Sphinx 9
# deprecates; that is Sphinx talking to itself, not this project's configuration.
pytestmark = pytest.mark.filterwarnings(
    "ignore:The mapping interface for autodoc options objects is deprecated")


def public_namespaces() -> list[str]:
    """Every module and package of handoffs without an underscore in its path; the
    command line has its own page (reference/cli.md)."""
    names = ["handoffs"]
    for module in pkgutil.walk_packages(handoffs.__path__, "handoffs."):
        parts = module.name.split(".")
        if not any(part.startswith("_") for part in parts) and parts[1] != "cli":
            names.append(module.name)
    return sorted(names)


def test_one_page_per_public_namespace() -> None:
    pages = {page.stem for page in API.glob("*.md")}
    namespaces = set(public_namespaces())
    assert {"handoffs.contracts", "handoffs.receivers", "handoffs.lab", "handoffs.testing",
            "handoffs.adapters.mcp", "handoffs.service"} <= namespaces
    assert sorted(namespaces - pages) == [], "add docs/reference/api/<namespace>.md"
    assert sorted(pages - namespaces) == [], "a page for a namespace that does not exist"
    for name in namespaces:
        text = (API / f"{name}.md").read_text(encoding="utf-8")
        assert f".. automodule:: {name}\n" in text, name


def build(tmp_path: Path, page: str, *, nitpicky: bool = True) -> tuple[int, str, str]:
    """Build ``page`` (reStructuredText inside a MyST page) as text with docs/conf.py,
    ``-W`` (and ``-n``: a page alone cannot resolve its links to the rest of the site):
    (exit status, the page as text, the warnings)."""
    src = tmp_path / "src"
    (src / "reference" / "api").mkdir(parents=True)
    shutil.copy(DOCS / "conf.py", src / "conf.py")
    (src / "index.md").write_text(f"# Page\n\n```{{eval-rst}}\n{page}\n```\n", encoding="utf-8")
    warnings = tmp_path / "warnings.txt"
    options = ["-W", "--keep-going", "-q", "-E", "-b", "text", "-w", str(warnings)]
    if not nitpicky:
        options += ["-D", "nitpicky=0"]
    else:
        options += ["-n"]
    status = sphinx_build.build_main([*options, str(src), str(tmp_path / "out")])
    out = tmp_path / "out" / "index.txt"
    text = out.read_text(encoding="utf-8") if out.exists() else ""
    return status, text, warnings.read_text(encoding="utf-8")


def test_an_attrs_class_shows_the_init_attrs_wrote(tmp_path: Path) -> None:
    status, text, warnings = build(tmp_path, """\
.. autoclass:: handoffs.contracts.Sender
   :no-members:

.. autoclass:: handoffs.contracts.GovernanceService
   :no-members:

.. autoclass:: handoffs.contracts.Interval
   :no-members:
""", nitpicky=False)
    assert status == 0, warnings
    flat = " ".join(text.split())
    # keyword-only arguments, annotations and defaults, as attrs wrote them
    assert ("class handoffs.contracts.Sender(*, contract: Contract[S, A], key: Signer, "
            "governance: GovernanceService, grants: GrantSource | None, "
            "clock: Callable[[], datetime] = utc_now)") in flat
    assert "valid_for: timedelta | None = None, may_decide: bool = False)" in flat
    assert "class handoffs.contracts.Interval(lo: float, hi: float)" in flat
    assert "attr_dict" not in flat


def test_a_public_name_left_off_its_page_fails_the_build(tmp_path: Path) -> None:
    # handoffs.adapters re-exports the constant Transport, which automodule leaves out:
    # its page lists it with autodata, and the build fails without that line.
    module = importlib.import_module("handoffs.adapters")
    assert "Transport" in module.__all__
    (tmp_path / "src" / "reference" / "api").mkdir(parents=True)
    (tmp_path / "src" / "reference" / "api" / "handoffs.adapters.md").write_text(
        "# `handoffs.adapters`\n\n```{eval-rst}\n.. automodule:: handoffs.adapters\n```\n",
        encoding="utf-8")
    status, _, warnings = build_existing(tmp_path)
    assert status != 0
    assert "handoffs.adapters.Transport is public but not documented" in warnings


def build_existing(tmp_path: Path) -> tuple[int, str, str]:
    """Build the pages already under ``tmp_path/src`` with docs/conf.py, ``-n -W``."""
    src = tmp_path / "src"
    shutil.copy(DOCS / "conf.py", src / "conf.py")
    (src / "index.md").write_text(
        "# Page\n\n```{toctree}\n:glob:\n\nreference/api/*\n```\n", encoding="utf-8")
    warnings = tmp_path / "warnings.txt"
    status = sphinx_build.build_main(["-n", "-W", "--keep-going", "-q", "-E", "-b", "text",
                                      "-w", str(warnings), str(src), str(tmp_path / "out")])
    return status, "", warnings.read_text(encoding="utf-8")


def test_a_dead_cross_reference_fails_the_build(tmp_path: Path) -> None:
    status, _, warnings = build(tmp_path, "See :class:`handoffs.contracts.NoSuchThing`.")
    assert status != 0
    assert "handoffs.contracts.NoSuchThing" in warnings


def test_shared_field_descriptions_are_split() -> None:
    spec = importlib.util.spec_from_file_location("docs_conf", DOCS / "conf.py")
    assert spec is not None
    assert spec.loader is not None
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    lines = ["Attributes:", "    agreement / mean_regret: measured under the control,",
             "        rounded.", "    other: kept."]
    conf._shared_fields(None, "class", "X", None, {}, lines)
    assert lines == ["Attributes:",
                     "    agreement: measured under the control,", "        rounded.",
                     "    mean_regret: measured under the control,", "        rounded.",
                     "    other: kept."]
