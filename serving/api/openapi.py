"""The OpenAPI document, completed with what only the running service knows.

The request classes a route request may name are the admission's (configurable), so the
document lists this service's: a client generating requests from the document sends only
classes that are served, and an unknown one is a documented 422.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from serving.service import PlacementService


def openapi_document(app: FastAPI, service: PlacementService) -> Callable[[], dict[str, Any]]:
    """A replacement for ``app.openapi``: FastAPI's document, built once, with the request
    classes of ``service`` as the ``request_class`` enum."""

    def build() -> dict[str, Any]:
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title,
                version=app.version,
                summary=app.summary,
                description=app.description,
                routes=app.routes,
            )
            route_request = document["components"]["schemas"]["RouteRequest"]
            route_request["properties"]["request_class"]["enum"] = sorted(service.admission.classes)
            app.openapi_schema = document
        return app.openapi_schema

    return build
