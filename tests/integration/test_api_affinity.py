"""Card affinity: the same seeded card stream through the POS sink, to one endpoint and to
`streamsim api --service fraud --instances 2` (real uvicorn processes, each addressed on its
own port), gets the same verdict for every transaction when each card goes to one instance,
while each instance follows the other's decisions through cards.activity
(`streamsim.bench.divergence`; `streamsim bench divergence` also measures the run without
affinity)."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.config import StackConfig
from streamsim.bench.divergence import run_divergence

pytestmark = pytest.mark.integration

EVENTS = 400


def test_card_affinity_decides_as_one_instance_does(
    kafka_stack: StackConfig, tmp_path: Path
) -> None:
    report = run_divergence(
        kafka_stack,
        events=EVENTS,
        seed=33,
        cards=100,
        rate=200.0,
        affinities=("token",),
        home=tmp_path,
    )
    single = report["single"]
    assert single["outcomes"] == {"ok": EVENTS}, report
    # The stream has verdicts worth comparing: cards come back, some are not approved.
    assert report["cards"] < EVENTS // 2, report
    assert set(single["decisions"]) - {"approve"}, report
    token = report["affinity"]["token"]
    assert token["outcomes"] == {"ok": EVENTS} and token["compared"] == EVENTS, report
    assert len(token["requests_per_instance"]) == 2 and min(token["requests_per_instance"]) > 0
    # No card ever reaches the other instance, and nothing diverges.
    assert token["handoffs"] == 0, report
    assert token["decisions_differ"] == 0 and token["rules_differ"] == 0, report
    # Each instance applied the other's decisions from the topic all the same.
    assert all(lag["count"] > 0 for lag in token["follow_lag_ms"]), report
