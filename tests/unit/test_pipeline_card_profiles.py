"""BucketState with cardholder profiles (rows of kind "p"): the spending rule judges each
released purchase against its card's profile exactly as the fraud endpoint's `ProfileStore`
does, applies profiles on arrival (never late), and judges no card without one."""

from __future__ import annotations

import json
import pickle
import random
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from api.fraud.profiles import ProfileStore
from api.fraud.settings import ApiSettings, load_settings
from core.config import load_model
from detectors import Alert, SpendingParams, TravelParams
from pipeline.config import PipelineConfig
from pipeline.jobs.cards.config import CardsSettings
from pipeline.jobs.cards.state import (
    INPUT_COLUMNS,
    BucketState,
    CardRuleParams,
    profile_features,
)

REPO = Path(__file__).resolve().parents[2]
MINUTE = 60_000
T0 = 1_767_225_600_000
ENDPOINT = SpendingParams(max_category_share=0.005)  # devices ignored: the amounts decide
PARAMS = CardRuleParams(spending=ENDPOINT, profiles=True)
CATEGORIES = ["5411", "5812", "5732", "5944", "4511"]


def profile(card: str, typical: float, counts: dict[str, int], at: int = T0) -> dict[str, Any]:
    """A `cards.profile/1` record (the fields the rule reads, plus the envelope)."""
    return {
        "schema": "cards.profile/1",
        "event_id": f"profile-{card}",
        "card_token": card,
        "event_time": at,
        "typical_amount": typical,
        "history_count": sum(counts.values()),
        "category_counts": counts,
    }


def push_profile(bucket: BucketState, record: dict[str, Any]) -> bool:
    features = {k: record[k] for k in ("history_count", "typical_amount", "category_counts")}
    return bucket.push(
        "p",
        record["card_token"],
        record["event_id"],
        record["event_time"],
        None,
        None,
        None,
        None,
        None,
        None,
        profile=json.dumps(features),
    )


def purchase(
    bucket: BucketState, card: str, event_id: str, at: int, amount: float, category: str
) -> bool:
    return bucket.push("c", card, event_id, at, None, None, False, amount, category, "m-1")


def facts(alert: Alert) -> tuple[str, str, int, str]:
    """What an alert says: id, entity, time and evidence (profile features included)."""
    return (
        alert.alert_id,
        alert.entity_id,
        alert.event_time,
        json.dumps(alert.evidence, sort_keys=True),
    )


def test_every_purchase_is_judged_as_the_endpoint_judges_it() -> None:
    rng = random.Random(5)
    store, bucket = ProfileStore(), BucketState(PARAMS)
    for c in range(40):
        counts = {cat: rng.choice([0, 1, 3, 40, 300]) for cat in CATEGORIES}
        record = profile(f"card-{c}", rng.choice([12.0, 30.0, 80.0]), counts)
        store.put(record)
        assert push_profile(bucket, record)
    expected, data = set(), bucket.to_bytes()
    for i in range(600):
        bucket = BucketState.from_bytes(data, PARAMS)  # a batch per purchase: state round trip
        card = f"card-{rng.randrange(45)}"  # five cards have no profile
        at, amount = T0 + i * 1000, rng.choice([20.0, 150.0, 250.0, 900.0, 4000.0])
        category = rng.choice(CATEGORIES)
        alert = store.check(card, f"tx-{i}", at, amount, category, ENDPOINT)
        expected |= set() if alert is None else {facts(alert)}
        purchase(bucket, card, f"tx-{i}", at, amount, category)
        data = bucket.to_bytes()
    got = {facts(a) for a in bucket.advance(T0 + 600 * 1000)}
    assert len(expected) > 20  # the data does fire, and not everywhere
    assert got == expected


