"""The control panel's client of the streamsim API: one method per route, plain dicts back.

Where the API is: `STREAMSIM_API_URL` (set by `streamsim ui`), else `http://<api.host>:<api.port>`
of the stack config. The bearer token of the control routes: `STREAMSIM_API_TOKEN`.

Errors are two types the pages can show as they are:
- `ApiUnavailable`: nothing answers (connection refused, timeout), with a hint how to start it;
- `ApiError`: the API answered with an error status; `str()` is its detail, made readable
  (a 422 lists each bad key with its message).
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import quote

import httpx

URL_ENV = "STREAMSIM_API_URL"
TOKEN_ENV = "STREAMSIM_API_TOKEN"


class ApiUnavailable(Exception):
    def __init__(self, url: str, reason: str) -> None:
        self.url = url
        self.reason = reason
        super().__init__(
            f"The API at {url} is not reachable ({reason}). Start it with `streamsim api` "
            f"(or point {URL_ENV} at it)."
        )


class ApiError(Exception):
    def __init__(self, status: int, detail: Any) -> None:
        self.status = status
        self.detail = detail
        super().__init__(describe(status, detail))


def describe(status: int, detail: Any) -> str:
    """An error body as one readable line."""
    if status == 401:
        return f"not authorized: set {TOKEN_ENV} to the API's control token ({_text(detail)})"
    if status == 403:
        return f"forbidden: {_text(detail)}"
    if isinstance(detail, list):  # 422 items
        parts = []
        for item in detail:
            if isinstance(item, dict):
                loc = ".".join(str(p) for p in item.get("loc", []) if p != "body")
                msg = str(item.get("msg", ""))
                parts.append(msg if loc and loc.split(".")[-1] in msg else f"{loc}: {msg}")
            else:
                parts.append(str(item))
        return "; ".join(parts)
    return _text(detail)


def _text(detail: Any) -> str:
    if isinstance(detail, dict) and "message" in detail:
        return str(detail["message"])
    return str(detail)


def default_url() -> str:
    url = os.environ.get(URL_ENV)
    if url:
        return url.rstrip("/")
    from core.config import load_stack

    stack = load_stack(None)
    host = "127.0.0.1" if stack.api.host in ("0.0.0.0", "::") else stack.api.host
    return f"http://{host}:{stack.api.port}"


class ApiClient:
    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout_s: float = 5.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.base_url = (base_url or default_url()).rstrip("/")
        self.token = token if token is not None else (os.environ.get(TOKEN_ENV) or None)
        self._http = httpx.Client(base_url=self.base_url, timeout=timeout_s, transport=transport)

    def close(self) -> None:
        self._http.close()

    @property
    def can_control(self) -> bool:
        return bool(self.token)

    def _request(
        self,
        method: str,
        path: str,
        *,
        control: bool = False,
        owner_token: str | None = None,
        **kwargs: Any,
    ) -> httpx.Response:
        """`control`: with the control token; `owner_token`: with that owner token instead."""
        headers = {}
        if control and self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        if owner_token is not None:
            headers["Authorization"] = f"Bearer {owner_token}"
        try:
            response = self._http.request(method, path, headers=headers, **kwargs)
        except httpx.TimeoutException:
            raise ApiUnavailable(self.base_url, "timed out") from None
        except httpx.TransportError as exc:
            raise ApiUnavailable(self.base_url, _reason(exc)) from None
        if response.status_code >= 400:
            try:
                detail = response.json().get("detail", response.text)
            except (ValueError, AttributeError):
                detail = response.text or response.reason_phrase
            raise ApiError(response.status_code, detail)
        return response

    def _get(self, path: str, **params: Any) -> dict[str, Any]:
        body: dict[str, Any] = self._request("GET", path, params=params or None).json()
        return body

    # -- read ----------------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        return self._get("/v1/health")

    def stats(self) -> dict[str, Any]:
        return self._get("/v1/stats")

    def scenarios(self) -> list[dict[str, Any]]:
        return list(self._get("/v1/scenarios")["scenarios"])

    def runs(self) -> list[dict[str, Any]]:
        """With the control token when there is one: only then does the API show a run's
        stderr tail, working directory and overrides."""
        body: dict[str, Any] = self._request("GET", "/v1/runs", control=True).json()
        return list(body["runs"])

    def alerts(self, limit: int = 50) -> dict[str, Any]:
        return self._get("/v1/alerts", limit=limit)

    def activity(self, limit: int = 100) -> dict[str, Any]:
        return self._get("/v1/activity/recent", limit=limit)

    def pipeline(self) -> dict[str, Any]:
        return self._get("/v1/pipeline")

    def stream_status(self) -> dict[str, Any]:
        """The SSE streams' positions and counters (`/v1/stream/status`)."""
        return self._get("/v1/stream/status")

    def rates(self) -> dict[str, Any]:
        return self._get("/v1/rates")

    def vehicles(self, limit: int = 1000, status: str | None = None) -> dict[str, Any]:
        params: dict[str, Any] = {"limit": limit}
        if status is not None:
            params["status"] = status
        return self._get("/v1/vehicles", **params)

    def vehicle_readings(
        self, vehicle_id: str, signals: list[str] | None = None, limit: int = 300
    ) -> dict[str, Any]:
        """Recent readings (oldest first) and alerts of one vehicle; `ApiError` 404 if the
        API has seen nothing of it."""
        params: dict[str, Any] = {"limit": limit}
        if signals:
            params["signal"] = signals
        return self._get(f"/v1/vehicles/{quote(vehicle_id, safe='')}/telemetry", **params)

    def shipping_fleet(self, hours: int = 24 * 21, run: str | None = None) -> dict[str, Any]:
        """One run's ships, ports with ships in dock, the backlog held on board (open); `run`
        None: the newest run the API read."""
        params: dict[str, Any] = {"hours": hours}
        if run is not None:
            params["run"] = run
        return self._get("/v1/shipping/fleet", **params)

    def shipping_alerts(self, limit: int = 50) -> dict[str, Any]:
        return self._get("/v1/shipping/alerts", limit=limit)

    def sensors(self, run: str | None = None, limit: int = 2000) -> dict[str, Any]:
        """One sensors run's devices and sites (open); `run` None: the newest read."""
        return self._get("/v1/sensors", limit=limit, **({"run": run} if run else {}))

    def sensor_series(
        self, sensor_id: str, run: str | None = None, limit: int = 60
    ) -> dict[str, Any]:
        """A device's recent readings (oldest first) and alerts; `ApiError` 404 if the run has
        no reading of it."""
        path = f"/v1/sensors/{quote(sensor_id, safe='')}/series"
        return self._get(path, limit=limit, **({"run": run} if run else {}))

    def sensor_alerts(self, run: str | None = None, limit: int = 100) -> dict[str, Any]:
        return self._get("/v1/sensors/alerts", limit=limit, **({"run": run} if run else {}))

    def clock_offsets(self, domain: str, bin_s: float = 5.0) -> dict[str, Any]:
        """The estimated clock offsets of `domain`'s devices (`vehicles`, `sensors`), binned."""
        return self._get(f"/v1/{domain}/clock-offsets", bin_s=bin_s)

    def sketches(self) -> dict[str, Any]:
        """The newest windows' heavy hitters and distinct counts, estimates with their bounds."""
        return self._get("/v1/sketches")

    def owner_containers(
        self, owner_token: str, run: str | None = None, limit: int = 1000
    ) -> dict[str, Any]:
        """The containers of the owner whose token this is (`ApiError` 401 if it is none's),
        of `run` only when one is given."""
        params: dict[str, Any] = {"limit": limit} | ({"run": run} if run else {})
        body: dict[str, Any] = self._request(
            "GET", "/v1/shipping/containers", owner_token=owner_token, params=params
        ).json()
        return body

    def owner_container(self, owner_token: str, container_id: str) -> dict[str, Any]:
        """One of the owner's containers: legs across ships, readings, port events."""
        body: dict[str, Any] = self._request(
            "GET",
            f"/v1/shipping/containers/{quote(container_id, safe='')}",
            owner_token=owner_token,
        ).json()
        return body

    def latest_evaluation(self) -> dict[str, Any] | None:
        """None when there is no evaluation yet (404)."""
        try:
            return self._get("/v1/evaluations/latest")
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise

    def run_evaluation(self, run_id: str) -> dict[str, Any] | None:
        """A run's evaluation (status; report once done); None when it has none (404). With
        the control token: its error and the run's overrides too."""
        path = f"/v1/runs/{quote(run_id, safe='')}/evaluation"
        try:
            body: dict[str, Any] = self._request("GET", path, control=True).json()
        except ApiError as exc:
            if exc.status == 404:
                return None
            raise
        return body

    def run_evaluations(self) -> list[dict[str, Any]]:
        """Every run's evaluation with the run's knobs, newest first."""
        body: dict[str, Any] = self._request("GET", "/v1/evaluations/runs", control=True).json()
        return list(body["evaluations"])

    def loadtest_files(self) -> dict[str, Any]:
        """The load-test files (each with its editable part) and the keys edits may set."""
        return self._get("/v1/loadtests/files")

    def loadtest_runs(self) -> list[dict[str, Any]]:
        """Every load test, earlier reports included, newest first (with the token: the
        stderr tail of a failed one)."""
        body: dict[str, Any] = self._request("GET", "/v1/loadtests/runs", control=True).json()
        return list(body["runs"])

    def loadtest_run(self, run_id: str) -> dict[str, Any]:
        """One load test with its live figures, whole report and Vega-Lite charts."""
        path = f"/v1/loadtests/runs/{quote(run_id, safe='')}"
        body: dict[str, Any] = self._request("GET", path, control=True).json()
        return body

    # -- the fraud endpoint --------------------------------------------------------------------

    def decide(self, transaction: dict[str, Any]) -> dict[str, Any]:
        """POST /v1/transactions: the verdict."""
        body: dict[str, Any] = self._request("POST", "/v1/transactions", json=transaction).json()
        return body

    # -- control (bearer token) ----------------------------------------------------------------

    def start_run(
        self,
        scenario: str,
        *,
        speed: float | str | None = None,
        duration_s: float | None = None,
        overrides: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"scenario": scenario, "overrides": overrides or {}}
        if speed is not None:
            body["speed"] = speed
        if duration_s is not None:
            body["duration_s"] = duration_s
        run: dict[str, Any] = self._request(
            "POST", "/v1/control/runs", control=True, json=body
        ).json()
        return run

    def retune_run(self, run_id: str, changes: dict[str, Any]) -> dict[str, Any]:
        """PATCH a running run's `speed` and/or `max_rate` (None: no cap), applied live."""
        run: dict[str, Any] = self._request(
            "PATCH",
            f"/v1/control/runs/{quote(run_id, safe='')}/pacing",
            control=True,
            json=changes,
        ).json()
        return run

    def evaluate_run(self, run_id: str) -> dict[str, Any]:
        """Score a run against truth: now (finished) or once it finishes (running)."""
        found: dict[str, Any] = self._request(
            "POST", f"/v1/control/runs/{quote(run_id, safe='')}/evaluation", control=True
        ).json()
        return found

    def start_loadtest(self, file: str, edits: dict[str, Any]) -> dict[str, Any]:
        """POST /v1/control/loadtests: `edits` (rate shape, durations, SLOs) over the file;
        the model checks them, so this can take a few seconds."""
        body = {"file": file, "edits": edits}
        run: dict[str, Any] = self._request(
            "POST", "/v1/control/loadtests", control=True, json=body, timeout=60.0
        ).json()
        return run

    def stop_loadtest(self, run_id: str) -> dict[str, Any]:
        path = f"/v1/control/loadtests/{quote(run_id, safe='')}"
        run: dict[str, Any] = self._request("DELETE", path, control=True, timeout=30.0).json()
        return run

    def stop_run(self, run_id: str) -> dict[str, Any]:
        run: dict[str, Any] = self._request(
            "DELETE", f"/v1/control/runs/{run_id}", control=True, timeout=30.0
        ).json()
        return run


def _reason(exc: httpx.TransportError) -> str:
    text = str(exc) or type(exc).__name__
    if "refused" in text.lower():
        return "connection refused"
    return text
