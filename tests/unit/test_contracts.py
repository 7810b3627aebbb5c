"""The contracts module: topics, event schemas and labels declared once, and what derives from
them equal to what the parts used before they derived it (literal copies here, so a change to
a wire format shows up as a failing test, not as a silent change)."""

from __future__ import annotations

import subprocess
import sys

import orjson
import pytest
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from core.contracts import (
    CARD_ACTIVITY,
    CARD_TRANSACTION,
    EVENTS,
    SENSOR_READING,
    VEHICLE_TELEMETRY,
    labels,
    topics,
)
from simulators.encoding import EventEncoder, PayloadField, payload_fields
from simulators.entities import EntityTable
from simulators.records import row_dtype
from simulators.settings import EntityClass

TYRES = ("tyre_fl_kpa", "tyre_fr_kpa", "tyre_rl_kpa", "tyre_rr_kpa")
#: The vehicle job's `VEHICLE_SCHEMA` as it was written out.
VEHICLE_NUMBERS = (
    "speed_limit_kmh",
    "lat",
    "lon",
    "speed_kmh",
    "heading_deg",
    "odometer_km",
    "rpm",
    "coolant_c",
    "oil_pressure_kpa",
    "fuel_pct",
    "battery_v",
    *TYRES,
    "accel_long_ms2",
)
VEHICLE_STRUCT = StructType(
    [
        StructField("schema", StringType()),
        StructField("event_id", StringType()),
        StructField("vehicle_id", StringType()),
        StructField("event_time", LongType()),
        StructField("seq", LongType()),
        StructField("trip_id", LongType()),
        StructField("road_class", StringType()),
        *(StructField(name, DoubleType()) for name in VEHICLE_NUMBERS),
    ]
)
#: The card job's `TRANSACTION_SCHEMA` as it was written out.
TRANSACTION_STRUCT = StructType(
    [
        StructField("schema", StringType()),
        StructField("event_id", StringType()),
        StructField("transaction_id", StringType()),
        StructField("card_token", StringType()),
        StructField("event_time", LongType()),
        StructField("amount", DoubleType()),
        StructField("currency", StringType()),
        StructField("merchant_id", StringType()),
        StructField("merchant_category", StringType()),
        StructField("channel", StringType()),
        StructField("card_present", BooleanType()),
        StructField("lat", DoubleType()),
        StructField("lon", DoubleType()),
        StructField("country", StringType()),
        StructField("terminal_id", StringType()),
        StructField("device_id", StringType()),
    ]
)
#: The vehicle scenario's `PAYLOAD` as it was written out.
VEHICLE_PAYLOAD = (
    PayloadField("trip_id", "int"),
    PayloadField("road_class", "enum", choices=("motorway", "rural", "urban")),
    PayloadField("speed_limit_kmh", "int"),
    PayloadField("lat", "float", decimals=5),
    PayloadField("lon", "float", decimals=5),
    PayloadField("speed_kmh", "float", decimals=1),
    PayloadField("heading_deg", "float", decimals=0),
    PayloadField("odometer_km", "float", decimals=2),
    PayloadField("rpm", "int"),
    PayloadField("coolant_c", "float", decimals=1),
    PayloadField("oil_pressure_kpa", "float", decimals=0),
    PayloadField("fuel_pct", "float", decimals=1),
    PayloadField("battery_v", "float", decimals=2),
    *(PayloadField(name, "float", decimals=1) for name in TYRES),
    PayloadField("accel_long_ms2", "float", decimals=2),
)
SITES = ("Port Jennifer", "Lake Amy")
#: The sensor fleet's payload as it was written out (site names are per run).
SENSOR_PAYLOAD = (
    PayloadField("site", "enum", choices=SITES),
    PayloadField("temperature_c", "float", decimals=2),
    PayloadField("humidity_pct", "float", decimals=1),
    PayloadField("battery_v", "float", decimals=3),
    PayloadField("status", "enum", choices=("ok", "low_battery")),
)


