"""Response schema of `GET /v1/stream/status` (`api.panel.routes.stream`). The streams
themselves are `text/event-stream`, outside the OpenAPI schema."""

from __future__ import annotations

from pydantic import BaseModel, Field


class StreamCounters(BaseModel):
    topic: str
    subscribers: int = Field(description="Clients following the stream now.")
    published: int = Field(description="Rows pushed since the API started.")
    dropped: int = Field(description="Clients dropped for reading slower than rows landed.")
    held: int = Field(description="Rows held for clients resuming with Last-Event-ID.")
    position: str = Field(
        description="The id of now: `partition:next_offset,...` (empty before the topic exists)."
    )


class StreamStatus(BaseModel):
    alerts: StreamCounters
    metrics: StreamCounters
    heartbeat_s: float = Field(description="A comment line after this long without an event.")
    queue_max: int = Field(description="Events a client may have queued before it is dropped.")
    retry_ms: int = Field(description="The reconnect delay the streams give EventSource.")
