"""Compare measured disorder with a scenario's configured parameters, within statistical bounds.

Expected figures come from the configured distributions' exact quantiles (`ppf`), not from
sampling them, so a broken sampler cannot vouch for itself. Tolerances:
- a sample p-quantile of n values lies, with high probability, between the true quantiles at
  p -+ 4*sqrt(p(1-p)/n), widened by 1 ms for millisecond rounding;
- a fraction of n trials lies within 4 binomial standard deviations (+1/n).
Checks are per entity class, named "<class>.<figure>", plus whole-stream integrity checks.
Classes belong to devices: the entities, or the scenario's own devices when truth names them
(`device_id`, e.g. the card scenario's POS terminals and gateways).

Expected figures hold for the run's actual simulated span, including a short one:
- A run ended by its duration reconnects every device at the end, so every backlog is sent.
  A run ended by `--events N` stops at its N-th send (the *cut*): readings an outage still
  holds, and readings or retries still in flight, are in neither the stream nor truth. The
  outage share is then derived for the cut (`cut_outage_share`). Which way a run ended is not
  in the stream, only told by it when enough backlogs would be held at the end (`run_end`:
  a duration run flushes them after its last reading, a cut run does not); otherwise the band
  spans both figures.
- Delays and duplicates are measured on readings early enough that even a slow (p99.9)
  delivery or retry would have been sent before the cut.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from scenarios.catalog import ScenarioConfig, build_scenario
from simulators.settings import EntityClass
from streamsim.verify.measure import NO_MATCH, Joined, backlogs, device_skews_ms

Z = 4.0
MS = 0.001
#: Share of a delay or retry distribution's tail left out when trimming readings near the cut.
TAIL = 0.001

Check = dict[str, Any]


def check(expected: float, measured: float, low: float, high: float) -> Check:
    return {
        "expected": round(expected, 6),
        "measured": round(measured, 6),
        "ok": bool(low - 1e-9 <= measured <= high + 1e-9),
        "tolerance": [round(low, 6), round(high, 6)],
    }


def quantile_check(
    dist: Any, p: float, values: np.ndarray, clip: tuple[float, float], slack: float, extra: float
) -> Check:
    """Is the sample's p-quantile where the (clipped) distribution puts it? `extra` widens the
    rank band by a share of values known to be off-distribution."""
    n = values.shape[0]
    band = Z * math.sqrt(p * (1 - p) / n) + 1 / n + extra
    low = dist.clipped_quantile(max(p - band, 0.0), *clip) - slack
    high = dist.clipped_quantile(min(p + band, 1.0), *clip) + slack
    measured = float(np.quantile(values, p))
    return check(dist.clipped_quantile(p, *clip), measured, low, high)


def fraction_check(p: float, hits: int, n: int) -> Check:
    tol = Z * math.sqrt(p * (1 - p) / n) + 1 / n
    return check(p, hits / n, p - tol, p + tol)


class ClassChecks:
    """The checks for one entity class, over the joined stream restricted to it."""

    def __init__(
        self,
        j: Joined,
        entity_class: np.ndarray,
        c: int,
        cls: EntityClass,
        own_outages: bool = False,
    ) -> None:
        """`entity_class`: the class of each device (of each entity, without devices);
        `own_outages`: the scenario takes devices offline itself too (vehicles in tunnels), so
        the configured outages only bound the buffered share from below."""
        self.j, self.cls, self.c = j, cls, c
        self.own_outages = own_outages
        self.entity_class = entity_class
        assert j.device_of_truth is not None
        self.device_of_truth = j.device_of_truth
        self.truth_rows = np.flatnonzero(entity_class[j.device_of_truth] == c)
        mine = np.zeros(len(j.truth.event_id) + 1, dtype=bool)  # last slot: NO_MATCH
        mine[self.truth_rows] = True
        self.deliveries = j.delivery[mine[j.delivery]]  # matched stream records of this class
        #: how the run ended, "duration" or "cut", when the stream tells (`run_end`)
        self.run_end: str | None = None

    def held_at_end(self) -> float:
        """Expected number of this class's devices holding a backlog when the run ends: offline
        (the steady share) in an outage that is older than one reading interval (residual-life
        law), so it holds a reading. A run ended by its duration flushes each of them after its
        last reading."""
        settings = self.cls.delivery.outages
        if self.truth_rows.size == 0 or settings.rate_per_hour <= 0:
            return 0.0
        _, durations, steady = _offline(settings)
        mean = float(durations.mean())
        t = self.j.truth
        devices = int(np.unique(self.device_of_truth[self.truth_rows]).shape[0])
        span_s = float(t.true_time.max() - t.true_time.min()) / 1000
        interval_s = span_s * devices / self.truth_rows.shape[0]
        younger = float(np.minimum(durations, interval_s).mean()) / mean
        return steady * devices * (1 - younger)

    def run(self) -> dict[str, Check]:
        if self.truth_rows.size == 0:
            return {}
        return {
            **self.delay(),
            **self.skew(),
            **self.duplicates(),
            **self.drops(),
            **self.outages(),
            **self.backlog(),
        }

    def delay(self) -> dict[str, Check]:
        """Delays of direct sends, on readings a slow delivery would still have made before
        the cut (those after it lose their slowest; see the module docstring)."""
        t, d = self.j.truth, self.deliveries
        settings = self.cls.delivery
        clip = (0.0, settings.max_delay_s)
        slowest_ms = 1000 * settings.delay_s.clipped_quantile(1 - TAIL, *clip)
        early = t.true_time[d] <= last_send_ms(t) - slowest_ms
        direct = d[~t.buffered[d] & ~t.duplicate[d] & early]
        if direct.size == 0:
            return {}
        delays = (t.emit_time[direct] - t.true_time[direct]) / 1000
        return {
            name: quantile_check(settings.delay_s, p, delays, clip, MS, TAIL)
            for p, name in ((0.5, "delay_p50_s"), (0.99, "delay_p99_s"))
        }

    def skew(self) -> dict[str, Check]:
        """Per-device median clock offset against the offset distribution; drift is slack, and
        devices whose clock jumped or reset widen the band by their share."""
        medians_ms, entities = device_skews_ms(self.j)
        mine = self.entity_class[entities] == self.c
        if not mine.any():
            return {}
        clock, t = self.cls.clock, self.j.truth
        elapsed_s = float(t.true_time.max() - t.true_time.min()) / 1000
        drift = max(abs(clock.drift_ppm.ppf(0.0005)), abs(clock.drift_ppm.ppf(0.9995)))
        slack = drift * 1e-6 * elapsed_s + MS
        counts = np.bincount(self.device_of_truth, minlength=len(self.j.devices or []))
        per_reading = clock.jumps.probability + clock.resets.probability
        moved = 1 - (1 - per_reading) ** float(np.median(counts[entities[mine]]))
        values = medians_ms[mine] / 1000
        clip = (-math.inf, math.inf)
        return {
            f"skew_{name}_s": quantile_check(clock.offset_s, p, values, clip, slack, moved)
            for p, name in ((0.25, "p25"), (0.5, "p50"), (0.75, "p75"))
        }

    def duplicates(self) -> dict[str, Check]:
        """Resent share, over events early enough that a slow retry beat the cut."""
        t, settings = self.j.truth, self.cls.delivery
        retry_ms = 1000 * settings.duplicates.retry_delay_s.clipped_quantile(1 - TAIL, 0, math.inf)
        slowest_ms = 1000 * settings.delay_s.clipped_quantile(1 - TAIL, 0, settings.max_delay_s)
        early = t.true_time[self.deliveries] <= last_send_ms(t) - retry_ms - slowest_ms
        deliveries = self.deliveries[early]
        records = int(deliveries.shape[0])
        events = int(np.unique(self.j.event_of_truth[deliveries]).shape[0])
        if events == 0:
            return {}
        p = self.cls.delivery.duplicates.probability
        resent = self.cls.delivery.outages.flush_duplicates
        if resent:  # backlog readings are also sent twice on reconnect
            _, first = np.unique(self.j.event_of_truth[deliveries], return_index=True)
            p += resent * float(t.buffered[deliveries[first]].mean())
        return {"duplicate_fraction": fraction_check(p, records - events, events)}

    def drops(self) -> dict[str, Check]:
        """Events lost in transit: in truth, not lost to a full buffer, and not in the stream."""
        t, rows = self.j.truth, self.truth_rows
        events = self.j.event_of_truth
        eligible = np.setdiff1d(events[rows], events[rows[t.overflow[rows]]])
        if eligible.size == 0:
            return {}
        missing = np.setdiff1d(eligible, events[self.deliveries]).shape[0]
        p = self.cls.delivery.drops.probability
        return {"drop_fraction": fraction_check(p, int(missing), int(eligible.shape[0]))}

    def outages(self) -> dict[str, Check]:
        """Share of readings an outage buffered vs. the share of time a device is offline,
        r*E[D] / (1 + r*E[D]) for a run ended by its duration, `cut_outage_share` for one cut
        by an event count (see the module docstring); when the stream does not tell which
        (`run_end`), the band spans both. Tolerance per figure q: a device's buffered share
        lies in [0, 1], so its variance is at most q(1-q) (Bhatia-Davis) whatever the run's
        length; a long run averages outages out, to r*E[D^2] / T per device. The smaller of
        the two, over N devices, or the measured spread across devices if larger."""
        t, j = self.j.truth, self.j
        _, first = np.unique(j.event_of_truth[self.truth_rows], return_index=True)
        rows = self.truth_rows[first]  # one truth record per event
        buffered = t.buffered[rows]
        settings = self.cls.delivery.outages
        rate, durations, steady = _offline(settings)
        # reading times: those an outage did not hold were sent at once, whatever the cut
        times_ms = t.true_time[rows[~buffered]]
        cut = cut_outage_share(steady, durations, (last_send_ms(t) - times_ms) / 1000)
        entity = self.device_of_truth[rows]
        devices = np.unique(entity)
        n = devices.shape[0]
        span_s = max(float(t.true_time.max() - t.true_time.min()) / 1000, 1.0)
        model_var = rate * float(np.mean(durations**2)) / (n * span_s)
        shares = np.bincount(entity, weights=buffered)[devices] / np.bincount(entity)[devices]
        data_var = float(shares.var()) / n

        def tol(q: float) -> float:
            return Z * math.sqrt(max(min(model_var, q * (1 - q) / n), data_var)) + 1 / rows.shape[0]

        measured = float(buffered.mean())
        if self.run_end == "duration":
            figures = [steady]
        elif self.run_end == "cut":
            figures = [cut]
        else:  # undecided: the band spans both
            figures = [steady, cut]
        expected = steady if self.run_end == "duration" or ended_by_duration(t) else cut
        if self.run_end == "cut":
            expected = cut
        low = min(q - tol(q) for q in figures)
        high = 1.0 if self.own_outages else max(q + tol(q) for q in figures)
        return {"outage_fraction": check(expected, measured, low, high)}

    def backlog(self) -> dict[str, Check]:
        t = self.j.truth
        mine = {t.outage_id[i] for i in self.truth_rows[t.buffered[self.truth_rows]].tolist()}
        sizes = [n for outage, n in backlogs(self.j).items() if outage in mine]
        if not sizes:
            return {}
        cap = self.cls.delivery.outages.buffer_cap
        return {"max_backlog": check(cap, max(sizes), 0, cap)}


def _offline(settings: Any) -> tuple[float, np.ndarray, float]:
    """Outages per device-second, the duration's quantile grid, and the steady share of time
    offline r*E[D] / (1 + r*E[D])."""
    rate = settings.rate_per_hour / 3600
    durations = _quantile_grid(settings.duration_s)
    mean = float(durations.mean())
    return rate, durations, rate * mean / (1 + rate * mean)


def _quantile_grid(dist: Any, points: int = 4000) -> np.ndarray:
    """The (non-negative) distribution at `points` evenly spaced quantiles, ascending."""
    qs = (np.arange(points) + 0.5) / points
    return np.array([dist.clipped_quantile(float(q), 0.0, math.inf) for q in qs])


def last_send_ms(t: Any) -> float:
    """The emit time of the run's last send: where a run cut by an event count was cut."""
    sent = t.emit_time[t.emit_time >= 0]
    return float(sent.max()) if sent.size else float(t.true_time.max())


