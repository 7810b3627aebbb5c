"""Owner-scoped shipping reads: a customer sees its own containers only.

The bearer token is an owner token (`core.config.owner_tokens`); every route filters by the owner it
names before anything else, so list, search and history all answer from that owner's
containers. Another owner's container is a 404 with the same body as an unknown one, so the
answer does not tell that it exists.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Path, Query, Request, status

from api.errors import ErrorBody
from api.panel.deps import OWNER_RESPONSES, require_owner
from api.panel.models.shipping import ContainerHistory, ContainerList
from api.responses import OrjsonResponse
from live.consumers.shipping import ShippingTail

router = APIRouter(prefix="/v1/shipping", tags=["read", "shipping"])

Owner = Annotated[str, Depends(require_owner)]
ContainerId = Annotated[
    str,
    Path(pattern=r"^[A-Z]{4}[0-9]{7}$", description="The ISO 6346 container number."),
]
UNAVAILABLE: dict[int | str, dict[str, str]] = {503: {"description": "No Kafka configured."}}


def shipping_of(request: Request) -> ShippingTail:
    tail: ShippingTail | None = getattr(request.app.state, "shipping", None)
    if tail is None:
        raise HTTPException(
            status.HTTP_503_SERVICE_UNAVAILABLE,
            "the shipping feed needs Kafka: this API runs without a stack",
        )
    return tail


@router.get(
    "/containers",
    response_class=OrjsonResponse,
    responses={200: {"model": ContainerList}, **OWNER_RESPONSES, **UNAVAILABLE},
)
def containers(
    request: Request,
    owner: Owner,
    q: Annotated[
        str | None,
        Query(
            pattern=r"^[A-Z0-9]{1,11}$", description="Only container numbers starting with this."
        ),
    ] = None,
    ship_id: Annotated[
        str | None, Query(max_length=16, description="Only boxes last read on this ship.")
    ] = None,
    run: Annotated[
        str | None,
        Query(
            pattern=r"^[A-Za-z0-9_.-]{1,64}$",
            description="Only boxes of this run (the event id's run part, as in `/fleet`).",
        ),
    ] = None,
    limit: Annotated[int, Query(ge=1, le=10_000, description="At most this many.")] = 1000,
) -> OrjsonResponse:
    """The caller's containers (by number) with their latest reading."""
    tail = shipping_of(request)
    rows, matched = tail.view.containers(owner, limit, q, ship_id, run)
    return OrjsonResponse(
        {
            "owner": owner,
            "containers": rows,
            "count": len(rows),
            "matched": matched,
            "source": tail.source(),
        }
    )


@router.get(
    "/containers/{container_id}",
    response_class=OrjsonResponse,
    responses={
        200: {"model": ContainerHistory},
        404: {"model": ErrorBody, "description": "None of the caller's containers (or unknown)."},
        **OWNER_RESPONSES,
        **UNAVAILABLE,
    },
)
def history(request: Request, owner: Owner, container_id: ContainerId) -> OrjsonResponse:
    """One of the caller's containers: its log across ships (legs), newest readings and port
    events."""
    found = shipping_of(request).view.history(owner, container_id)
    if found is None:
        raise HTTPException(
            status.HTTP_404_NOT_FOUND, f"no container {container_id} among yours (yet)"
        )
    return OrjsonResponse(found)
