"""The project's code for a cluster's executors: one zip of the packages a job imports there.

On `local[*]` the Python workers run on this machine and import the checkout. On a cluster
they run where the checkout is not, so a session whose master is not local adds the zip with
`addPyFile` (`ship_packages`) unless the stack already names one in `spark.submit.pyFiles`
(`streamsim pipeline package` writes it for images and `spark-submit`).
"""

from __future__ import annotations

import os
import zipfile
from pathlib import Path

from pyspark.sql import SparkSession

from core.config import StackConfig

#: What a job's Python code imports on the executors: the base, the jobs and the detectors.
EXECUTOR_PACKAGES = ("core", "detectors", "pipeline")
ZIP_NAME = "streamsim-packages.zip"
ROOT = Path(__file__).resolve().parents[1]


def write_packages_zip(out: Path) -> int:
    """Write `EXECUTOR_PACKAGES` into the zip `out` (replaced at once, never half written);
    the number of files in it."""
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(f".{out.name}.{os.getpid()}")
    files = 0
    with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as archive:
        for name in EXECUTOR_PACKAGES:
            for path in sorted((ROOT / name).rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    archive.write(path, path.relative_to(ROOT).as_posix())
                    files += 1
    partial.replace(out)
    return files


def ship_packages(session: SparkSession, stack: StackConfig) -> Path:
    """Zip the packages under the data dir and add them to `session` for its executors."""
    out = (stack.dirs.data / ZIP_NAME).resolve()
    write_packages_zip(out)
    session.sparkContext.addPyFile(str(out))
    return out
