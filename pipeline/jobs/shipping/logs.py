"""The job's per-entity state, pure pandas: a container's history across ships, and a ship's
log (its positions, port calls and the readings of the boxes it carries).

Routing (`route_key`): every container reading goes to its box's log (`c:<container id>`) and,
while on a ship, to that ship's log too (`s:<ship id>`); positions and port events go to their
ship's log. A box log runs the rules that need only the box (reefer failure, door tamper) over
its history across ships; a ship log runs those that need the ship's side too (lost overboard:
the ship's positions go on after the box fell silent; missed unload: the port the voyage left
from; route deviation: the ship's positions). A box's voyage legs (ship, voyage) are its
sessions (`EntityLog.legs`).

Late data (see docs/shipping.md): a log keeps `history_ms` of event time behind the newest
event it holds and re-runs its rules over all of it when it is scored, so a voyage flushed days
late in port is re-scored when it lands. A row older than that horizon is dropped and counted
(`push` returns the count), never silently. An alert whose event time is more than the live
`watermark_ms` behind the log's newest event when it is raised is late: `late_by_ms` says by
how much. Alert ids are deterministic, and a log remembers the ids it raised, so re-scoring
raises each alert once.

When to score (`next_timer`, `cuts_unscored`): once a backfill has stopped landing for the
settle time, but live rows never put that off, and never after the horizon has cut away rows
that landed since the last scoring (those are scored first).
"""

from __future__ import annotations

import pickle
from collections.abc import Iterable
from dataclasses import dataclass, field

import pandas as pd

from detectors.alert import Alert
from detectors.shipping import (
    CONTAINER_COLUMNS,
    PORT_EVENT_COLUMNS,
    POSITION_COLUMNS,
    door_tamper,
    lost_overboard,
    missed_unload,
    reefer_failure,
    route_deviation,
)

BOX, SHIP = "c", "s"  # key prefixes: a container's log, a ship's log
#: The `channel` of rows held on board at sea and flushed in port: backfill (`next_timer`).
BACKFILL_CHANNEL = "onboard"
#: The kinds of rows a log holds, with their columns (the rules' inputs).
KINDS: dict[str, tuple[str, ...]] = {
    "container": CONTAINER_COLUMNS,
    "position": POSITION_COLUMNS,
    "port_event": PORT_EVENT_COLUMNS,
}


def route_key(kind: str, container_id: str | None, ship_id: str | None) -> list[str]:
    """The logs a row goes to (see the module docstring).

    >>> route_key("container", "MSCU1", "9321483"), route_key("position", None, "9321483")
    (['c:MSCU1', 's:9321483'], ['s:9321483'])
    """
    if kind == "container":
        return [f"{BOX}:{container_id}", *([f"{SHIP}:{ship_id}"] if ship_id else [])]
    return [f"{SHIP}:{ship_id}"] if ship_id else []


@dataclass(frozen=True)
class Scored:
    """An alert a log raised, and how late (event time behind the log's newest event)."""

    alert: Alert
    late: bool
    late_by_ms: int


