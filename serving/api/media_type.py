"""Request bodies are JSON: a body sent as another media type is refused with 415.

Every body the API takes is ``application/json`` (or a ``+json`` type). A body whose
``Content-Type`` says otherwise (``text/plain``, a form) is refused before anything reads it,
rather than parsed as JSON regardless or failing later as a shapeless 422. A body sent with no
``Content-Type`` is read as JSON, as most HTTP clients' JSON helpers expect.
"""

from __future__ import annotations

import json

from starlette.types import ASGIApp, Receive, Scope, Send

UNSUPPORTED = "request body must be JSON (Content-Type: application/json)"
_WITH_BODY = frozenset({"POST", "PUT", "PATCH"})


def is_json(content_type: bytes) -> bool:
    """``application/json`` or ``application/<anything>+json``, parameters ignored."""
    mime = content_type.partition(b";")[0].strip().lower()
    return mime == b"application/json" or (
        mime.startswith(b"application/") and mime.endswith(b"+json")
    )


def refuses(scope: Scope) -> bool:
    """A request with a body of a declared media type other than JSON."""
    if scope["method"] not in _WITH_BODY:
        return False
    content_type: bytes | None = None
    has_body = False
    for name, value in scope["headers"]:
        if name == b"content-type":
            content_type = value
        elif name == b"content-length":
            has_body = has_body or value.strip() not in (b"", b"0")
        elif name == b"transfer-encoding":
            has_body = True
    return has_body and content_type is not None and not is_json(content_type)


class JsonBodies:
    """ASGI middleware answering 415 (a Problem) for a non-JSON request body."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not refuses(scope):
            await self.app(scope, receive, send)
            return
        body = json.dumps({"detail": UNSUPPORTED}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 415,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})