def test_a_card_without_a_profile_is_not_judged_even_with_stream_history() -> None:
    with_profiles, from_stream = BucketState(PARAMS), BucketState(CardRuleParams(spending=ENDPOINT))
    for bucket in (with_profiles, from_stream):
        for i in range(12):
            purchase(bucket, "c1", f"g-{i}", T0 + i * MINUTE, 20.0, "5411")
        purchase(bucket, "c1", "ato", T0 + 20 * MINUTE, 900.0, "5944")
    assert with_profiles.advance(T0 + 20 * MINUTE) == []
    assert [a.event_ids for a in from_stream.advance(T0 + 20 * MINUTE)] == [("ato",)]


def test_a_profile_is_applied_on_arrival_whatever_the_watermark() -> None:
    bucket = BucketState(PARAMS)
    purchase(bucket, "c1", "early", T0 + 10 * MINUTE, 20.0, "5411")
    bucket.advance(T0 + 10 * MINUTE)  # the card has released past the profile's time
    assert push_profile(bucket, profile("c1", 25.0, {"5411": 400}))
    assert bucket.late_dropped == 0 and bucket.timer() is None  # not buffered, no timer
    bucket = BucketState.from_bytes(bucket.to_bytes(), PARAMS)
    purchase(bucket, "c1", "ato", T0 + 11 * MINUTE, 900.0, "5944")
    assert [a.event_ids for a in bucket.advance(T0 + 11 * MINUTE)] == [("ato",)]


def test_a_profile_after_the_purchase_was_released_cannot_help_it() -> None:
    bucket = BucketState(PARAMS)
    purchase(bucket, "c1", "ato-1", T0 + MINUTE, 900.0, "5944")
    assert bucket.advance(T0 + MINUTE) == []  # released with no profile: not judged
    push_profile(bucket, profile("c1", 25.0, {"5411": 400}))
    purchase(bucket, "c1", "ato-2", T0 + 2 * MINUTE, 900.0, "5944")
    assert [a.event_ids for a in bucket.advance(T0 + 2 * MINUTE)] == [("ato-2",)]


def test_a_buffered_purchase_is_judged_with_a_profile_that_arrived_before_its_release() -> None:
    bucket = BucketState(PARAMS)
    purchase(bucket, "c1", "ato", T0 + 5 * MINUTE, 900.0, "5944")
    assert bucket.advance(T0) == []  # still buffered
    push_profile(bucket, profile("c1", 25.0, {"5411": 400}, at=T0 + 60 * MINUTE))
    assert [a.event_ids for a in bucket.advance(T0 + 5 * MINUTE)] == [("ato",)]


def test_the_newer_profile_wins() -> None:
    bucket = BucketState(PARAMS)
    assert push_profile(bucket, profile("c1", 25.0, {"5411": 400}, at=T0 + MINUTE))
    assert not push_profile(bucket, profile("c1", 25.0, {"5944": 400}, at=T0))  # older
    purchase(bucket, "c1", "ato", T0 + 2 * MINUTE, 900.0, "5944")
    assert [a.event_ids for a in bucket.advance(T0 + 2 * MINUTE)] == [("ato",)]
    assert push_profile(bucket, profile("c1", 25.0, {"5944": 400}, at=T0 + 3 * MINUTE))
    purchase(bucket, "c1", "ring", T0 + 4 * MINUTE, 900.0, "5944")
    assert bucket.advance(T0 + 4 * MINUTE) == []  # a jeweller's regular now


def test_profile_rows_come_in_frames_and_a_known_device_is_the_holders() -> None:
    record = profile("c1", 25.0, {"5411": 400})
    features = {k: record[k] for k in ("history_count", "typical_amount", "category_counts")}
    features["devices"] = ["dv-own"]
    profile_json = json.dumps(features)
    at = T0 + MINUTE
    rows = [
        ("p", "c1", "profile-c1", T0, None, None, None, None, None, None, None, profile_json),
        ("c", "c1", "ato", at, None, None, False, 900.0, "5944", "m-1", "dv-new", None),
        ("m", "m-1", "ato", at, None, None, False, 900.0, "5944", "c1", "dv-new", None),
        ("c", "c1", "own", at + 1, None, None, False, 900.0, "5944", "m-1", "dv-own", None),
    ]
    new = ENDPOINT.model_copy(update={"devices": "new"})
    bucket = BucketState(CardRuleParams(spending=new, travel=TravelParams(), profiles=True))
    bucket.push_frame(pd.DataFrame(rows, columns=list(INPUT_COLUMNS)))
    alerts = bucket.advance(at + 1)
    assert [(a.rule, a.event_ids) for a in alerts] == [("spending_anomaly", ("ato",))]


