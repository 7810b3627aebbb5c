"""The pipeline's clock setting: which time a job windows, watermarks and judges its rules on.

`time: event_time` (the default): the device's own clock, as sent. `corrected_event_time`:
the event time less the device's estimated clock offset (`detectors.clock`, in Spark
`pipeline.clock`): the job then also runs the offsets query that keeps
`<domain>.clock-offsets` current, and reads each record's offset from it; its alerts carry
`"time": "corrected_event_time"` (an alert without `time` was judged on `event_time`).
Raw stays the default until the lab (`streamsim lab watermark`) shows otherwise.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from detectors.clock import ClockParams

TimeBasis = Literal["event_time", "corrected_event_time"]


class ClockSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    time: TimeBasis = Field(
        "event_time", description="Window, watermark and judge on this time (see pipeline.clock)."
    )
    params: ClockParams = Field(ClockParams(), description="The skew estimator's parameters.")
    slide_s: float = Field(
        30.0, gt=0, description="How often each device's offset is republished (send time)."
    )
    offsets_topic: str | None = Field(
        None, description="The offsets table's topic; default `<domain>.clock-offsets`."
    )

    @property
    def corrected(self) -> bool:
        return self.time == "corrected_event_time"
