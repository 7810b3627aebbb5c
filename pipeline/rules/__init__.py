"""Rules in Spark's engine: PySpark Column expressions derived from the `detectors/` params.

One module per concept: `windows` (a key's readings per event-time window, as a sorted
array), `alert_rows` (the alert struct and its id), then one module per rule form (`step`,
`flatline`, `threshold`). Each rule builder maps a sorted readings array to an array
of alert structs; nothing runs in a Python worker.
"""