def test_the_spark_schemas_are_what_the_jobs_parsed() -> None:
    assert VEHICLE_TELEMETRY.spark_schema() == VEHICLE_STRUCT
    assert CARD_TRANSACTION.spark_schema(exclude=("card_last4", "seq")) == TRANSACTION_STRUCT
    # The card job reads cards.activity with the same fields: the endpoint writes them all.
    activity = CARD_ACTIVITY.spark_schema(names=TRANSACTION_STRUCT.fieldNames())
    assert activity == TRANSACTION_STRUCT


def test_the_encoder_fields_are_the_scenarios_payloads() -> None:
    assert payload_fields(VEHICLE_TELEMETRY) == VEHICLE_PAYLOAD
    assert payload_fields(SENSOR_READING, choices={"site": SITES}) == SENSOR_PAYLOAD
    with pytest.raises(ValueError, match="site"):
        payload_fields(SENSOR_READING)  # a string field needs its values


def test_encoded_events_carry_the_schemas_fields_in_order() -> None:
    table = EntityTable.build(["s-0", "s-1"], [EntityClass(name="default")], [2])
    fields = payload_fields(SENSOR_READING, choices={"site": SITES})
    encoder = EventEncoder(SENSOR_READING.id, SENSOR_READING.entity, "sf-", table, fields)
    rows = __import__("numpy").zeros(2, dtype=row_dtype([(f.name, f.dtype) for f in fields]))
    rows["ent"] = [0, 1]
    (event, _) = (orjson.loads(e) for e in encoder.encode(rows))
    assert tuple(event) == SENSOR_READING.names
    assert event["schema"] == "sensor.reading/1" and event["site"] == SITES[0]
    assert SENSOR_READING.model().model_validate(event).model_dump(by_alias=True) == event


def test_the_envelope_comes_first_and_names_the_entity() -> None:
    for schema in (VEHICLE_TELEMETRY, SENSOR_READING):
        assert schema.names[:5] == ("schema", "event_id", schema.entity, "event_time", "seq")
    assert VEHICLE_TELEMETRY.id == "vehicle.telemetry/1"
    assert set(EVENTS) == {
        "vehicle.telemetry/1",
        "sensor.reading/1",
        "cards.transaction/1",
        "cards.activity/1",
    }
    for schema in EVENTS.values():
        assert schema.topic.key == schema.entity


def test_the_vehicle_signals_and_encoding_hints() -> None:
    assert VEHICLE_TELEMETRY.signals() == VEHICLE_NUMBERS
    assert VEHICLE_TELEMETRY.nullable() == ("lat", "lon")
    assert VEHICLE_TELEMETRY.signed() == ("lat", "lon", "coolant_c", "accel_long_ms2")


def test_a_model_validates_a_card_activity_record() -> None:
    model = CARD_ACTIVITY.model()
    record = {name: None for name in CARD_ACTIVITY.names}
    with pytest.raises(ValueError, match="event_id"):
        model.model_validate(record)


def test_topics_are_declared_once_with_their_keys() -> None:
    names = [t.name for t in topics.TOPICS]
    assert len(names) == len(set(names))
    assert set(names) >= {
        "cards.transactions",
        "cards.activity",
        "cards.profiles",
        "sensors.readings",
        "vehicles.telemetry",
        "shipping.positions",
        "shipping.containers",
        "shipping.port-events",
        "alerts",
        "metrics",
        "deadletter",
    }
    assert topics.CARDS_PROFILES.compacted and not topics.ALERTS.compacted
    assert [t.name for t in topics.TOPICS if t.name.startswith("aggregates.")] == [
        "aggregates.card-features",
        "aggregates.vehicle-stats",
        "aggregates.vehicle-trips",
        "aggregates.sensor-counts",
        "aggregates.heavy-hitters",
        "aggregates.distinct-counts",
    ]
    truth = topics.truth("sensors")
    assert truth.name == "truth.sensors" and truth.key == "event_id"
    assert topics.is_truth(truth.name) and not topics.is_truth("metrics")


