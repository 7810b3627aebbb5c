"""The import direction of the layout: base <- domain <- shell, and no two packages in a cycle."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ("core", "detectors", "simulators", "scenarios", "pipeline", "api", "ui", "streamsim")


def imports_of(package: str) -> dict[str, set[str]]:
    """Each other project package `package` imports, with the modules that do."""
    found: dict[str, set[str]] = {}
    for path in sorted((REPO / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in PACKAGES and top != package:
                    found.setdefault(top, set()).add(str(path.relative_to(REPO)))
    return found


GRAPH = {package: imports_of(package) for package in PACKAGES}


@pytest.mark.parametrize("package", ["core", "detectors"])
def test_base_and_detectors_import_no_other_package(package: str) -> None:
    assert GRAPH[package] == {}


@pytest.mark.parametrize("package", [p for p in PACKAGES if p != "streamsim"])
def test_only_the_shell_imports_the_shell(package: str) -> None:
    assert "streamsim" not in GRAPH[package], GRAPH[package].get("streamsim")


def test_no_two_packages_import_each_other() -> None:
    cycles = []
    for package, targets in GRAPH.items():
        seen, stack = set(), [(t, [package, t]) for t in targets]
        while stack:
            node, path = stack.pop()
            if node == package:
                cycles.append(" -> ".join(path))
                continue
            if node in seen:
                continue
            seen.add(node)
            stack.extend((t, [*path, t]) for t in GRAPH[node])
    assert cycles == []


def test_the_graph_sees_imports() -> None:
    """The walk itself works: the shell is known to import the domain packages."""
    assert {"core", "pipeline", "simulators"} <= set(GRAPH["streamsim"])
