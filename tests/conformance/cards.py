"""The card rules' conformance corpus (`pipeline.jobs.cards`): transactions in arrival order,
and the alerts each form must raise over them.

Every case runs against the Python operator's logic (`pipeline.jobs.cards.state.BucketState`:
one transaction per batch in arrival order, the state stored and loaded between batches, the
watermark `WATERMARK_MS` behind the latest event time, as the stream job runs it), the
detectors' batch forms (`velocity_window_alerts` on `velocity_window_features`,
`terminal_window_alerts` on `terminal_window_features`, `travel_alerts`), and the engine form
(`pipeline.jobs.cards.engine.batch_alerts`), with the job's default thresholds, windows of 10
minutes sliding by `SLIDE_MS`. The stream drops a repeated event id before the rules (the
job's de-duplication), so the Python and batch forms get each id once, the first copy; the
engine form gets every copy and drops them itself. A transaction behind the watermark on
arrival (`late`) is refused by the Python operator, and the batch forms never get it.

`alerts` are what the Python forms raise, as (rule, event ids). `engine_extra` lists alerts
only the engine form raises, by design, with the reason (`why`): impossible travel judges
every pair of a card's located uses within its bound, not only consecutive ones (see
`pipeline.rules.travel`). No form may raise an alert not listed.

Not in the corpus: spending (account takeover), which has no engine form (it stays in the
Python operator in both forms), and the approx distinct counts' error, which small cases
never show (HyperLogLog++ counts a handful of distinct values exactly).
"""

from __future__ import annotations

from dataclasses import dataclass

WATERMARK_MS = 120_000
SLIDE_MS = 60_000
MINUTE = 60_000

#: (card, event_id, event_time ms, amount, merchant, lat, lon, card_present)
Tx = tuple[str, str, int, float, str, float | None, float | None, bool]
#: (rule, event ids)
Expected = tuple[str, tuple[str, ...]]

PARIS = (48.8566, 2.3522)
NEW_YORK = (40.7128, -74.0060)
LONDON = (51.5074, -0.1278)
TOKYO = (35.6762, 139.6503)
SYDNEY = (-33.8688, 151.2093)
STRASBOURG = (48.5734, 7.7521)
KEHL = (48.5723, 7.8156)


@dataclass(frozen=True)
class Case:
    name: str
    txs: tuple[Tx, ...]
    alerts: tuple[Expected, ...] = ()
    engine_extra: tuple[Expected, ...] = ()
    why: str = ""
    late: tuple[str, ...] = ()  # event ids behind the watermark on arrival


def small(card: str, ids: list[str], times: list[int], amount: float = 1.0) -> list[Tx]:
    """Small purchases of `card` at one merchant each, in Paris."""
    return [
        (card, i, t, amount, f"shop-{i}", *PARIS, True) for i, t in zip(ids, times, strict=True)
    ]


def at(
    card: str, event_id: str, time_ms: int, where: tuple[float, float], present: bool = True
) -> Tx:
    return (card, event_id, time_ms, 40.0, "store", where[0], where[1], present)


def terminal(merchant: str, cards: list[str], start_ms: int, every_ms: int = 20_000) -> list[Tx]:
    """One purchase per card listed at `merchant`, `every_ms` apart, in Paris."""
    return [
        (card, f"{merchant}-u{k:02}", start_ms + k * every_ms, 30.0, merchant, *PARIS, True)
        for k, card in enumerate(cards)
    ]