def test_labels_are_the_designs_snake_case_types() -> None:
    assert labels.CARD_FRAUDS == (
        "impossible_travel",
        "card_testing",
        "account_takeover",
        "compromised_terminal",
    )
    assert len(labels.VEHICLE_FAULTS) == 7 and "overheating" in labels.VEHICLE_FAULTS
    assert labels.SENSOR_FAULTS == ("stuck_sensor", "spike", "silent_device")
    for types in labels.LABELS.values():
        assert labels.NONE not in types and all(t == t.lower() for t in types)


def test_importing_the_contracts_does_not_import_pyspark() -> None:
    code = "import sys, core.contracts; assert 'pyspark' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_what_the_api_projects_is_in_the_schemas() -> None:
    from api.fraud.decision import RECORD_KEYS, SCHEMA
    from api.fraud.verdict import RESPONSE_KEYS
    from live.views.feeds import ACTIVITY_FIELDS
    from live.views.vehicles import DEFAULT_SIGNALS, SIGNALS

    assert CARD_ACTIVITY.id == SCHEMA
    assert set(RECORD_KEYS) | set(RESPONSE_KEYS) | set(ACTIVITY_FIELDS) <= set(CARD_ACTIVITY.names)
    assert sorted(SIGNALS) == sorted(VEHICLE_TELEMETRY.signals())
    assert SIGNALS[: len(DEFAULT_SIGNALS)] == DEFAULT_SIGNALS


def test_the_card_transaction_is_what_the_scenario_writes() -> None:
    """`scenarios.cards.encoding` writes the event from a bytes template; its keys, in order
    (checked on real events by `test_cards_scenario`), are the schema's."""
    assert CARD_TRANSACTION.names == (
        "schema",
        "event_id",
        "transaction_id",
        "card_token",
        "card_last4",
        "event_time",
        "seq",
        "amount",
        "currency",
        "merchant_id",
        "merchant_category",
        "channel",
        "card_present",
        "lat",
        "lon",
        "country",
        "terminal_id",
        "device_id",
    )
    from scenarios.cards.encoding import SCHEMA

    assert CARD_TRANSACTION.id == SCHEMA


def test_the_static_literals_match_the_contracts() -> None:
    """Literal types must be written out for mypy and the config reference; they may not
    drift from the contracts."""
    from typing import get_args

    from pipeline.jobs.vehicles.config import VehicleSignal
    from scenarios.sensors.config import FaultType as SensorFault
    from scenarios.vehicles.config import FaultType as VehicleFault
    from scenarios.vehicles.config import StuckSignal

    assert sorted(get_args(VehicleSignal)) == sorted(VEHICLE_TELEMETRY.signals())
    assert set(get_args(StuckSignal)) <= set(VEHICLE_TELEMETRY.signals())
    assert get_args(VehicleFault) == labels.VEHICLE_FAULTS
    assert get_args(SensorFault) == labels.SENSOR_FAULTS


#: The alert frame's Spark DDL (`detectors.ALERT_SPARK_DDL`) as it was written out.
ALERT_DDL = (
    "alert_id STRING, rule STRING, label STRING, entity_id STRING, event_time BIGINT, "
    "event_ids ARRAY<STRING>, evidence STRING"
)
#: The alerts topic's record as the panel listed it (`ALERT_FIELDS`, `AlertRow`).
ALERT_TOPIC_FIELDS = (
    "alert_id",
    "rule",
    "label",
    "entity_id",
    "event_time",
    "event_ids",
    "evidence",
    "source",
    "job",
    "detected_at",
    "late",
    "late_by_ms",
)


def _lake_schema() -> object:
    """The lake's `LAKE_SCHEMA` as `pipeline.alerts_sink` wrote it out."""
    import pyarrow as pa

    return pa.schema(
        [
            ("alert_id", pa.string()),
            ("rule", pa.string()),
            ("label", pa.string()),
            ("entity_id", pa.string()),
            ("event_time", pa.int64()),
            ("event_ids", pa.list_(pa.string())),
            ("evidence", pa.string()),
            ("source", pa.string()),
            ("job", pa.string()),
            ("detected_at", pa.int64()),
            ("query_id", pa.string()),
            ("batch_id", pa.int64()),
        ]
    )


