"""The pooled HTTP client that carries requests to replicas.

One ``aiohttp`` session per gateway: HTTP/1.1 keep-alive connections pooled per replica (vLLM
and SGLang serve HTTP/1.1 through uvicorn, so there is no HTTP/2 to negotiate). aiohttp's pool
rather than httpx's: httpcore looks at every pooled connection on every request (a socket call
each), which at a few hundred requests a second cost more than everything else the gateway
does (``placement bench gateway``). Timeouts: connecting is short (a replica that does not
accept is tried no longer), reading waits up to ``read_timeout_s`` between two bytes (a long
generation is not a failure). Bodies are passed on as they come (no decompression).
"""

from __future__ import annotations

import errno

import aiohttp

from serving.gateway.settings import GatewaySettings

_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
# a try failed before any answer because nothing listens there: the replica is down (marked
# down at once). A connect timeout is not proof: an overloaded replica accepts late.
DOWN_ERRNOS = frozenset({errno.ECONNREFUSED, errno.EHOSTUNREACH, errno.ENETUNREACH})
# anything the replica's connection can do wrong, before or during an answer
UPSTREAM_ERRORS: tuple[type[Exception], ...] = (aiohttp.ClientError, TimeoutError)

Response = aiohttp.ClientResponse


def refused(exc: BaseException) -> bool:
    """Did connecting fail because the replica is not there (refused, unreachable)?"""
    return isinstance(exc, aiohttp.ClientConnectorError) and exc.os_error.errno in DOWN_ERRNOS


def base_url(address: str) -> str:
    """A replica address as a URL prefix (``10.0.0.1:8000`` → ``http://10.0.0.1:8000``)."""
    address = address.rstrip("/")
    return address if "://" in address else "http://" + address


class Upstream:
    def __init__(self, settings: GatewaySettings) -> None:
        self._settings = settings
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        """The shared session, made on first use (inside the serving event loop)."""
        if self._session is None:
            s = self._settings
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(
                    limit=s.max_connections, keepalive_timeout=30.0, ttl_dns_cache=None
                ),
                timeout=aiohttp.ClientTimeout(
                    total=None, sock_connect=s.connect_timeout_s, sock_read=s.read_timeout_s
                ),
                auto_decompress=False,
                trust_env=False,
                # the session's own headers: merging per-request ones into them took an eighth
                # of the gateway's event-loop time at 300 req/s (py-spy)
                headers=_HEADERS,
            )
        return self._session

    async def open(self, base: str, path: str, body: bytes) -> Response:
        """Send the request; the answer's status and headers are in, its body not yet read."""
        return await self.session().post(base + path, data=body)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
