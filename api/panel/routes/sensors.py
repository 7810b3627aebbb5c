"""Read routes for the Sensors page (open, like the Vehicles page's): one sensors run's
devices on the site map with their latest reading, a device's recent series, and the run's
sensor alerts (from `sensors.readings` and `alerts`; see `live.views.sensors`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Path, Query, Request, status

from api.errors import ErrorBody
from api.panel.deps import UNAVAILABLE, feeds_of
from api.panel.models.clock import ClockHistogram
from api.panel.models.sensors import SensorAlerts, SensorList, SensorSeries
from api.panel.routes.vehicles import BinS, histogram_body, with_offsets
from api.responses import OrjsonResponse
from core.pan import scrub_text
from live.consumers.feeds import Feeds
from live.consumers.sensors import SensorFeed
from live.views.clock import BIN_S
from live.views.sensors import run_alerts

router = APIRouter(prefix="/v1/sensors", tags=["read"])

Run = Annotated[
    str | None,
    Query(
        pattern=r"^[A-Za-z0-9_.-]{1,64}$",
        description="The run (event ids' `sf-<run>` part); default: the newest read.",
    ),
]
SensorId = Annotated[
    str, Path(min_length=1, max_length=128, description="The sensor id (the Kafka key).")
]


def sensors_of(request: Request) -> SensorFeed:
    feed: SensorFeed | None = getattr(request.app.state, "sensors", None)
    if feed is None:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            "the sensor feed needs Kafka: this API runs without a stack",
        )
    return feed


def _alerts(feeds: Feeds, feed: SensorFeed, run: str | None) -> list[dict[str, Any]]:
    """The run's sensor alerts among the alerts feed's newest, newest detection first."""
    return run_alerts(feeds.alerts.recent(feeds.alerts.size), run, feed.view.has_device)


@router.get(
    "",
    response_class=OrjsonResponse,
    responses={200: {"model": SensorList}, **UNAVAILABLE},
)
def sensors(
    request: Request,
    run: Run = None,
    limit: Annotated[int, Query(ge=1, le=10_000, description="At most this many.")] = 2000,
) -> OrjsonResponse:
    """A run's devices (site, place on the site map, latest reading, alert count) and sites."""
    feed, feeds = sensors_of(request), feeds_of(request)
    run = feed.view.run_of_request(run)
    body = feed.view.fleet(run, _alerts(feeds, feed, run), limit)
    with_offsets(body["devices"], "sensor_id", feed.clock)
    body["source"] = feed.source()
    return OrjsonResponse(body)


@router.get(
    "/alerts",
    response_class=OrjsonResponse,
    responses={200: {"model": SensorAlerts}, **UNAVAILABLE},
)
def alerts(
    request: Request,
    run: Run = None,
    limit: Annotated[int, Query(ge=1, le=500, description="At most this many.")] = 100,
) -> OrjsonResponse:
    """A run's sensor alerts (stuck sensor, spike, low battery, silent device), evidence
    decoded, newest first: from the alerts feed's newest records."""
    feed, feeds = sensors_of(request), feeds_of(request)
    run = feed.view.run_of_request(run)
    rows = _alerts(feeds, feed, run)[:limit]
    return OrjsonResponse(
        {
            "run": run,
            "alerts": rows,
            "count": len(rows),
            "source": feeds.source(feeds.alerts_topic),
        }
    )


@router.get(
    "/{sensor_id}/series",
    response_class=OrjsonResponse,
    responses={
        200: {"model": SensorSeries},
        404: {"model": ErrorBody, "description": "No reading of this sensor in the run kept."},
        **UNAVAILABLE,
    },
)
def series(
    request: Request,
    sensor_id: SensorId,
    run: Run = None,
    limit: Annotated[int, Query(ge=1, le=1000, description="The newest this many.")] = 60,
) -> OrjsonResponse:
    """One device's recent readings (oldest first) and its alerts (newest first)."""
    feed, feeds = sensors_of(request), feeds_of(request)
    found = feed.view.series(sensor_id, run, limit)
    if found is None:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND, f"no reading of {scrub_text(sensor_id)} in the run (yet)"
        )
    found["alerts"] = [
        a for a in _alerts(feeds, feed, found["run"]) if a.get("entity_id") == sensor_id
    ]
    found["clock"] = feed.clock.table.offset(sensor_id)
    return OrjsonResponse(found)


@router.get(
    "/clock-offsets",
    response_class=OrjsonResponse,
    responses={200: {"model": ClockHistogram}, **UNAVAILABLE},
)
def clock_offsets(request: Request, bin_s: BinS = BIN_S) -> OrjsonResponse:
    """The sensors' estimated clock offsets, binned (from the compacted
    `sensors.clock-offsets`, which the sensors job writes on corrected time)."""
    return OrjsonResponse(histogram_body(sensors_of(request).clock, bin_s))
