"""A small seeded shipping scenario for tests: 4 ships, 400 boxes, 6 simulated days, incidents
far more frequent than by default, so each type the seed injects has support in seconds."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import orjson
from confluent_kafka import Producer

from core.config import StackConfig
from core.config.loader import load_model
from core.contracts import topics
from core.kafka import producer_config
from core.kafka.offsets import end_offsets
from scenarios.catalog import ScenarioConfig, run_scenario
from simulators.sinks import JsonlSink

REPO = Path(__file__).resolve().parents[1]
SEED = 11


def small_shipping(run_id: str, seed: int = SEED) -> dict[str, Any]:
    """The scenario as a dict (for `ScenarioConfig.model_validate` or a YAML file)."""
    data = load_model(ScenarioConfig, REPO / "config/scenarios/shipping.yaml").model_dump(
        mode="json"
    )
    data.update(
        run_id=run_id,
        seed=seed,
        entities=4 + 400 + 30,
        duration_s=6 * 86_400.0,
        classes=[
            {"name": "ship", "share": 4},
            {"name": "container", "share": 400},
            {"name": "port", "share": 30},
        ],
    )
    data["domain"]["capacity"] = 150
    data["domain"]["incidents"].update(
        reefer_failure=0.2, door_tamper=0.05, missed_unload=0.1, route_deviation=0.5
    )
    return data


#: Each shipping schema's topic and key field (docs/design.md).
TOPIC = {
    "shipping.container/1": (topics.SHIPPING_CONTAINERS.name, "container_id"),
    "shipping.position/1": (topics.SHIPPING_POSITIONS.name, "ship_id"),
    "shipping.port-event/1": (topics.SHIPPING_PORT_EVENTS.name, "port"),
}


def seeded_events(
    out: Path, ships: int = 3, boxes: int = 150, days: int = 4
) -> list[dict[str, Any]]:
    """A run of seed 13, written to `out` as JSONL; its events in emit order. The batch rules
    find 4 incident types in it with 150 boxes over 4 days (~32,000 events), 3 with 80 boxes
    over 3 days (~12,000)."""
    data = small_shipping(uuid.uuid4().hex[:8], seed=13)
    data.update(
        entities=ships + boxes + 30,
        duration_s=days * 86_400.0,
        classes=[
            {"name": "ship", "share": ships},
            {"name": "container", "share": boxes},
            {"name": "port", "share": 30},
        ],
    )
    data["domain"]["capacity"] = 80
    run_scenario(ScenarioConfig.model_validate(data), JsonlSink(out), speed="max")
    return [orjson.loads(line) for line in (out / "events.jsonl").open("rb")]


def keyed_records(events: list[dict[str, Any]]) -> list[tuple[str, str, bytes]]:
    """(topic, key, value) of each event, as the simulator's Kafka sink writes them."""
    return [(TOPIC[e["schema"]][0], str(e[TOPIC[e["schema"]][1]]), orjson.dumps(e)) for e in events]


def starting_after(stack: StackConfig, names: list[str]) -> str:
    """Spark's JSON form of the topics' end offsets now: the job reads what comes after."""
    return orjson.dumps(
        {t: {str(p): o for p, o in end_offsets(stack, t).items()} for t in names}
    ).decode()


def produce(stack: StackConfig, records: list[tuple[str, str, bytes]]) -> None:
    """(topic, key, value) records into their topics, in order."""
    producer = Producer(producer_config(stack))
    for topic, key, value in records:
        producer.produce(topic, value, key.encode())
        producer.poll(0)
    assert producer.flush(60) == 0
