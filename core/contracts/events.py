"""Every event schema, declared once: its name and version, its entity, and its fields in
wire order with their types; and `Record`, the same for a record that is not an event (the
alert, `core.contracts.alerts`).

An event is a JSON object: the envelope (`schema`, `event_id`, the entity id, `event_time` in
epoch ms of the device clock, `seq` per device), then the payload fields. What other packages
need is derived from here, never listed again:
- the simulator's encoder fields (`simulators.encoding.payload_fields`);
- the Spark schema a job parses with (`spark_schema`, pyspark imported lazily), or its DDL
  string (`spark_ddl`, for `applyInPandas` and friends);
- the pyarrow schema of a Parquet file (`arrow_schema`, pyarrow imported lazily);
- the API's field lists and models (`EventSchema.signals`, `model`).

A field's `type` is its JSON type on the wire. A `measure` is a numeric reading (a signal):
readers take it as a double even where the device writes an integer (`rpm`), so detectors and
aggregates see one numeric type. `decimals` is how many digits the simulator writes. A
`strings` field is a JSON array of strings; a `json` or `object` field is, in a table (Spark,
pandas, Parquet), its JSON text: an alert's `evidence` is an object on the topic and a string
in the alert frame and the lake.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import cache
from typing import TYPE_CHECKING, Any, Literal, cast

from core.contracts import topics
from core.contracts.topics import Topic

if TYPE_CHECKING:
    import pyarrow as pa
    from pydantic import BaseModel
    from pyspark.sql.types import StructType

FieldType = Literal["string", "int", "float", "bool", "strings", "object", "json"]


@dataclass(frozen=True)
class Field:
    """One key of an event: its name, JSON type and what a value may be."""

    name: str
    type: FieldType
    #: float: the digits the simulator writes.
    decimals: int = 2
    #: May be JSON null (e.g. no GPS fix in a tunnel).
    nullable: bool = False
    #: float: may be negative (the simulator writes the others as >= 0).
    signed: bool = True
    #: A numeric reading: readers take it as a double.
    measure: bool = False
    #: string: the values it takes, where they are fixed by the schema.
    choices: tuple[str, ...] = ()
    doc: str = ""
    #: The key may be missing: only some producers write it (an alert's `late`).
    optional: bool = False

    @property
    def value_type(self) -> Any:
        """The Python type of a value, null aside (a `Literal` of the choices if fixed)."""
        if self.choices:
            return cast(Any, Literal)[self.choices]
        return {
            "string": str,
            "int": float if self.measure else int,
            "float": float,
            "bool": bool,
            "strings": list[str],
            "object": dict[str, Any],
            "json": Any,
        }[self.type]

    @property
    def python_type(self) -> Any:
        base = self.value_type
        return base | None if self.nullable else base

    @property
    def ddl_type(self) -> str:
        """Its Spark SQL type, as a DDL string names it."""
        if self.type == "float" or self.measure:
            return "DOUBLE"
        return _DDL[self.type]

    def spark_type(self) -> Any:
        """The pyspark `DataType` a job parses this field as."""
        from pyspark.sql import types as T

        return {
            "STRING": T.StringType(),
            "BIGINT": T.LongType(),
            "DOUBLE": T.DoubleType(),
            "BOOLEAN": T.BooleanType(),
            "ARRAY<STRING>": T.ArrayType(T.StringType()),
        }[self.ddl_type]

    def arrow_type(self) -> pa.DataType:
        """Its pyarrow type in a Parquet file."""
        import pyarrow as pa

        if self.type == "float" or self.measure:
            return pa.float64()
        return {
            "string": pa.string(),
            "int": pa.int64(),
            "bool": pa.bool_(),
            "strings": pa.list_(pa.string()),
            "object": pa.string(),
            "json": pa.string(),
        }[self.type]


#: Spark SQL types by field type (a float or a measure is DOUBLE).
_DDL = {
    "string": "STRING",
    "int": "BIGINT",
    "bool": "BOOLEAN",
    "strings": "ARRAY<STRING>",
    "object": "STRING",
    "json": "STRING",
}


def _string(name: str, doc: str = "", **kw: Any) -> Field:
    return Field(name, "string", doc=doc, **kw)


def _float(name: str, decimals: int, **kw: Any) -> Field:
    return Field(name, "float", decimals=decimals, measure=True, **kw)


SCHEMA = _string("schema", "name/version, e.g. vehicle.telemetry/1")
EVENT_ID = _string("event_id", "unique, deterministic from the seed")
EVENT_TIME = Field("event_time", "int", doc="epoch ms, the device's clock")
SEQ = Field("seq", "int", doc="per-device sequence number")


class _Fields:
    """What derives from a record's fields, for `EventSchema` and `Record` alike."""

    fields: tuple[Field, ...]
    by_name: dict[str, Field]

    @property
    def id(self) -> str:
        raise NotImplementedError

    @property
    def title(self) -> str:
        """A class name for its model: `cards.activity` -> `CardsActivity`."""
        return "".join(p.capitalize() for p in self.id.split("/")[0].replace(".", "_").split("_"))

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields)

    def field(self, name: str) -> Field:
        return self.by_name[name]

    def select(
        self, names: Iterable[str] | None = None, exclude: Iterable[str] = ()
    ) -> tuple[Field, ...]:
        """Fields in wire order: those in `names` (default all), less those in `exclude`."""
        keep = set(self.names if names is None else names)
        unknown = keep - set(self.names) | set(exclude) - set(self.names)
        if unknown:
            raise KeyError(f"{self.id} has no field {sorted(unknown)}")
        drop = set(exclude)
        return tuple(f for f in self.fields if f.name in keep and f.name not in drop)

    def pick(self, names: Iterable[str]) -> tuple[Field, ...]:
        """The fields named, in the order given (a view's own order)."""
        names = tuple(names)
        self.select(names)  # every name is a field
        return tuple(self.by_name[name] for name in names)

    def spark_schema(
        self, names: Iterable[str] | None = None, exclude: Iterable[str] = ()
    ) -> StructType:
        """The `StructType` a Spark job parses these records with (all fields nullable, so a
        missing one parses as null and the job can dead-letter it); `names` / `exclude` pick
        the fields a job reads. pyspark is imported here, not when `core` is."""
        from pyspark.sql.types import StructField, StructType

        return StructType(
            [StructField(f.name, f.spark_type()) for f in self.select(names, exclude)]
        )

    def spark_ddl(self, names: Iterable[str] | None = None, exclude: Iterable[str] = ()) -> str:
        """The same schema as a DDL string (`applyInPandas`, `transformWithStateInPandas`),
        without pyspark: `alert_id STRING, ..., event_ids ARRAY<STRING>, ...`."""
        return ", ".join(f"{f.name} {f.ddl_type}" for f in self.select(names, exclude))

    def arrow_schema(
        self, names: Iterable[str] | None = None, exclude: Iterable[str] = ()
    ) -> pa.Schema:
        """The pyarrow schema of these records in a Parquet file (every field nullable)."""
        import pyarrow as pa

        return pa.schema([(f.name, f.arrow_type()) for f in self.select(names, exclude)])

    def model(
        self,
        names: Sequence[str] | None = None,
        *,
        title: str | None = None,
        doc: str | None = None,
        nullable_except: Iterable[str] | None = None,
        extra: Literal["ignore", "allow"] = "ignore",
    ) -> type[BaseModel]:
        """A pydantic model of the records: the fields `names` in that order (default all, in
        wire order), typed. A nullable field may be left out (None) and so may an `optional`
        one. `nullable_except` makes it a read view's model: every field may be null but
        those, and is a key present (no default) unless `optional`. Unknown keys are ignored,
        or kept with `extra="allow"`."""
        fields = self.fields if names is None else self.pick(names)
        view = None if nullable_except is None else tuple(sorted(nullable_except))
        if view is not None:
            self.select(view)  # every name is a field
        return _model(self, fields, title or self.title, doc, view, extra)


