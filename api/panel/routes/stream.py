"""Server-sent events for the panel's live views (open, as their read routes are):

- `GET /v1/stream/alerts`: each new alert of the `alerts` topic as it is read (`event: alert`),
  filtered as the read routes filter: `kind=all` (`/v1/alerts`), `kind=shipping`
  (`/v1/shipping/alerts`), `kind=sensors` with `run` (`/v1/sensors/alerts`), and `job`;
- `GET /v1/stream/metrics`: each new `pipeline.progress/1` record of the `metrics` topic
  (`event: progress`), optionally one `job`'s;
- `GET /v1/stream/status`: subscribers, rows published, clients dropped, per stream.

Each event's `id:` is the Kafka position after it (`live.views.stream`: `partition:next_offset`
per partition, e.g. `0:124,1:457`). A client reconnecting with `Last-Event-ID` gets every held
row after that position; a position the server no longer holds first gets `event: gap` naming
the offsets missed (an id that is not ours: `gap` with a `reason`). Without one, `backlog=N`
sends the newest N held rows first; `after=<id>` starts after an id as the header does (a
page that read the position from `/v1/stream/status` before its snapshot). Then `event: live`
carries the current position as its id, so a client that saw no row yet still resumes from
where it joined.

A comment line (`: heartbeat <epoch ms>`) goes out after `heartbeat_s` without an event. A
client's queue holds at most `queue_max` events; one that reads slower than rows land is
dropped: `event: dropped`, the stream ends (counted in `status`, logged), and EventSource
reconnects and resumes from its last id. When the server is told to stop (SIGINT, SIGTERM),
every stream ends with `event: bye`, so uvicorn's graceful shutdown does not wait on them.

Auth: none, as `/v1/alerts`, `/v1/shipping/alerts`, `/v1/sensors/alerts` and `/v1/pipeline`
are open (no owner scope applies to them; nothing owner-scoped is streamed), so no token ever
goes into a URL. The browser reaches the API from the panel's origin, so the streams answer
CORS for an `Origin` on the same host as the API (loopback names are one host) or listed in
`STREAMSIM_STREAM_ORIGINS` (comma-separated), never `*`.

The two streams are left out of `/openapi.json`: a response that never ends is not something
a schema fuzzer can check (`/v1/stream/status` is in it).

Settings (environment of `streamsim api`): `STREAMSIM_STREAM_HEARTBEAT_S` (15),
`STREAMSIM_STREAM_QUEUE` (256 events), `STREAMSIM_STREAM_RETRY_MS` (2000).
"""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from types import FrameType
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi.responses import StreamingResponse

from api.panel.deps import UNAVAILABLE, feeds_of
from api.panel.models.stream import StreamStatus
from api.panel.routes.sensors import Run, sensors_of
from api.panel.routes.ships import is_shipping
from api.responses import OrjsonResponse
from live.views.sensors import is_sensor_alert, run_alerts
from live.views.stream import EventLog, Resume, Subscriber, comment, format_id, frame
from live.views.stream import retry as retry_line

router = APIRouter(prefix="/v1/stream", tags=["read", "stream"])

HEARTBEAT_ENV = "STREAMSIM_STREAM_HEARTBEAT_S"
QUEUE_ENV = "STREAMSIM_STREAM_QUEUE"
RETRY_ENV = "STREAMSIM_STREAM_RETRY_MS"
ORIGINS_ENV = "STREAMSIM_STREAM_ORIGINS"
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "[::1]"})


@dataclass(frozen=True)
class StreamSettings:
    heartbeat_s: float = 15.0
    queue_max: int = 256
    retry_ms: int = 2000
    origins: tuple[str, ...] = ()

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> StreamSettings:
        env = dict(os.environ) if env is None else env
        default = cls()
        return cls(
            heartbeat_s=max(0.05, float(env.get(HEARTBEAT_ENV) or default.heartbeat_s)),
            queue_max=max(1, int(env.get(QUEUE_ENV) or default.queue_max)),
            retry_ms=max(0, int(env.get(RETRY_ENV) or default.retry_ms)),
            origins=tuple(
                o.strip().rstrip("/") for o in (env.get(ORIGINS_ENV) or "").split(",") if o.strip()
            ),
        )


def settings_of(request: Request) -> StreamSettings:
    """The app's stream settings (`app.state.stream_settings`), else the environment's, read
    once per app."""
    found = getattr(request.app.state, "stream_settings", None)
    if not isinstance(found, StreamSettings):
        found = StreamSettings.from_env()
        request.app.state.stream_settings = found
    return found


