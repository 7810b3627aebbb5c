"""The import direction of the layout: base <- domain <- shell, and no two packages in a cycle.
`detectors/` stands alone but for the contracts (`core.contracts`, standard library only)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PACKAGES = (
    "core", "detectors", "simulators", "scenarios", "pipeline", "runs", "live", "api", "ui",
    "streamsim",
)  # fmt: skip


def imports_of(package: str, modules: bool = False) -> dict[str, set[str]]:
    """Each other project package `package` imports (each module imported, with `modules`),
    with the modules that do."""
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
                    key = name if modules else top
                    found.setdefault(key, set()).add(str(path.relative_to(REPO)))
    return found


GRAPH = {package: imports_of(package) for package in PACKAGES}


def test_the_base_imports_no_other_package() -> None:
    assert GRAPH["core"] == {}


def test_detectors_import_only_the_contracts() -> None:
    """The alert row's columns and Spark DDL derive from `core.contracts.alerts`; nothing else
    of the project reaches the rules."""
    imported = imports_of("detectors", modules=True)
    assert set(GRAPH["detectors"]) <= {"core"}
    assert all(m == "core.contracts" or m.startswith("core.contracts.") for m in imported), imported


def test_the_contracts_import_only_the_standard_library() -> None:
    code = (
        "import sys; before = set(sys.modules); import core.contracts; "
        "new = {m.split('.')[0] for m in set(sys.modules) - before}; "
        "assert new <= {'core'} | set(sys.stdlib_module_names), new"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_running_things_imports_no_http_nor_ui() -> None:
    """`runs/` supervises child processes for `api/` and `streamsim/`; it imports neither."""
    assert not {"api", "ui", "streamsim"} & set(GRAPH["runs"]), GRAPH["runs"]


def test_the_live_views_import_only_the_base() -> None:
    """`live/` (the panel's topic views) is read by `api/panel/`; it reads only `core`."""
    assert set(GRAPH["live"]) <= {"core"}, GRAPH["live"]


def test_the_panel_package_holds_only_http_code() -> None:
    """`api/panel/` is routes, response models and dependencies; Kafka stays outside it."""
    kafka = [
        str(path.relative_to(REPO))
        for path in (REPO / "api" / "panel").rglob("*.py")
        if "confluent_kafka" in path.read_text(encoding="utf-8")
    ]
    assert kafka == []


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