def ended_by_duration(t: Any) -> bool:
    """Does the stream look like a run that ended by its duration? Such a run reconnects every
    device at its end, so a backlog still held then is sent after the last reading's true
    time; a run cut at its N-th send has sent nothing past that. Only a hint: a run with no
    outage at its end looks cut (see the module docstring)."""
    sent = t.buffered & (t.emit_time >= 0)
    return bool(sent.any() and t.emit_time[sent].max() > t.true_time.max())


#: Backlogs a run ended by its duration is expected to flush at its end, at least, before the
#: stream is trusted to tell the two ends apart: a Poisson count of 40 falls below a quarter of
#: it with probability ~1e-8, and a cut run flushes only the few outages that ended within the
#: last deliveries' delay.
DECIDE_AT = 40


def run_end(t: Any, held_at_end: float) -> str | None:
    """ "duration" or "cut" when the stream tells how the run ended, else None.

    A run ended by its duration flushes every backlog still held at its end (`held_at_end`
    expected) after its last reading's true time; a run cut by an event count flushes there
    only outages that ended within the last deliveries' delay. Counted in distinct outages.
    """
    if held_at_end < DECIDE_AT:
        return None
    late = t.buffered & (t.emit_time > t.true_time.max())
    flushed = len({t.outage_id[i] for i in np.flatnonzero(late).tolist()})
    return "duration" if flushed >= held_at_end / 4 else "cut"


