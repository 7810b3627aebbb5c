"""The session's checkpoint file manager, as Spark itself builds it for a checkpoint folder."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pipeline.session import FILE_SYSTEM_CHECKPOINTS

pytestmark = pytest.mark.integration


def test_checkpoints_are_renamed_without_a_child_process(spark: Any, tmp_path: Path) -> None:
    """Spark builds the FileSystem-based manager from the session's conf (the FileContext one
    runs `readlink` per rename without libhadoop), and it writes a checkpoint file."""
    jvm = spark._jvm
    hadoop = spark._jsparkSession.sessionState().newHadoopConf()
    folder = jvm.org.apache.hadoop.fs.Path(str(tmp_path))
    managers = jvm.org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager
    manager = managers.create(folder, hadoop)
    assert manager.getClass().getName() == FILE_SYSTEM_CHECKPOINTS
    stream = manager.createAtomic(jvm.org.apache.hadoop.fs.Path(str(tmp_path / "0")), False)
    stream.write(b"v1")
    stream.close()
    assert (tmp_path / "0").read_bytes() == b"v1"
