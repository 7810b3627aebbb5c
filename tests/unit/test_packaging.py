"""The executors' zip: the packages a job imports there, whole, and nothing else."""

from __future__ import annotations

import zipfile
from pathlib import Path

from typer.testing import CliRunner

from core.errors import StreamsimError
from pipeline.packaging import EXECUTOR_PACKAGES, ROOT, write_packages_zip
from streamsim.cli import app


def test_zip_holds_every_module_of_the_executor_packages(tmp_path: Path) -> None:
    out = tmp_path / "deep" / "packages.zip"
    files = write_packages_zip(out)
    names = set(zipfile.ZipFile(out).namelist())
    assert files == len(names)
    expected = {
        p.relative_to(ROOT).as_posix()
        for package in EXECUTOR_PACKAGES
        for p in (ROOT / package).rglob("*.py")
        if "__pycache__" not in p.parts
    }
    assert expected <= names
    assert "detectors/__init__.py" in names and "pipeline/jobs/shipping/job.py" in names
    assert {n.split("/")[0] for n in names} == set(EXECUTOR_PACKAGES)  # no api/, streamsim/
    assert not any("__pycache__" in n for n in names)
    assert list(out.parent.iterdir()) == [out]  # written aside, then moved in


def test_pipeline_run_refuses_drain_with_a_duration() -> None:
    result = CliRunner().invoke(app, ["pipeline", "run", "shipping", "--drain", "--duration", "5"])
    assert isinstance(result.exception, StreamsimError)
    assert "--drain and --duration" in str(result.exception)
