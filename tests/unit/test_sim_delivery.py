"""The delivery model: delays, losses, retries, and store-and-forward outages with caps."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from scenarios.catalog import ScenarioConfig
from simulators.delivery import DeliveryModel
from simulators.entities import EntityTable
from simulators.records import BUFFER_OVERFLOW, NETWORK, NO_ID, Readings, row_dtype, to_rows

START = 1_767_225_600_000
DTYPE = row_dtype([])


def model_for(n: int = 2, **delivery: Any) -> DeliveryModel:
    cfg = ScenarioConfig.model_validate({"entities": n, "delivery": delivery})
    table = EntityTable.build([f"d{i}" for i in range(n)], cfg.classes, cfg.class_counts())
    return DeliveryModel(table, np.random.default_rng(11), START, DTYPE)


def rows_for(ent: list[int], offsets_ms: list[int]) -> np.ndarray:
    n = len(ent)
    readings = Readings(
        np.array(ent, dtype=np.int32),
        START + np.array(offsets_ms, dtype=np.int64),
        np.zeros(n, dtype=np.int16),
        np.full(n, NO_ID),
    )
    rows = to_rows([readings], DTYPE)
    rows["gen"] = np.arange(n)
    rows["event_ms"] = rows["true_ms"]
    return rows


def force_outage(model: DeliveryModel, start_ms: int, end_ms: int, outage_id: int = 7) -> None:
    model.outages.start[:] = START + start_ms
    model.outages.end[:] = START + end_ms
    model.outages.id[:] = outage_id


def test_each_event_is_sent_after_its_network_delay() -> None:
    model = model_for(delay_s=0.5)
    routed = model.route(rows_for([0, 1, 0], [0, 10, 20]))
    assert (routed.sends["emit_ms"] - routed.sends["true_ms"]).tolist() == [500, 500, 500]
    assert routed.drops.size == 0 and not routed.sends["dup"].any()


def test_delays_are_capped_at_max_delay() -> None:
    model = model_for(delay_s={"type": "exponential", "mean": 100}, max_delay_s=2)
    routed = model.route(rows_for([0] * 500, list(range(500))))
    delays = routed.sends["emit_ms"] - routed.sends["true_ms"]
    assert delays.max() == 2000 and delays.min() >= 0


def test_lost_events_are_dropped_with_the_network_reason() -> None:
    model = model_for(drops={"probability": 1.0})
    routed = model.route(rows_for([0, 1], [0, 5]))
    assert routed.sends.size == 0
    assert routed.drops["dropped"].tolist() == [NETWORK, NETWORK]


def test_retries_are_identical_resends_after_the_retry_delay() -> None:
    model = model_for(delay_s=0.1, duplicates={"probability": 1.0, "retry_delay_s": 2})
    routed = model.route(rows_for([0, 1], [0, 5]))
    originals = routed.sends[~routed.sends["dup"]]
    retries = routed.sends[routed.sends["dup"]]
    assert originals["gen"].tolist() == retries["gen"].tolist() == [0, 1]
    assert (retries["emit_ms"] - originals["emit_ms"]).tolist() == [2000, 2000]
    assert (retries["event_ms"] == originals["event_ms"]).all()


def test_fractions_follow_the_probabilities() -> None:
    model = model_for(n=100, drops={"probability": 0.1}, duplicates={"probability": 0.2})
    n = 50_000
    routed = model.route(rows_for(list(np.arange(n) % 100), list(range(n))))
    assert abs(routed.drops.shape[0] / n - 0.1) < 0.01
    delivered = n - routed.drops.shape[0]
    assert abs(int(routed.sends["dup"].sum()) / delivered - 0.2) < 0.01


def test_outage_holds_readings_then_flushes_them_in_order_on_reconnect() -> None:
    model = model_for(delay_s=0.05, outages={"flush": "in_order", "flush_rate": 100})
    force_outage(model, 0, 10_000)
    routed = model.route(rows_for([0] * 5, [1000, 2000, 3000, 4000, 5000]))
    assert routed.sends.size == 0 and model.backlog == 5
    assert model.release(START + 9_999).sends.size == 0  # still offline
    flushed = model.release(START + 10_001).sends
    assert flushed["true_ms"].tolist() == sorted(flushed["true_ms"].tolist())
    assert flushed["emit_ms"].tolist() == [START + 10_050 + 10 * k for k in range(5)]
    assert (flushed["outage"] == 7).all() and model.backlog == 0


def test_shuffled_flush_permutes_the_backlog() -> None:
    model = model_for(delay_s=0.0, outages={"flush": "shuffled", "buffer_cap": 1000})
    force_outage(model, 0, 100_000)
    model.route(rows_for([0] * 200, list(range(0, 20_000, 100))))
    flushed = model.release(START + 100_001).sends
    order = flushed[np.argsort(flushed["emit_ms"], kind="stable")]["true_ms"]
    assert sorted(order.tolist()) == list(START + np.arange(0, 20_000, 100))
    assert order.tolist() != sorted(order.tolist())


@pytest.mark.parametrize(
    ("policy", "kept"), [("drop_oldest", [3000, 4000, 5000]), ("drop_newest", [1000, 2000, 3000])]
)
def test_a_full_buffer_drops_by_policy(policy: str, kept: list[int]) -> None:
    model = model_for(delay_s=0.0, outages={"buffer_cap": 3, "drop_policy": policy})
    force_outage(model, 0, 10_000)
    first = model.route(rows_for([0] * 2, [1000, 2000]))
    second = model.route(rows_for([0] * 3, [3000, 4000, 5000]))
    dropped = np.concatenate([first.drops, second.drops])
    assert (dropped["dropped"] == BUFFER_OVERFLOW).all() and dropped.shape[0] == 2
    flushed = model.release(START + 10_001).sends
    assert (flushed["true_ms"] - START).tolist() == kept


def test_end_of_run_reconnects_everyone() -> None:
    model = model_for(delay_s=0.0)
    force_outage(model, 0, 3_600_000)
    model.route(rows_for([0, 1], [10, 20]))
    model.reconnect_all(START + 1000)
    assert model.release(START + 1001).sends["emit_ms"].min() == START + 1000


def test_outages_are_counted_once_each() -> None:
    model = model_for(delay_s=0.0)
    force_outage(model, 0, 10_000)
    model.outages.id[:] = [7, 8]  # one outage per device
    model.route(rows_for([0, 1], [10, 20]))
    model.route(rows_for([0, 1], [30, 40]))
    assert model.outages_seen == 2
