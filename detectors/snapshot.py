"""JSON snapshots of a stateful rule's state, for Spark's state store or any key-value store.

Every `*State` class can `snapshot()` itself into plain JSON-able data and `restore()` from it;
`to_json` / `load_json` wrap that as one string, so a `transformWithStateInPandas` processor
can keep a whole rule state in a single `ValueState` column (`state STRING`). Thresholds are
not part of a snapshot: they come from config each time the state is created.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


class Snapshottable:
    """Mixin: `to_json` / `load_json` on top of `snapshot` / `restore`."""

    __slots__ = ()

    def snapshot(self) -> dict[str, Any]:
        raise NotImplementedError

    def restore(self, data: Mapping[str, Any]) -> None:
        raise NotImplementedError

    def to_json(self) -> str:
        return json.dumps(self.snapshot(), separators=(",", ":"))

    def load_json(self, text: str) -> None:
        self.restore(json.loads(text))
