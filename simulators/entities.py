"""The entity table: ids, and which class each entity belongs to (contiguous blocks by share)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simulators.encoding import json_bytes
from simulators.settings import EntityClass


@dataclass(frozen=True)
class EntityTable:
    ids: list[str]
    classes: list[EntityClass]
    bounds: np.ndarray  # class c owns entities bounds[c] <= i < bounds[c+1]
    class_of: np.ndarray  # int16 per entity
    keys: np.ndarray  # object array: the id as bytes (the Kafka key)
    json_ids: np.ndarray  # object array: the id as a JSON string literal, quotes included

    @classmethod
    def build(
        cls, ids: Sequence[str], classes: Sequence[EntityClass], counts: Sequence[int]
    ) -> EntityTable:
        if len(ids) != sum(counts):
            raise ValueError(f"{len(ids)} entity ids for {sum(counts)} entities")
        bounds = np.r_[0, np.cumsum(counts)].astype(np.int64)
        class_of = np.repeat(np.arange(len(counts), dtype=np.int16), counts)
        keys = np.array([i.encode() for i in ids], dtype=object)
        json_ids = np.array([json_bytes(i) for i in ids], dtype=object)
        return cls(list(ids), list(classes), bounds, class_of, keys, json_ids)

    def __len__(self) -> int:
        return len(self.ids)

    def per_entity(self, values: Sequence[float], dtype: str = "f8") -> np.ndarray:
        """Spread one value per class over the class's entities."""
        return np.asarray(values, dtype=dtype)[self.class_of]

    def class_range(self, c: int) -> range:
        return range(int(self.bounds[c]), int(self.bounds[c + 1]))
