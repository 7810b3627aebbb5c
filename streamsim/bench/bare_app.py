"""The reference of `bench api`: a bare FastAPI endpoint served exactly like `streamsim api`.

`POST /v1/transactions` parses the JSON body into `BareTransaction` (the request's field names
and JSON types, no constraints or validators, unknown keys rejected) and returns the small JSON
object `{"transaction_id": ..., "decision": "approve"}` the idiomatic FastAPI way (a dict, so
FastAPI's default JSON response). No middleware, no state, no Kafka, no logging beyond uvicorn's.

`serve_bare()` runs it under uvicorn with the same settings as `api.server.serve`: one worker,
uvloop, httptools, lifespan on, the same logging config (`api.logscrub.log_config`) and the same
access-log switch. `python -m streamsim.bench.bare_app HOST PORT [--access-log]` starts it.
"""

from __future__ import annotations

import argparse
import contextlib
from typing import Any

import uvicorn
from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict

from api.server import uvicorn_config

PATH = "/v1/transactions"


class BareTransaction(BaseModel):
    """The fraud endpoint's request fields with plain types only."""

    model_config = ConfigDict(extra="forbid")

    card_number: str
    transaction_id: str
    amount: float
    currency: str
    merchant_id: str
    merchant_category: str
    channel: str
    lat: float | None = None
    lon: float | None = None
    country: str
    event_time: int
    terminal_id: str | None = None
    device_id: str | None = None


def create_bare_app() -> FastAPI:
    app = FastAPI(title="bare reference endpoint")

    @app.post(PATH)
    async def post_transaction(tx: BareTransaction) -> dict[str, Any]:
        return {"transaction_id": tx.transaction_id, "decision": "approve"}

    return app


def serve_bare(host: str, port: int, *, access_log: bool = False, log_level: str = "info") -> None:
    config = uvicorn_config(create_bare_app(), host, port, access_log, log_level)
    with contextlib.suppress(KeyboardInterrupt):
        uvicorn.Server(config).run()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("host")
    parser.add_argument("port", type=int)
    parser.add_argument("--access-log", action="store_true")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args()
    serve_bare(args.host, args.port, access_log=args.access_log, log_level=args.log_level)


if __name__ == "__main__":
    main()
