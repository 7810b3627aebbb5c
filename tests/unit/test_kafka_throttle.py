"""ThrottleWatch: a throttled client says so once per spell and counts the delays."""

from __future__ import annotations

from confluent_kafka import ThrottleEvent

from core.kafka.throttle import ThrottleWatch


def test_a_throttling_spell_is_said_once_counted_and_its_end_said() -> None:
    lines: list[str] = []
    watch = ThrottleWatch("the producer", lambda line: lines.append(f"W {line}"), lines.append)
    assert watch.summary() == {"events": 0, "total_ms": 0, "max_ms": 0, "spells": 0}
    watch(ThrottleEvent("localhost:9/1", 1, 0.0))  # not throttled: nothing to say
    assert lines == []
    for delay_s in (0.25, 1.5, 0.75):
        watch(ThrottleEvent("localhost:9/1", 1, delay_s))
    watch(ThrottleEvent("localhost:9/1", 1, 0.0))
    watch(ThrottleEvent("localhost:9/1", 1, 0.1))
    assert watch.summary() == {"events": 4, "total_ms": 2600, "max_ms": 1500, "spells": 2}
    assert len(lines) == 3
    assert lines[0] == (
        "W Kafka throttles the producer (broker localhost:9/1 delays its requests "
        "250 ms: a client quota); it goes on at that pace"
    )
    assert lines[1] == (
        "the producer: Kafka no longer throttles it (3 throttled responses, 2500 ms in all, "
        "max 1500)"
    )
    assert lines[2].startswith("W Kafka throttles the producer")