@dataclass(frozen=True)
class EventSchema(_Fields):
    """An event's `name/version`, its entity id field, its topic and all its fields in wire
    order (envelope included)."""

    name: str
    version: int
    entity: str
    topic: Topic
    fields: tuple[Field, ...]
    doc: str = ""
    by_name: dict[str, Field] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", _by_name(self.id, self.fields))
        missing = {"schema", "event_id", self.entity, "event_time"} - set(self.by_name)
        if missing:
            raise ValueError(f"{self.id}: the envelope lacks {sorted(missing)}")

    @property
    def id(self) -> str:
        """The `schema` value of its events, e.g. `vehicle.telemetry/1`."""
        return f"{self.name}/{self.version}"

    @property
    def envelope(self) -> tuple[Field, ...]:
        return tuple(f for f in self.fields if f.name in _ENVELOPE or f.name == self.entity)

    @property
    def payload(self) -> tuple[Field, ...]:
        """The fields after the envelope, in wire order."""
        envelope = {f.name for f in self.envelope}
        return tuple(f for f in self.fields if f.name not in envelope)

    def signals(self) -> tuple[str, ...]:
        """The numeric readings (`measure` fields), in wire order."""
        return tuple(f.name for f in self.fields if f.measure)

    def nullable(self) -> tuple[str, ...]:
        return tuple(f.name for f in self.fields if f.nullable)

    def signed(self) -> tuple[str, ...]:
        """The float fields that may be negative."""
        return tuple(f.name for f in self.fields if f.type == "float" and f.signed)