@dataclass
class EntityLog:
    """One box's or ship's history (frames per kind) and the alert ids it raised."""

    key: str
    frames: dict[str, pd.DataFrame] = field(default_factory=dict)
    raised: set[str] = field(default_factory=set)
    newest_ms: int | None = None
    dirty: bool = False  # rows landed since the last scoring
    timer_ms: int | None = None  # the processing-time timer registered for this log
    unscored_from_ms: int | None = None  # oldest event time among rows landed since scoring

    def frame(self, kind: str) -> pd.DataFrame:
        columns = list(KINDS[kind])
        held = self.frames.get(kind)
        return pd.DataFrame(columns=columns) if held is None else held

    def push(self, kind: str, rows: pd.DataFrame, history_ms: int) -> int:
        """Add rows (each event id once); returns how many were dropped as older than
        `history_ms` behind the newest event (counted, not kept)."""
        if rows.empty:
            return 0
        newest = int(rows["event_time"].max())
        self.newest_ms = newest if self.newest_ms is None else max(newest, self.newest_ms)
        horizon = self.newest_ms - history_ms
        fresh = rows.loc[:, list(KINDS[kind])]
        dropped = int((fresh["event_time"] < horizon).sum())
        fresh = fresh[fresh["event_time"] >= horizon]
        held = self.frames.get(kind)
        parts = [f for f in (held, fresh) if f is not None and not f.empty]
        merged = pd.concat(parts, ignore_index=True) if len(parts) > 1 else fresh
        merged = merged.drop_duplicates("event_id", ignore_index=True)
        self.frames[kind] = merged[merged["event_time"] >= horizon].reset_index(drop=True)
        for other, frame in self.frames.items():  # the horizon moved for every kind
            if other != kind:
                self.frames[other] = frame[frame["event_time"] >= horizon].reset_index(drop=True)
        self.dirty = self.dirty or not fresh.empty
        if not fresh.empty:
            oldest = int(fresh["event_time"].min())
            held_from = self.unscored_from_ms
            self.unscored_from_ms = oldest if held_from is None else min(held_from, oldest)
        return dropped

    def land(
        self, rows: pd.DataFrame, now_ms: int, history_ms: int, settle_ms: int, watermark_ms: int
    ) -> tuple[list[Scored], int]:
        """Rows of any kinds (a `kind` column; `channel`, if present, tells backfill) that
        landed at processing time `now_ms`: the alerts to raise now, and how many rows were
        dropped as older than `history_ms`. Sets `timer_ms`, when to score next (`next_timer`);
        with `settle_ms` 0 it scores at once."""
        scored: list[Scored] = []
        if self.cuts_unscored(int(rows["event_time"].max()), history_ms):
            scored = self.score(watermark_ms)
        dropped = sum(self.push(kind, part, history_ms) for kind, part in rows_by_kind(rows))
        if settle_ms <= 0:
            return scored + self.score(watermark_ms), dropped
        backfill = "channel" in rows and bool((rows["channel"] == BACKFILL_CHANNEL).any())
        self.timer_ms = self.next_timer(now_ms, settle_ms, backfill)
        return scored, dropped

    def cuts_unscored(self, newest_ms: int, history_ms: int) -> bool:
        """Whether rows up to `newest_ms` would move the horizon past rows that landed since the
        last scoring: score first, so the horizon never cuts away a row no rule has seen."""
        if self.unscored_from_ms is None:
            return False
        newest = newest_ms if self.newest_ms is None else max(newest_ms, self.newest_ms)
        return newest - history_ms > self.unscored_from_ms

    def next_timer(self, now_ms: int, settle_ms: int, backfill: bool) -> int:
        """When to score after rows landed at processing time `now_ms`. Backfill rows (held on
        board, flushed in port) put the scoring off to `settle_ms` after them: a voyage lands
        over several batches and is scored once, whole. Live rows never put off a timer already
        set: a ship's log at sea gets a satellite position every few hours, which at a demo's
        speed is more often than `settle_ms`, so waiting for quiet would leave it unscored
        until its history horizon had cut its first weeks away.

        >>> log = EntityLog("s:9321483", timer_ms=5_000)
        >>> log.next_timer(4_000, 3_000, backfill=False), log.next_timer(4_000, 3_000, True)
        (5000, 7000)
        """
        if backfill or self.timer_ms is None:
            return now_ms + settle_ms
        return self.timer_ms

    def legs(self) -> pd.DataFrame:
        """A box's sessions: one per voyage leg (ship, voyage), with its first and last
        reading and their count."""
        rows = self.frame("container").dropna(subset=["ship_id"])
        return (
            rows.groupby(["ship_id", "voyage_id"], sort=True)["event_time"]
            .agg(first="min", last="max", readings="count")
            .reset_index()
        )

    def alerts(self) -> list[Alert]:
        """Every alert the log's rules raise over its history now."""
        boxes = self.frame("container")
        if self.key.startswith(f"{BOX}:"):
            return [*reefer_failure(boxes), *door_tamper(boxes)] if not boxes.empty else []
        positions, calls = self.frame("position"), self.frame("port_event")
        out = route_deviation(positions) if not positions.empty else []
        if not boxes.empty:
            out += missed_unload(boxes, calls)
            out += lost_overboard(aboard(boxes, calls), positions)
        return out

    def score(self, watermark_ms: int) -> list[Scored]:
        """The alerts not raised before, each marked late when its event time is more than
        `watermark_ms` behind the newest event."""
        self.dirty = False
        self.unscored_from_ms = None
        newest = self.newest_ms or 0
        out = []
        for alert in {a.alert_id: a for a in self.alerts()}.values():
            if alert.alert_id in self.raised:
                continue
            self.raised.add(alert.alert_id)
            behind = max(newest - alert.event_time, 0)
            out.append(Scored(alert, behind > watermark_ms, behind))
        return out

    def to_bytes(self) -> bytes:
        return pickle.dumps(
            (
                self.frames,
                sorted(self.raised),
                self.newest_ms,
                self.dirty,
                self.timer_ms,
                self.unscored_from_ms,
            ),
            protocol=pickle.HIGHEST_PROTOCOL,
        )

    @classmethod
    def from_bytes(cls, key: str, blob: bytes) -> EntityLog:
        # our own state store; a state written before `unscored_from_ms` has five fields
        frames, raised, newest, dirty, timer, *unscored = pickle.loads(blob)
        return cls(key, frames, set(raised), newest, dirty, timer, *unscored)


def aboard(boxes: pd.DataFrame, calls: pd.DataFrame) -> pd.DataFrame:
    """A ship log's box readings without the boxes unloaded after their last reading aboard:
    a box craned off before its next reading last reported at sea, yet it came off in port
    (the batch form sees its later readings ashore instead)."""
    unloads = calls[calls["event"] == "unloaded"]
    if unloads.empty:
        return boxes
    last = boxes.groupby("container_id")["event_time"].max()
    off = unloads.groupby("container_id")["event_time"].max()
    both = off.index.intersection(last.index)
    gone = both[off[both].to_numpy() >= last[both].to_numpy()]
    return boxes[~boxes["container_id"].isin(set(gone))]


def rows_by_kind(frame: pd.DataFrame) -> Iterable[tuple[str, pd.DataFrame]]:
    """The job's routed rows (a `kind` column) split per kind."""
    for kind, rows in frame.groupby("kind", sort=False):
        yield str(kind), rows
