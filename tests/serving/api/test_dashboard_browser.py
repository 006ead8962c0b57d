"""The dashboard in a real headless browser (Debian's chromium driven by Playwright) against
``placement serve --demo`` with the example tenants, after real traffic: routes for two
tenants, outcomes within and past their SLO, and a refusal."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import httpx
import pytest
from api_fakes import ADMIN_KEY, ROUTE_KEY, auth
from live_server import REPO, demo_service

from serving.api.security import hash_key
from serving.api.settings import ApiKey

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
BROWSER_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
MODEL = "llama-3-8b"  # the demo fleet's


def _traffic(url: str) -> None:
    with httpx.Client(base_url=url, headers=auth(ROUTE_KEY), timeout=30) as client:
        outcomes = []
        for tenant, ttfts in (("acme", [0.4, 0.5, 0.6, 5.0]), ("globex", [0.3, 0.2])):
            for ttft in ttfts:
                r = client.post(
                    "/v1/route", json={"tenant": tenant, "model": MODEL, "input_tokens": 256}
                )
                assert r.status_code == 200, r.text
                outcomes.append(
                    {"decision_id": r.json()["decision_id"], "ttft_s": ttft, "output_tokens": 8}
                )
        r = client.post("/v1/outcomes", json={"outcomes": outcomes})
        assert r.json()["accepted"] == len(outcomes), r.text
        # a model no replica of the demo fleet serves: refused, and listed as such
        r = client.post(
            "/v1/route", json={"tenant": "initech", "model": "llama-2-70b", "input_tokens": 256}
        )
        assert r.status_code == 404, r.text


@pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="chromium is not installed (make test)")
def test_dashboard_shows_the_running_service(tmp_path: Path) -> None:
    from playwright.sync_api import expect, sync_playwright

    keys = [
        ApiKey(name="ops", digest=hash_key(ADMIN_KEY), scopes=("admin",)),
        ApiKey(name="router", digest=hash_key(ROUTE_KEY), scopes=("route", "telemetry")),
    ]
    tenants = str(REPO / "data" / "tenants" / "example.yaml")
    with demo_service(tmp_path, keys, {"PLACEMENT_TENANTS_FILE": tenants}) as url:
        _traffic(url)
        # a plan solved for that demand (the demo may answer before its first plan)
        solved = httpx.post(f"{url}/v1/plan:solve", headers=auth(ADMIN_KEY), timeout=300)
        assert solved.status_code == 200, solved.text
        plan = httpx.get(f"{url}/v1/plan", headers=auth(ADMIN_KEY)).json()
        replicas = len(httpx.get(f"{url}/v1/replicas", headers=auth(ADMIN_KEY)).json())
        assert replicas > 0
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=BROWSER_ARGS)
            try:
                page = browser.new_page()
                page.goto(f"{url}/dashboard#key={ADMIN_KEY}")
                expect(page.locator("#health")).to_contain_text(
                    re.compile(rf"^{replicas} replicas, {replicas} healthy"), timeout=20_000
                )
                expect(page.locator("#replicas tbody tr")).to_have_count(replicas)
                expect(page.locator("#plan")).to_contain_text(f"version {plan['version']},")
                rows = page.locator("#tenants tbody tr")
                acme = rows.filter(has_text="acme")
                expect(acme).to_contain_text("50.0 %")  # its credit share in the file
                expect(acme).to_contain_text("75.0 %")  # 3 of its 4 outcomes within 2 s
                expect(rows.filter(has_text="globex")).to_contain_text("30.0 %")
                expect(page.locator("#slo polyline")).to_have_count(1)
                expect(page.locator("#slo-note")).to_contain_text(
                    re.compile(r"latest: \d+\.\d % of [1-6] outcomes within SLO")
                )
                refusals = page.locator("#refusals tbody tr")
                expect(refusals.first).to_contain_text("initech")
                expect(refusals.first).to_contain_text("no_replica")
                # a key without the scope is told so on the page
                page.goto(f"{url}/dashboard#key={ROUTE_KEY}")
                page.reload()
                expect(page.locator("#error")).to_contain_text("403")
            finally:
                browser.close()
