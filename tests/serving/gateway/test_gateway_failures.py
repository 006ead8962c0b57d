"""The gateway when replicas fail: retries to the decision's fallbacks before the first byte, an
error event after it, a stopped replica avoided at once, 429 from admission, 503 when nothing
can serve."""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import openai
import pytest
from gateway_harness import KEY, MODEL, Running, running_gateway

REPLICAS = ("h100-0", "h100-1", "h100-2")
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with running_gateway(tmp_path_factory.mktemp("failures"), replicas=3) as running:
        yield running


@pytest.fixture
def fleet(gateway: Running) -> Iterator[Running]:
    """The gateway with every replica healthy again after the test."""
    yield gateway
    for rid in REPLICAS:
        gateway.emulator.set_faults(rid, stopped=False, fail_rate=0.0, drop_rate=0.0)
    deadline = time.monotonic() + 10
    while not all(s.healthy for s in gateway.service.replicas.values()):
        assert time.monotonic() < deadline, "replicas not healthy again"
        time.sleep(0.05)


def _ask(c: httpx.Client, **extra: object) -> httpx.Response:
    return c.post(
        "/v1/completions", json={"model": MODEL, "prompt": "Hi", "max_tokens": 3, **extra}
    )


def _metrics(gateway: Running) -> str:
    return httpx.get(gateway.url + "/metrics", timeout=10).text


def test_a_5xx_before_the_first_byte_is_retried_on_a_fallback(fleet: Running) -> None:
    for rid in ("h100-0", "h100-1"):
        fleet.emulator.set_faults(rid, fail_rate=1.0, fail_status=503)
    retries = 'placement_gateway_retries_total{cause="5xx"}'
    before = fleet.metric(_metrics(fleet), retries)
    answers = []
    with httpx.Client(base_url=fleet.url, headers=AUTH, timeout=20) as c:
        for i in range(30):  # until the route path has picked a failing replica a few times
            answers.append(_ask(c, prompt=f"p{i}", stream=i % 2 == 1))
            if fleet.metric(_metrics(fleet), retries) >= before + 2:
                break
    assert fleet.metric(_metrics(fleet), retries) >= before + 2
    assert all(a.status_code == 200 for a in answers)
    assert {a.headers["x-placement-replica"] for a in answers} == {"h100-2"}
    assert not fleet.service.leases and all(
        s.in_flight == 0 for s in fleet.service.replicas.values()
    )


def test_a_stopped_replica_is_marked_down_at_once_and_back_after_a_scrape(
    fleet: Running,
) -> None:
    fleet.emulator.set_faults("h100-1", stopped=True)
    served = []
    with httpx.Client(base_url=fleet.url, headers=AUTH, timeout=20) as c:
        for i in range(40):  # until the route path has tried the stopped replica
            answer = _ask(c, prompt=f"q{i}")
            assert answer.status_code == 200
            served.append(answer.headers["x-placement-replica"])
            if not fleet.service.replicas["h100-1"].healthy:
                break
        assert not fleet.service.replicas["h100-1"].healthy
        for i in range(6):  # marked down: not tried again
            served.append(_ask(c, prompt=f"r{i}").headers["x-placement-replica"])
    assert "h100-1" not in served
    fleet.emulator.set_faults("h100-1", stopped=False)
    deadline = time.monotonic() + 5
    while not fleet.service.replicas["h100-1"].healthy:
        assert time.monotonic() < deadline, "not back after a good scrape"
        time.sleep(0.05)


def test_a_stream_cut_after_its_first_byte_ends_with_an_error_event(fleet: Running) -> None:
    for rid in REPLICAS:
        fleet.emulator.set_faults(rid, drop_rate=1.0, drop_after_tokens=3)
    before = fleet.metric(_metrics(fleet), "placement_gateway_stream_errors_total")
    with openai.OpenAI(base_url=fleet.url + "/v1", api_key=KEY, max_retries=0) as client:
        stream = client.completions.create(model=MODEL, prompt="Go", max_tokens=40, stream=True)
        received = []
        with pytest.raises(openai.APIError, match="stream broke after its first byte"):
            for chunk in stream:
                received.append(chunk)
    assert 1 <= len(received) < 40
    assert fleet.metric(_metrics(fleet), "placement_gateway_stream_errors_total") == before + 1


def test_admission_refuses_with_429_and_retry_after(fleet: Running) -> None:
    admission = fleet.service.admission
    capacity = admission.fleet_in_flight
    admission.set_fleet_capacity(1)
    long = {"model": MODEL, "prompt": "Talk", "max_tokens": 2000, "stream": True}
    try:
        with httpx.Client(base_url=fleet.url, headers=AUTH, timeout=20) as c:
            with c.stream("POST", "/v1/completions", json=long) as held:
                lines = held.iter_lines()  # kept: a dropped iterator closes the stream
                next(lines)  # in flight, holding the only slot
                refused = _ask(c)
                del lines
            assert refused.status_code == 429
            assert int(refused.headers["retry-after"]) >= 1
            assert refused.json()["error"]["type"] == "rate_limit_error"
            deadline = time.monotonic() + 5
            while fleet.service.leases:  # the held stream's client left: its lease is settled
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert _ask(c).status_code == 200
    finally:
        admission.set_fleet_capacity(capacity)


def test_nothing_to_serve_is_503(fleet: Running) -> None:
    for rid in REPLICAS:
        fleet.emulator.set_faults(rid, stopped=True)
    with httpx.Client(base_url=fleet.url, headers=AUTH, timeout=20) as c:
        first = _ask(c)  # tries replicas that refuse connections, marks them down
        second = _ask(c)  # nothing healthy left to route to
    for answer in (first, second):
        assert answer.status_code == 503
        assert answer.json()["error"]["type"] == "server_error"
