"""The fraud endpoint's HTTP routes, one module per resource."""

from api.fraud.routes import cards, control, health, stats, transactions

#: In the order `api.main` includes them.
ROUTERS = (transactions.router, cards.router, stats.router, health.router, control.router)
