"""The API keeps the contract its OpenAPI document states, over real HTTP (uvicorn on a free
127.0.0.1 port): every error a Problem with a documented status, strict request bodies, the
full ``Allow`` on a 405, 415 for bodies that are not JSON, and who may report an outcome.

Each test reproduces a gap schemathesis found (issue 19, item 7; issue 18, item 4).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from api_fakes import (
    ACME_KEY,
    ADMIN_KEY,
    OTHER_ROUTE_KEY,
    ROUTE_KEY,
    TELEMETRY_KEY,
    auth,
    make_plan,
    make_runtime,
)
from live_server import serve_app

from serving.api.main import create_app
from serving.api.runtime import ServiceRuntime
from serving.api.schemas import Problem

ROUTE = {"tenant": "acme", "model": "llama-3-8b", "input_tokens": 64}
REPLICA = {
    "id": "l40s-0",
    "address": "10.0.1.1:8000",
    "model": "llama-3-8b",
    "accelerator": "L40S",
    "kv_capacity_tokens": 100_000,
}
JSON_BODY_OPERATIONS = [
    "/v1/route",
    "/v1/route:batch",
    "/v1/outcomes",
    "/v1/replicas",
    "/v1/whatif",
]


@pytest.fixture
def served() -> Iterator[tuple[httpx.Client, ServiceRuntime]]:
    """A service of its own, for a test that changes or counts its state."""
    runtime = make_runtime(plan=make_plan(3))
    with serve_app(create_app(runtime)) as url, httpx.Client(base_url=url) as client:
        yield client, runtime


@pytest.fixture(scope="module")
def client() -> Iterator[httpx.Client]:
    """One service for the tests that only read answers (and at most route a request)."""
    with (
        serve_app(create_app(make_runtime(plan=make_plan(3)))) as url,
        httpx.Client(base_url=url) as client,
    ):
        yield client


def problem(r: httpx.Response, status: int) -> Problem:
    """The answer, checked to be exactly a Problem with ``status``."""
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/json")
    body = r.json()
    assert set(body) <= {"detail", "retry_after_s"}, body
    if isinstance(body["detail"], list):
        assert body["detail"], body
        assert all(set(e) == {"loc", "msg", "type"} for e in body["detail"]), body
    return Problem.model_validate(body, strict=True)


def locs(p: Problem) -> list[list[str | int]]:
    assert isinstance(p.detail, list), p.detail
    return [e.loc for e in p.detail]


# --- every error a Problem, every status documented -------------------------------------------


def test_the_document_declares_a_problem_for_every_error(client: httpx.Client) -> None:
    spec = client.get("/openapi.json").json()
    assert not {"HTTPValidationError", "ValidationError"} & set(spec["components"]["schemas"])
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            for status, answer in operation["responses"].items():
                if int(status) < 400 or path == "/readyz":  # /readyz: its Health document
                    continue
                schema = answer["content"]["application/json"]["schema"]
                assert schema == {"$ref": "#/components/schemas/Problem"}, (method, path, status)
            if "requestBody" in operation:
                assert {"413", "415", "422"} <= set(operation["responses"]), (method, path)


@pytest.mark.parametrize(
    "method,path,kwargs,status",
    [
        ("POST", "/v1/route", {"json": ROUTE}, 401),
        ("POST", "/v1/route", {"json": ROUTE, "headers": auth("nope")}, 401),
        ("POST", "/v1/route", {"json": ROUTE, "headers": auth(TELEMETRY_KEY)}, 403),
        ("POST", "/v1/route:batch", {"json": {"requests": [ROUTE]}}, 401),
        ("GET", "/v1/replicas", {"headers": auth(ACME_KEY)}, 403),
        ("GET", "/nowhere", {}, 404),
        ("GET", "/v1/plans/999", {"headers": auth(ADMIN_KEY)}, 404),
        ("GET", "/v1/jobs/none", {"headers": auth(ADMIN_KEY)}, 404),
        ("DELETE", "/v1/replicas/none", {"headers": auth(ADMIN_KEY)}, 404),
        (
            "POST",
            "/v1/route",
            {"json": {**ROUTE, "model": "other"}, "headers": auth(ROUTE_KEY)},
            404,
        ),
        ("GET", "/v1/route", {"headers": auth(ROUTE_KEY)}, 405),
        ("POST", "/v1/whatif", {"json": {}, "headers": auth(ADMIN_KEY)}, 409),
        ("POST", "/v1/route", {"content": b"x" * 2_000_000, "headers": auth(ROUTE_KEY)}, 413),
        ("POST", "/v1/outcomes", {"content": b"x" * 2_000_000, "headers": auth(ROUTE_KEY)}, 413),
        ("POST", "/v1/route", {"content": b"{", "headers": auth(ROUTE_KEY)}, 422),
        ("POST", "/v1/route:batch", {"json": {"requests": []}, "headers": auth(ROUTE_KEY)}, 422),
        ("POST", "/v1/outcomes", {"json": {}, "headers": auth(ROUTE_KEY)}, 422),
        ("GET", "/v1/plans/abc", {"headers": auth(ADMIN_KEY)}, 422),
        ("DELETE", "/v1/replicas/a%2Fb", {"headers": auth(ADMIN_KEY)}, 404),
        ("DELETE", "/v1/replicas/..x", {"headers": auth(ADMIN_KEY)}, 422),
    ],
)
def test_every_error_is_a_problem(
    client: httpx.Client, method: str, path: str, kwargs: dict[str, Any], status: int
) -> None:
    problem(client.request(method, path, **kwargs), status)


def test_refusal_and_unavailability_are_problems(
    served: tuple[httpx.Client, ServiceRuntime],
) -> None:
    client, runtime = served
    for state in runtime.service.replicas.values():
        state.healthy = False
    assert problem(client.post("/v1/route", json=ROUTE, headers=auth(ROUTE_KEY)), 503).detail
    small = make_runtime(replicas=1, plan=make_plan(), in_flight_per_replica=1)
    batch = {**ROUTE, "request_class": "batch"}
    with serve_app(create_app(small)) as url, httpx.Client(base_url=url) as other:
        answers = [other.post("/v1/route", json=batch, headers=auth(ROUTE_KEY)) for _ in range(3)]
    refused = problem(answers[-1], 429)
    assert refused.retry_after_s is not None and refused.retry_after_s >= 1
    assert answers[-1].headers["Retry-After"] == str(refused.retry_after_s)


def test_even_a_bug_is_answered_as_a_problem(served: tuple[httpx.Client, ServiceRuntime]) -> None:
    client, runtime = served

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    runtime.service.route = broken  # type: ignore[method-assign]
    for path, body in (("/v1/route", ROUTE), ("/v1/route:batch", {"requests": [ROUTE]})):
        assert problem(client.post(path, json=body, headers=auth(ROUTE_KEY)), 500).detail == (
            "internal error"
        )


# --- validation errors: the declared field errors, never FastAPI's own shape ---------------------


def test_a_422_lists_field_errors_in_the_declared_shape(client: httpx.Client) -> None:
    fast = problem(client.post("/v1/route", json={"tenant": ""}, headers=auth(ROUTE_KEY)), 422)
    assert ["body", "tenant"] in locs(fast) and ["body", "model"] in locs(fast)
    framework = problem(
        client.post(
            "/v1/route:batch", json={"requests": [{"tenant": ""}]}, headers=auth(ROUTE_KEY)
        ),
        422,
    )
    assert ["body", "requests", 0, "tenant"] in locs(framework)
    assert locs(problem(client.get("/v1/plans/abc", headers=auth(ADMIN_KEY)), 422)) == [
        ["path", "version"]
    ]
    bad = {**REPLICA, "accelerator": "TPU-v9"}
    unknown = problem(client.post("/v1/replicas", json=bad, headers=auth(ADMIN_KEY)), 422)
    assert locs(unknown) == [["body", "accelerator"]]


@pytest.mark.parametrize("path", JSON_BODY_OPERATIONS)
def test_a_body_that_is_not_text_is_the_documented_422_not_a_400(
    client: httpx.Client, path: str
) -> None:
    headers = {**auth(ADMIN_KEY), "Content-Type": "application/json"}
    r = client.post(path, content=b"\xff\xfe\x00{", headers=headers)
    assert locs(problem(r, 422))[0][0] == "body"


# --- strict bodies: a wrong JSON type is refused, not coerced -----------------------------------


@pytest.mark.parametrize(
    "path,body,loc",
    [
        ("/v1/route", {**ROUTE, "input_tokens": "64"}, ["body", "input_tokens"]),
        ("/v1/route", {**ROUTE, "max_output_tokens": True}, ["body", "max_output_tokens"]),
        ("/v1/route", {**ROUTE, "input_tokens": 64.5}, ["body", "input_tokens"]),
        ("/v1/route", {**ROUTE, "block_hashes": ["1"]}, ["body", "block_hashes", 0]),
        ("/v1/route", {**ROUTE, "tenant": 7}, ["body", "tenant"]),
        (
            "/v1/route:batch",
            {"requests": [{**ROUTE, "input_tokens": "64"}]},
            ["body", "requests", 0, "input_tokens"],
        ),
        (
            "/v1/route:batch",
            {"requests": [{**ROUTE, "max_output_tokens": False}]},
            ["body", "requests", 0, "max_output_tokens"],
        ),
        (
            "/v1/outcomes",
            {"outcomes": [{"decision_id": "d", "output_tokens": "40"}]},
            ["body", "outcomes", 0, "output_tokens"],
        ),
        (
            "/v1/outcomes",
            {"outcomes": [{"decision_id": "d", "ttft_s": "0.2"}]},
            ["body", "outcomes", 0, "ttft_s"],
        ),
        (
            "/v1/outcomes",
            {"outcomes": [{"decision_id": 7}]},
            ["body", "outcomes", 0, "decision_id"],
        ),
        ("/v1/replicas", {**REPLICA, "tp": "2"}, ["body", "tp"]),
        ("/v1/whatif", {"replicas": {"h100": "3"}}, ["body", "replicas", "h100"]),
        ("/v1/whatif", {"slo_scale": "1"}, ["body", "slo_scale"]),
    ],
)
def test_wrong_typed_fields_are_refused(
    client: httpx.Client, path: str, body: dict[str, Any], loc: list[str | int]
) -> None:
    r = client.post(path, json=body, headers=auth(ADMIN_KEY))
    assert loc in locs(problem(r, 422))


def test_integers_may_be_written_as_json_schema_allows(client: httpx.Client) -> None:
    r = client.post("/v1/route", json={**ROUTE, "input_tokens": 64.0}, headers=auth(ROUTE_KEY))
    assert r.status_code == 200, r.text


def test_the_documented_cross_field_rules_are_the_enforced_ones(client: httpx.Client) -> None:
    spec = client.get("/openapi.json").json()
    rules = spec["components"]["schemas"]["RouteRequest"]
    assert rules["anyOf"] and rules["not"]  # prompt or input_tokens; not hashes and a prompt
    assert rules["properties"]["request_class"]["enum"] == ["batch", "interactive"]
    both = {**ROUTE, "block_hashes": [1], "prompt": "p"}
    assert problem(client.post("/v1/route", json=both, headers=auth(ROUTE_KEY)), 422)
    neither = {"tenant": "acme", "model": "llama-3-8b"}
    assert problem(client.post("/v1/route", json=neither, headers=auth(ROUTE_KEY)), 422)
    nulls = {**ROUTE, "block_hashes": None, "prompt": None}
    assert client.post("/v1/route", json=nulls, headers=auth(ROUTE_KEY)).status_code == 200


# --- media types ---------------------------------------------------------------------------------


@pytest.mark.parametrize("path", JSON_BODY_OPERATIONS)
@pytest.mark.parametrize("media_type", ["text/plain", "multipart/form-data", "application/xml"])
def test_a_body_that_is_not_json_is_415(client: httpx.Client, path: str, media_type: str) -> None:
    headers = {**auth(ADMIN_KEY), "Content-Type": media_type}
    r = client.post(path, content=b'{"tenant": "acme"}', headers=headers)
    assert "JSON" in str(problem(r, 415).detail)


def test_json_media_types_and_no_media_type_are_read_as_json(client: httpx.Client) -> None:
    body = b'{"tenant": "acme", "model": "llama-3-8b", "input_tokens": 64}'
    for headers in (
        {"Content-Type": "application/json; charset=utf-8"},
        {"Content-Type": "application/vnd.placement+json"},
        {},
    ):
        r = client.post("/v1/route", content=body, headers={**auth(ROUTE_KEY), **headers})
        assert r.status_code == 200, (headers, r.text)


# --- methods -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method,path,allowed",
    [
        ("OPTIONS", "/v1/replicas", {"GET", "POST"}),
        ("PUT", "/v1/replicas", {"GET", "POST"}),
        ("OPTIONS", "/v1/route", {"POST"}),
        ("PATCH", "/v1/replicas/h100-0", {"DELETE"}),
        ("DELETE", "/v1/plan", {"GET"}),
    ],
)
def test_405_allows_every_method_the_path_serves(
    client: httpx.Client, method: str, path: str, allowed: set[str]
) -> None:
    r = client.request(method, path, headers=auth(ADMIN_KEY))
    problem(r, 405)
    assert {m.strip() for m in r.headers["Allow"].split(",")} - {"HEAD"} == allowed


# --- credentials ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {"X-API-Key": "", "Authorization": f"Bearer {ROUTE_KEY}"},
        {"X-API-Key": "nope", "Authorization": f"Bearer {ROUTE_KEY}"},
        {"Authorization": f"Basic {ROUTE_KEY}"},
        {"Authorization": "Bearer"},
    ],
)
def test_a_malformed_credential_is_refused_not_skipped(
    client: httpx.Client, headers: dict[str, str]
) -> None:
    for path in ("/v1/route", "/v1/route:batch"):
        body = ROUTE if path == "/v1/route" else {"requests": [ROUTE]}
        r = client.post(path, json=body, headers=headers)
        assert problem(r, 401).detail == "invalid API key"
        assert r.headers["WWW-Authenticate"] == "Bearer"


# --- who may report an outcome -------------------------------------------------------------------


def _route(client: httpx.Client, key: str, tenant: str = "acme") -> str:
    r = client.post("/v1/route", json={**ROUTE, "tenant": tenant}, headers=auth(key))
    assert r.status_code == 200, r.text
    decision_id: str = r.json()["decision_id"]
    return decision_id


def _report(client: httpx.Client, key: str, decision_id: str) -> dict[str, Any]:
    r = client.post(
        "/v1/outcomes",
        json={"outcomes": [{"decision_id": decision_id, "output_tokens": 1}]},
        headers=auth(key),
    )
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


def test_a_router_key_reports_only_the_decisions_it_asked_for(
    served: tuple[httpx.Client, ServiceRuntime],
) -> None:
    client, runtime = served
    mine = _route(client, ROUTE_KEY)
    assert _report(client, OTHER_ROUTE_KEY, mine) == {"accepted": 0, "unknown": [mine]}
    assert runtime.service.admission.in_flight == 1  # still held: nothing was settled
    assert _report(client, ROUTE_KEY, mine) == {"accepted": 1, "unknown": []}
    assert runtime.service.admission.in_flight == 0


def test_a_tenant_key_reports_only_its_tenants_decisions(
    served: tuple[httpx.Client, ServiceRuntime],
) -> None:
    client, runtime = served
    globex = _route(client, ROUTE_KEY, tenant="globex")
    acme = _route(client, ROUTE_KEY, tenant="acme")
    assert _report(client, ACME_KEY, globex) == {"accepted": 0, "unknown": [globex]}
    # its own tenant's decision, even one another key asked for
    assert _report(client, ACME_KEY, acme) == {"accepted": 1, "unknown": []}
    assert runtime.service.admission.in_flight == 1


def test_a_fleet_wide_telemetry_key_reports_any_decision(
    served: tuple[httpx.Client, ServiceRuntime],
) -> None:
    client, runtime = served
    decisions = [_route(client, ROUTE_KEY), _route(client, OTHER_ROUTE_KEY, tenant="globex")]
    for decision_id in decisions:
        assert _report(client, TELEMETRY_KEY, decision_id) == {"accepted": 1, "unknown": []}
    assert runtime.service.admission.in_flight == 0


def test_the_reporting_policy_is_documented(client: httpx.Client) -> None:
    spec = client.get("/openapi.json").json()
    text = spec["paths"]["/v1/outcomes"]["post"]["description"]
    assert "tenant-scoped key" in text and "`telemetry`" in text and "asked for itself" in text
