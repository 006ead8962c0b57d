"""The gateway driven by the official ``openai`` client, in front of an emulated fleet: whole and
streamed answers, where they landed, the result cache, bad input, and outcomes recorded."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pandas as pd
import pytest
from gateway_harness import KEY, MODEL, Running, running_gateway

from training.telemetry import read_requests


@pytest.fixture(scope="module", params=[False, True], ids=["in-protocol", "asgi"])
def gateway(
    tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Running]:
    """As `serve --proxy` serves it (completions answered in the HTTP protocol), and through
    ASGI (:class:`serving.gateway.GatewayMiddleware`, as under any ASGI server)."""
    tmp = tmp_path_factory.mktemp("gateway")
    with running_gateway(
        tmp, asgi=request.param, telemetry_dir=tmp / "telemetry", telemetry_flush_s=0.2
    ) as running:
        yield running


@pytest.fixture
def client(gateway: Running) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=gateway.url + "/v1", api_key=KEY, max_retries=0) as c:
        yield c


def test_a_whole_completion_and_chat_through_the_gateway(client: openai.OpenAI) -> None:
    completion = client.completions.create(model=MODEL, prompt="Say hello.", max_tokens=5)
    assert completion.usage is not None and completion.usage.completion_tokens == 5
    assert completion.choices[0].text.startswith(" The placement")
    chat = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Hi!"}], max_tokens=8
    )
    assert chat.choices[0].message.content is not None
    assert chat.usage is not None and chat.usage.completion_tokens == 8


def test_a_stream_passes_through_event_by_event(client: openai.OpenAI) -> None:
    stream = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Stream to me."}],
        max_tokens=16,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert len(chunks) > 4  # token by token, not one buffered piece
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens == 16
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.startswith(" The placement service")


def test_usage_the_client_did_not_ask_for_is_not_passed_on(client: openai.OpenAI) -> None:
    chunks = list(
        client.completions.create(model=MODEL, prompt="Count.", max_tokens=6, stream=True)
    )
    assert all(c.usage is None for c in chunks)
    assert all(c.choices for c in chunks)


def test_a_deterministic_request_is_answered_from_the_result_cache(gateway: Running) -> None:
    ask = {"model": MODEL, "prompt": "What is 2 + 2?", "max_tokens": 4, "temperature": 0}
    headers = {"Authorization": f"Bearer {KEY}"}
    with httpx.Client(base_url=gateway.url, headers=headers, timeout=20) as c:
        first = c.post("/v1/completions", json=ask)
        second = c.post("/v1/completions", json=ask)
        other = c.post("/v1/completions", json={**ask, "temperature": 0.7})
        metrics = c.get("/metrics").text
    assert first.status_code == second.status_code == other.status_code == 200
    assert "x-placement-cache" not in first.headers
    assert second.headers["x-placement-cache"] == "hit"
    assert second.json() == first.json()
    assert "x-placement-cache" not in other.headers  # not deterministic: never cached
    assert gateway.metric(metrics, "placement_gateway_result_cache_hits") >= 1
    assert 0 < gateway.metric(metrics, "placement_gateway_result_cache_hit_ratio") <= 0.5


def test_bad_input_gets_openai_errors(gateway: Running, client: openai.OpenAI) -> None:
    with pytest.raises(openai.NotFoundError) as unknown:
        client.completions.create(model="gpt-9", prompt="x", max_tokens=1)
    assert unknown.value.code == "model_not_found"
    with pytest.raises(openai.BadRequestError) as greedy:
        client.completions.create(model=MODEL, prompt="x", max_tokens=200_000)
    assert greedy.value.param == "max_tokens"
    with (
        openai.OpenAI(base_url=gateway.url + "/v1", api_key="wrong", max_retries=0) as stranger,
        pytest.raises(openai.AuthenticationError),
    ):
        stranger.completions.create(model=MODEL, prompt="x", max_tokens=1)
    with httpx.Client(base_url=gateway.url, timeout=10) as c:
        missing = c.post("/v1/completions", json={"model": MODEL, "prompt": "x"})
        assert missing.status_code == 401
        assert missing.json()["error"]["code"] == "invalid_api_key"
        malformed = c.post(
            "/v1/chat/completions",
            content=b'{"model": ',
            headers={"Authorization": f"Bearer {KEY}"},
        )
        assert malformed.status_code == 400
        assert "not valid JSON" in malformed.json()["error"]["message"]
        # token ids: a known length (sent without the client, slow to encode 140k ids)
        long = c.post(
            "/v1/completions",
            json={"model": MODEL, "prompt": [1] * 140_000, "max_tokens": 1},
            headers={"Authorization": f"Bearer {KEY}"},
        )
        assert long.status_code == 400
        assert long.json()["error"]["code"] == "context_length_exceeded"
        assert long.json()["error"]["param"] == "prompt"
        bad_slo = c.post(
            "/v1/completions",
            json={"model": MODEL, "prompt": "x"},
            headers={"Authorization": f"Bearer {KEY}", "x-slo-ttft-ms": "soon"},
        )
        assert bad_slo.status_code == 400 and bad_slo.json()["error"]["param"] == "x-slo-ttft-ms"
        unknown_class = c.post(
            "/v1/completions",
            json={"model": MODEL, "prompt": "x"},
            headers={"Authorization": f"Bearer {KEY}", "x-gateway-inference-objective": "vip"},
        )
        assert unknown_class.status_code == 400
        too_big = c.post(
            "/v1/completions",
            content=b"x" * (2 << 20),
            headers={"Authorization": f"Bearer {KEY}", "content-type": "application/json"},
        )
        assert too_big.status_code == 413


def test_outcomes_reach_the_leases_and_the_telemetry_store(
    gateway: Running, client: openai.OpenAI
) -> None:
    response = client.completions.with_raw_response.create(
        model=MODEL,
        prompt="Where did I land?",
        max_tokens=3,
        extra_headers={"x-gateway-inference-fairness-id": "acme", "x-slo-ttft-ms": "5000"},
    )
    replica = response.headers["x-placement-replica"]
    assert replica in gateway.service.replicas
    assert not gateway.service.leases  # settled without a POST /v1/outcomes
    assert gateway.service.replicas[replica].in_flight == 0
    list(client.completions.create(model=MODEL, prompt="Stream", max_tokens=4, stream=True))
    assert gateway.telemetry_dir is not None
    rows = _wait_for_rows(gateway.telemetry_dir)
    acme = rows[rows["tenant"] == "acme"]
    assert len(acme) == 1
    row = acme.iloc[0]
    assert row["replica"] == replica and row["output_tokens"] == 3 and row["error"] == ""
    assert row["accelerator"] == "H100-SXM" and row["e2e_s"] > 0
    streamed = rows[rows["ttft_s"].notna()]
    assert len(streamed) >= 1 and (streamed["tpot_s"] > 0).all()


def _wait_for_rows(store: Path) -> pd.DataFrame:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if (store / "requests").is_dir():
            rows = read_requests(store)
            if (rows["tenant"] == "acme").any():
                return rows
        time.sleep(0.1)
    raise AssertionError("no telemetry rows written")