@dataclass(frozen=True)
class Record(_Fields):
    """A record that is not an event (no envelope, no `schema` key): its name, its fields in
    order, and the topic it goes to, if one (e.g. the alert, `core.contracts.alerts`)."""

    name: str
    fields: tuple[Field, ...]
    doc: str = ""
    topic: Topic | None = None
    by_name: dict[str, Field] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "by_name", _by_name(self.id, self.fields))

    @property
    def id(self) -> str:
        return self.name


def _by_name(record: str, fields: tuple[Field, ...]) -> dict[str, Field]:
    by_name = {f.name: f for f in fields}
    if len(by_name) != len(fields):
        raise ValueError(f"{record}: a field is declared twice")
    return by_name


_ENVELOPE = ("schema", "event_id", "event_time", "seq")


@cache
def _model(
    record: _Fields,
    fields: tuple[Field, ...],
    title: str,
    doc: str | None,
    view: tuple[str, ...] | None,
    extra: Literal["ignore", "allow"],
) -> type[BaseModel]:
    from pydantic import ConfigDict, create_model
    from pydantic import Field as PydanticField

    attributes: dict[str, Any] = {}
    for f in fields:
        if view is None:
            kind, default = f.python_type, None if f.nullable or f.optional else ...
        else:
            nullable = f.name not in view
            kind = f.value_type | None if nullable else f.value_type
            default = None if f.optional else ...
        # `schema` would shadow BaseModel.schema: the attribute is `schema_id`.
        name = "schema_id" if f.name == "schema" else f.name
        attributes[name] = (kind, PydanticField(default, alias=f.name, description=f.doc))
    model: type[BaseModel] = create_model(
        title,
        __config__=ConfigDict(populate_by_name=True, extra=extra),
        __doc__=doc if doc is not None else f"`{record.id}`: {getattr(record, 'doc', '')}",
        **attributes,
    )
    return model


def event(
    name: str,
    version: int,
    entity: str,
    topic: Topic,
    payload: Sequence[Field],
    doc: str = "",
) -> EventSchema:
    """A schema with the standard envelope: schema, event_id, entity, event_time, seq."""
    head = (SCHEMA, EVENT_ID, _string(entity, "the entity id (the Kafka key)"), EVENT_TIME, SEQ)
    return EventSchema(name, version, entity, topic, (*head, *payload), doc)


ROAD_CLASSES = ("motorway", "rural", "urban")
TYRES = ("tyre_fl_kpa", "tyre_fr_kpa", "tyre_rl_kpa", "tyre_rr_kpa")
_UNSIGNED = {"signed": False}

