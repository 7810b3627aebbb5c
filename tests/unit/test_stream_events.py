"""The pure parts of the server-sent-event streams: ids and framing, resuming (exact, a gap,
an id that is not ours, ahead of a restarted tail), the bounded per-client queue, the
heartbeat, and which browser origins may read a stream."""

from __future__ import annotations

import asyncio
import threading

import orjson

from api.panel.routes.stream import (
    StreamSettings,
    alert_filter,
    allowed_origin,
    events,
    merged_id,
)
from live.views.stream import (
    EventLog,
    Subscriber,
    comment,
    format_id,
    frame,
    parse_id,
    resume_gaps,
)


def everything(row: dict[str, object]) -> bool:
    return True


def alert(n: int, job: str = "cards") -> dict[str, object]:
    return {"alert_id": f"a{n}", "rule": "velocity", "job": job}


def test_ids_are_kafka_positions_and_round_trip() -> None:
    assert format_id({1: 457, 0: 124}) == "0:124,1:457"
    assert parse_id("0:124,1:457") == {0: 124, 1: 457}
    assert parse_id(format_id({})) is None  # no position yet: no id
    for bad in ("", "  ", "abc", "0:", ":5", "0:-1", "0:1;1:2", "7"):
        assert parse_id(bad) is None, bad


def test_frame_is_one_event_with_one_data_line() -> None:
    raw = frame({"text": "two\nlines"}, event="alert", event_id="0:5")
    assert raw.endswith(b"\n\n") and raw.count(b"\n\n") == 1
    lines = raw.decode().splitlines()
    assert lines[:2] == ["event: alert", "id: 0:5"]
    assert orjson.loads(lines[2].removeprefix("data: ")) == {"text": "two\nlines"}
    assert frame(1, event="a\nb").startswith(b"event: a b\n")  # no field injection
    assert comment("heartbeat 1") == b": heartbeat 1\n\n"


def published(log: EventLog, partition: int, offsets: range, job: str = "cards") -> None:
    for offset in offsets:
        log.publish(partition, offset, alert(offset, job))


def test_resume_sends_every_held_row_after_the_id() -> None:
    log = EventLog(keep=100)
    log.cover(0, 10)
    log.cover(1, 0)
    published(log, 0, range(10, 15))
    first = log.publish(1, 0, alert(100))
    assert first is not None
    last_seen = first.id
    assert last_seen == "0:15,1:1"
    published(log, 0, range(15, 18))
    published(log, 1, range(1, 3))
    resume = log.subscribe(Subscriber(everything, 10), last_seen)
    assert not resume.gap
    assert [(e.partition, e.offset) for e in resume.backlog] == [
        (0, 15),
        (0, 16),
        (0, 17),
        (1, 1),
        (1, 2),
    ]


def test_resume_from_an_evicted_position_says_what_was_missed() -> None:
    log = EventLog(keep=3)
    log.cover(0, 0)
    first = log.publish(0, 0, alert(0))
    assert first is not None
    published(log, 0, range(1, 6))  # 0..2 evicted: the log holds 3, 4, 5
    resume = log.subscribe(Subscriber(everything, 10), first.id)
    assert resume.missed == {0: (1, 3)} and resume.gap
    assert [e.offset for e in resume.backlog] == [3, 4, 5]


def test_a_tail_that_started_past_the_id_is_a_gap_too() -> None:
    assert resume_gaps({0: 40}, {0: 50, 1: 0}) == {0: (40, 50)}
    assert resume_gaps({0: 50, 1: 0}, {0: 50, 1: 0}) == {}
    assert resume_gaps({0: 60}, {0: 50, 1: 3}) == {1: (0, 3)}  # a partition it never saw


def test_an_id_that_is_not_ours_is_said_and_the_newest_rows_follow() -> None:
    log = EventLog()
    published(log, 0, range(5))
    resume = log.subscribe(Subscriber(everything, 10), "not-an-id", backlog=2)
    assert resume.gap and resume.reason and "not-an-id" in resume.reason
    assert [e.offset for e in resume.backlog] == [3, 4]


def test_a_fresh_client_gets_the_newest_rows_it_accepts_then_only_new_ones() -> None:
    log = EventLog()
    published(log, 0, range(4), job="cards")
    published(log, 0, range(4, 6), job="shipping")
    sub = Subscriber(lambda row: row["job"] == "cards", 10)
    resume = log.subscribe(sub, None, backlog=3)
    assert [e.offset for e in resume.backlog] == [1, 2, 3] and not resume.gap
    assert log.subscribe(Subscriber(everything, 10)).backlog == []
    log.publish(0, 6, alert(6, "shipping"))
    log.publish(0, 7, alert(7, "cards"))
    assert [e.offset for e in sub.take()] == [7]


def test_resuming_ahead_of_a_restarted_tail_sends_nothing_twice() -> None:
    log = EventLog()
    log.cover(0, 0)
    sub = Subscriber(everything, 10)
    resume = log.subscribe(sub, "0:3")  # the client saw up to offset 2 from the last server
    assert resume.backlog == [] and not resume.gap
    published(log, 0, range(5))  # the new server's tail reads 0..4
    assert [e.offset for e in sub.take()] == [3, 4]
    assert merged_id({0: 1}, sub.after) == "0:3"  # its `live` id does not go back either


