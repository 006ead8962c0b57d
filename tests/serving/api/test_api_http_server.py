"""A real HTTP server: uvicorn on a free 127.0.0.1 port in a thread, driven with httpx."""

from __future__ import annotations

import socket
import threading
import time

import httpx
import uvicorn
from api_fakes import ROUTE_KEY, auth, make_plan, make_runtime

from serving.api.main import create_app


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_route_over_real_http() -> None:
    port = _free_port()
    config = uvicorn.Config(
        create_app(make_runtime(plan=make_plan(4))),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        for _ in range(500):
            if server.started:
                break
            time.sleep(0.01)
        assert server.started
        with httpx.Client(base_url=f"http://127.0.0.1:{port}") as client:
            r = client.post(
                "/v1/route",
                json={"tenant": "acme", "model": "llama-3-8b", "input_tokens": 64},
                headers=auth(ROUTE_KEY),
            )
            assert r.status_code == 200, r.text
            assert r.json()["plan_version"] == 4
            assert r.headers["x-gateway-destination-endpoint"].startswith("10.0.0.1:8000")
            assert client.get("/readyz").status_code == 200
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    assert not thread.is_alive()
