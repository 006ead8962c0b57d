"""Flow control through a real gateway and emulated fleet: a request the fleet cannot take waits
and is served when capacity frees; one whose deadline passes is refused with 429 and counted; a
client that leaves while waiting is taken out of the queue at once."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from gateway_harness import KEY, MODEL, Running, running_gateway

AUTH = {"Authorization": f"Bearer {KEY}"}
HOLD = {"model": MODEL, "prompt": "Talk", "max_tokens": 2000, "stream": True}


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    with running_gateway(tmp_path_factory.mktemp("flow"), replicas=1) as running:
        admission = running.service.admission
        capacity = admission.fleet_in_flight
        admission.set_fleet_capacity(1)  # one request in flight fills the fleet
        try:
            yield running
        finally:
            admission.set_fleet_capacity(capacity)


def _metrics(gateway: Running) -> str:
    return httpx.get(gateway.url + "/metrics", timeout=10).text


def _ask(c: httpx.Client, **headers: str) -> httpx.Response:
    ask = {"model": MODEL, "prompt": "Hi", "max_tokens": 3}
    return c.post("/v1/completions", json=ask, headers=headers)


def _wait_for(check: object, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


def _queued(gateway: Running) -> float:
    return gateway.metric(_metrics(gateway), "placement_gateway_queue_length")


def test_a_request_waits_for_capacity_and_is_served_when_it_frees(gateway: Running) -> None:
    answers: list[httpx.Response] = []
    with httpx.Client(base_url=gateway.url, headers=AUTH, timeout=30) as c:
        with c.stream("POST", "/v1/completions", json=HOLD) as held:
            lines = held.iter_lines()
            next(lines)  # in flight, holding the only slot
            waiter = threading.Thread(
                target=lambda: answers.append(_ask(c, **{"x-slo-ttft-ms": "20000"}))
            )
            waiter.start()
            _wait_for(lambda: _queued(gateway) == 1)
            time.sleep(0.3)
            assert not answers  # still waiting, not refused
            del lines  # the held stream's client leaves: its slot frees
        waiter.join(timeout=20)
    assert [a.status_code for a in answers] == [200]
    assert answers[0].headers["x-placement-replica"] == "h100-0"
    assert answers[0].json()["usage"]["completion_tokens"] == 3
    text = _metrics(gateway)
    assert gateway.metric(text, "placement_gateway_queue_length") == 0
    assert any(
        line.startswith("placement_gateway_queue_total") and 'outcome="dispatched"' in line
        for line in text.splitlines()
    )
    assert gateway.metric(text, "placement_gateway_queue_wait_seconds_count") >= 1
    assert gateway.metric(text, "placement_gateway_queue_wait_seconds_sum") >= 0.3


def test_a_request_whose_deadline_passes_is_refused_and_counted(gateway: Running) -> None:
    with (
        httpx.Client(base_url=gateway.url, headers=AUTH, timeout=30) as c,
        c.stream("POST", "/v1/completions", json=HOLD) as held,
    ):
        lines = held.iter_lines()
        next(lines)
        started = time.monotonic()
        refused = _ask(c, **{"x-slo-ttft-ms": "400"})
        waited = time.monotonic() - started
        del lines
    assert refused.status_code == 429
    assert refused.json()["error"]["type"] == "rate_limit_error"
    assert "deadline" in refused.json()["error"]["message"]
    assert int(refused.headers["retry-after"]) >= 1
    assert 0.3 <= waited < 5  # waited for its deadline, not refused at once
    assert gateway.metric(_metrics(gateway), "placement_gateway_deadline_misses_total") >= 1


def test_a_client_that_leaves_is_taken_out_of_the_queue(gateway: Running) -> None:
    with (
        httpx.Client(base_url=gateway.url, headers=AUTH, timeout=30) as c,
        c.stream("POST", "/v1/completions", json=HOLD) as held,
    ):
        lines = held.iter_lines()
        next(lines)
        with (
            httpx.Client(base_url=gateway.url, headers=AUTH, timeout=0.5) as impatient,
            pytest.raises(httpx.ReadTimeout),
        ):
            _ask(impatient, **{"x-slo-ttft-ms": "60000"})
        _wait_for(lambda: _queued(gateway) == 0, 2.0)
        del lines
    text = _metrics(gateway)
    gone = [
        line
        for line in text.splitlines()
        if line.startswith("placement_gateway_queue_total") and 'outcome="client_gone"' in line
    ]
    assert float(gone[0].rsplit(" ", 1)[1]) == 1


def test_a_streamed_request_that_waited_streams_from_the_replica_that_serves_it(
    gateway: Running,
) -> None:
    events: list[str] = []

    def stream_when_served(c: httpx.Client) -> None:
        ask = {"model": MODEL, "prompt": "Hi", "max_tokens": 6, "stream": True}
        with c.stream(
            "POST", "/v1/completions", json=ask, headers={"x-slo-ttft-ms": "20000"}
        ) as answer:
            events.append(f"status {answer.status_code} {answer.headers['x-placement-replica']}")
            events.extend(line for line in answer.iter_lines() if line.startswith("data:"))

    with httpx.Client(base_url=gateway.url, headers=AUTH, timeout=30) as c:
        with c.stream("POST", "/v1/completions", json=HOLD) as held:
            lines = held.iter_lines()
            next(lines)
            waiter = threading.Thread(target=stream_when_served, args=(c,))
            waiter.start()
            _wait_for(lambda: _queued(gateway) == 1)
            assert not events
            del lines
        waiter.join(timeout=20)  # the client stays open while the waiter streams
    assert events[0] == "status 200 h100-0"
    assert events[-1] == "data: [DONE]"
    assert len(events) - 2 >= 3  # relayed event by event as they came, not one piece