def test_a_full_queue_drops_the_client_and_counts_it() -> None:
    log = EventLog()
    sub = Subscriber(everything, queue_max=3)
    log.subscribe(sub)
    published(log, 0, range(3))
    assert not sub.dropped and log.subscribers == 1
    published(log, 0, range(3, 10))
    assert sub.dropped and sub.take() == []  # nothing kept for it
    assert log.dropped == 1 and log.subscribers == 0
    assert log.published == 10


def test_get_wakes_on_a_row_from_another_thread_and_times_out_for_a_heartbeat() -> None:
    async def main() -> tuple[list[int], list[int]]:
        log = EventLog()
        sub = Subscriber(everything, 10, asyncio.get_running_loop())
        log.subscribe(sub)
        quiet = await sub.get(0.05)
        threading.Timer(0.05, lambda: log.publish(0, 0, alert(0))).start()
        woken = await sub.get(30.0)
        return [e.offset for e in quiet], [e.offset for e in woken]

    assert asyncio.run(main()) == ([], [0])


def test_the_stream_heartbeats_then_ends_with_dropped() -> None:
    settings = StreamSettings(heartbeat_s=0.05, queue_max=2, retry_ms=500)

    async def main() -> list[bytes]:
        log = EventLog()
        log.cover(0, 0)
        sub = Subscriber(everything, settings.queue_max, asyncio.get_running_loop())
        resume = log.subscribe(sub)
        published(log, 0, range(2))  # after the subscription: queued, after `live`
        stream = events(log, sub, resume, settings, "alert", {"topic": "alerts"})
        chunks = [await anext(stream) for _ in range(4)]  # retry, live, the two rows
        chunks.append(await anext(stream))  # a heartbeat
        published(log, 0, range(2, 7))  # the client reads nothing meanwhile: dropped
        chunks += [chunk async for chunk in stream]
        assert log.subscribers == 0
        return chunks

    chunks = asyncio.run(main())
    assert chunks[0] == b"retry: 500\n\n"
    # `live` carries the position at subscription, before the rows queued since.
    assert chunks[1].startswith(b"event: live\nid: 0:0\n")
    assert chunks[2].startswith(b"event: alert\nid: 0:1\n")
    assert chunks[3].startswith(b"event: alert\nid: 0:2\n")
    assert chunks[4].startswith(b": heartbeat ")
    assert chunks[-1].startswith(b"event: dropped\n") and len(chunks) == 6


def test_only_the_apis_own_host_or_listed_origins_may_read_a_stream() -> None:
    assert allowed_origin("http://127.0.0.1:8501", "127.0.0.1:8000", ()) == "http://127.0.0.1:8501"
    assert allowed_origin("http://localhost:8501", "127.0.0.1:8000", ()) == "http://localhost:8501"
    assert allowed_origin("http://panel.lan:80", "panel.lan:8000", ()) == "http://panel.lan:80"
    assert allowed_origin("https://evil.example", "127.0.0.1:8000", ()) is None
    assert allowed_origin("null", "127.0.0.1:8000", ()) is None
    assert allowed_origin(None, "127.0.0.1:8000", ()) is None
    listed = ("https://panel.example",)
    assert allowed_origin("https://panel.example/", "10.0.0.5:8000", listed) is not None


def test_settings_come_from_the_environment() -> None:
    found = StreamSettings.from_env(
        {
            "STREAMSIM_STREAM_HEARTBEAT_S": "0.5",
            "STREAMSIM_STREAM_QUEUE": "8",
            "STREAMSIM_STREAM_ORIGINS": "https://a.example, https://b.example/",
        }
    )
    assert (found.heartbeat_s, found.queue_max) == (0.5, 8)
    assert found.origins == ("https://a.example", "https://b.example")
    assert StreamSettings.from_env({}) == StreamSettings()


def test_alert_streams_filter_as_their_read_routes() -> None:
    """kind=shipping as /v1/shipping/alerts, kind=sensors as /v1/sensors/alerts (the run's,
    by its event ids, or for a silence by the run having the device), and `job`."""
    card = alert(1, "cards")
    ship = {**alert(2, "shipping"), "label": "reefer_failure"}
    sensor = {**alert(3, "sensors"), "label": "spike", "event_ids": ["sf-r1-x1"]}
    other_run = {**sensor, "alert_id": "a4", "event_ids": ["sf-r2-x1"]}
    silence = {**alert(5, "sensors"), "label": "silent_device", "event_ids": [],
               "entity_id": "sensor-7"}  # fmt: skip
    rows = [card, ship, sensor, other_run, silence]

    def kept(kind: str, job: str | None = None, run: str | None = None) -> list[object]:
        accept = alert_filter(kind, job, run, lambda r, d: (r, d) == ("sf-r1", "sensor-7"))
        return [row["alert_id"] for row in rows if accept(row)]

    assert kept("all") == ["a1", "a2", "a3", "a4", "a5"]
    assert kept("all", job="cards") == ["a1"]
    assert kept("shipping") == ["a2"]
    assert kept("sensors", run="sf-r1") == ["a3", "a5"]
    assert kept("sensors") == ["a3", "a4", "a5"]  # no run read yet: every sensor alert


def test_rows_read_again_after_a_tail_restart_are_not_published_twice() -> None:
    log = EventLog()
    log.cover(0, 0)
    sub = Subscriber(everything, 10)
    log.subscribe(sub)
    published(log, 0, range(3))
    log.cover(0, 0)  # the tail thread restarted: it reads from its start again
    assert log.publish(0, 1, alert(1)) is None
    published(log, 0, range(3, 4))
    assert [e.offset for e in sub.take()] == [0, 1, 2, 3] and log.position() == "0:4"
