"""The fraud endpoint: card-transaction verdicts in milliseconds (Dunning & Friedman ch. 6).

- `main`: the app factory; `server`: uvicorn (`streamsim api`); `routes/`: one module each.
- `models`: request/response schemas; `pan`: PAN tokens, masks, scrubbing; `errors`: 422s.
- `decision`: the detectors' per-request checks, score and verdict, the `cards.activity` record.
- `state`: the last-use state and the verdict cache; `updater`: rebuilds and follows it from
  `cards.activity`; `publisher`: non-blocking publishing; `service`: ties them together.
- `settings`: thresholds (the detectors' own models), scoring, bounds, secrets.
- `stats`: counters and the HdrHistogram of handling time; `logscrub`, `kafkalog`: logging.
"""
