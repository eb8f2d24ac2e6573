"""Import roots for experiment files inside a package (``examples/*.toml``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from handoffs.lab._imports import ensure_importable, import_root

ROOT = Path(__file__).resolve().parents[2]


def test_a_file_outside_a_package_imports_the_modules_beside_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "plain.toml").write_text("", "utf-8")
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert import_root(tmp_path / "plain.toml") == tmp_path.resolve()
    assert ensure_importable(tmp_path / "plain.toml") == tmp_path.resolve()
    assert sys.path[0] == str(tmp_path.resolve())


def test_the_root_is_above_the_topmost_package(tmp_path: Path) -> None:
    inner = tmp_path / "outer" / "inner"
    inner.mkdir(parents=True)
    (tmp_path / "outer" / "__init__.py").write_text("", "utf-8")
    (inner / "__init__.py").write_text("", "utf-8")
    assert import_root(inner / "x.toml") == tmp_path.resolve()
    assert import_root(ROOT / "examples" / "scout.toml") == ROOT


def test_ensure_importable_prepends_once(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(tmp_path.resolve())])
    package = tmp_path / "demo_pkg_for_imports"
    package.mkdir()
    (package / "__init__.py").write_text("VALUE = 42\n", "utf-8")
    assert ensure_importable(package / "x.toml") == tmp_path.resolve()
    assert ensure_importable(package / "x.toml") == tmp_path.resolve()
    assert sys.path.count(str(tmp_path.resolve())) == 1
    assert sys.path[0] == str(tmp_path.resolve())
    monkeypatch.delitem(sys.modules, "demo_pkg_for_imports", raising=False)
    import demo_pkg_for_imports  # type: ignore[import-not-found]

    assert demo_pkg_for_imports.VALUE == 42
    monkeypatch.delitem(sys.modules, "demo_pkg_for_imports")
