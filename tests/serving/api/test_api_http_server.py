"""A real HTTP server: uvicorn on a free 127.0.0.1 port in a thread, driven with httpx."""

from __future__ import annotations

import httpx
from api_fakes import ROUTE_KEY, auth, make_plan, make_runtime
from live_server import serve_app

from serving.api.main import create_app


def test_route_over_real_http() -> None:
    with (
        serve_app(create_app(make_runtime(plan=make_plan(4)))) as url,
        httpx.Client(base_url=url) as client,
    ):
        r = client.post(
            "/v1/route",
            json={"tenant": "acme", "model": "llama-3-8b", "input_tokens": 64},
            headers=auth(ROUTE_KEY),
        )
        assert r.status_code == 200, r.text
        assert r.json()["plan_version"] == 4
        assert r.headers["x-gateway-destination-endpoint"].startswith("10.0.0.1:8000")
        assert client.get("/readyz").status_code == 200
