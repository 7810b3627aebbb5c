"""What an endpoint answered the simulator in POS mode (`delivery: http`): one record per
transaction POSTed, on `cards.verdicts` keyed by card token, written by the simulator itself
(`simulators.sinks.http`). `streamsim evaluate cards` scores these verdicts when the endpoint
published none to `cards.activity` for the run (an endpoint in another language, a vendor's
sandbox), or when asked (`--verdicts simulator`): `streamsim.evaluate.verdicts`.

A request that got no 2xx answer is recorded with its `outcome` (a timeout, a 5xx, ...) and no
`decision`: it is counted as such, never as an approval. `shed`: the endpoint answered 429
(load shedding) to every attempt, the terminal fell back to its stand-in decision (named in
`error`), and the endpoint decided nothing.
"""

from __future__ import annotations

from core.contracts import topics
from core.contracts.events import DECISIONS, Field, Record

#: How a request ended: a 2xx (`ok`: `decision` read from the body, if it had one), a 4xx or
#: 5xx status after the retries, shed (429 to every attempt: the terminal's stand-in), a
#: timeout, a connection error, or anything else (`error`).
OK = "ok"
HTTP_4XX = "http_4xx"
HTTP_5XX = "http_5xx"
SHED = "shed"
TIMEOUT = "timeout"
CONNECTION = "connection_error"
ERROR = "error"
OUTCOMES = (OK, HTTP_4XX, HTTP_5XX, SHED, TIMEOUT, CONNECTION, ERROR)

CARD_VERDICT = Record(
    "cards.verdict",
    (
        Field(
            "transaction_id",
            "string",
            nullable=True,
            doc="the request's transaction id (= event_id); null if its body had none",
        ),
        Field("card_token", "string", doc="the card's token (the Kafka key): never the PAN"),
        Field("outcome", "string", choices=OUTCOMES, doc="how the request ended"),
        Field("status", "int", nullable=True, doc="the last HTTP status; null without one"),
        Field(
            "decision",
            "string",
            nullable=True,
            doc=f"the body's `decision` on a 2xx ({', '.join(DECISIONS)} or the endpoint's "
            "own word); null otherwise",
        ),
        Field(
            "alerts",
            "json",
            nullable=True,
            doc="the body's `evidence.alerts` (`label`, `event_ids`), when it names any",
        ),
        Field("sent_at", "int", doc="epoch ms: when the simulator meant to send it"),
        Field("answered_at", "int", doc="epoch ms: when the request ended"),
        Field(
            "latency_ms",
            "float",
            doc="answered_at minus the intended send time: queueing and retries included",
        ),
        Field("attempts", "int", doc="requests sent: 1 plus the retries"),
        Field("error", "string", nullable=True, doc="the error's kind and text, if any"),
    ),
    "What the endpoint answered the simulator for one transaction (POS mode).",
    topics.CARDS_VERDICTS,
)
