"""The gateway sends each request with the engine priority the service set for it."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest
from gateway_harness import KEY, MODEL, running_gateway

from serving.gateway.headers import OBJECTIVE
from serving.gateway.prompt import with_priority

AUTH = {"Authorization": f"Bearer {KEY}"}
ASK = {"model": MODEL, "prompt": "Hi", "max_tokens": 3}


@pytest.mark.parametrize(
    "raw",
    [b'{"model":"m","prompt":"x"}', b"  {}", b'{"model":"m","priority":-5,"prompt":"x"}'],
)
def test_the_routers_priority_goes_in_the_body_over_the_clients(raw: bytes) -> None:
    sent = json.loads(with_priority(raw, 3))
    assert sent["priority"] == 3
    assert {k: v for k, v in sent.items() if k != "priority"} == {
        k: v for k, v in json.loads(raw).items() if k != "priority"
    }


def _ask(url: str, request_class: str) -> httpx.Response:
    headers = {**AUTH, OBJECTIVE: request_class}
    return httpx.post(url + "/v1/completions", json=ASK, headers=headers, timeout=30)


def test_a_batch_request_reaches_its_replica_with_priority_1(tmp_path: Path) -> None:
    # FCFS replicas refuse any priority but 0, as vLLM does: the body carried the batch one
    with running_gateway(tmp_path, replicas=1, engine_priority="class") as running:
        assert _ask(running.url, "interactive").status_code == 200
        assert _ask(running.url, "batch").status_code == 400
    # replicas scheduling by priority serve it
    (tmp_path / "p").mkdir()
    with running_gateway(
        tmp_path / "p", replicas=1, engine_priority="class", scheduling="priority"
    ) as running:
        assert _ask(running.url, "batch").status_code == 200


def test_without_engine_priority_the_body_goes_as_sent(tmp_path: Path) -> None:
    with running_gateway(tmp_path, replicas=1) as running:
        assert _ask(running.url, "batch").status_code == 200  # no priority on an FCFS replica
