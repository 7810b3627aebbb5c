"""The sensor rules' conformance corpus (`pipeline.jobs.sensors`): readings in arrival order,
and the alerts each form must raise over them.

Every case runs against the per-event form (`SensorRules`, fed in arrival order and released
by a watermark `WATERMARK_MS` behind the latest event time, as the stream job does), the
silence rule's bucket form (`SilenceTails`, fed the same way), the vectorised batch form
(`sensor_alerts_batch`) and the engine form (`engine.batch_alerts`, with `WINDOW` and
`SLIDE`). The batch forms get the readings the per-event form took in time; a reading behind
the watermark is dropped, as Spark drops it from the stream.

`alerts` are what the Python forms raise, as (rule, event ids). `engine_misses` lists those
the engine form does not raise, by design, each with the reason (its module docstring in
`pipeline.rules` says it in general): the readings of the case outside what a window of
`WINDOW` sliding by `SLIDE` holds whole (`SPAN_MS`), or a low-battery run that starts at a
sensor's first readings (a stuck run there is caught: the stuck rule's
`max_gap_s` is shorter than `SPAN_MS`). No form may raise an alert not listed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

WATERMARK_MS = 30_000
WINDOW, SLIDE = "4 minutes", "1 minute"
#: The longest stretch of event time a window holds whole (`span_covered_ms`).
SPAN_MS = 180_000
EVERY_MS = 5_000

#: (sensor_id, event_id, event_time ms, temperature_c, humidity_pct, status, seq)
Reading = tuple[str, str, int, float | None, float | None, str | None, int | None]
#: (rule, event ids)
Expected = tuple[str, tuple[str, ...]]


@dataclass(frozen=True)
class Case:
    name: str
    readings: tuple[Reading, ...]
    alerts: tuple[Expected, ...] = ()
    engine_misses: tuple[Expected, ...] = ()
    why: str = ""
    late: tuple[str, ...] = field(default=())  # event ids behind the watermark on arrival


def series(
    n: int,
    *,
    sensor: str = "s1",
    prefix: str = "e",
    start_ms: int = 0,
    first: int = 0,
    every_ms: int = EVERY_MS,
    seq_from: int | None = None,
) -> list[Reading]:
    """`n` ordinary readings, `every_ms` apart, seq counting up (from `first`, or `seq_from`):
    temperature wanders in 0.05 steps (no step, no flatline), humidity steady, status ok."""
    seq = first if seq_from is None else seq_from
    return [
        (
            sensor,
            f"{prefix}{first + i:02}",
            start_ms + i * every_ms,
            21.0 + 0.05 * ((first + i) % 10),
            40.0,
            "ok",
            seq + i,
        )
        for i in range(n)
    ]


def put(rows: list[Reading], index: int, **changes: Any) -> list[Reading]:
    """`rows` with reading `index` changed (fields by name)."""
    names = ("sensor", "event_id", "time", "temperature", "humidity", "status", "seq")
    row: dict[str, Any] = dict(zip(names, rows[index], strict=True))
    row.update(changes)
    out = list(rows)
    out[index] = tuple(row.values())
    return out


def _spike() -> list[Reading]:
    return put(series(20), 10, temperature=27.0)


def _stuck() -> list[Reading]:
    rows = series(20)
    for i in range(6, 10):
        rows = put(rows, i, temperature=21.3)
    return rows


def _stuck_first() -> list[Reading]:
    rows = series(20)
    for i in range(4):
        rows = put(rows, i, temperature=22.0)
    return rows


def _low(indexes: range | list[int], rows: list[Reading]) -> list[Reading]:
    for i in indexes:
        rows = put(rows, i, status="low_battery")
    return rows


def _at_limit() -> list[Reading]:
    """A 50 s gap (its seq skips, so no silence) with a change of exactly the allowance:
    3.0 + 0.01 * 50 = 3.5, not more; later a 3.75 change after another 50 s gap."""
    rows = series(6) + series(6, first=6, start_ms=75_000, seq_from=16)
    for i in range(12):  # humidity moves, so a steady temperature does not look stuck
        rows = put(rows, i, temperature=20.0 if i < 6 else 23.5, humidity=40.0 + 0.1 * i)
    tail = [("s1", "e12", 150_000, 27.25, 42.0, "ok", 30)]
    return rows + tail


def _silence(gap_ms: int, at: int = 15, seq_skip: int = 1) -> list[Reading]:
    before = series(at)
    start = (at - 1) * EVERY_MS + gap_ms
    after = series(5, first=at, start_ms=start, seq_from=at - 1 + seq_skip)
    return before + after


def _out_of_order() -> list[Reading]:
    rows = _spike()
    order = [0, 1, 2, 3, 4, 5, 8, 6, 7, 11, 9, 10, 12, 13, 16, 14, 15, 17, 18, 19]
    return [rows[i] for i in order]


def _duplicates() -> list[Reading]:
    rows = _spike()
    return [*rows[:12], rows[10], rows[9], *rows[12:], rows[11]]


def _late() -> list[Reading]:
    """e10 (a spike) arrives after e17: 35 s behind the newest, past the 30 s watermark."""
    rows = _spike()
    return [*rows[:10], *rows[11:18], rows[10], *rows[18:]]


def _missing() -> list[Reading]:
    """A spike at e10 with e09's temperature and e11's humidity missing, e12's seq missing."""
    rows = put(_spike(), 9, temperature=None)
    rows = put(rows, 11, humidity=None)
    return put(rows, 12, seq=None)


