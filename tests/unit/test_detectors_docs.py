"""The examples in the detectors' docstrings hold, and the package needs no Spark."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
import subprocess
import sys

import pytest

import detectors

MODULES = sorted(m.name for m in pkgutil.iter_modules(detectors.__path__, "detectors."))


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_hold(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0


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
