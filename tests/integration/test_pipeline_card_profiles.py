"""Real broker + real Spark: `cards` judges spending against the cards' profiles.

The profiles go to the job's own compacted topic first, then the purchases; the job must
raise exactly the account-takeover alerts the fraud endpoint's rule (`ProfileStore.check`,
`check_profile_spending`) raises for the same profiles and purchases, ids and evidence alike:
- tok-grocer (400 groceries, typical 25.00, one phone): 900.00 at a jeweller from a device the
  profile does not list -> alert; 30.00 of groceries and 140.00 at the jeweller (under
  min_amount), and 900.00 at the jeweller from the holder's phone or by plastic -> none;
- tok-jeweller (a jeweller's regular): 900.00 at a jeweller from a new device -> none;
- tok-new (5 purchases of history, under min_history): 900.00 at a jeweller -> none;
- tok-stream (no profile, 12 groceries in the stream): 900.00 at a jeweller -> none (the
  stream-built history would fire);
- tok-late: its profile arrives after the watermark passed the profile's time (master data is
  never late), then 900.00 at a jeweller -> alert.
Malformed profiles go to the dead-letter topic with their reason.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest

from api.fraud.profiles import ProfileStore
from core.config import StackConfig
from core.kafka import ensure_topics
from core.kafka.compacted import ensure_compacted
from pipeline.alerts_sink import sink_of
from pipeline.config import PipelineConfig
from pipeline.triggers import query_mode
from tests.integration.test_pipeline_cards import (
    alerts_query,
    process,
    produce,
    read_topic,
    stop,
    wait_until,
    with_dirs,
)
from tests.oracles.cards import PARIS, T0, tx

pytestmark = pytest.mark.integration

MINUTE = 60


def profile(card: str, typical: float, counts: dict[str, int], at: int = T0) -> dict[str, Any]:
    return {
        "schema": "cards.profile/1",
        "event_id": f"profile-{card}",
        "card_token": card,
        "card_last4": "4242",
        "event_time": at,
        "home_country": "FR",
        "home_lat": PARIS[0],
        "home_lon": PARIS[1],
        "currency": "EUR",
        "usual_channel": "card_present",
        "online_share": 0.1,
        "typical_amount": typical,
        "history_count": sum(counts.values()),
        "history_days": 90,
        "category_counts": counts,
        "devices": [f"dv-{card}"],
    }


PROFILES = [
    profile("tok-grocer", 25.0, {"5411": 390, "5812": 10}),
    profile("tok-jeweller", 60.0, {"5944": 150, "5411": 250}),
    profile("tok-new", 25.0, {"5411": 5}),
]
MALFORMED = [
    ("bad-1", b"{not json"),
    ("bad-2", orjson.dumps({**profile("tok-bad-2", 1.0, {}), "typical_amount": None})),
    ("bad-3", orjson.dumps({**profile("tok-bad-3", 1.0, {}), "schema": "cards.transaction/1"})),
    ("bad-4", orjson.dumps({**profile("tok-bad-4", 1.0, {}), "history_count": -3})),
]
JEWELLER = {"merchant": "m-jeweller", "category": "5944"}
TAKER = {"merchant": "m-jeweller", "category": "5944", "device": "dv-taker"}
PURCHASES = [
    tx("grocer-ato", "tok-grocer", 10 * MINUTE, PARIS, amount=900.0, **TAKER),
    tx("grocer-food", "tok-grocer", 11 * MINUTE, PARIS, amount=30.0, category="5411"),
    tx("grocer-small", "tok-grocer", 12 * MINUTE, PARIS, amount=140.0, **TAKER),
    tx("grocer-own", "tok-grocer", 13 * MINUTE, amount=900.0, **JEWELLER, device="dv-tok-grocer"),
    tx("grocer-plastic", "tok-grocer", 14 * MINUTE, PARIS, amount=900.0, **JEWELLER),
    tx("jeweller-ring", "tok-jeweller", 10 * MINUTE, PARIS, amount=900.0, **TAKER),
    tx("new-ring", "tok-new", 10 * MINUTE, PARIS, amount=900.0, **TAKER),
    *[tx(f"stream-{i:02}", "tok-stream", i * MINUTE, PARIS, category="5411") for i in range(12)],
    tx("stream-ring", "tok-stream", 13 * MINUTE, PARIS, amount=900.0, **TAKER),
    tx("clock-1", "tok-clock", 60 * MINUTE, PARIS),  # the watermark (2 min) passes them all
]
LATE_PROFILE = profile("tok-late", 25.0, {"5411": 400})  # as of T0: far behind the watermark
LATE_PURCHASES = [
    tx("late-ato", "tok-late", 70 * MINUTE, PARIS, amount=900.0, **TAKER),
    tx("clock-2", "tok-clock", 120 * MINUTE, PARIS),
]


@dataclass
class Run:
    cfg: PipelineConfig
    modes: dict[str, str | None] = field(default_factory=dict)
    alerts: list[dict] = field(default_factory=list)
    deadletter: list[dict] = field(default_factory=list)


@pytest.fixture(scope="module")
def run(kafka_stack: StackConfig, spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Run:
    from pipeline.jobs.cards import job as cards

    tag = uuid.uuid4().hex[:8]
    stack = with_dirs(kafka_stack, tmp_path_factory.mktemp("card-profiles"))
    cfg = PipelineConfig.model_validate(
        {
            "job": "cards",
            "input_topics": [f"cards.transactions-{tag}"],
            "output_topic": f"alerts-{tag}",
            "deadletter_topic": f"deadletter-{tag}",
            "watermark": "2 minutes",
            "cards": {
                "features_topic": f"aggregates.card-features-{tag}",
                "feature_windows": [{"length": "1 minute"}],
                "profiles_topic": f"cards.profiles-{tag}",
                "deadletter_trigger": {"mode": "microbatch"},
                # each phase waits for every query's idle trigger: 1 s, not the default 10
                "features_trigger": {"mode": "microbatch", "interval": "1 second"},
            },
        }
    )
    profiles_topic = cfg.cards.profiles_topic
    assert profiles_topic is not None
    ensure_topics(stack, [*cfg.input_topics, cfg.output_topic, cfg.deadletter_topic], 1)
    ensure_compacted(stack, profiles_topic)
    result = Run(cfg)
    queries = cards.start(spark, stack, cfg)
    result.modes = {q.name: query_mode(q) for q in queries}
    try:
        produce(stack, profiles_topic, [(p["card_token"], p) for p in PROFILES] + MALFORMED)
        process(queries)
        produce(stack, cfg.input_topics[0], PURCHASES)
        process(queries)
        produce(stack, profiles_topic, [(LATE_PROFILE["card_token"], LATE_PROFILE)])
        process(queries)
        produce(stack, cfg.input_topics[0], LATE_PURCHASES)
        process(queries)
        sink = sink_of(alerts_query(queries))
        assert sink is not None
        wait_until(lambda: sink.stats()["alerts_written"] >= 2, 60)
        process(queries)
    finally:
        stop(queries)
    result.alerts = [r for r, _ in read_topic(stack, cfg.output_topic)]
    result.deadletter = [r for r, _ in read_topic(stack, cfg.deadletter_topic)]
    return result


def endpoint_alerts(cfg: PipelineConfig) -> list[Any]:
    """What the fraud endpoint's rule says for the same profiles and purchases."""
    store = ProfileStore()
    for record in [*PROFILES, LATE_PROFILE]:
        store.put(record)
    alerts = []
    for _, p in PURCHASES + LATE_PURCHASES:
        alert = store.check(
            p["card_token"],
            p["event_id"],
            p["event_time"],
            p["amount"],
            p["merchant_category"],
            cfg.cards.spending,
            p["device_id"],
        )
        alerts += [] if alert is None else [alert]
    return alerts


