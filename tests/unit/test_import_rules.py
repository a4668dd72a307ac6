"""The package import rules of architecture.md, checked on the source."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OWNERS = {"ray": "actors", "kazoo": "zk_registry", "pyspark": "analysis"}


def _imports(path: Path) -> list[tuple[str, bool]]:
    """Top-level module names imported by a file, and whether at module level."""
    tree = ast.parse(path.read_text(), str(path))
    top_level = set(map(id, tree.body))
    out: list[tuple[str, bool]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((a.name.split(".")[0], id(node) in top_level) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            out.append((node.module.split(".")[0], id(node) in top_level))
    return out


def _files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", ["emulator", "zk_registry", "actors", "analysis"])
def test_heavy_dependencies_stay_in_their_package(package: str) -> None:
    bad = []
    for path in _files(package):
        for mod, _ in _imports(path):
            owner = OWNERS.get(mod)
            if owner is not None and owner != package:
                bad.append(f"{path.relative_to(ROOT)} imports {mod}")
    assert bad == []


def test_core_imports_no_outer_package_at_module_level() -> None:
    bad = []
    for path in _files("emulator"):
        for mod, top in _imports(path):
            # Only the CLI may reach outward, and only lazily inside a command.
            if mod in ("actors", "zk_registry", "analysis") and (top or path.name != "cli.py"):
                bad.append(f"{path.relative_to(ROOT)} imports {mod}")
    assert bad == []


def test_the_rule_checker_sees_imports() -> None:
    # Guard against a checker that silently finds nothing.
    mods = {m for m, _ in _imports(ROOT / "actors" / "broker.py")}
    assert "ray" in mods
