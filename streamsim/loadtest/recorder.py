"""What happened to each request of an open-model run, timed from its INTENDED send time.

Latency = completion time - intended send time, whatever delayed the send (a busy connection,
the in-flight bound, a late generator): this is what keeps a slow server from hiding its queue
(coordinated omission). Times are seconds since the run started, on one monotonic clock.

Requests intended during the warm-up are tracked but left out of every figure. Outcomes:
- an answer: its latency goes into the HdrHistogram (1 µs .. 60 s, 3 significant digits);
  2xx is good, and so is 422 for a body from the invalid share;
- shed: a 429 (the endpoint's load shedding, `api.fraud.shedding`) to a valid body: counted
  apart (`shed`), neither good nor an error, and kept out of the latency histogram, so the
  percentiles are those of the accepted requests;
- errors, counted by kind: `status_<code>` (any other non-2xx, 422 to a valid body included),
  `accepted_invalid` (2xx to an invalid body), `timeout`, `connection` (closed mid-request).
"""

from __future__ import annotations

from collections import Counter

import numpy as np
from hdrh.histogram import HdrHistogram

LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS = 1, 60_000_000, 3
PENDING, GOOD, ERROR, SHED = 0, 1, 2, 3


class Recorder:
    def __init__(self, times_s: np.ndarray, expect_422: np.ndarray, warmup_s: float) -> None:
        n = len(times_s)
        self.times = times_s.tolist()
        self.expect_422 = expect_422.tolist()
        self.warmup_s = warmup_s
        #: Slots are in intended-time order; these and later ones are measured.
        self.first_measured = int(np.searchsorted(times_s, warmup_s))
        self.histogram = HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)
        #: From the actual send instead (diagnostic only: what a closed-loop tool would show).
        self.from_send = HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)
        self.outcome = np.zeros(n, dtype=np.int8)
        self.done_at = np.full(n, np.nan)
        self.latency_s = np.full(n, np.nan)
        self.errors: Counter[str] = Counter()
        self.warmup_errors: Counter[str] = Counter()
        self.statuses: Counter[int] = Counter()
        self.decisions: Counter[str] = Counter()
        self.finished = 0  # requests answered or failed, warm-up included
        self.shed = 0  # 429s in the measured window
        self.shed_latency = HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_DIGITS)

    @property
    def requests(self) -> int:
        """Requests intended in the measured window."""
        return len(self.times) - self.first_measured

    def answered(
        self,
        slot: int,
        status: int,
        done_s: float,
        decision: bytes | None = None,
        sent_s: float | None = None,
    ) -> None:
        latency = done_s - self.times[slot]
        self.finished += 1
        self.done_at[slot] = done_s
        self.latency_s[slot] = latency
        if status == 429 and not self.expect_422[slot]:
            self.outcome[slot] = SHED
            if slot >= self.first_measured:
                self.shed += 1
                self.statuses[status] += 1
                self.shed_latency.record_value(_us(latency))
            return
        good = 200 <= status < 300
        kind = None
        if self.expect_422[slot]:
            good = status == 422
            if 200 <= status < 300:
                kind = "accepted_invalid"
        if not good and kind is None:
            kind = f"status_{status}"
        self.outcome[slot] = GOOD if good else ERROR
        if slot < self.first_measured:
            if kind:
                self.warmup_errors[kind] += 1
            return
        self.statuses[status] += 1
        if kind:
            self.errors[kind] += 1
        if decision:
            self.decisions[decision.decode("ascii", "replace")] += 1
        self.histogram.record_value(_us(latency))
        if sent_s is not None:
            self.from_send.record_value(_us(done_s - sent_s))

    def failed(self, slot: int, kind: str, done_s: float) -> None:
        """No answer: `timeout` or `connection`."""
        self.finished += 1
        self.done_at[slot] = done_s
        self.outcome[slot] = ERROR
        if slot < self.first_measured:
            self.warmup_errors[kind] += 1
        else:
            self.errors[kind] += 1

    # figures
    def latency_ms(self) -> dict[str, float | None]:
        return _percentiles_ms(self.histogram, {"p50": 50, "p90": 90, "p99": 99, "p999": 99.9})

    def shed_latency_ms(self) -> dict[str, float | None]:
        return _percentiles_ms(self.shed_latency, {"p50": 50, "p99": 99})

    def latency_from_send_ms(self) -> dict[str, float | None]:
        return _percentiles_ms(self.from_send, {"p50": 50, "p99": 99})

    def good_in_window(self, start_s: float, end_s: float) -> int:
        """Good answers completed in [start_s, end_s) (any request, warm-up ones included)."""
        done = self.done_at
        inside = (self.outcome == GOOD) & (done >= start_s) & (done < end_s)
        return int(np.count_nonzero(inside))

    def percentile_curve(self) -> list[tuple[float, float]]:
        """(percentile, latency ms) points for a percentile-distribution chart."""
        h = self.histogram
        if h.get_total_count() == 0:
            return []
        points = [0.0, 10, 25, 50, 75, 90, 95, 99, 99.5, 99.9, 99.95, 99.99, 99.999, 100.0]
        return [(p, h.get_value_at_percentile(p) / 1000) for p in points]


def _us(seconds: float) -> int:
    return min(max(round(seconds * 1e6), LOWEST_US), HIGHEST_US)


def _percentiles_ms(h: HdrHistogram, points: dict[str, float]) -> dict[str, float | None]:
    empty = h.get_total_count() == 0
    out: dict[str, float | None] = {
        name: None if empty else round(h.get_value_at_percentile(p) / 1000, 3)
        for name, p in points.items()
    }
    out["max"] = None if empty else round(h.get_max_value() / 1000, 3)
    return out
