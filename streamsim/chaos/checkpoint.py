"""What a Spark streaming checkpoint says about its batches: planned, committed, and the
source offsets a batch covers.

Spark writes `offsets/<N>` when it plans batch N (line 1 `v1`, line 2 the batch metadata, then
one JSON line per source: topic -> partition -> offset, exclusive) and `commits/<N>` once the
batch's sinks are done. A batch is running while its offsets file has no commit.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


def batch_ids(folder: Path) -> list[int]:
    """The batch ids with a file in `folder` (`offsets` or `commits`), ascending."""
    if not folder.is_dir():
        return []
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


@dataclass(frozen=True)
class BatchState:
    planned: int | None  # the latest batch with an offsets file
    committed: int | None  # the latest batch with a commit

    @property
    def running(self) -> int | None:
        """The batch planned but not committed yet, if any."""
        if self.planned is None or (self.committed is not None and self.planned <= self.committed):
            return None
        return self.planned

    @property
    def mid_batch(self) -> bool:
        """At least one batch completed and the next one is running: the moment to kill."""
        return self.committed is not None and self.running is not None


def batch_state(checkpoint: Path) -> BatchState:
    planned = batch_ids(checkpoint / "offsets")
    committed = batch_ids(checkpoint / "commits")
    return BatchState(planned[-1] if planned else None, committed[-1] if committed else None)


def source_offsets(checkpoint: Path, batch: int) -> dict[str, dict[int, int]]:
    """Topic -> partition -> end offset (exclusive) that batch `batch` reads up to."""
    lines = (checkpoint / "offsets" / str(batch)).read_text(encoding="utf-8").splitlines()
    found: dict[str, dict[int, int]] = {}
    for line in lines[2:]:
        if not line.strip().startswith("{"):
            continue
        for topic, partitions in json.loads(line).items():
            found[topic] = {int(p): int(o) for p, o in partitions.items()}
    return found


def covers(read: Mapping[str, Mapping[int, int]], topic: str, ends: Mapping[int, int]) -> bool:
    """Whether offsets `read` reach the end offsets `ends` of every non-empty partition."""
    got = read.get(topic, {})
    return all(got.get(p, 0) >= end for p, end in ends.items() if end > 0)