def allowed_origin(origin: str | None, host: str | None, extra: tuple[str, ...]) -> str | None:
    """`origin` when a browser page there may read the stream: listed in `extra`, or on the
    same host as the API (`host`: the request's Host header; loopback names count as one)."""
    if not origin:
        return None
    origin = origin.rstrip("/")
    if origin in extra:
        return origin
    parts = urlsplit(origin)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    api_host = urlsplit(f"//{host}").hostname if host else None
    if api_host is None:
        return None
    same = parts.hostname == api_host or (parts.hostname in LOOPBACK and api_host in LOOPBACK)
    return origin if same else None


def stream_headers(request: Request, settings: StreamSettings) -> dict[str, str]:
    headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no", "Vary": "Origin"}
    origin = allowed_origin(
        request.headers.get("origin"), request.headers.get("host"), settings.origins
    )
    if origin is not None:
        headers["Access-Control-Allow-Origin"] = origin
    return headers


#: The streams open in this process: ended when the server is told to stop.
OPEN: set[Subscriber] = set()
_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_chained = False


def end_streams_on_stop() -> None:
    """Chain a handler before the server's own SIGINT/SIGTERM handlers (uvicorn's, installed
    by then) that ends every open stream; uvicorn's graceful shutdown waits for open responses.
    Only from the main thread (signals are delivered there); once per process."""
    global _chained
    if _chained or threading.current_thread() is not threading.main_thread():
        return
    _chained = True
    for sig in _STOP_SIGNALS:
        previous = signal.getsignal(sig)

        def handler(signum: int, frame: FrameType | None, previous: object = previous) -> None:
            for sub in list(OPEN):
                sub.close()
            if callable(previous):
                previous(signum, frame)
            elif signum == signal.SIGINT:
                signal.default_int_handler(signum, frame)
            elif previous == signal.SIG_DFL:
                signal.signal(signum, signal.SIG_DFL)
                signal.raise_signal(signum)

        signal.signal(sig, handler)


def merged_id(position: dict[int, int], after: dict[int, int]) -> str:
    """The `live` event's id: the log's position when the client subscribed (rows after it
    are in its queue), not behind where a resuming client was."""
    now = dict(position)
    for partition, offset in after.items():
        now[partition] = max(now.get(partition, 0), offset)
    return format_id(now)


async def events(
    log: EventLog,
    sub: Subscriber,
    resume: Resume,
    settings: StreamSettings,
    name: str,
    hello: dict[str, Any],
) -> AsyncIterator[bytes]:
    """The stream of one subscription: retry, gap (if any), backlog, `live`, then each new
    event, a heartbeat comment after `heartbeat_s` of silence; `dropped` ends it."""
    OPEN.add(sub)
    try:
        yield retry_line(settings.retry_ms)
        if resume.gap:
            yield frame(
                {
                    "missed": {
                        str(p): {"from": lo, "to": hi} for p, (lo, hi) in resume.missed.items()
                    },
                    "reason": resume.reason
                    or "the server no longer holds these offsets (evicted, or read before it "
                    "started): the rows it holds after them follow",
                },
                event="gap",
            )
        for event in resume.backlog:
            yield frame(event.row, event=name, event_id=event.id)
        yield frame(hello, event="live", event_id=merged_id(resume.position, sub.after))
        while True:
            batch = await sub.get(settings.heartbeat_s)
            if sub.closed:
                yield frame({"reason": "the server is stopping"}, event="bye")
                return
            if sub.dropped:
                yield frame(
                    {
                        "reason": f"client too slow: {sub.queue_max} events queued unread; "
                        "reconnect with Last-Event-ID to resume",
                        "queue_max": sub.queue_max,
                    },
                    event="dropped",
                )
                return
            if not batch:
                yield comment(f"heartbeat {time.time_ns() // 1_000_000}")
                continue
            for event in batch:
                yield frame(event.row, event=name, event_id=event.id)
    finally:
        OPEN.discard(sub)
        log.unsubscribe(sub)


async def open_stream(
    request: Request,
    log: EventLog,
    accept: Callable[[dict[str, Any]], bool],
    name: str,
    hello: dict[str, Any],
    last_event_id: str | None,
    backlog: int,
) -> StreamingResponse:
    settings = settings_of(request)
    end_streams_on_stop()
    sub = Subscriber(accept, settings.queue_max, asyncio.get_running_loop())
    resume = log.subscribe(sub, last_event_id, backlog)
    return StreamingResponse(
        events(log, sub, resume, settings, name, hello),
        media_type="text/event-stream",
        headers=stream_headers(request, settings),
    )


LastEventId = Annotated[
    str | None,
    Header(
        alias="Last-Event-ID",
        max_length=4096,
        description="Resume after this event id (EventSource sends it when it reconnects).",
    ),
]
After = Annotated[
    str | None,
    Query(
        max_length=4096,
        description="Start after this id, as Last-Event-ID does (the header wins): a page "
        "that read `/v1/stream/status` before its snapshot streams what came after it.",
    ),
]
Backlog = Annotated[
    int,
    Query(ge=0, le=1000, description="Without Last-Event-ID: first send the newest N held rows."),
]
Job = Annotated[
    str | None,
    Query(pattern=r"^[A-Za-z0-9_.-]{1,64}$", description="Only this job's."),
]


