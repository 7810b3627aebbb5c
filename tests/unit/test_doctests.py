"""Every docstring example of the project holds: the packages are walked, not listed by hand.

Every module of the project's packages is imported (those that use Spark or Kafka import
without a JVM or a broker) and its examples are run. Nothing is left out silently: the only
modules not imported are the scripts below, which run when imported, and they must have no
examples.
"""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil
from pathlib import Path

import pytest

PACKAGES = (
    "core", "streamsim", "simulators", "scenarios", "pipeline", "detectors", "runs", "live", "api",
    "ui",
)  # fmt: skip
#: Scripts, not libraries: importing one runs it. Their source must hold no example.
SCRIPTS = {
    "streamsim.__main__": "runs the CLI",
    "ui.app": "the Streamlit page: importing it renders the panel",
}


def walk() -> list[str]:
    names: list[str] = []

    def broken(name: str) -> None:
        raise ImportError(f"{name} does not import, so its examples cannot run")

    for package in PACKAGES:
        module = importlib.import_module(package)
        names.append(package)
        names += [m.name for m in pkgutil.walk_packages(module.__path__, f"{package}.", broken)]
    return sorted(names)


MODULES = walk()


@pytest.mark.parametrize("name", [m for m in MODULES if m not in SCRIPTS])
def test_docstring_examples_hold(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0, f"{name}: {result.failed} of {result.attempted} examples failed"


def test_the_walk_finds_the_packages_and_their_examples() -> None:
    assert len(MODULES) > 100
    for package in PACKAGES:
        assert any(m.startswith(f"{package}.") for m in MODULES), package
    examples = sum(
        len(test.examples)
        for name in MODULES
        if name not in SCRIPTS
        for test in doctest.DocTestFinder().find(importlib.import_module(name))
    )
    assert examples > 100  # the walk reaches the modules that have them


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_scripts_not_imported_have_no_examples(name: str) -> None:
    spec = importlib.util.find_spec(name)
    assert spec is not None and spec.origin is not None, f"{name} is gone: drop it from SCRIPTS"
    assert ">>>" not in Path(spec.origin).read_text(), f"{name} has examples no test runs"
