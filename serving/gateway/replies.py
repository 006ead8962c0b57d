"""Reading a request's body and sending a whole answer, straight on ASGI (the gateway's
paths answer without the framework)."""

from __future__ import annotations

from starlette.types import Receive, Send

from serving.gateway.errors import GatewayError

JSON = b"application/json"


async def read_body(receive: Receive, headers: dict[str, str], max_bytes: int) -> bytes:
    length = headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > max_bytes:
        raise GatewayError(413, f"request body over {max_bytes} bytes", code="body_too_large")
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise GatewayError(400, "client disconnected")
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > max_bytes:
            raise GatewayError(413, f"request body over {max_bytes} bytes", code="body_too_large")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def send_whole(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes,
    extra: list[tuple[bytes, bytes]] | None = None,
) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    if extra:
        headers += extra
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def send_error(send: Send, exc: GatewayError) -> None:
    extra = [(k.lower().encode(), v.encode()) for k, v in exc.headers.items()]
    await send_whole(send, exc.status, exc.body(), JSON, extra)