def _window_edge() -> list[Reading]:
    """Readings every 7 s from t=3 s: the spike pair (e08, e09) straddles t=60 s, where one
    window ends and the next begins."""
    rows = series(20, start_ms=3_000, every_ms=7_000)
    return put(rows, 9, temperature=27.0)


def _two_sensors() -> list[Reading]:
    a = _spike()
    b = put(series(20, sensor="s2", prefix="f"), 5, temperature=14.0)
    return [row for pair in zip(a, b, strict=True) for row in pair]


SPIKE = (("step", ("e09", "e10")), ("step", ("e10", "e11")))
FIRST = "a run or history that starts at the sensor's first reading(s)"

CASES: tuple[Case, ...] = (
    Case("quiet", tuple(series(30))),
    Case("spike", tuple(_spike()), SPIKE),
    Case(
        "step_at_the_limit",
        tuple(_at_limit()),
        (("step", ("e11", "e12")),),
    ),
    Case("stuck", tuple(_stuck()), (("flatline", ("e06", "e07", "e08")),)),
    Case(
        "stuck_from_the_first_reading",
        tuple(_stuck_first()),
        (("flatline", ("e00", "e01", "e02")),),
    ),
    Case(
        "low_battery_episodes",
        tuple(_low([8, 9, 10, 11, 16, 17], series(20))),
        (("threshold", ("e08",)), ("threshold", ("e16",))),
    ),
    Case(
        "low_battery_status_missing_mid_episode",
        tuple(put(_low([8, 9, 11, 12], series(20)), 10, status=None)),
        (("threshold", ("e08",)),),
    ),
    Case(
        "low_battery_from_the_first_reading",
        tuple(_low(range(5), series(20))),
        (("threshold", ("e00",)),),
        engine_misses=(("threshold", ("e00",)),),
        why=FIRST,
    ),
    Case("silence", tuple(_silence(60_000)), (("silence", ("e14", "e15")),)),
    Case("silence_at_the_limit", tuple(_silence(20_000))),
    Case("silence_just_past_the_limit", tuple(_silence(20_001)), (("silence", ("e14", "e15")),)),
    Case("silence_seq_skips", tuple(_silence(60_000, seq_skip=5))),
    Case("silence_early", tuple(_silence(60_000, at=4)), (("silence", ("e03", "e04")),)),
    Case(
        "gap_beyond_the_span",
        tuple(put(_silence(300_000), 15, temperature=35.0)),
        (("silence", ("e14", "e15")), ("step", ("e14", "e15")), ("step", ("e15", "e16"))),
        engine_misses=(("step", ("e14", "e15")),),
        why="a 300 s gap: longer than SPAN_MS, no window holds both readings",
    ),
    Case(
        "spike_across_a_window_edge",
        tuple(_window_edge()),
        (("step", ("e08", "e09")), ("step", ("e09", "e10"))),
    ),
    Case("spike_out_of_order", tuple(_out_of_order()), SPIKE),
    Case("spike_duplicates", tuple(_duplicates()), SPIKE),
    Case("spike_late", tuple(_late()), late=("e10",)),
    Case("missing_values", tuple(_missing()), (("step", ("e08", "e10")), ("step", ("e10", "e11")))),
    Case(
        "two_sensors",
        tuple(_two_sensors()),
        (*SPIKE, ("step", ("f04", "f05")), ("step", ("f05", "f06"))),
    ),
)
