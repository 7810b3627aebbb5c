"""Response schemas of the clock-offset read routes (`/v1/vehicles/clock-offsets`,
`/v1/sensors/clock-offsets`) and the `clock` of a device's readings: from the compacted
`<domain>.clock-offsets` topics (`live.views.clock`)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ClockOffset(BaseModel):
    """A device's estimated clock offset: its latest row on the offsets topic."""

    device_id: str
    offset_estimate_ms: int = Field(
        description="The device clock minus true time, estimated (the lower envelope of send "
        "time minus event time): subtract it from the device's event time to correct it."
    )
    reset: bool = Field(description="True while the device's clock is reset to an epoch.")
    records: int | None = Field(description="Records behind the estimate (its window's).")
    as_of: int = Field(description="Send time the estimate is as of, epoch ms.")


class OffsetBin(BaseModel):
    low_s: float
    high_s: float
    devices: int


class OffsetsSource(BaseModel):
    topic: str
    status: str = Field(description="live, no topic yet (no job on corrected time has run), ...")
    partitions: int
    error: str | None
    devices: int
    records: int
    malformed: int


class ClockHistogram(BaseModel):
    """The fleet's running-clock offsets, binned."""

    bins: list[OffsetBin] = Field(description="Lowest first; empty bins between kept.")
    bin_s: float = Field(description="Bin width (widened when the spread needs > 120 bins).")
    devices: int = Field(description="Devices counted (their clock not in a reset).")
    in_reset: int = Field(description="Devices whose newest estimate is a reset clock's.")
    p50_ms: int | None
    max_abs_ms: int | None
    source: OffsetsSource
