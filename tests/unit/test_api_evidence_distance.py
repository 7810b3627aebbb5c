"""The endpoint's travel evidence takes Vincenty's distance where the rule cannot be near its
threshold (`detectors.cards.travel.pair_distance_km`): every decision, score, reason and alert
is the same as with Karney's distance everywhere (the path before), and the evidence differs by less
than a millimetre."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import orjson
import pytest

import api.fraud.decision
from api.fraud.models import TransactionRequest
from api.fraud.publisher import MemoryPublisher
from api.fraud.service import FraudService
from api.fraud.settings import ApiSecrets, ApiSettings
from detectors import geodesic_km
from detectors.cards.travel import Position, TravelParams

SECRET = b"unit-test-secret-0123456789"
T0 = 1_767_225_600_000
#: Homes: real cities, some close to each other (borders), some far apart.
CITIES = [
    (51.5074, -0.1278),  # London
    (48.8566, 2.3522),  # Paris
    (48.5734, 7.7521),  # Strasbourg
    (48.5729, 7.8155),  # Kehl
    (40.7128, -74.0060),  # New York
    (-33.8688, 151.2093),  # Sydney
    (35.6762, 139.6503),  # Tokyo
    (55.7558, 37.6173),  # Moscow
    (-23.5505, -46.6333),  # Sao Paulo
    (64.1466, -21.9426),  # Reykjavik
]
PANS = [
    "4111111111111111",
    "5555555555554444",
    "4012888888881881",
    "378282246310005",
    "6011111111111117",
    "5105105105105100",
]


def karney_pair_distance(previous: Position, current: Position, params: TravelParams) -> float:
    """The evidence distance before: Karney's, always."""
    return geodesic_km(previous.lat, previous.lon, current.lat, current.lon)


def stream(seed: int, n: int) -> list[TransactionRequest]:
    """Card uses with gaps from seconds to a day: near home, in another city (often too soon),
    exactly at a pair's threshold, or online."""
    rng = np.random.default_rng(seed)
    at = {pan: T0 for pan in PANS}
    out = []
    for i in range(n):
        pan = PANS[int(rng.integers(len(PANS)))]
        at[pan] += int(rng.choice([5_000, 120_000, 3_600_000, 40_000_000]) * rng.random())
        kind = rng.random()
        body: dict[str, Any] = {
            "transaction_id": f"t{i}",
            "card_number": pan,
            "amount": round(float(rng.uniform(1, 300)), 2),
            "currency": "EUR",
            "merchant_id": f"m-{int(rng.integers(50))}",
            "merchant_category": "grocery",
            "country": "FR",
            "event_time": at[pan] + int(rng.normal(0, 30_000)),  # skewed, some out of order
        }
        if kind < 0.15:
            body["channel"] = "online"
        else:
            lat, lon = CITIES[int(rng.integers(len(CITIES)))]
            spread = 0.05 if kind < 0.6 else 2.0
            body["channel"] = "card_present"
            body["lat"] = float(np.clip(lat + rng.normal(0, spread), -90, 90))
            body["lon"] = float((lon + rng.normal(0, spread) + 180) % 360 - 180)
        out.append(TransactionRequest.model_validate(body))
    return out


def at_thresholds(params: TravelParams) -> list[TransactionRequest]:
    """Pairs of one card whose gap is the rule's threshold for their distance, to the
    millisecond (-1, 0, +1, +2 ms), so the distance decides."""
    rng = np.random.default_rng(5)
    out = []
    t = T0
    for i in range(150):
        a = CITIES[i % len(CITIES)]
        b = (
            float(np.clip(a[0] + rng.normal(0, 15), -89, 89)),
            float((a[1] + rng.normal(0, 15) + 180) % 360 - 180),
        )
        distance = geodesic_km(*a, *b)
        by_air = params.overhead_s + distance * 3600 / params.max_speed_kmh
        fastest = min(by_air, distance * 3600 / (params.max_ground_speed_kmh or math.inf))
        limit_ms = (fastest - params.skew_allowance_s) * 1000
        for k, delta in enumerate((-1, 0, 1, 2)):
            gap = max(0, math.floor(limit_ms) + delta)
            t += 10 * 86_400_000  # a fresh start: the previous pair is long ago
            for j, (where, when) in enumerate(((a, t), (b, t + gap))):
                out.append(
                    TransactionRequest.model_validate(
                        {
                            "transaction_id": f"b{i}-{k}-{j}",
                            "card_number": PANS[0],
                            "amount": 10.0,
                            "currency": "EUR",
                            "merchant_id": f"m-{i}-{k}-{j}",
                            "merchant_category": "grocery",
                            "channel": "card_present",
                            "lat": where[0],
                            "lon": where[1],
                            "country": "FR",
                            "event_time": when,
                        }
                    )
                )
    return out


def records(requests: list[TransactionRequest]) -> list[dict[str, Any]]:
    publisher = MemoryPublisher()
    service = FraudService(
        ApiSettings(gc_freeze_interval_s=None),
        ApiSecrets(SECRET, None),
        publisher=publisher,
        clock=lambda: T0,
    )
    for request in requests:
        service.handle(request)
    return [orjson.loads(value) for _, value in publisher.records]


@pytest.mark.parametrize("case", ["random", "thresholds"])
def test_decisions_are_those_of_karney_everywhere(
    case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    requests = stream(42, 4000) if case == "random" else at_thresholds(TravelParams())
    new = records(requests)
    monkeypatch.setattr(api.fraud.decision, "pair_distance_km", karney_pair_distance)
    old = records(requests)
    assert len(new) == len(old) == len(requests)
    compared, declines = 0, 0
    for got, want in zip(new, old, strict=True):
        got_travel = got["evidence"].pop("travel")
        want_travel = want["evidence"].pop("travel")
        assert got == want  # decision, score, reasons, alerts, velocity, everything else
        declines += got["decision"] == "decline"
        assert (got_travel is None) == (want_travel is None)
        if got_travel is None:
            continue
        compared += 1
        for key in ("distance_km", "speed_kmh", "fastest_s"):
            g, w = got_travel.pop(key), want_travel.pop(key)
            assert (g is None) == (w is None)
            if g is not None:
                assert math.isclose(g, w, rel_tol=1e-9, abs_tol=1e-6), (key, g, w)
        assert got_travel == want_travel
    assert compared > len(requests) // 2 and declines > 50, (compared, declines)
