"""The card job's hand-made transactions (their timeline:
`tests/integration/test_pipeline_cards.py`), the alerts planted in them, and the detectors'
batch forms over the on-time ones."""

from __future__ import annotations

from typing import Any

import orjson
import pandas as pd

from detectors import (
    spending_alerts,
    terminal_window_alerts,
    terminal_window_features,
    travel_alerts,
    velocity_window_alerts,
    velocity_window_features,
)
from pipeline.jobs.cards.config import CardsSettings

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z
PARIS = (48.8566, 2.3522)
NEW_YORK = (40.7128, -74.0060)
LONDON = (51.5074, -0.1278)
STRASBOURG = (48.5734, 7.7521)
KEHL = (48.5725, 7.8152)
MADRID = (40.4168, -3.7038)
MOSCOW = (55.7558, 37.6173)
LYON = (45.7640, 4.8357)


def tx(
    event_id: str,
    card: str,
    second: int,
    where: tuple[float, float] | None = None,
    *,
    amount: float = 20.0,
    merchant: str = "m-shop",
    category: str = "retail",
    country: str = "FR",
    device: str | None = None,
) -> tuple[str, dict[str, Any]]:
    """A `cards.transaction/1` record; no location means an online (card not present) use;
    `device`: the payer's (none: a plastic card)."""
    present = where is not None
    return card, {
        "schema": "cards.transaction/1",
        "event_id": event_id,
        "transaction_id": event_id,
        "card_token": card,
        "card_last4": "4242",
        "event_time": T0 + second * 1000,
        "amount": amount,
        "currency": "EUR",
        "merchant_id": merchant,
        "merchant_category": category,
        "channel": "card_present" if present else "online",
        "card_present": present,
        "lat": where[0] if where else None,
        "lon": where[1] if where else None,
        "country": country,
        "terminal_id": f"{merchant}-t1" if present else None,
        "device_id": device,
    }


CARD_TESTING = [
    tx(f"ct-{i}", "tok-ct", 3000 + 60 * i, amount=1.0, merchant=f"m-web-{i}") for i in range(6)
]
SKIMMED = [
    tx(f"sk-{i:02}", f"tok-sk-{i:02}", 3000 + 10 * i, LYON, amount=40.0, merchant="m-skimmer")
    for i in range(25)
]
GROCERIES = [
    tx(f"ato-{i:02}", "tok-ato", 250 * i, PARIS, merchant="m-grocer", category="grocery")
    for i in range(10)
]
MALFORMED = [("bad", b"{not json"), ("bad", orjson.dumps({"event_id": "nc-1", "event_time": T0}))]

PHASE_1 = [
    tx("pny-paris", "tok-pny", 60, PARIS),
    tx("pny-ny", "tok-pny", 1860, NEW_YORK, country="US"),
    tx("ooo-ny", "tok-ooo", 2000, NEW_YORK, country="US"),
    tx("border-strasbourg", "tok-border", 600, STRASBOURG),
    tx("border-kehl", "tok-border", 1200, KEHL, country="DE"),
    tx("flight-london", "tok-flight", 400, LONDON, country="GB"),
    tx("online-paris", "tok-online", 100, PARIS),
    tx("online-us", "tok-online", 1900, None, merchant="m-us-web", country="US"),
    tx("dup-madrid", "tok-dup", 300, MADRID, country="ES"),
    tx("dup-moscow", "tok-dup", 900, MOSCOW, country="RU"),
    *GROCERIES,
]
PHASE_2 = [
    tx("ooo-paris", "tok-ooo", 200, PARIS),
    tx("dup-madrid", "tok-dup", 300, MADRID, country="ES"),
    tx("dup-moscow", "tok-dup", 900, MOSCOW, country="RU"),
    *CARD_TESTING,
    *SKIMMED,
    tx("ato-10", "tok-ato", 3400, amount=900.0, merchant="m-electro", category="electronics"),
    tx("clock-1", "tok-clock", 5000, PARIS),
]
PHASE_3 = [
    tx("flight-ny", "tok-flight", 400 + 8 * 3600, NEW_YORK, country="US"),
    CARD_TESTING[2],
    tx("clock-2", "tok-clock", 12 * 3600, PARIS),
]
PHASE_4 = [tx("late", "tok-late", 500, PARIS, merchant="m-late")]

EXPECTED = {  # (rule, entity, event ids) of every alert, nothing else
    ("impossible_travel", "tok-pny", ("pny-paris", "pny-ny")),
    ("impossible_travel", "tok-ooo", ("ooo-paris", "ooo-ny")),
    ("impossible_travel", "tok-dup", ("dup-madrid", "dup-moscow")),
    # Sliding windows alert at the first window over the threshold: the fifth use, the 24th card.
    ("velocity", "tok-ct", tuple(f"ct-{i}" for i in range(5))),
    ("compromised_terminal", "m-skimmer-t1", tuple(f"sk-{i:02}" for i in range(24))),
    ("spending_anomaly", "tok-ato", ("ato-10",)),
}


def oracle_alerts(settings: CardsSettings) -> pd.DataFrame:
    """The detectors' batch forms over the on-time input (the late use excluded)."""
    rows = [value for _, value in PHASE_1 + PHASE_2 + PHASE_3]
    frame = pd.DataFrame(rows).rename(columns={"card_token": "entity_id"})
    travel = travel_alerts(frame, settings.travel)
    slide = settings.rule_slide_ms
    velocity = velocity_window_alerts(
        velocity_window_features(frame, settings.velocity, slide_ms=slide), settings.velocity
    )
    by_terminal = frame.rename(columns={"entity_id": "card_id"})
    by_terminal["entity_id"] = by_terminal["terminal_id"].fillna(by_terminal["merchant_id"])
    terminal = terminal_window_alerts(
        terminal_window_features(by_terminal, settings.terminal, slide_ms=slide),
        settings.terminal,
    )
    spending = spending_alerts(
        frame.rename(columns={"merchant_category": "category"}), settings.spending
    )
    return pd.concat([travel, velocity, terminal, spending], ignore_index=True)
