"""Read routes for the Vehicles page (open): the fleet's latest positions and status, and one
vehicle's recent telemetry with its alerts (from `vehicles.telemetry` and `alerts`, see
`live.views.vehicles` for what is kept and how the feed samples a fast topic)."""

from __future__ import annotations

import time
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Request, status

from api.panel.deps import UNAVAILABLE, feeds_of
from api.panel.models.clock import ClockHistogram
from api.panel.models.runs import ErrorBody
from api.panel.models.vehicles import Signal, Status, VehicleList, VehicleTelemetry
from api.responses import OrjsonResponse
from core.pan import scrub_text
from live.consumers.clock import OffsetsFeed
from live.consumers.feeds import Feeds
from live.views.clock import BIN_S
from live.views.vehicles import DEFAULT_SIGNALS

router = APIRouter(prefix="/v1", tags=["read"])

VehicleId = Annotated[
    str, Path(min_length=1, max_length=128, description="The vehicle id (the Kafka key).")
]


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _sampling(feeds: Feeds) -> dict[str, object]:
    view = feeds.vehicles
    return {
        **feeds.vehicle_tail.sampling(),
        "readings": view.readings,
        "stale": view.stale,
        "malformed": view.malformed,
    }


@router.get(
    "/vehicles",
    response_class=OrjsonResponse,
    responses={200: {"model": VehicleList}, **UNAVAILABLE},
)
def vehicles(
    request: Request,
    limit: Annotated[
        int, Query(ge=1, le=10_000, description="At most this many (alerting first).")
    ] = 1000,
    status_: Annotated[
        Status | None, Query(alias="status", description="Only vehicles in this status.")
    ] = None,
) -> OrjsonResponse:
    """The vehicles' latest readings: last GPS fix, speed, road, a few signals; status
    (alerting, moving, parked) and last alert; the feed's bounds and sampling."""
    feeds = feeds_of(request)
    rows, counts = feeds.vehicles.vehicles(_now_ms(), limit, status_)
    with_offsets(rows, "vehicle_id", feeds.vehicle_clock)
    return OrjsonResponse(
        {
            "vehicles": rows,
            "count": len(rows),
            "counts": counts,
            "bounds": feeds.vehicles.sizes(),
            "sampling": _sampling(feeds),
            "source": feeds.source(feeds.vehicles_topic),
        }
    )


@router.get(
    "/vehicles/{vehicle_id}/telemetry",
    response_class=OrjsonResponse,
    responses={
        200: {"model": VehicleTelemetry},
        404: {"model": ErrorBody, "description": "No reading or alert of this vehicle seen."},
        **UNAVAILABLE,
    },
)
def telemetry(
    request: Request,
    vehicle_id: VehicleId,
    signal: Annotated[
        list[Signal] | None,
        Query(
            description="Signals to return (repeat the parameter); default: what the page "
            "charts (speed and limit, coolant, battery, tyres, acceleration)."
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=10_000, description="The newest this many.")] = 300,
) -> OrjsonResponse:
    """One vehicle's recent readings (oldest first) and its alerts (newest first). Asking for
    a vehicle whose history is not kept starts keeping it."""
    feeds = feeds_of(request)
    now = _now_ms()
    feeds.vehicles.want(vehicle_id, now)
    signals = tuple(dict.fromkeys(signal)) if signal else DEFAULT_SIGNALS
    found = feeds.vehicles.telemetry(vehicle_id, now, limit, signals)
    if found is None:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND,
            f"no reading or alert of {scrub_text(vehicle_id)} seen on {feeds.vehicles_topic} (yet)",
        )
    found["clock"] = feeds.vehicle_clock.table.offset(vehicle_id)
    found["vehicle"]["offset_estimate_ms"] = (found["clock"] or {}).get("offset_estimate_ms")
    return OrjsonResponse(found)


BinS = Annotated[float, Query(gt=0, le=3600, description="Bin width, seconds.")]


def with_offsets(rows: list[dict[str, Any]], key: str, feed: OffsetsFeed) -> None:
    """Each row gains `offset_estimate_ms`: its device's current estimate (None: none)."""
    current = feed.table.current()
    for row in rows:
        found = current.get(row[key])
        row["offset_estimate_ms"] = None if found is None else found["offset_estimate_ms"]


def histogram_body(feed: OffsetsFeed, bin_s: float) -> dict[str, Any]:
    return {**feed.table.histogram(bin_s), "source": feed.source()}


@router.get(
    "/vehicles/clock-offsets",
    response_class=OrjsonResponse,
    responses={200: {"model": ClockHistogram}, **UNAVAILABLE},
)
def clock_offsets(request: Request, bin_s: BinS = BIN_S) -> OrjsonResponse:
    """The fleet's estimated clock offsets, binned (from the compacted
    `vehicles.clock-offsets`, which the vehicles job writes on corrected time)."""
    return OrjsonResponse(histogram_body(feeds_of(request).vehicle_clock, bin_s))