def cut_outage_share(steady: float, durations: np.ndarray, left_s: np.ndarray) -> float:
    """The buffered share of the readings a run cut short has sent.

    A reading at a random time falls in an outage with probability `steady` (the schedule
    starts stationary), and the rest of that outage, R, has the equilibrium (residual-life)
    law P(R <= x) = E[min(D, x)] / E[D]. The reading was sent before the cut when R is at most
    the time left until it (`left_s`, per reading); readings no outage held were sent anyway
    (their delay aside). `durations`: the outage duration's quantile grid, ascending.

    >>> grid = np.full(10, 60.0)  # every outage lasts 60 s
    >>> cut_outage_share(0.1, grid, np.array([600.0, 6000.0]))  # the cut is far: all sent
    0.1
    >>> round(cut_outage_share(0.1, grid, np.array([30.0])), 4)  # half of one outage's rest
    0.0526
    """
    if steady <= 0 or left_s.size == 0 or durations.size == 0:
        return steady
    mean = float(durations.mean())
    if mean <= 0:
        return steady
    below = np.searchsorted(durations, left_s)  # grid points shorter than the time left
    head = np.r_[0.0, np.cumsum(durations)][below]
    done = (head + left_s * (durations.shape[0] - below)) / durations.shape[0] / mean
    sent = steady * float(np.clip(done, 0.0, 1.0).mean())
    return sent / (1 - steady + sent)


