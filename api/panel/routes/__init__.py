"""The control panel's read and control routes, one module per resource."""

from api.panel.routes import (
    evaluations,
    feeds,
    runs,
    scenarios,
    sensors,
    shipping,
    ships,
    sketches,
    stream,
    vehicles,
)

#: In the order `api.main` includes them.
ROUTERS = (
    runs.router,
    scenarios.router,
    feeds.router,
    evaluations.router,
    vehicles.router,
    shipping.router,
    ships.router,
    sensors.router,
    sketches.router,
    stream.router,
)
