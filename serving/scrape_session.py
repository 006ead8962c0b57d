"""Fetch replicas' ``/metrics`` over kept-alive connections, asking only for what changed.

One aiohttp session keeps a connection open to each replica between scrapes and sends a
conditional GET: ``If-None-Match`` with the entity tag of the replica's last page read in full.
A replica that answers 304 Not Modified (the emulator does while nothing changed) costs neither
a page nor a parse; one that sends no ``ETag`` (vLLM) is read in full every time, as before.
Either way every scrape is a request answered, so a replica that stops is noticed at the same
scrape as without the condition.
"""

from __future__ import annotations

import aiohttp

from placement.errors import ScrapeFailed
from serving.scrape import ACCEPT

NOT_MODIFIED = 304


class ScrapeSession:
    """Open it on the running event loop; :meth:`close` it there."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # no cookies, no proxy variables, no per-host cap: a scrape is one plain GET
            self._session = aiohttp.ClientSession(
                cookie_jar=aiohttp.DummyCookieJar(),
                trust_env=False,
                connector=aiohttp.TCPConnector(limit=0, keepalive_timeout=30.0),
            )
        return self._session

    async def fetch(
        self, url: str, timeout_s: float, etag: str | None = None
    ) -> tuple[str | None, str | None]:
        """(page text, its entity tag) of ``url``; the text is None when the replica answered
        that the page tagged ``etag`` still holds. Raises ScrapeFailed saying why not."""
        headers = {"Accept": ACCEPT}
        if etag is not None:
            headers["If-None-Match"] = etag
        timeout = aiohttp.ClientTimeout(total=timeout_s)
        try:
            async with self._open().get(url, headers=headers, timeout=timeout) as response:
                if response.status == NOT_MODIFIED and etag is not None:
                    return None, etag
                if response.status != 200:
                    raise ScrapeFailed(
                        f"{url} answered HTTP {response.status} {response.reason}, expected 200"
                    )
                body = await response.read()
                tag = response.headers.get("ETag")
        except aiohttp.ClientError as exc:
            raise ScrapeFailed(f"cannot reach {url}: {exc}") from None
        except (TimeoutError, OSError) as exc:
            raise ScrapeFailed(f"cannot reach {url}: {exc!r}") from None
        try:
            return body.decode("utf-8"), tag
        except UnicodeDecodeError:
            raise ScrapeFailed(f"{url} did not answer UTF-8 text") from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
