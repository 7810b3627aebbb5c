"""The control panel's read and control API: topic feeds, vehicle views, scenario runs.

- `views/`: pure in-memory views (no Kafka): recent alerts and decisions, pipeline progress,
  records/s, vehicles, the latest evaluation report.
- `consumers/`: the Kafka consumer threads that fill the views.
- `runs`: scenario runs as child processes. `models/`: response schemas, one per resource.
- `deps`: what routes share; `routes/`: one module per resource.
"""