def test_queries_and_modes(run: Run) -> None:
    assert run.modes == {
        "cards.deadletter": "microbatch",
        "cards.features": "microbatch",
        "cards.alerts": "microbatch",
        "cards.profiles-deadletter": "microbatch",
    }


def test_account_takeover_alerts_are_the_endpoints(run: Run) -> None:
    spending = [a for a in run.alerts if a["rule"] == "spending_anomaly"]
    expected = endpoint_alerts(run.cfg)
    assert sorted(a.event_ids for a in expected) == [("grocer-ato",), ("late-ato",)]
    assert sorted((a["alert_id"], tuple(a["event_ids"])) for a in spending) == sorted(
        (a.alert_id, a.event_ids) for a in expected
    )
    by_id = {a["alert_id"]: a for a in spending}
    for alert in expected:
        got = by_id[alert.alert_id]
        assert got["label"] == "account_takeover"
        assert got["evidence"] == alert.evidence  # the profile's features, the same params
    assert by_id[expected[0].alert_id]["evidence"]["history_count"] == 400


def test_no_alert_without_a_profile(run: Run) -> None:
    assert not [a for a in run.alerts if a["entity_id"] == "tok-stream"]
    assert [a["rule"] for a in run.alerts] == ["spending_anomaly"] * 2  # nothing else fired


def test_malformed_profiles_go_to_the_dead_letter_topic(run: Run) -> None:
    profiles_topic = run.cfg.cards.profiles_topic
    reasons = sorted((r["reason"], r["topic"]) for r in run.deadletter)
    assert reasons == sorted(
        [
            ("not a JSON object", profiles_topic),
            ("missing typical_amount", profiles_topic),
            ("not a cards.profile/1 record", profiles_topic),
            ("negative history_count", profiles_topic),
        ]
    )
    assert all(r["job"] == "cards" for r in run.deadletter)
