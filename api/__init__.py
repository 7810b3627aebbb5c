"""The HTTP service: two apps under one uvicorn server.

- `fraud/`: the fraud endpoint (POST /v1/transactions and its read routes).
- `panel/`: the control panel's read and control API (feeds, vehicles, scenario runs).
- `main`: the app factory mounting both; `server`: uvicorn (`streamsim api`).
- Shared: `auth` (the control token), `responses`, `errors` (PAN-free 422s), `logscrub`
  (PAN-scrubbed logs), `kafkalog` (librdkafka's logger).
"""
