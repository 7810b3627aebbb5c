"""Device clocks: what each device's own clock reads when it stamps a reading.

    event_time = true_time + offset + drift * (true_time - start) + jumps so far
    during a reset: event_time = epoch + (true_time - reset moment), until it resyncs

Jumps and resets are rare, so they are applied in a short loop over just those readings.
"""

from __future__ import annotations

import numpy as np

from simulators.distributions import sample_per_group
from simulators.entities import EntityTable

NEVER = np.iinfo(np.int64).min


class DeviceClocks:
    def __init__(self, table: EntityTable, rng: np.random.Generator, start_ms: int) -> None:
        clocks = [c.clock for c in table.classes]
        self._rng = rng
        self._start_ms = start_ms
        self._class_of = table.class_of
        group = table.class_of
        self.offset_ms = sample_per_group(rng, [c.offset_s for c in clocks], group) * 1000
        self.drift = sample_per_group(rng, [c.drift_ppm for c in clocks], group) * 1e-6
        self._p_jump = table.per_entity([c.jumps.probability for c in clocks])
        self._p_reset = table.per_entity([c.resets.probability for c in clocks])
        self._jump_sizes = [c.jumps.size_s for c in clocks]
        self._reset_lengths = [c.resets.duration_s for c in clocks]
        self._epoch_ms = np.array(
            [int(c.resets.epoch.timestamp() * 1000) for c in clocks], dtype=np.int64
        )
        n = len(table)
        self.reset_at = np.full(n, NEVER, dtype=np.int64)
        self.reset_until = np.full(n, NEVER, dtype=np.int64)

    def stamp(self, ent: np.ndarray, true_ms: np.ndarray) -> np.ndarray:
        """event_time for readings sorted by true time (per entity, across calls too)."""
        n = ent.shape[0]
        jump = self._rng.random(n) < self._p_jump[ent]
        reset = self._rng.random(n) < self._p_reset[ent]
        offset = self.offset_ms[ent] + self.drift[ent] * (true_ms - self._start_ms)
        in_reset = (true_ms >= self.reset_at[ent]) & (true_ms < self.reset_until[ent])
        reset_from = np.where(in_reset, self.reset_at[ent], NEVER)
        rare = np.flatnonzero(jump | reset)
        if rare.size:
            self._apply_rare(ent, true_ms, rare, jump, reset, offset, reset_from)
        stamped = true_ms + np.rint(offset).astype(np.int64)
        resetting = reset_from != NEVER
        if resetting.any():
            epoch = self._epoch_ms[self._class_of[ent[resetting]]]
            stamped[resetting] = epoch + (true_ms[resetting] - reset_from[resetting])
        return stamped

    def _apply_rare(
        self,
        ent: np.ndarray,
        true_ms: np.ndarray,
        rare: np.ndarray,
        jump: np.ndarray,
        reset: np.ndarray,
        offset: np.ndarray,
        reset_from: np.ndarray,
    ) -> None:
        group = self._class_of[ent[rare]]
        sizes_ms = sample_per_group(self._rng, self._jump_sizes, group) * 1000
        lengths_ms = np.maximum(sample_per_group(self._rng, self._reset_lengths, group), 0) * 1000
        rows_of = {int(d): np.flatnonzero(ent == d) for d in np.unique(ent[rare])}
        for k, row in enumerate(rare.tolist()):
            device = int(ent[row])
            rows = rows_of[device]
            later = rows[rows >= row]
            if jump[row]:
                self.offset_ms[device] += sizes_ms[k]
                offset[later] += sizes_ms[k]
            if reset[row]:
                moment = int(true_ms[row])
                until = moment + int(lengths_ms[k])
                self.reset_at[device], self.reset_until[device] = moment, until
                reset_from[later] = np.where(true_ms[later] < until, moment, NEVER)
