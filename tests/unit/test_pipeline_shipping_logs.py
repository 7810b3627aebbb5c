"""The shipping job's logs (`pipeline.jobs.shipping.logs`), without Spark: a small seeded run fed
in emit order, batch by batch, through per-box and per-ship logs raises the alerts the batch
form raises over the whole run; a voyage flushed days late is re-scored and marked late; rows
older than the history horizon are dropped and counted."""

from __future__ import annotations

from collections import defaultdict

import orjson
import pandas as pd
import pytest

from pipeline.jobs.shipping.logs import KINDS, EntityLog, Scored, aboard, route_key
from scenarios.catalog import ScenarioConfig, run_scenario
from simulators.sinks import JsonlSink
from streamsim.evaluate.shipping import TOPIC_COLUMNS, frame_of, run_rules
from tests.shipping_run import small_shipping

KIND_OF = {
    "shipping.container/1": "container",
    "shipping.position/1": "position",
    "shipping.port-event/1": "port_event",
}
DAY_MS = 86_400_000
#: Events per batch; a log is scored after the first batch that brings it nothing (the job
#: re-scores a log once its rows stop landing for `settle`).
BATCH = 20_000


@pytest.fixture(scope="module")
def events(tmp_path_factory: pytest.TempPathFactory) -> list[dict]:
    out = tmp_path_factory.mktemp("ship-logs")
    run_scenario(ScenarioConfig.model_validate(small_shipping("logs")), JsonlSink(out), speed="max")
    return [orjson.loads(line) for line in (out / "events.jsonl").open("rb")]


def stream(events: list[dict], history_ms: int) -> tuple[list[Scored], int]:
    """The events in emit order through the logs, `BATCH` at a time: what the job raises."""
    logs: dict[str, EntityLog] = {}
    raised: list[Scored] = []
    dropped = 0
    pending: set[str] = set()
    for start in [*range(0, len(events), BATCH), len(events)]:
        batch: dict[tuple[str, str], list[dict]] = defaultdict(list)
        for e in events[start : start + BATCH]:
            kind = KIND_OF[e["schema"]]
            for key in route_key(kind, e.get("container_id"), e.get("ship_id")):
                batch[(key, kind)].append(e)
        touched = set()
        for (key, kind), rows in batch.items():
            log = logs.setdefault(key, EntityLog(key))
            dropped += log.push(kind, frame_of(rows, KINDS[kind]), history_ms)
            touched.add(key)
        for key in pending - touched:  # quiet since: settled
            raised += logs[key].score(watermark_ms=1_800_000)
        pending = (pending & touched) | touched
    return raised, dropped


def test_streamed_logs_raise_the_batch_alerts(events: list[dict]) -> None:
    frames = {
        topic: frame_of([e for e in events if TOPIC_COLUMNS[topic] == KINDS[KIND_OF[e["schema"]]]],
                        columns)
        for topic, columns in TOPIC_COLUMNS.items()
    }  # fmt: skip
    batch = {a.alert_id: a.rule for a in run_rules(*frames.values())}
    raised, dropped = stream(events, history_ms=30 * DAY_MS)
    streamed = {s.alert.alert_id: s.alert.rule for s in raised}
    assert dropped == 0
    assert len(raised) == len(streamed)  # each alert once
    assert set(batch.values()) == {
        "reefer_failure", "lost_overboard", "door_tamper", "missed_unload", "route_deviation"
    }  # fmt: skip
    assert {i: streamed.get(i) for i in batch} == batch  # every batch alert, same id and rule
    # More: a reefer run first seen on the live alarm slice, before its voyage landed and
    # showed the run began earlier (its key, the run's first reading, moved).
    extra = {i: r for i, r in streamed.items() if i not in batch}
    assert set(extra.values()) <= {"reefer_failure"} and len(extra) <= 0.1 * len(batch)
    late = [s for s in raised if s.late]
    assert late and all(s.late_by_ms > 1_800_000 for s in late)  # flushed voyages, days late
    assert {s.alert.rule for s in late} >= {"route_deviation", "missed_unload"}


def test_rows_beyond_the_history_are_dropped_and_counted() -> None:
    log = EntityLog("s:S1")
    rows = pd.DataFrame(
        {"event_id": ["p1", "p2"], "ship_id": ["S1"] * 2, "event_time": [10 * DAY_MS, 0]}
    ).reindex(columns=list(KINDS["position"]))
    assert log.push("position", rows, DAY_MS) == 1
    old = rows.assign(event_id=["p3", "p4"], event_time=[DAY_MS, 9 * DAY_MS + 1])
    assert log.push("position", old, DAY_MS) == 1
    assert sorted(log.frame("position")["event_id"]) == ["p1", "p4"]


