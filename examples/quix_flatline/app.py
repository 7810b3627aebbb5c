"""A job that is not streamsim's: a flat-line rule on Quix Streams, scored by streamsim.

It reads a sensor fleet's readings (`sensors.readings`, keyed by `sensor_id`), keeps per sensor
the run of readings in a row with the same temperature and humidity, and writes one alert in
streamsim's contract (docs/contracts.md) to its alerts topic when such a run reaches three
readings: a stuck sensor. It reads nothing of streamsim's but the events' wire format, and
never the truth topics; `streamsim evaluate sensors --alerts-topic TOPIC` scores what it wrote.

    python app.py --bootstrap 127.0.0.1:9092 --alerts-topic alerts.quix-flatline

Runs until stopped (Ctrl+C, SIGTERM), or with `--idle-exit S` once no reading came for S
seconds. Its environment is its own (requirements.txt; `make examples` builds .venv-examples).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from typing import Any

from quixstreams import Application, State

#: Readings in a row with the same values that make a flat line.
RUN = 3
#: Event ids remembered per sensor, so a duplicate delivery does not lengthen a run.
REMEMBERED = 16


def parse(value: bytes | None) -> dict[str, Any] | None:
    """A reading, or None for anything else on the topic (a malformed record, a tombstone)."""
    try:
        record = json.loads(value) if value is not None else None
    except ValueError:
        return None
    if not isinstance(record, dict) or not isinstance(record.get("event_id"), str):
        return None
    if record.get("temperature_c") is None or record.get("humidity_pct") is None:
        return None
    return record


def flat_line(reading: dict[str, Any], state: State) -> dict[str, Any] | None:
    """The sensor's run so far (state is per message key: one sensor), extended by `reading`;
    an alert when the run has just reached `RUN` readings (one alert per flat run)."""
    seen: list[str] = state.get("seen", [])
    if reading["event_id"] in seen:
        return None
    state.set("seen", [*seen, reading["event_id"]][-REMEMBERED:])
    values = [reading["temperature_c"], reading["humidity_pct"]]
    run: dict[str, Any] = state.get("run", {"values": None, "ids": [], "length": 0})
    if run["values"] == values:
        run = {
            "values": values,
            "ids": [*run["ids"], reading["event_id"]][:RUN],
            "length": run["length"] + 1,
        }
    else:
        run = {"values": values, "ids": [reading["event_id"]], "length": 1}
    state.set("run", run)
    if run["length"] != RUN:
        return None
    sensor = str(reading["sensor_id"])
    return {
        "alert_id": hashlib.sha1(f"flat_line|{sensor}|{run['ids'][0]}".encode()).hexdigest(),
        "rule": "flat_line",
        "label": "stuck_sensor",
        "entity_id": sensor,
        "event_time": reading["event_time"],
        "event_ids": run["ids"],
        "evidence": {"temperature_c": values[0], "humidity_pct": values[1], "readings": RUN},
        "detected_at": int(time.time() * 1000),
    }


def main(argv: list[str] | None = None) -> None:
    args = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    args.add_argument("--bootstrap", default="127.0.0.1:9092", help="Kafka bootstrap servers")
    args.add_argument("--readings-topic", default="sensors.readings")
    args.add_argument("--alerts-topic", default="alerts.quix-flatline")
    args.add_argument("--group", default="quix-flatline", help="consumer group")
    args.add_argument("--state-dir", default="state", help="where the RocksDB state lives")
    args.add_argument("--idle-exit", type=float, default=0.0, help="stop after S idle seconds")
    opts = args.parse_args(argv)

    app = Application(
        broker_address=opts.bootstrap,
        consumer_group=opts.group,
        auto_offset_reset="earliest",
        state_dir=opts.state_dir,
        loglevel="WARNING",
    )
    readings = app.topic(opts.readings_topic, key_deserializer="string", value_deserializer="bytes")
    alerts = app.topic(opts.alerts_topic, key_serializer="string", value_serializer="json")
    sdf = app.dataframe(readings)
    sdf = sdf.apply(parse).filter(lambda r: r is not None)
    sdf = sdf.apply(flat_line, stateful=True).filter(lambda a: a is not None)
    sdf.to_topic(alerts, key=lambda a: a["entity_id"])
    app.run(timeout=opts.idle_exit)


if __name__ == "__main__":
    main()
