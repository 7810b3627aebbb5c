"""The fraud endpoint: card-transaction verdicts in milliseconds (Dunning & Friedman ch. 6).

- `settings`: thresholds (the detectors' own models), scoring, bounds, secrets; imports no
  route. `models`: request/response schemas.
- `decision`: the detectors' per-request checks, score and verdict, the `cards.activity` record;
  `verdict`: the response body, a function of that record.
- `state`: the last-use state and the verdict cache; `updater`: the consumer thread that
  rebuilds and follows it from `cards.activity`; `publisher`: non-blocking publishing;
  `service`: ties them together.
- `stats`: counters and the HdrHistogram of handling time.
- `deps`: what routes share; `routes/`: one module per resource.
"""