def test_a_box_unloaded_before_its_next_reading_is_not_overboard() -> None:
    boxes = pd.DataFrame(
        {"container_id": ["A", "A", "B"], "event_time": [1, 5, 5], "event_id": ["a1", "a2", "b1"]}
    )
    calls = pd.DataFrame(
        {"event": ["unloaded", "loaded"], "container_id": ["A", "B"], "event_time": [9, 2]}
    )
    assert aboard(boxes, calls)["container_id"].tolist() == ["B"]


def test_log_state_round_trips_and_keeps_legs() -> None:
    log = EntityLog("c:A")
    rows = pd.DataFrame(
        {
            "event_id": ["e1", "e2", "e3"],
            "container_id": ["A"] * 3,
            "event_time": [0, 3_600_000, 7_200_000],
            "ship_id": ["S1", "S1", "S2"],
            "voyage_id": [1, 1, 4],
        }
    ).reindex(columns=list(KINDS["container"]))
    assert log.push("container", rows, DAY_MS) == 0
    again = EntityLog.from_bytes("c:A", log.to_bytes())
    assert again.legs()[["ship_id", "readings"]].values.tolist() == [["S1", 2], ["S2", 1]]
    assert again.push("container", rows, DAY_MS) == 0  # the same ids: kept once
    assert len(again.frame("container")) == 3


def _positions(ids: list[str], hours: list[float], sog: float, channel: str) -> pd.DataFrame:
    """A ship's positions under way at `sog` knots, as the job routes them (`kind`, `channel`)."""
    return pd.DataFrame(
        {
            "event_id": ids,
            "ship_id": "S1",
            "event_time": [int(h * 3_600_000) for h in hours],
            "voyage_id": 1,
            "lat": 10.0,
            "lon": 60.0,
            "sog_kn": sog,
            "nav_status": "under_way",
            "kind": "position",
            "channel": channel,
        }
    )


def test_live_rows_never_put_off_the_scoring_of_a_landed_voyage() -> None:
    """A ship log fed a live position every batch, more often than the settle time (a demo's
    speed), still scores the voyage that landed: only backfill puts the timer off."""
    log = EntityLog("s:S1")
    settle = 3_000
    loiter = _positions([f"b{i}" for i in range(13)], [i / 6 for i in range(13)], 1.0, "onboard")
    raised, _ = log.land(loiter, 0, 30 * DAY_MS, settle, 1_800_000)
    assert not raised and log.timer_ms == settle
    for batch in range(1, 20):  # every 1 s of processing time: a satellite position
        now = batch * 1_000
        if log.timer_ms is not None and now >= log.timer_ms:
            raised += log.score(1_800_000)
            log.timer_ms = None
        live = _positions([f"l{batch}"], [3 + batch], 18.0, "satellite")
        raised += log.land(live, now, 30 * DAY_MS, settle, 1_800_000)[0]
    assert [s.alert.rule for s in raised] == ["route_deviation"]
    backfill = _positions(["b99"], [20.0], 18.0, "onboard")
    log.land(backfill, 30_000, 30 * DAY_MS, settle, 1_800_000)
    assert log.timer_ms == 33_000  # a landing voyage does put it off


def test_the_horizon_never_cuts_rows_no_rule_has_seen() -> None:
    """Rows that landed since the last scoring are scored before the history horizon would cut
    them away: a loiter in a log's first days, then a row weeks later, still alerts."""
    log = EntityLog("s:S1")
    loiter = _positions([f"b{i}" for i in range(13)], [i / 6 for i in range(13)], 1.0, "onboard")
    assert log.land(loiter, 0, 21 * DAY_MS, 3_000, 1_800_000) == ([], 0)
    assert not log.cuts_unscored(20 * DAY_MS, 21 * DAY_MS)
    later = _positions(["l1"], [22 * 24.0], 18.0, "satellite")
    raised, dropped = log.land(later, 1_000, 21 * DAY_MS, 3_000, 1_800_000)
    assert [s.alert.rule for s in raised] == ["route_deviation"] and dropped == 0
    assert raised[0].late and log.frame("position")["event_id"].tolist() == ["l1"]
    assert log.cuts_unscored(50 * DAY_MS, 21 * DAY_MS)  # l1 is waiting for its timer
    assert log.score(1_800_000) == [] and not log.cuts_unscored(50 * DAY_MS, 21 * DAY_MS)
