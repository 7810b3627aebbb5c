"""The sensor fleet: smart meters and environmental sensors reporting every few seconds.

Each sensor has a profile made once at set-up (site, baselines, battery, reporting interval and
phase). One SimPy cohort process per entity class steps all of its sensors at once: per tick it
finds the sensors due to report, possibly several times, and computes their readings as numpy
columns. Faults are episodes per sensor: a stuck sensor or a spike labels the readings it
touches; a silent device makes none while it lasts and labels the first reading after it (the
one that ends the gap), if the device had reported before it in the run (a silence already
under way at the start is, in the stream, just a device whose first reading comes late).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from faker import Faker

from core.contracts import SENSOR_READING
from core.contracts.events import SENSOR_STATUSES
from core.names import STREAM_SALT
from scenarios.sensors.config import SENSOR_FAULTS, SensorsDomain
from simulators.distributions import sample_per_group
from simulators.encoding import payload_fields
from simulators.entities import EntityTable
from simulators.intervals import Episodes, IntervalSchedule
from simulators.records import NO_ID, Readings
from simulators.scenario import Scenario
from simulators.seeds import rng_for

if TYPE_CHECKING:
    from scenarios.catalog import ScenarioConfig

DAY_MS = 86_400_000
MIN_INTERVAL_S = 0.05
STATUSES = SENSOR_STATUSES  # order matters: the encoder writes status by index
STUCK, SPIKE = SENSOR_FAULTS.index("stuck_sensor"), SENSOR_FAULTS.index("spike")
SILENT = SENSOR_FAULTS.index("silent_device")


def site_names(seed: int, count: int) -> list[str]:
    fake = Faker("en_US")
    fake.seed_instance(seed)
    return [fake.city() for _ in range(count)]


class SensorProfiles:
    """Per-sensor constants, one numpy array each."""

    def __init__(self, config: ScenarioConfig, table: EntityTable) -> None:
        d = config.domain
        assert isinstance(d, SensorsDomain)
        n = len(table)
        rng = rng_for(config.seed, STREAM_SALT["sensors"], "profiles")
        group = table.class_of
        self.site = rng.integers(0, d.sites, n).astype(np.int32)
        self.temperature = d.temperature_c.sample(rng, n)
        self.humidity = d.humidity_pct.sample(rng, n)
        self.battery = d.battery_v.sample(rng, n)
        self.phase = rng.uniform(0, 2 * np.pi, n)
        intervals = [d.interval_s_by_class.get(c.name, d.interval_s) for c in table.classes]
        self.interval_ms = (
            np.maximum(sample_per_group(rng, intervals, group), MIN_INTERVAL_S) * 1000
        )
        self.jitter_ms = np.minimum(d.jitter_s * 1000, 0.45 * self.interval_ms)
        self.first_ms = config.start_ms + rng.uniform(0, 1, n) * self.interval_ms


class SensorCohort:
    """All sensors of one class, stepped together."""

    def __init__(
        self,
        entities: range,
        profiles: SensorProfiles,
        faults: IntervalSchedule,
        domain: SensorsDomain,
        start_ms: int,
        rng: np.random.Generator,
    ) -> None:
        self.lo = entities.start
        self.p = profiles
        self.faults = faults
        self.d = domain
        self.start_ms = start_ms
        self.rng = rng
        own = slice(entities.start, entities.stop)
        self.interval_ms = profiles.interval_ms[own]
        self.jitter_ms = profiles.jitter_ms[own]
        self.scheduled = profiles.first_ms[own].copy()
        self.next_ms = np.maximum(self._jittered(np.arange(len(entities))), start_ms)
        self.reported = np.zeros(len(entities), dtype=bool)
        self.silence = np.full(len(entities), NO_ID, dtype=np.int64)  # the gap it is in

    def _jittered(self, local: np.ndarray) -> np.ndarray:
        return self.scheduled[local] + self.rng.uniform(-1, 1, local.size) * self.jitter_ms[local]

    def readings(self, t0_ms: int, t1_ms: int) -> Readings | None:
        local_parts, time_parts = [], []
        while True:
            due = np.flatnonzero(self.next_ms < t1_ms)
            if due.size == 0:
                break
            local_parts.append(due)
            time_parts.append(self.next_ms[due])
            self.scheduled[due] += self.interval_ms[due]
            self.next_ms[due] = self._jittered(due)
        if not local_parts:
            return None
        ent = (np.concatenate(local_parts) + self.lo).astype(np.int32)
        true_ms = np.floor(np.concatenate(time_parts)).astype(np.int64)
        episodes = self.faults.classify(ent, true_ms)
        keep = self._silences(ent, true_ms, episodes)
        if not keep.all():
            ent, true_ms = ent[keep], true_ms[keep]
            e = episodes
            episodes = Episodes(e.id[keep], e.start_ms[keep], e.end_ms[keep], e.kind[keep])
        return self._measure(ent, true_ms, episodes) if ent.size else None

    def _silences(self, ent: np.ndarray, true_ms: np.ndarray, episodes: Episodes) -> np.ndarray:
        """Which readings are made (not those of a silent device), and the silence ending at a
        made one: its label and incident are set in `episodes` (in place). In time order per
        sensor, over the few sensors in or just out of a silence; the rest only mark that they
        have reported."""
        local = ent - self.lo
        silent = (episodes.id != NO_ID) & (episodes.kind == SILENT)
        rare = np.flatnonzero(silent | (self.silence[local] != NO_ID))
        for row in rare[np.lexsort((true_ms[rare], local[rare]))].tolist():
            i = local[row]
            if silent[row]:
                if self.reported[i]:
                    self.silence[i] = episodes.id[row]
            elif self.silence[i] != NO_ID:
                if episodes.id[row] == NO_ID:
                    episodes.id[row], episodes.kind[row] = self.silence[i], SILENT
                self.silence[i] = NO_ID
                self.reported[i] = True
        self.reported[local[~silent]] = True
        return ~silent

    def _baseline(self, ent: np.ndarray, t_ms: np.ndarray) -> np.ndarray:
        day = (t_ms % DAY_MS) / DAY_MS
        return self.p.temperature[ent] + self.d.daily_amplitude_c * np.sin(
            2 * np.pi * day + self.p.phase[ent]
        )

    def _measure(self, ent: np.ndarray, true_ms: np.ndarray, episodes: Episodes) -> Readings:
        n = int(ent.shape[0])
        temperature_noise: np.ndarray = self.rng.normal(0.0, self.d.noise_c, n)
        humidity_noise: np.ndarray = self.rng.normal(0.0, 1.0, n)
        faulty = episodes.id != NO_ID
        stuck = faulty & (episodes.kind == STUCK)
        baseline = self._baseline(ent, true_ms)
        baseline[stuck] = self._baseline(ent[stuck], episodes.start_ms[stuck])  # frozen
        temperature_noise[stuck] = 0.0
        humidity_noise[stuck] = 0.0
        temperature = baseline + temperature_noise
        temperature[faulty & (episodes.kind == SPIKE)] += self.d.faults.spike_c
        swing = baseline - self.p.temperature[ent]
        humidity = np.clip(self.p.humidity[ent] - 1.5 * swing + humidity_noise, 0.0, 100.0)
        days = (true_ms - self.start_ms) / DAY_MS
        battery = self.p.battery[ent] - self.d.battery_drain_v_per_day * days
        return Readings(
            ent=ent,
            true_ms=true_ms,
            label=np.where(faulty, episodes.kind + 1, 0).astype(np.int16),
            incident=np.where(faulty, episodes.id, NO_ID),
            payload={
                "site": self.p.site[ent],
                "temperature_c": temperature,
                "humidity_pct": humidity,
                "battery_v": battery,
                "status": (battery < self.d.low_battery_v).astype(np.int32),
            },
        )


class SensorsScenario(Scenario):
    schema = SENSOR_READING.id
    entity_field = "sensor_id"
    labels = ("none", *SENSOR_FAULTS)

    def __init__(self, config: ScenarioConfig) -> None:
        self.config = config
        assert isinstance(config.domain, SensorsDomain)
        self.domain: SensorsDomain = config.domain
        self.topic = self.domain.topic
        self.id_prefix = self.domain.id_prefix
        self.entity_ids = sensor_ids(config.entities)
        sites = site_names(config.seed, self.domain.sites)
        self.payload = payload_fields(SENSOR_READING, choices={"site": sites})

    def sources(self, table: EntityTable) -> list[SensorCohort]:
        config, d = self.config, self.domain
        profiles = SensorProfiles(config, table)
        mix = {str(kind): weight for kind, weight in d.faults.mix.items()}
        weights = np.array([mix.get(k, 0.0) for k in SENSOR_FAULTS])
        faults = IntervalSchedule(
            np.full(len(table), d.faults.rate_per_hour),
            np.zeros(len(table), dtype=np.int16),
            [d.faults.duration_s],
            rng_for(config.seed, STREAM_SALT["sensors"], "faults"),
            config.start_ms,
            kinds=weights / weights.sum(),
            kind_durations=[d.faults.duration_of(k) for k in SENSOR_FAULTS],
        )
        return [
            SensorCohort(
                table.class_range(c),
                profiles,
                faults,
                d,
                config.start_ms,
                rng_for(config.seed, STREAM_SALT["sensors"], "cohort", cls.name),
            )
            for c, cls in enumerate(table.classes)
            if len(table.class_range(c))
        ]


def sensor_ids(count: int) -> list[str]:
    width = max(6, len(str(count - 1)))
    return [f"sensor-{i:0{width}d}" for i in range(count)]
