"""Engine hooks the vehicles scenario relies on: scenario outages (readings with an
`offline_until`, e.g. a tunnel) are held and flushed like the engine's own, with their own
outage ids; reconnect flushes may send readings twice (`outages.flush_duplicates`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from scenarios.catalog import ScenarioConfig
from simulators.delivery import DeliveryModel
from simulators.entities import EntityTable
from simulators.records import NO_ID, Readings, row_dtype, to_rows

START = 1_767_225_600_000
DTYPE = row_dtype([])


def model_for(n: int = 2, **delivery: Any) -> DeliveryModel:
    cfg = ScenarioConfig.model_validate({"entities": n, "delivery": delivery})
    table = EntityTable.build([f"d{i}" for i in range(n)], cfg.classes, cfg.class_counts())
    return DeliveryModel(table, np.random.default_rng(11), START, DTYPE)


def rows_for(ent: list[int], offsets_ms: list[int], offline: list[int] | None) -> np.ndarray:
    n = len(ent)
    until = None if offline is None else np.array([NO_ID if o < 0 else START + o for o in offline])
    readings = Readings(
        np.array(ent, dtype=np.int32),
        START + np.array(offsets_ms, dtype=np.int64),
        np.zeros(n, dtype=np.int16),
        np.full(n, NO_ID),
        offline_until=until,
    )
    rows = to_rows([readings], DTYPE)
    rows["gen"] = np.arange(n)
    rows["event_ms"] = rows["true_ms"]
    return rows


def test_rows_offline_by_the_scenario_are_held_until_its_reconnect_time() -> None:
    model = model_for(delay_s=0.1)
    # device 0 in a tunnel from 0 to 2.5 s (reconnects at 3 s); device 1 online
    routed = model.route(
        rows_for([0, 1, 0, 0, 0], [0, 0, 1000, 2000, 3000], [3000, -1, 3000, 3000, -1])
    )
    assert sorted(routed.sends["ent"].tolist()) == [0, 1]  # the reading at 3 s and device 1
    assert model.backlog == 3
    held_ids = set(model.held["outage"].tolist())
    assert len(held_ids) == 1 and NO_ID not in held_ids
    assert model.release(START + 3000).sends.shape[0] == 0  # flushed strictly after reconnect
    flushed = model.release(START + 3001).sends
    assert flushed["true_ms"].tolist() == [START, START + 1000, START + 2000]
    assert (flushed["emit_ms"] >= START + 3000).all()
    assert model.outages_seen == 1


def test_one_scenario_outage_keeps_its_id_across_steps_and_the_next_gets_a_new_one() -> None:
    model = model_for()
    model.route(rows_for([0], [0], [5000]))
    model.route(rows_for([0], [1000], [5000]))
    model.route(rows_for([0], [9000], [12000]))
    ids = model.held["outage"].tolist()
    assert ids[0] == ids[1] != ids[2]
    assert model.outages_seen == 2


def test_readings_without_offline_until_are_unchanged() -> None:
    a = model_for(delay_s=0.2).route(rows_for([0, 1], [0, 10], None)).sends
    b = model_for(delay_s=0.2).route(rows_for([0, 1], [0, 10], [-1, -1])).sends
    assert a.tobytes() == b.tobytes()


def test_flush_duplicates_resend_backlog_readings_after_a_retry_delay() -> None:
    model = model_for(
        n=1,
        outages={"flush_duplicates": 1.0},
        duplicates={"retry_delay_s": 2.0},
    )
    model.route(rows_for([0, 0, 0], [0, 1000, 2000], [4000, 4000, 4000]))
    sends = model.release(START + 5000).sends
    assert sends.shape[0] == 6 and int(sends["dup"].sum()) == 3
    originals, copies = sends[~sends["dup"]], sends[sends["dup"]]
    assert (np.sort(copies["emit_ms"]) - np.sort(originals["emit_ms"]) == 2000).all()


def test_flush_duplicates_off_draws_nothing_extra() -> None:
    plain = model_for(n=1, outages={"rate_per_hour": 0})
    plain.route(rows_for([0, 0], [0, 1000], [3000, 3000]))
    assert plain.release(START + 4000).sends["dup"].sum() == 0
