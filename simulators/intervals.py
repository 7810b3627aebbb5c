"""Per-entity episodes in time (outages, faults): an alternating renewal process, vectorised.

Each entity is "up" for an exponential gap (mean 1/rate), then inside an interval whose length is
drawn from a distribution (its group's, or with `kind_durations` its kind's), and so on.
Readings are classified against the entity's current
interval; the schedule only moves forward, so memory is O(entities).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from simulators.distributions import sample_per_group
from simulators.records import NO_ID

_WARMUP_CYCLES = 10  # start this many mean cycles early, so t=start is (nearly) stationary


class IdCounter:
    """Hands out consecutive ids; one per kind of episode keeps ids unique within a run."""

    def __init__(self) -> None:
        self.next = 0

    def take(self, k: int) -> np.ndarray:
        ids = np.arange(self.next, self.next + k, dtype=np.int64)
        self.next += k
        return ids


@dataclass
class Episodes:
    """Per reading: the interval it falls in (or NO_ID), with that interval's bounds and kind."""

    id: np.ndarray
    start_ms: np.ndarray
    end_ms: np.ndarray
    kind: np.ndarray


class IntervalSchedule:
    def __init__(
        self,
        rate_per_hour: np.ndarray,  # per entity
        group: np.ndarray,  # per entity: index into `durations`
        durations: Sequence[object],  # Distribution per group, seconds
        rng: np.random.Generator,
        start_ms: int,
        kinds: np.ndarray | None = None,  # probabilities of each kind of episode
        kind_durations: Sequence[object] | None = None,  # per kind, overriding `durations`
    ) -> None:
        n = rate_per_hour.shape[0]
        self._rng = rng
        self._group = group
        self._durations = list(durations)
        self._kinds = kinds
        self._kind_durations = (
            None if kinds is None or kind_durations is None else list(kind_durations)
        )
        self._ids = IdCounter()
        with np.errstate(divide="ignore"):
            self._mean_gap_ms = np.where(rate_per_hour > 0, 3.6e6 / rate_per_hour, np.inf)
        self.start = np.full(n, np.inf)
        self.end = np.full(n, np.inf)
        self.id = np.full(n, NO_ID, dtype=np.int64)
        self.kind = np.zeros(n, dtype=np.int16)
        active = np.flatnonzero(rate_per_hour > 0)
        if active.size:
            self._warm_up(active, start_ms)

    def _warm_up(self, active: np.ndarray, start_ms: int) -> None:
        mean_dur_ms = np.array([d.clipped_mean(0.0, np.inf) * 1000 for d in self._durations])  # type: ignore[attr-defined]
        if self._kind_durations is not None and self._kinds is not None:
            by_kind = [d.clipped_mean(0.0, np.inf) * 1000 for d in self._kind_durations]  # type: ignore[attr-defined]
            mean_dur_ms = np.full_like(mean_dur_ms, float(np.dot(self._kinds, by_kind)))
        cycle = self._mean_gap_ms[active] + mean_dur_ms[self._group[active]]
        self.end[active] = start_ms - _WARMUP_CYCLES * cycle
        due = active
        while due.size:
            self._advance(due)
            due = due[self.end[due] <= start_ms]

    def _advance(self, ents: np.ndarray) -> None:
        """Move each entity to its next interval."""
        k = ents.shape[0]
        gap = self._rng.exponential(1.0, k) * self._mean_gap_ms[ents]
        if self._kind_durations is not None and self._kinds is not None:
            # the kind first, then a length from that kind's own distribution
            kind = np.asarray(self._rng.choice(self._kinds.shape[0], size=k, p=self._kinds))
            length = sample_per_group(self._rng, self._kind_durations, kind)
            self.kind[ents] = kind
        else:
            length = sample_per_group(self._rng, self._durations, self._group[ents])
        self.start[ents] = np.floor(self.end[ents] + gap)
        self.end[ents] = np.floor(self.start[ents] + np.maximum(length, 0.0) * 1000)
        self.id[ents] = self._ids.take(k)
        if self._kinds is not None and self._kind_durations is None:
            self.kind[ents] = self._rng.choice(self._kinds.shape[0], size=k, p=self._kinds)

    def new_ids(self, k: int) -> np.ndarray:
        """k ids from this schedule's counter, for episodes made elsewhere (unique with its own)."""
        return self._ids.take(k)

    def classify(self, ent: np.ndarray, t_ms: np.ndarray) -> Episodes:
        """Which interval each reading falls in. Readings must not go back in time per entity
        across calls; within one call any order is fine."""
        n = ent.shape[0]
        out = Episodes(
            np.full(n, NO_ID, dtype=np.int64),
            np.zeros(n, dtype=np.int64),
            np.zeros(n, dtype=np.int64),
            np.zeros(n, dtype=np.int16),
        )
        todo = np.arange(n)
        while todo.size:
            e, t = ent[todo], t_ms[todo]
            past = t >= self.end[e]
            now = ~past
            inside = now & (t >= self.start[e])
            rows, owners = todo[inside], e[inside]
            out.id[rows] = self.id[owners]
            out.start_ms[rows] = self.start[owners]
            out.end_ms[rows] = self.end[owners]
            out.kind[rows] = self.kind[owners]
            if not past.any():
                break
            self._advance(np.unique(e[past]))
            todo = todo[past]
        return out