def test_a_profile_only_card_is_forgotten_a_ttl_after_the_profile() -> None:
    params = CardRuleParams(spending=ENDPOINT, profiles=True, ttl_ms=60 * MINUTE)
    bucket = BucketState(params)
    push_profile(bucket, profile("c1", 25.0, {"5411": 400}))
    bucket.advance(T0 + 59 * MINUTE)
    assert "c:c1" in BucketState.from_bytes(bucket.to_bytes(), params).entities
    bucket.advance(T0 + 60 * MINUTE)
    assert not BucketState.from_bytes(bucket.to_bytes(), params).entities


def test_state_from_before_profiles_still_loads() -> None:
    old = [[], None, 5, [], [0, {}, []], [], None]  # a card's record without the profile slot
    bucket = BucketState(PARAMS)
    bucket.entities["c:c1"], bucket.latest["c:c1"] = pickle.dumps(old), 5
    bucket = BucketState.from_bytes(bucket.to_bytes(), PARAMS)
    assert push_profile(bucket, profile("c1", 25.0, {"5411": 400}))
    purchase(bucket, "c1", "ato", T0 + MINUTE, 900.0, "5944")
    assert len(bucket.advance(T0 + MINUTE)) == 1


@pytest.mark.parametrize(
    "bad",
    [
        None,
        "{not json",
        '{"history_count": 4, "typical_amount": 2.0}',
        '{"history_count": 4, "typical_amount": 2.0, "category_counts": [1]}',
        '{"history_count": "x", "typical_amount": 2.0, "category_counts": {}}',
    ],
)
def test_profile_features_refuse_what_is_not_a_profile(bad: Any) -> None:
    with pytest.raises(ValueError, match="not a card profile"):
        profile_features(bad)


def test_the_job_reads_profiles_by_default_with_the_endpoints_thresholds() -> None:
    settings = CardsSettings()
    assert settings.profiles_topic == "cards.profiles"
    assert settings.profiles_starting_offsets == "earliest"
    endpoint = load_settings(REPO / "config" / "api.yaml").spending  # the shipped endpoint's
    assert settings.spending == ApiSettings().spending == endpoint
    shipped = load_model(PipelineConfig, REPO / "config" / "pipelines" / "cards.yaml")
    assert shipped.cards.spending == endpoint
    assert shipped.cards.profiles_topic == "cards.profiles"
    assert CardsSettings(profiles_topic=None).profiles_topic is None


@pytest.mark.parametrize("offsets", ["nowhere", "[1]", "{"])
def test_profiles_starting_offsets_are_checked(offsets: str) -> None:
    with pytest.raises(ValueError, match="use earliest, latest, or JSON"):
        CardsSettings(profiles_starting_offsets=offsets)


def test_state_from_before_devices_still_judges() -> None:
    """A profile and a use kept by a job from before devices: no device known, none paid."""
    params = CardRuleParams(spending=ENDPOINT, profiles=True)
    bucket = BucketState(params)
    features = (400, 25.0, {"5411": 400})
    use = (T0 + MINUTE, "ato", None, None, False, 900.0, "5944", "m-1")
    old = [[use], None, T0 + MINUTE, [], [0, {}, []], [], None, (features, T0)]
    bucket.entities["c:c1"], bucket.latest["c:c1"] = pickle.dumps(old), T0 + MINUTE
    bucket.due["c:c1"] = T0 + MINUTE
    bucket = BucketState.from_bytes(bucket.to_bytes(), params)
    assert [a.event_ids for a in bucket.advance(T0 + MINUTE)] == [("ato",)]