def no_device(run: str, device: str) -> bool:
    return False


def alert_filter(
    kind: str, job: str | None, run: str | None, has_device: Callable[[str, str], bool]
) -> Callable[[dict[str, Any]], bool]:
    """Which alert rows a stream sends, as its read route picks them: `shipping` as
    `/v1/shipping/alerts` (`is_shipping`), `sensors` as `/v1/sensors/alerts` (`run`'s, by
    `run_alerts`; every sensor alert while no run is known yet), `all` as `/v1/alerts`; and
    only `job`'s when given."""

    def kind_of(row: dict[str, Any]) -> bool:
        if kind == "shipping":
            return is_shipping(row)
        if kind == "sensors":
            if run is None:
                return is_sensor_alert(row)
            return bool(run_alerts([row], run, has_device))
        return True

    def accept(row: dict[str, Any]) -> bool:
        return (job is None or row.get("job") == job) and kind_of(row)

    return accept


@router.get("/alerts", response_class=StreamingResponse, include_in_schema=False)
async def alert_stream(
    request: Request,
    kind: Annotated[
        Literal["all", "shipping", "sensors"],
        Query(
            description="all: as /v1/alerts; shipping: as /v1/shipping/alerts; sensors: as "
            "/v1/sensors/alerts (with `run`)."
        ),
    ] = "all",
    run: Run = None,
    job: Job = None,
    backlog: Backlog = 0,
    after: After = None,
    last_event_id: LastEventId = None,
) -> StreamingResponse:
    """Each new alert of the `alerts` topic as it is read, evidence decoded (`event: alert`,
    the row of `/v1/alerts`)."""
    feeds = feeds_of(request)
    hello: dict[str, Any] = {"topic": feeds.alerts_topic, "kind": kind, "job": job}
    has_device: Callable[[str, str], bool] = no_device
    if kind == "sensors":
        feed = sensors_of(request)
        run = hello["run"] = feed.view.run_of_request(run)
        has_device = feed.view.has_device
    accept = alert_filter(kind, job, run, has_device)
    return await open_stream(
        request, feeds.alert_stream, accept, "alert", hello, last_event_id or after, backlog
    )


@router.get("/metrics", response_class=StreamingResponse, include_in_schema=False)
async def metrics_stream(
    request: Request,
    job: Job = None,
    backlog: Backlog = 0,
    after: After = None,
    last_event_id: LastEventId = None,
) -> StreamingResponse:
    """Each new progress record of the `metrics` topic as it is read (`event: progress`, a
    query's row of `/v1/pipeline` before its derived figures)."""
    feeds = feeds_of(request)

    def accept(row: dict[str, Any]) -> bool:
        return job is None or row.get("job") == job

    hello = {"topic": feeds.metrics_topic, "job": job}
    return await open_stream(
        request,
        feeds.progress_stream,
        accept,
        "progress",
        hello,
        last_event_id or after,
        backlog,
    )


@router.options("/alerts", include_in_schema=False)
@router.options("/metrics", include_in_schema=False)
def preflight(request: Request) -> Response:
    """CORS preflight (a browser may send one for the `Last-Event-ID` header)."""
    headers = stream_headers(request, settings_of(request))
    if "Access-Control-Allow-Origin" in headers:
        headers["Access-Control-Allow-Methods"] = "GET"
        headers["Access-Control-Allow-Headers"] = "Last-Event-ID"
        headers["Access-Control-Max-Age"] = "600"
    return Response(status_code=204, headers=headers)


@router.get(
    "/status",
    response_class=OrjsonResponse,
    responses={200: {"model": StreamStatus}, **UNAVAILABLE},
)
def status(request: Request) -> OrjsonResponse:
    """Per stream: clients following it, rows published, clients dropped for reading too
    slowly, rows held for resuming, the current position; and the settings."""
    feeds = feeds_of(request)
    settings = settings_of(request)

    def of(log: EventLog, topic: str) -> dict[str, Any]:
        return {
            "topic": topic,
            "subscribers": log.subscribers,
            "published": log.published,
            "dropped": log.dropped,
            "held": log.held,
            "position": log.position(),
        }

    return OrjsonResponse(
        {
            "alerts": of(feeds.alert_stream, feeds.alerts_topic),
            "metrics": of(feeds.progress_stream, feeds.metrics_topic),
            "heartbeat_s": settings.heartbeat_s,
            "queue_max": settings.queue_max,
            "retry_ms": settings.retry_ms,
        }
    )
