"""The examples in the detectors' docstrings hold, and the package needs no Spark."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import subprocess
import sys

import pytest

import detectors

#: The rule groups whose modules are each a rule (`detectors.shipping` keeps its examples in
#: its package docstring).
GROUPS = ("cards", "series")


def modules_of(path: list[str], prefix: str) -> list[str]:
    return [
        m.name for m in pkgutil.iter_modules(path, prefix) if m.name[len(prefix) :] not in GROUPS
    ]


ALL = sorted(
    modules_of(detectors.__path__, "detectors.")
    + [
        name
        for group in GROUPS
        for name in modules_of(
            importlib.import_module(f"detectors.{group}").__path__, f"detectors.{group}."
        )
    ]
)
#: Plumbing without a rule, and without examples of its own (tests/unit/test_doctests.py still
#: imports them and runs whatever examples they gain).
NO_EXAMPLES = {"detectors.frames", "detectors.series.base", "detectors.snapshot"}
MODULES = [name for name in ALL if name not in NO_EXAMPLES]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
    assert result.attempted > 0, f"{name} has no example to run"


def test_the_modules_without_examples_exist() -> None:
    assert set(ALL) >= NO_EXAMPLES


def test_every_public_rule_has_an_example() -> None:
    missing = [
        name
        for name in detectors.__all__
        if (name.endswith("_alerts") or name.startswith("check_") or name.endswith("State"))
        and name != "SeriesState"  # the abstract base of the series states
        and ">>>" not in (getattr(detectors, name).__doc__ or "")
    ]
    assert missing == []


def test_importing_detectors_does_not_import_spark() -> None:
    code = "import sys, detectors; sys.exit(1 if 'pyspark' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
