"""Conditional scrapes over kept-alive connections against a real aiohttp server: a page
without an entity tag (vLLM's) is read in full every time, one with a tag is not sent again
while it holds, and every failure is a ScrapeFailed naming the URL."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable

import pytest
from aiohttp import web

from placement.errors import ScrapeFailed
from serving.scrape_session import ScrapeSession

PAGE = "vllm:num_requests_running 1.0\n"


Seen = tuple[str | None, int]  # a request's If-None-Match, the client's port


async def _serving(check: Callable[[str], Awaitable[None]]) -> list[Seen]:
    seen: list[Seen] = []

    def note(request: web.Request) -> None:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        seen.append((request.headers.get("If-None-Match"), peer[1] if peer else -1))

    async def plain(request: web.Request) -> web.Response:
        note(request)
        return web.Response(text=PAGE)

    async def tagged(request: web.Request) -> web.Response:
        note(request)
        if request.headers.get("If-None-Match") == '"v1"':
            return web.Response(status=304, headers={"ETag": '"v1"'})
        return web.Response(text=PAGE, headers={"ETag": '"v1"'})

    async def broken(request: web.Request) -> web.Response:
        return web.Response(status=500, text="internal error")

    app = web.Application()
    app.router.add_get("/plain", plain)
    app.router.add_get("/tagged", tagged)
    app.router.add_get("/broken", broken)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        await check(f"http://127.0.0.1:{port}")
    finally:
        await runner.cleanup()
    return seen


def test_a_page_without_an_etag_is_read_in_full_every_time() -> None:
    session = ScrapeSession()

    async def check(base: str) -> None:
        for _ in range(2):
            assert await session.fetch(f"{base}/plain", 2.0) == (PAGE, None)
        await session.close()

    seen = asyncio.run(_serving(check))
    assert [tag for tag, _ in seen] == [None, None]


def test_a_tagged_page_that_still_holds_is_not_sent_again() -> None:
    session = ScrapeSession()

    async def check(base: str) -> None:
        text, tag = await session.fetch(f"{base}/tagged", 2.0)
        assert (text, tag) == (PAGE, '"v1"')
        assert await session.fetch(f"{base}/tagged", 2.0, tag) == (None, '"v1"')
        assert await session.fetch(f"{base}/tagged", 2.0, '"v0"') == (PAGE, '"v1"')
        await session.close()

    seen = asyncio.run(_serving(check))
    assert [tag for tag, _ in seen] == [None, '"v1"', '"v0"']
    assert len({port for _, port in seen}) == 1  # one kept-alive connection for the three


def test_failures_are_scrape_failures_naming_the_url() -> None:
    session = ScrapeSession()

    async def check(base: str) -> None:
        with pytest.raises(ScrapeFailed, match=r"/broken answered HTTP 500"):
            await session.fetch(f"{base}/broken", 2.0)
        with socket.socket() as s:  # a port that was free a moment ago and is closed now
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        with pytest.raises(ScrapeFailed, match=f"cannot reach http://127.0.0.1:{port}"):
            await session.fetch(f"http://127.0.0.1:{port}/metrics", 1.0)
        await session.close()

    asyncio.run(_serving(check))
