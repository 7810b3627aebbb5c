"""Input preparation shared by the vectorised forms: canonical columns, sorted, de-duplicated.

Every vectorised rule takes a pandas DataFrame with the canonical columns `entity_id`,
`event_id` and `event_time` (epoch ms, device clock) plus the rule's own columns. Pass
`columns={"entity_id": "card_token"}` (canonical name -> your name) to map other names.

Before a rule looks at the rows it
1. drops rows without an `event_id` or `event_time` (they cannot be placed in time),
2. sorts by (`event_time`, `event_id`), so input order never matters, and
3. keeps the first row of each `event_id` (at-least-once duplicates count once).
A frame may hold many entities; rules run per entity.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

import numpy as np
import pandas as pd

from detectors.alert import Alert, alerts_to_frame

ENTITY, EVENT_ID, EVENT_TIME = "entity_id", "event_id", "event_time"
KEY_COLUMNS = (ENTITY, EVENT_ID, EVENT_TIME)

Columns = Mapping[str, str] | None


def prepare(
    df: pd.DataFrame,
    required: Sequence[str] = (),
    optional: Sequence[str] = (),
    columns: Columns = None,
) -> pd.DataFrame:
    """Rename, check, sort and de-duplicate `df` (see the module docstring)."""
    if columns:
        df = df.rename(columns={actual: canonical for canonical, actual in columns.items()})
    wanted = [*KEY_COLUMNS, *required]
    missing = [name for name in wanted if name not in df.columns]
    if missing:
        raise ValueError(
            f"missing columns {missing}; the frame has {list(df.columns)}. "
            "Map other names with columns={canonical: actual}."
        )
    keep = [*dict.fromkeys([*wanted, *(c for c in optional if c in df.columns)])]
    out = df[keep]
    valid = out[EVENT_ID].notna() & out[EVENT_TIME].notna()
    out = out.loc[valid] if not valid.all() else out.copy()
    out[EVENT_ID] = out[EVENT_ID].astype(str)
    out[ENTITY] = out[ENTITY].astype(str)
    out[EVENT_TIME] = out[EVENT_TIME].astype("int64")
    return _sorted_unique(out)


def _sorted_unique(rows: pd.DataFrame) -> pd.DataFrame:
    """Rows sorted by (event_time, event_id), first of each event_id kept, index reset."""
    times = rows[EVENT_TIME].to_numpy()
    if len(times) > 1 and not (np.diff(times) > 0).all():
        if (np.diff(np.sort(times)) > 0).all():
            rows = rows.iloc[np.argsort(times, kind="stable")]
        else:
            rows = rows.sort_values([EVENT_TIME, EVENT_ID], kind="stable")
    if not rows[EVENT_ID].is_unique:
        rows = rows.drop_duplicates(EVENT_ID, keep="first")
    return rows.reset_index(drop=True)


def per_entity(
    df: pd.DataFrame, rule: Callable[[str, pd.DataFrame], Iterable[Alert]]
) -> pd.DataFrame:
    """Run `rule(entity_id, rows)` on each entity's prepared rows; all alerts as one frame."""
    alerts: list[Alert] = []
    entities = df[ENTITY]
    if len(df) and (entities.iat[0] == entities).all():
        alerts.extend(rule(str(entities.iat[0]), df))
    else:
        for entity, rows in df.groupby(ENTITY, sort=True):
            alerts.extend(rule(str(entity), rows.reset_index(drop=True)))
    return alerts_to_frame(alerts)