CASES: tuple[Case, ...] = (
    Case(
        "velocity-burst",
        tuple(small("c1", ["v1", "v2", "v3", "v4", "v5"], [m * MINUTE + 5_000 for m in range(5)])),
        alerts=(("velocity", ("v1", "v2", "v3")),),
    ),
    Case(
        "velocity-boundary",  # 5.00 is not below small_amount (5.0): two small ones only
        (
            *small("c1", ["b1", "b2"], [5_000, MINUTE + 5_000]),
            *small("c1", ["b3"], [2 * MINUTE + 5_000], amount=5.0),
        ),
    ),
    Case(
        "velocity-just-small",  # 4.99 is
        (
            *small("c1", ["s1", "s2"], [5_000, MINUTE + 5_000]),
            *small("c1", ["s3"], [2 * MINUTE + 5_000], amount=4.99),
        ),
        alerts=(("velocity", ("s1", "s2", "s3")),),
    ),
    Case(
        "velocity-duplicate",  # a repeated id is one transaction: two, not three
        tuple(small("c1", ["d1", "d2", "d2"], [5_000, MINUTE + 5_000, MINUTE + 5_000])),
    ),
    Case(
        "velocity-out-of-order",  # arrival order within the watermark changes nothing
        tuple(small("c1", ["o3", "o1", "o2"], [2 * MINUTE, 10_000, MINUTE + 10_000])),
        alerts=(("velocity", ("o1", "o2", "o3")),),
    ),
    Case(
        "velocity-late",  # the third arrives after the watermark passed it: refused
        (
            *small("c1", ["l1", "l2"], [5_000, MINUTE + 5_000]),
            at("c1", "l-clock", 30 * MINUTE, PARIS),
            *small("c1", ["l3"], [2 * MINUTE + 5_000]),
        ),
        late=("l3",),
    ),
    Case(
        "velocity-window-edge",  # 10 minutes apart end to end: no 10-minute window holds all three
        tuple(small("c1", ["w1", "w2", "w3"], [0, 5 * MINUTE, 10 * MINUTE])),
    ),
    Case(
        "velocity-two-bursts",  # a burst, 30 quiet minutes, another: two alerts
        tuple(
            small("c1", ["a1", "a2", "a3"], [5_000, MINUTE + 5_000, 2 * MINUTE + 5_000])
            + small("c1", ["z1", "z2", "z3"], [40 * MINUTE + m * MINUTE for m in range(3)])
        ),
        alerts=(("velocity", ("a1", "a2", "a3")), ("velocity", ("z1", "z2", "z3"))),
    ),
    Case(
        "terminal-burst",  # 10th card at 185 s; the first window to cross ends at 4 min: 12
        tuple(terminal("m1", [f"k{k}" for k in range(12)], 5_000)),
        alerts=(("compromised_terminal", tuple(f"m1-u{k:02}" for k in range(12))),),
    ),
    Case(
        "terminal-boundary",  # twelve uses, nine distinct cards: no alert
        tuple(terminal("m1", [f"k{k % 9}" for k in range(12)], 5_000)),
    ),
    Case(
        "travel-paris-new-york",  # 30 minutes apart: impossible
        (at("c1", "p1", 0, PARIS), at("c1", "p2", 30 * MINUTE, NEW_YORK)),
        alerts=(("impossible_travel", ("p1", "p2")),),
    ),
    Case(
        "travel-real-flight",  # London -> New York in 8 h: possible
        (at("c1", "f1", 0, LONDON), at("c1", "f2", 480 * MINUTE, NEW_YORK)),
    ),
    Case(
        "travel-across-a-border",  # Strasbourg -> Kehl in 10 minutes: possible
        (at("c1", "b1", 0, STRASBOURG), at("c1", "b2", 10 * MINUTE, KEHL)),
    ),
    Case(
        "travel-out-of-order",  # the later use arrives first (within the watermark): same alert
        (at("c1", "r2", MINUTE, NEW_YORK), at("c1", "r1", 0, PARIS)),
        alerts=(("impossible_travel", ("r1", "r2")),),
    ),
    Case(
        "travel-duplicate",  # a repeated use is one use: one alert
        (
            at("c1", "u1", 0, PARIS),
            at("c1", "u2", 30 * MINUTE, NEW_YORK),
            at("c1", "u2", 30 * MINUTE, NEW_YORK),
        ),
        alerts=(("impossible_travel", ("u1", "u2")),),
    ),
    Case(
        "travel-not-present",  # an online use has no position: never a leg
        (
            at("c1", "n1", 0, PARIS),
            at("c1", "n2", 10 * MINUTE, SYDNEY, present=False),
        ),
    ),
    Case(
        "travel-three-legs",  # Paris -> Tokyo -> Sydney, 10 minutes apart
        (
            at("c1", "t1", 0, PARIS),
            at("c1", "t2", 10 * MINUTE, TOKYO),
            at("c1", "t3", 20 * MINUTE, SYDNEY),
        ),
        alerts=(("impossible_travel", ("t1", "t2")), ("impossible_travel", ("t2", "t3"))),
        engine_extra=(("impossible_travel", ("t1", "t3")),),
        why="every pair within the join's bound is judged: Paris -> Sydney in 20 minutes too",
    ),
    Case(
        "travel-late",  # the Paris use arrives after the watermark passed it: refused
        (
            at("c1", "x2", 30 * MINUTE, NEW_YORK),
            at("c1", "x-clock", 90 * MINUTE, NEW_YORK),
            at("c1", "x1", 0, PARIS),
        ),
        late=("x1",),
    ),
)