VEHICLE_TELEMETRY = event(
    "vehicle.telemetry",
    1,
    "vehicle_id",
    topics.VEHICLES_TELEMETRY,
    (
        Field("trip_id", "int", doc="(vehicle index + 1) * 10_000 + trip number"),
        _string("road_class", choices=ROAD_CLASSES),
        Field("speed_limit_kmh", "int", measure=True),
        _float("lat", 5, nullable=True, doc="null without a GPS fix (tunnels)"),
        _float("lon", 5, nullable=True),
        _float("speed_kmh", 1, **_UNSIGNED),
        _float("heading_deg", 0, **_UNSIGNED),
        _float("odometer_km", 2, **_UNSIGNED),
        Field("rpm", "int", measure=True),
        _float("coolant_c", 1),
        _float("oil_pressure_kpa", 0, **_UNSIGNED),
        _float("fuel_pct", 1, **_UNSIGNED),
        _float("battery_v", 2, **_UNSIGNED),
        *(_float(name, 1, **_UNSIGNED) for name in TYRES),
        _float("accel_long_ms2", 2),
    ),
    "One reading of a connected vehicle, every `interval_s` while the ignition is on.",
)

SENSOR_STATUSES = ("ok", "low_battery")
SENSOR_READING = event(
    "sensor.reading",
    1,
    "sensor_id",
    topics.SENSORS_READINGS,
    (
        _string("site", doc="the site's name (a few per run)"),
        _float("temperature_c", 2),
        _float("humidity_pct", 1),
        _float("battery_v", 3),
        _string("status", choices=SENSOR_STATUSES),
    ),
    "One reading of a smart meter or environmental sensor.",
)

CHANNELS = ("card_present", "card_not_present", "online")
_TRANSACTION = (
    _string("merchant_id"),
    _string("merchant_category", doc="a 4-digit MCC or a category name"),
    _string("channel", choices=CHANNELS),
    Field("card_present", "bool"),
    _float("lat", 5, nullable=True, doc="the terminal's; null when not card present"),
    _float("lon", 5, nullable=True),
    _string("country"),
    _string("terminal_id", nullable=True),
    _string(
        "device_id",
        nullable=True,
        doc="the payer's device: a browser or app fingerprint online, the phone of a mobile "
        "wallet in store; null for a plastic card at a terminal",
    ),
)
_CARD = (
    _string("transaction_id", doc="the idempotency key; equals event_id"),
    _string("card_token", doc="the PAN's token: never the PAN"),
    _string("card_last4"),
)

CARD_TRANSACTION = EventSchema(
    "cards.transaction",
    1,
    "card_token",
    topics.CARDS_TRANSACTIONS,
    (
        SCHEMA,
        EVENT_ID,
        *_CARD,
        EVENT_TIME,
        SEQ,
        Field("amount", "float", decimals=2),
        _string("currency"),
        *_TRANSACTION,
    ),
    "A card transaction at a terminal or online (token and last 4 digits, never the PAN).",
)

DECISIONS = ("approve", "review", "decline")
CARD_ACTIVITY = EventSchema(
    "cards.activity",
    1,
    "card_token",
    topics.CARDS_ACTIVITY,
    (
        SCHEMA,
        EVENT_ID,
        *_CARD,
        EVENT_TIME,
        Field("amount", "float"),
        _string("currency"),
        *_TRANSACTION,
        _string("decision", choices=DECISIONS),
        Field("score", "float"),
        Field("reasons", "strings", doc="the fired rules, plus no_history / state_incomplete"),
        Field("evidence", "object", doc="previous use, travel, velocity and alerts"),
        Field("decided_at", "int", doc="epoch ms, processing time"),
    ),
    "A transaction the fraud endpoint decided: the request (PAN as token + last 4) and the "
    "verdict. No `seq`: the endpoint is not a device.",
)

