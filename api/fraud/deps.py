"""What the fraud routes share: the service of the app."""

from __future__ import annotations

from fastapi import Request

from api.fraud.service import FraudService


def service_of(request: Request) -> FraudService:
    service: FraudService = request.app.state.service
    return service
