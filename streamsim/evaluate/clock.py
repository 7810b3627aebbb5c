"""The clock block of `streamsim evaluate`: the skew estimator (`detectors.clock`) over a run's
sent records, its corrected time scored against true time.

Each sent record's send time is its truth `emit_time`, the Kafka timestamp its event was sent
with (the simulator stamps both alike). Error = `corrected_event_time - true_time`. Records
fall in one class each, from truth (never from the estimator):

- `reset`: the device's clock is in a reset (its event time a day or more from true time);
- `settling`: within the estimator's `window_s` after a step of the device's true offset of
  more than `STEP_MS` (a jump, or the end of a reset): its envelope may still hold the clock
  before the step;
- `steady`: the rest.

`within_1s_share`, `p50_ms` and `p99_ms` (of the absolute error) cover `steady` records;
`non_reset` the steady and settling ones together; `by_class` the steady ones per device class
(`smart_meter`, `truck`, ...), and `by_state` each of the three classes.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from detectors.clock import CLOCK, CORRECTED, ClockParams, estimate

#: A step of the true offset bigger than this starts a device's settling.
STEP_MS = 1_000
#: An event time this far from true time is a reset clock's (the epoch is decades back).
RESET_MS = 86_400_000
#: The truth columns the block reads.
COLUMNS = ("event_id", "entity_id", "true_time", "event_time", "emit_time", "clock_offset_ms")


def states(truth: pd.DataFrame, settle_ms: int) -> pd.Series:
    """Per sent record (index of `truth`): `reset`, `settling` or `steady` (module doc)."""
    t = truth.sort_values(["entity_id", "true_time"], kind="stable")
    off = t["clock_offset_ms"].to_numpy(dtype=np.int64)
    reset = np.abs(off) > RESET_MS
    ids = t["entity_id"].to_numpy()
    same = np.r_[False, ids[1:] == ids[:-1]]
    step = same & np.r_[False, np.abs(np.diff(off)) > STEP_MS]
    true_ms = t["true_time"].to_numpy(dtype=np.int64)
    since = pd.Series(np.where(step, true_ms, np.nan), index=t.index).groupby(ids).ffill()
    settling = ~reset & (true_ms - since.to_numpy() <= settle_ms)
    state = np.where(reset, "reset", np.where(settling, "settling", "steady"))
    return pd.Series(state, index=t.index).reindex(truth.index)


def figures(error_ms: np.ndarray) -> dict[str, Any]:
    """records, within_1s_share, p50_ms and p99_ms of the absolute errors.

    >>> figures(np.array([10, -20, 3000]))
    {'records': 3, 'within_1s_share': 0.6667, 'p50_ms': 20, 'p99_ms': 2940}
    """
    if error_ms.size == 0:
        return {"records": 0, "within_1s_share": None, "p50_ms": None, "p99_ms": None}
    size = np.abs(error_ms)
    return {
        "records": int(size.size),
        "within_1s_share": round(float((size <= 1000).mean()), 4),
        "p50_ms": int(np.percentile(size, 50)),
        "p99_ms": int(np.percentile(size, 99)),
    }


def clock_report(
    truth: pd.DataFrame,
    classes: Mapping[str, str] | None = None,
    params: ClockParams = CLOCK,
) -> dict[str, Any]:
    """The `clock` block over the run's truth (`COLUMNS`; dropped records have no
    `emit_time` and are left out). `classes`: entity id -> device class, for `by_class`."""
    sent = truth[truth["emit_time"].notna()]
    sent = sent.loc[:, list(COLUMNS)].astype({"emit_time": "int64"})
    done = estimate(sent, params, kafka_ts="emit_time")
    error = (done[CORRECTED] - done["true_time"]).to_numpy(dtype=np.int64)
    state = states(done, params.window_ms).to_numpy()
    steady = state == "steady"
    block: dict[str, Any] = figures(error[steady])
    block["non_reset"] = figures(error[state != "reset"])
    block["by_state"] = {s: figures(error[state == s]) for s in ("steady", "settling", "reset")}
    if classes:
        of = done["entity_id"].map(classes).fillna("?").to_numpy()
        block["by_class"] = {
            c: figures(error[steady & (of == c)]) for c in sorted(set(classes.values()))
        }
    block["params"] = params.model_dump()
    return block


def entity_classes(scenario_file: Path, entity_ids: pd.Series) -> dict[str, str] | None:
    """Entity id -> class name, for a run of `scenario_file`'s classes: entities are numbered
    in blocks by share (`simulators.entities.EntityTable`), so an id's number places it, given
    the fleet size (the largest number + 1). None when the ids carry no number."""
    from scenarios.catalog import ScenarioConfig
    from streamsim.config.kinds import load_file

    numbers = entity_ids.drop_duplicates().str.extract(r"(\d+)$")[0]
    if numbers.isna().any() or numbers.empty or not scenario_file.exists():
        return None
    _, config = load_file(scenario_file)
    if not isinstance(config, ScenarioConfig):
        return None
    n = int(numbers.astype(int).max()) + 1
    sized = config.with_overrides(entities=n)
    bounds = np.cumsum(sized.class_counts())
    names = [c.name for c in sized.classes]
    index = numbers.astype(int).to_numpy()
    which = np.searchsorted(bounds, index, side="right")
    ids = entity_ids.drop_duplicates().to_numpy()
    return {str(i): names[int(k)] for i, k in zip(ids, which, strict=True)}