CARD_PROFILE = EventSchema(
    "cards.profile",
    1,
    "card_token",
    topics.CARDS_PROFILES,
    (
        SCHEMA,
        _string("event_id", "profile-<card_token>: one live profile per card (compacted)"),
        _string("card_token", doc="the PAN's token: never the PAN"),
        _string("card_last4"),
        Field("event_time", "int", doc="epoch ms: the profile is as of this time"),
        _string("home_country"),
        _float("home_lat", 5, doc="the holder's home city"),
        _float("home_lon", 5),
        _string("currency"),
        _string("usual_channel", choices=("card_present", "online")),
        _float("online_share", 3),
        _float("typical_amount", 2, doc="median of the card's latest purchases"),
        Field("history_count", "int", doc="purchases over the profile's period"),
        Field("history_days", "int", doc="the profile's period"),
        Field("category_counts", "json", doc="purchases per MCC over the period"),
        Field("devices", "json", doc="the device ids the holder has paid from (`device_id`)"),
    ),
    "A cardholder profile from the issuer's master data (compacted, keyed by card token): the "
    "typical ticket, categories, home region and usual channel, as banks keep one.",
)

#: The records on the `metrics` topic: what a finished simulator run was (keyed by scenario),
#: and a pipeline query's progress per batch (keyed by query name). Their producers,
#: `simulators.run_record` and `pipeline.metrics`, define their fields.
SHIPPING_CHANNELS = ("onboard", "satellite", "shore")
SHIPPING_ALARMS = ("none", "temperature", "door", "shock")
PORT_EVENT_KINDS = ("arrival", "departure", "loaded", "unloaded")
_VOYAGE = Field("voyage_id", "int", nullable=True, doc="the ship's voyage leg number")
_CHANNEL = _string("channel", choices=SHIPPING_CHANNELS, doc="held on board, satellite, shore")

SHIPPING_POSITION = event(
    "shipping.position",
    1,
    "ship_id",
    topics.SHIPPING_POSITIONS,
    (
        _VOYAGE,
        _float("lat", 5),
        _float("lon", 5),
        _float("sog_kn", 1, signed=False, doc="speed over ground"),
        _float("cog_deg", 0, signed=False, doc="course over ground"),
        _string("nav_status", choices=("under_way", "moored")),
        _string("dest_port", nullable=True, doc="UN/LOCODE"),
        _CHANNEL,
    ),
    "A ship's position (AIS-like), keyed by its IMO number.",
)
SHIPPING_CONTAINER = event(
    "shipping.container",
    1,
    "container_id",
    topics.SHIPPING_CONTAINERS,
    (
        _string("ship_id", nullable=True),
        _VOYAGE,
        _string("port", nullable=True, doc="UN/LOCODE while in port"),
        _string("owner"),
        _string("cargo"),
        _string("discharge_port", nullable=True),
        _string("final_port", nullable=True),
        Field("reefer", "bool"),
        _float("setpoint_c", 1, nullable=True),
        _float("temp_c", 2, nullable=True),
        _float("power_kw", 2, nullable=True, signed=False),
        Field("door_open", "bool"),
        _float("shock_g", 2, signed=False),
        _string("alarm", choices=SHIPPING_ALARMS),
        _CHANNEL,
    ),
    "A container's sensors (reefer, door, shock), keyed by its ISO 6346 number.",
)
SHIPPING_PORT_EVENT = event(
    "shipping.port-event",
    1,
    "port",
    topics.SHIPPING_PORT_EVENTS,
    (
        _string("event", choices=PORT_EVENT_KINDS),
        _string("ship_id"),
        Field("voyage_id", "int"),
        _string("container_id", nullable=True),
        _string("owner", nullable=True),
        _string("cargo", nullable=True),
    ),
    "A ship's arrival or departure, or a container loaded or unloaded, keyed by the port.",
)

SIMULATOR_RUN = "simulator.run/1"
PIPELINE_PROGRESS = "pipeline.progress/1"

#: Every event schema by its `schema` value.
EVENTS: dict[str, EventSchema] = {
    s.id: s for s in (VEHICLE_TELEMETRY, SENSOR_READING, CARD_TRANSACTION, CARD_ACTIVITY)
}


def with_choices(f: Field, choices: Sequence[str]) -> Field:
    """`f` with values fixed per run (e.g. a sensor fleet's site names)."""
    return replace(f, choices=tuple(choices))
