"""Read routes for the Shipping page (open): ships with their tracks and sea lanes, ports with
the ships alongside, the backlog held on board per ship (`live.views.ships`), and the
shipping alerts of the `alerts` topic.

Open as `/v1/vehicles` and `/v1/alerts` are: a ship's position is AIS, public at sea, and the
fleet view holds no container id or owner. A container's history stays behind its owner's
token (`api.panel.routes.shipping`).
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query, Request, status

from api.panel.deps import UNAVAILABLE, feeds_of
from api.panel.models.ships import Fleet, ShippingAlerts
from api.panel.routes.shipping import shipping_of
from api.responses import OrjsonResponse
from core.contracts.labels import SHIPPING_FAULTS
from live.views.ships import ShipsView

router = APIRouter(prefix="/v1/shipping", tags=["read", "shipping"])

JOB = "shipping"
LANE_POINTS = 160  # a lane's vertices, at most (a whole ocean crossing in a few KB)


def lane(origin: str | None, dest: str | None) -> list[list[float]]:
    """The searoute lane between two ports, thinned; [] when either is unknown."""
    from scenarios.shipping.lanes import lane as sea_lane
    from scenarios.shipping.lanes import port_table

    table = port_table()
    if origin is None or dest is None or origin == dest or not {origin, dest} <= table.keys():
        return []
    found = sea_lane(origin, dest)
    step = max(1, len(found.lat) // LANE_POINTS)
    keep = list(range(0, len(found.lat), step))
    if keep[-1] != len(found.lat) - 1:
        keep.append(len(found.lat) - 1)
    return [[round(float(found.lon[i]), 3), round(float(found.lat[i]), 3)] for i in keep]


def port_rows(fleet: dict[str, Any]) -> list[dict[str, Any]]:
    """Every port the fleet names (calls and destinations), placed, with ships alongside."""
    from scenarios.shipping.lanes import port_table

    table = port_table()
    docked = {p["port"]: p["ships_in_dock"] for p in fleet["ports"]}
    named = set(docked)
    for ship in fleet["ships"]:
        named |= {ship["port"], (ship["position"] or {}).get("dest_port")} - {None}
    rows = []
    for code in sorted(named):
        port = table.get(code)
        rows.append(
            {
                "port": code,
                "name": port.name if port else None,
                "lat": port.lat if port else None,
                "lon": port.lon if port else None,
                "ships_in_dock": docked.get(code, []),
            }
        )
    return rows


@router.get(
    "/fleet",
    response_class=OrjsonResponse,
    responses={200: {"model": Fleet}, **UNAVAILABLE},
)
def fleet(
    request: Request,
    hours: Annotated[
        int, Query(ge=1, le=24 * 90, description="Backlog history, hours of the run's clock.")
    ] = 24 * 21,
    run: Annotated[
        str | None,
        Query(
            pattern=r"^[A-Za-z0-9_.-]{1,64}$",
            description="The run (event ids' `sh-<run>` part); default: the newest read.",
        ),
    ] = None,
) -> OrjsonResponse:
    """Ships (newest position, track, sea lane, call, boxes aboard, backlog on board), ports
    with ships in dock, and the hourly backlog held on board per ship."""
    tail = shipping_of(request)
    view: ShipsView | None = tail.fleet
    if view is None:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, "the fleet view is not set up")
    body = view.fleet(hours, run)
    for ship in body["ships"]:
        dest = (ship["position"] or {}).get("dest_port")
        ship["lane"] = lane(ship["port"], dest) if ship["status"] == "at_sea" else []
    body["ports"] = port_rows(body)
    body["source"] = tail.source()
    body["fleet"] = view.stats()
    return OrjsonResponse(body)


def is_shipping(alert: dict[str, Any]) -> bool:
    return alert.get("job") == JOB or alert.get("label") in SHIPPING_FAULTS


@router.get(
    "/alerts",
    response_class=OrjsonResponse,
    responses={200: {"model": ShippingAlerts}, **UNAVAILABLE},
)
def alerts(
    request: Request,
    limit: Annotated[int, Query(ge=1, le=500, description="At most this many.")] = 50,
) -> OrjsonResponse:
    """Recent shipping alerts of the `alerts` topic (the `shipping` job's or a shipping
    incident label), newest first, evidence decoded."""
    feeds = feeds_of(request)
    rows = [a for a in feeds.alerts.recent(feeds.alerts.size) if is_shipping(a)][:limit]
    return OrjsonResponse(
        {"alerts": rows, "count": len(rows), "source": feeds.source(feeds.alerts_topic)}
    )