def test_the_alert_row_derivations_are_what_the_parts_wrote_out() -> None:
    from pyspark.sql.types import ArrayType

    from core.contracts import ALERT_ROW
    from detectors import ALERT_COLUMNS, ALERT_SPARK_DDL, Alert

    assert ALERT_SPARK_DDL == ALERT_DDL == ALERT_ROW.spark_ddl()
    assert ALERT_ROW.names == ALERT_COLUMNS
    assert ALERT_ROW.spark_schema() == StructType(
        [
            *(StructField(n, StringType()) for n in ("alert_id", "rule", "label", "entity_id")),
            StructField("event_time", LongType()),
            StructField("event_ids", ArrayType(StringType())),
            StructField("evidence", StringType()),
        ]
    )
    alert = Alert.make("velocity", "c1", 5, ["t1"], {"n": 1}, key=["t1"], label="card_testing")
    assert tuple(alert.to_row()) == ALERT_ROW.names and tuple(alert.to_dict()) == ALERT_ROW.names


def test_the_lake_schema_is_the_alert_lake_record() -> None:
    from core.contracts import ALERT_LAKE
    from pipeline.alerts_sink import LAKE_SCHEMA

    assert LAKE_SCHEMA.equals(_lake_schema())
    assert tuple(LAKE_SCHEMA.names) == ALERT_LAKE.names


def test_the_alerts_topic_record_is_the_contracts() -> None:
    """What the sink publishes, what the panel projects and its model's fields: `ALERT`'s
    fields (the jobs that write `late` / `late_by_ms` add them beside the sink's record)."""
    from api.panel.models.feeds import AlertRow
    from core.contracts import ALERT
    from live.views.feeds import ALERT_FIELDS
    from pipeline.alerts_sink import alert_record

    assert ALERT.names == ALERT_TOPIC_FIELDS == ALERT_FIELDS
    assert tuple(AlertRow.model_fields) == ALERT.names
    assert AlertRow.model_config.get("extra") == "allow"
    row = {
        "alert_id": "a1",
        "rule": "velocity",
        "label": None,
        "entity_id": "c1",
        "event_time": 5,
        "event_ids": ["t1"],
        "evidence": '{"n": 5}',
    }
    record = alert_record(row, "cards", 9)
    assert tuple(record) == tuple(f.name for f in ALERT.fields if not f.optional)
    parsed = AlertRow.model_validate(record)
    assert parsed.model_dump() == {**record, "late": None, "late_by_ms": None}
    assert AlertRow.model_validate({**record, "late": True, "late_by_ms": 7}).late_by_ms == 7
    with pytest.raises(ValueError, match="rule"):
        AlertRow.model_validate({**record, "rule": None})


def test_the_activity_model_and_keys_derive_from_the_activity_record() -> None:
    from api.fraud.decision import RECORD_KEYS
    from api.fraud.verdict import RESPONSE_KEYS
    from api.panel.models.feeds import ActivityRow
    from live.views.feeds import ACTIVITY_FIELDS

    assert tuple(ActivityRow.model_fields) == ACTIVITY_FIELDS
    assert set(ACTIVITY_FIELDS) <= set(CARD_ACTIVITY.names)
    # As the endpoint listed them: the response body, then what the state reads.
    assert RESPONSE_KEYS == (
        "transaction_id",
        "card_token",
        "card_last4",
        "decision",
        "score",
        "reasons",
        "evidence",
        "decided_at",
    )
    assert set(RECORD_KEYS) == {
        *RESPONSE_KEYS,
        *("event_time", "amount", "currency", "merchant_id", "channel", "card_present"),
        *("lat", "lon", "country"),
    }
    row = ActivityRow.model_validate(
        {key: None for key in ACTIVITY_FIELDS} | {"card_token": "t"} | {"card_last4": "1234"}
    )
    assert row.model_dump()["decision"] is None
    with pytest.raises(ValueError, match="card_last4"):
        ActivityRow.model_validate({key: None for key in ACTIVITY_FIELDS} | {"card_token": "t"})
    with pytest.raises(ValueError, match="decision"):
        ActivityRow.model_validate(
            {key: None for key in ACTIVITY_FIELDS}
            | {"card_token": "t", "card_last4": "1234", "decision": "maybe"}
        )
