"""Alert latency phases: a paced input, the whole job in micro-batches, append to append."""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import orjson
from confluent_kafka import Producer

from core.config import StackConfig
from core.contracts import VEHICLE_TELEMETRY
from core.errors import StreamsimError
from core.kafka import producer_config
from streamsim.bench.pipeline.measure import percentiles
from streamsim.bench.pipeline.settings import own_checkpoints
from streamsim.bench.pipeline.topics import Record, create_topic, topic_records, wait_for_records

#: In the latency phase: the job's watermark, and one vehicle in this many overheats once.
LATENCY_WATERMARK = "5 seconds"
PLANTED_EVERY = 5
CARD_PLANTED_EVERY = 10
PARIS, NEW_YORK = (48.8566, 2.3522), (40.7128, -74.0060)


def overheating(cfg: Any) -> tuple[float, float]:
    """(coolant threshold, seconds it must last) of the job's overheating detector."""
    params = cfg.vehicles.detectors["overheating"]
    return float(params.above), float(params.min_duration_s)


def paced_fleet(
    stack: StackConfig, topic: str, vehicles: int, seconds: float, hot: tuple[float, float]
) -> set[str]:
    """`vehicles` readings a second for `seconds`, event time = now. Every `PLANTED_EVERY`th
    vehicle runs above the coolant threshold once, for 10 s longer than the detector's
    duration, starting at a staggered second; returns the planted vehicles."""
    above, duration = hot
    episode = int(duration) + 10
    if seconds < episode + 10:
        raise StreamsimError(
            f"--latency-s must be at least {episode + 10} s: an overheating episode lasts "
            f"{episode} s (the detector's {duration:.0f} s + 10), or no alert can be due"
        )
    starts = max(1, int(seconds) - episode - 5)
    planted = {v: (v // PLANTED_EVERY * 7) % starts for v in range(0, vehicles, PLANTED_EVERY)}
    producer = Producer(producer_config(stack, **{"linger.ms": 5}))
    started = time.time()
    for tick in range(int(seconds)):
        now_ms = int(time.time() * 1000)
        for v in range(vehicles):
            start = planted.get(v)
            coolant = above + 5 if start is not None and start <= tick < start + episode else 90.0
            producer.produce(topic, orjson.dumps(paced_reading(v, tick, now_ms, coolant)))
        producer.poll(0)
        time.sleep(max(0.0, started + tick + 1 - time.time()))
    producer.flush(30)
    return {f"veh-{v:06d}" for v in planted}


def paced_reading(vehicle: int, tick: int, now_ms: int, coolant: float) -> dict[str, Any]:
    """A healthy reading but for the coolant temperature: steady speed, gently varying
    signals (no flatline), no braking, below the speed limit."""
    wobble = (tick + vehicle) % 3
    return {
        "schema": VEHICLE_TELEMETRY.id,
        "event_id": f"lat-{vehicle}-{tick}",
        "vehicle_id": f"veh-{vehicle:06d}",
        "event_time": now_ms,
        "seq": tick,
        "trip_id": vehicle,
        "speed_limit_kmh": 100.0,
        "lat": 48.0 + 0.0002 * tick,
        "lon": 9.0 + 0.001 * vehicle,
        "speed_kmh": 72.0 + wobble,
        "odometer_km": 1000.0 + 0.02 * tick,
        "coolant_c": coolant + 0.1 * wobble,
        "oil_pressure_kpa": 300.0 + wobble,
        "battery_v": 14.0 + 0.01 * wobble,
        **{
            f"tyre_{t}_kpa": 240.0 + 0.1 * ((tick + i) % 2)
            for i, t in enumerate(("fl", "fr", "rl", "rr"))
        },
        "accel_long_ms2": 0.1 * (wobble - 1),
    }


def alert_latency(
    spark: Any, stack: StackConfig, cfg: Any, vehicles: int, seconds: float
) -> dict[str, Any]:
    """The whole job (micro-batches) on a paced fleet: latency of each alert once due."""
    from pipeline.jobs.vehicles import job
    from pipeline.settings import duration_ms

    topic = cfg.input_topics[0]
    create_topic(stack, topic, 2)
    create_topic(stack, cfg.output_topic, 1)
    queries = job.start(spark, own_checkpoints(stack, cfg.output_topic), cfg)
    try:
        time.sleep(5)  # the first (empty) batches
        planted = paced_fleet(stack, topic, vehicles, seconds, overheating(cfg))
        wait_for_records(stack, cfg.output_topic, len(planted), 30)
    finally:
        for query in queries:
            query.stop()
    records = topic_records(stack, cfg.output_topic)
    due = due_latencies(topic_records(stack, topic), records, duration_ms(cfg.watermark))
    alerted = {r["entity_id"] for r, _ in records if r}
    return {
        "latency_ms": percentiles(due),
        "alerts": sum(1 for r, _ in records if r),
        "planted": len(planted),
        "alerted_planted": len(alerted & planted),
        "alerted_other": len(alerted - planted),
    }


def due_latencies(inputs: list[Record], alerts: list[Record], watermark_ms: int) -> list[float]:
    """Per alert: its append time - the first append of a reading `watermark_ms` or more past
    the alert's event time (the reading that let the watermark pass it).

    >>> readings = [({"event_time": t}, 1000 + t) for t in (0, 10, 20, 30)]
    >>> due_latencies(readings, [({"event_time": 5}, 1100)], 10)
    [80.0]
    """
    pairs = sorted((int(r["event_time"]), ts) for r, ts in inputs if r)
    times = np.array([t for t, _ in pairs])
    first_append = np.minimum.accumulate(np.array([ts for _, ts in pairs])[::-1])[::-1]
    out = []
    for alert, ts in alerts:
        i = int(np.searchsorted(times, int((alert or {})["event_time"]) + watermark_ms))
        if i < len(times):
            out.append(float(ts - first_append[i]))
    return out


def paced_cards(stack: StackConfig, topic: str, cards: int, rate: int, seconds: float) -> int:
    """`rate` card-present transactions a second for `seconds` over `cards` cards, each card
    at home in Paris at a merchant of its own, event time = now; every `CARD_PLANTED_EVERY`th
    card makes one use in New York halfway through (two impossible-travel alerts: there and
    back). Returns the planted cards."""
    producer = Producer(producer_config(stack, **{"linger.ms": 5}))
    total = int(rate * seconds)
    planted_at = total // 2
    planted = 0
    started = time.time()
    for seq in range(total):
        card = seq % cards
        where = PARIS
        if card % CARD_PLANTED_EVERY == 0 and planted_at <= seq < planted_at + cards:
            where, planted = NEW_YORK, planted + 1
        body = {
            "schema": "cards.transaction/1",
            "event_id": f"lat-{seq}",
            "transaction_id": f"lat-{seq}",
            "card_token": f"tok-{card:06d}",
            "event_time": int(time.time() * 1000),
            "amount": 20.0 + seq % 50,
            "currency": "EUR",
            "merchant_id": f"m-{card:06d}",
            "merchant_category": "retail",
            "channel": "card_present",
            "card_present": True,
            "lat": where[0],
            "lon": where[1],
            "country": "FR",
        }
        producer.produce(topic, orjson.dumps(body), key=f"tok-{card:06d}")
        if seq % 100 == 0:
            producer.poll(0)
            time.sleep(max(0.0, started + seq / rate - time.time()))
    producer.flush(30)
    return planted


def card_alert_latency(
    spark: Any, stack: StackConfig, cfg: Any, cards: int, rate: int, seconds: float
) -> dict[str, Any]:
    """The whole card job (micro-batches) on paced transactions: latency of each alert once
    due (its append - the append of the first use a watermark past its event time)."""
    from pipeline.jobs.cards import job
    from pipeline.settings import duration_ms

    topic = cfg.input_topics[0]
    create_topic(stack, topic, 2)
    create_topic(stack, cfg.output_topic, 1)
    queries = job.start(spark, own_checkpoints(stack, cfg.output_topic), cfg)
    try:
        time.sleep(5)  # the first (empty) batches
        planted = paced_cards(stack, topic, cards, rate, seconds)
        wait_for_records(stack, cfg.output_topic, 2 * planted, 30)
    finally:
        for query in queries:
            query.stop()
    records = topic_records(stack, cfg.output_topic)
    due = due_latencies(topic_records(stack, topic), records, duration_ms(cfg.watermark))
    return {
        "latency_ms": percentiles(due),
        "alerts": sum(1 for r, _ in records if r),
        "planted": 2 * planted,
        "alerted_planted": sum(1 for r, _ in records if r and r["rule"] == "impossible_travel"),
        "alerted_other": sum(1 for r, _ in records if r and r["rule"] != "impossible_travel"),
    }
