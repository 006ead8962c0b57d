"""The pooled HTTP client that carries requests to replicas.

One ``httpx.AsyncClient`` per gateway: HTTP/1.1 keep-alive connections pooled per replica
(HTTP/2 when the ``h2`` package is installed and a replica speaks it). Timeouts: connecting is
short (a replica that does not accept is tried no longer), reading waits up to
``read_timeout_s`` between two bytes (a long generation is not a failure).
"""

from __future__ import annotations

import importlib.util

import httpx

from serving.gateway.settings import GatewaySettings

_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
CONNECT_ERRORS = (httpx.ConnectError, httpx.ConnectTimeout)


def base_url(address: str) -> str:
    """A replica address as a URL prefix (``10.0.0.1:8000`` → ``http://10.0.0.1:8000``)."""
    address = address.rstrip("/")
    return address if "://" in address else "http://" + address


class Upstream:
    def __init__(self, settings: GatewaySettings) -> None:
        self._settings = settings
        self._client: httpx.AsyncClient | None = None

    def client(self) -> httpx.AsyncClient:
        """The shared client, made on first use (inside the serving event loop)."""
        if self._client is None:
            s = self._settings
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(
                    s.read_timeout_s, connect=s.connect_timeout_s, pool=s.read_timeout_s
                ),
                limits=httpx.Limits(
                    max_connections=s.max_connections,
                    max_keepalive_connections=s.max_connections,
                    keepalive_expiry=30.0,
                ),
                http2=importlib.util.find_spec("h2") is not None,
                trust_env=False,
            )
        return self._client

    async def open(self, base: str, path: str, body: bytes) -> httpx.Response:
        """Send the request; the answer's status and headers are in, its body not yet read."""
        client = self.client()
        request = client.build_request("POST", base + path, content=body, headers=_HEADERS)
        return await client.send(request, stream=True)

    async def close(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None