def integrity_checks(measured: dict[str, Any], config: ScenarioConfig) -> dict[str, Check]:
    """Nothing lost or invented by the sink, duplicates identical, timestamps = emit times."""
    out = {
        name: check(0, measured[name], 0, 0)
        for name in ("lost", "unexpected", "event_time_mismatches", "timestamp_mismatches")
    }
    if not has_disorder(config):
        out["out_of_order_fraction"] = check(0, measured["out_of_order_fraction"], 0, 0)
    return out


def has_disorder(config: ScenarioConfig) -> bool:
    """False when every event arrives in true-time order, stamped by one exact shared clock."""
    offsets, delays = set(), set()
    for c in config.classes:
        clock, delivery = c.clock, c.delivery
        constant = (clock.offset_s, clock.drift_ppm, delivery.delay_s)
        if not all(d.is_constant for d in constant) or clock.drift_ppm.ppf(0.5) != 0:
            return True
        faults = (
            clock.jumps.probability,
            clock.resets.probability,
            delivery.outages.rate_per_hour,
            delivery.duplicates.probability,
        )
        if any(faults):
            return True
        offsets.add(clock.offset_s.ppf(0.5))
        delays.add(min(max(delivery.delay_s.ppf(0.5), 0), delivery.max_delay_s))
    return len(offsets) > 1 or len(delays) > 1


def run_checks(j: Joined, measured: dict[str, Any], config: ScenarioConfig) -> dict[str, Check]:
    scenario = build_scenario(config)
    devices = scenario.devices
    if devices is not None and j.truth.device_id is not None:
        ids, class_of = devices.ids, devices.class_of.tolist()
    else:
        counts = config.class_counts()
        ids, class_of = scenario.entity_ids, np.repeat(np.arange(len(counts)), counts).tolist()
    class_of_id = dict(zip(ids, class_of, strict=True))
    entity_class = np.array([class_of_id.get(e, -1) for e in j.devices or []], dtype=np.int64)
    checks = integrity_checks(measured, config)
    own_outages = scenario.own_outages
    classes = [
        ClassChecks(j, entity_class, c, cls, own_outages) for c, cls in enumerate(config.classes)
    ]
    end = run_end(j.truth, sum(c.held_at_end() for c in classes))
    for cc in classes:
        cc.run_end = end
        for name, result in cc.run().items():
            checks[f"{cc.cls.name}.{name}"] = result
    return checks


__all__ = ["NO_MATCH", "run_checks"]
