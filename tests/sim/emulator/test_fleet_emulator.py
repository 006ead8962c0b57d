"""The fleet emulator over real HTTP: OpenAI endpoints, vLLM /metrics, the prefix cache on real
BPE tokens, timings from the engine cost model, and injected faults."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest

from placement.domain.fleet import Fleet, fleet_from_dict
from serving.scrape import scrape
from sim.capacity import prefill_s
from sim.costmodel.factory import cost_model_for_replica
from sim.emulator import EmulatorOptions, EmulatorThread

MODEL = "llama-3-8b"
SHARED = "You are a careful assistant. Answer in one paragraph. " * 40


def _fleet() -> Fleet:
    return fleet_from_dict(
        {
            "name": "two",
            "replicas": [{"kind": "h100", "accelerator": "H100-SXM", "count": 2, "model": MODEL}],
        }
    )


@pytest.fixture(scope="module")
def emulator() -> Iterator[EmulatorThread]:
    with EmulatorThread(_fleet(), EmulatorOptions(base_port=0, max_model_len=4096)) as emu:
        yield emu


@pytest.fixture
def client(emulator: EmulatorThread) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=emulator.addresses()["h100-0"], timeout=20) as c:
        yield c
    emulator.set_faults("h100-0", stopped=False, slowdown=1.0, fail_rate=0.0, drop_rate=0.0)


def _events(response: httpx.Response) -> list[str]:
    return [line[len("data: ") :] for line in response.iter_lines() if line.startswith("data: ")]


def test_models_health_and_a_whole_completion(client: httpx.Client) -> None:
    assert client.get("/health").status_code == 200
    assert [m["id"] for m in client.get("/v1/models").json()["data"]] == [MODEL]
    r = client.post("/v1/completions", json={"model": MODEL, "prompt": "Hello", "max_tokens": 7})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["object"] == "text_completion"
    assert body["usage"]["completion_tokens"] == 7
    assert body["usage"]["prompt_tokens"] == 1  # "Hello" is one cl100k token
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["choices"][0]["text"].startswith(" The placement service")


def test_a_chat_stream_ends_with_its_usage_then_done(client: httpx.Client) -> None:
    request = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "Tell me about prefix caches."}],
        "max_tokens": 12,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with client.stream("POST", "/v1/chat/completions", json=request) as r:
        assert r.headers["content-type"].startswith("text/event-stream")
        events = _events(r)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 12
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    text = "".join(c["choices"][0]["delta"]["content"] for c in chunks[:-1])
    assert len(text.split()) >= 10  # one output token per word of the emulator's paragraph
    assert len(chunks) > 3  # streamed token by token, not in one piece


def test_a_shared_prompt_prefix_hits_the_cache_exactly_when_the_tokens_match(
    emulator: EmulatorThread,
) -> None:
    with httpx.Client(base_url=emulator.addresses()["h100-1"], timeout=20) as c:

        def cached(prompt: str) -> int:
            r = c.post("/v1/completions", json={"model": MODEL, "prompt": prompt, "max_tokens": 2})
            assert r.status_code == 200, r.text
            return int(r.json()["usage"]["prompt_tokens_details"]["cached_tokens"])

        before = _scrape(emulator, "h100-1")
        assert cached(SHARED + "First question?") == 0
        hit = cached(SHARED + "Second, different question?")
        assert hit > 0 and hit % 16 == 0  # whole 16-token blocks of the shared prefix
        assert cached("Unrelated " + SHARED) == 0  # one token differs at the start: no prefix
        after = _scrape(emulator, "h100-1")
    assert after["prefix_cache_hit_tokens_total"] - before["prefix_cache_hit_tokens_total"] == hit


def _scrape(emulator: EmulatorThread, replica: str) -> dict[str, float]:
    return scrape(
        emulator.addresses()[replica] + "/metrics",
        replica=replica,
        accelerator="H100-SXM",
        model=MODEL,
        tp=1,
    )


def test_metrics_carry_vllm_names_and_latency_histograms(
    emulator: EmulatorThread, client: httpx.Client
) -> None:
    client.post("/v1/completions", json={"model": MODEL, "prompt": "Hi there", "max_tokens": 4})
    text = client.get("/metrics").text
    for name in (
        "vllm:num_requests_running",
        "vllm:num_requests_waiting",
        "vllm:kv_cache_usage_perc",
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:time_per_output_token_seconds_bucket",
        "vllm:e2e_request_latency_seconds_bucket",
    ):
        lines = [line for line in text.splitlines() if line.startswith(name + "{")]
        assert lines and all(f'model_name="{MODEL}"' in line for line in lines), name
    row = _scrape(emulator, "h100-0")
    assert row["ttft_seconds_count"] >= 1 and row["prompt_tokens_total"] >= 2


def test_time_to_first_token_is_the_cost_models_prefill(
    emulator: EmulatorThread, client: httpx.Client
) -> None:
    prompt = " ".join(f"w{i}" for i in range(1500))  # no shared prefix with other tests
    r = client.post("/v1/completions", json={"model": MODEL, "prompt": prompt, "max_tokens": 1})
    tokens = r.json()["usage"]["prompt_tokens"]
    spec = _fleet().replicas[0]
    expected = prefill_s(spec, cost_model_for_replica(spec), tokens)
    assert expected > 0.02
    # one request alone: e2e = its prefill (+ HTTP and loop overhead)
    assert expected <= r.elapsed.total_seconds() < expected + 0.08


def test_bad_requests_get_openai_errors(client: httpx.Client) -> None:
    bad_json = client.post("/v1/completions", content=b"{not json")
    assert bad_json.status_code == 400 and "not valid JSON" in bad_json.json()["error"]["message"]
    unknown = client.post("/v1/completions", json={"model": "gpt-9", "prompt": "x"})
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "model_not_found"
    long = client.post("/v1/completions", json={"model": MODEL, "prompt": "x", "max_tokens": 5000})
    assert long.status_code == 400
    assert long.json()["error"]["code"] == "context_length_exceeded"
    no_messages = client.post("/v1/chat/completions", json={"model": MODEL, "messages": []})
    assert no_messages.status_code == 400 and no_messages.json()["error"]["param"] == "messages"
    # an FCFS engine refuses a priority it cannot honour, as vLLM does; 0 is everyone's
    ranked = {"model": MODEL, "prompt": "x", "max_tokens": 2, "priority": 1}
    refused = client.post("/v1/completions", json=ranked)
    assert refused.status_code == 400 and refused.json()["error"]["param"] == "priority"
    assert client.post("/v1/completions", json={**ranked, "priority": 0}).status_code == 200
    not_int = client.post("/v1/completions", json={**ranked, "priority": "high"})
    assert not_int.status_code == 400 and "integer" in not_int.json()["error"]["message"]


def test_a_priority_engine_serves_a_better_priority_ahead_of_those_waiting() -> None:
    import threading

    options = EmulatorOptions(base_port=0, max_num_seqs=1, scheduling="priority")
    done: dict[str, float] = {}

    def send(address: str, name: str, priority: int) -> None:
        body = {"model": MODEL, "prompt": "x", "max_tokens": 100, "priority": priority}
        with httpx.Client(base_url=address, timeout=20) as c:
            assert c.post("/v1/completions", json=body).status_code == 200
        done[name] = time.monotonic()

    with EmulatorThread(_fleet(), options) as emu:
        address = emu.addresses()["h100-0"]
        threads = []
        # one running, one waiting at priority 5, then one at priority 0 (lower: first)
        for name, priority in (("running", 5), ("waiting", 5), ("urgent", 0)):
            threads.append(threading.Thread(target=send, args=(address, name, priority)))
            threads[-1].start()
            time.sleep(0.15)
        for t in threads:
            t.join()
    assert done["running"] < done["urgent"] < done["waiting"]


def test_an_unknown_scheduling_policy_is_refused() -> None:
    from placement.errors import InputError

    with pytest.raises(InputError, match="scheduling_policy"):
        EmulatorOptions(scheduling="lifo")


def test_injected_failures_slowdown_and_a_stopped_replica(
    emulator: EmulatorThread, client: httpx.Client
) -> None:
    ask = {"model": MODEL, "prompt": "Why?", "max_tokens": 20}
    normal = client.post("/v1/completions", json=ask).elapsed.total_seconds()
    emulator.set_faults("h100-0", slowdown=4.0)
    slowed = client.post("/v1/completions", json=ask).elapsed.total_seconds()
    assert slowed > 2.5 * normal
    emulator.set_faults("h100-0", slowdown=1.0, fail_rate=1.0, fail_status=503)
    failed = client.post("/v1/completions", json=ask)
    assert failed.status_code == 503 and failed.json()["error"]["type"] == "server_error"
    emulator.set_faults("h100-0", fail_rate=0.0, stopped=True)
    with pytest.raises(httpx.TransportError):
        httpx.get(emulator.addresses()["h100-0"] + "/health", timeout=5)
    emulator.set_faults("h100-0", stopped=False)
    assert httpx.get(emulator.addresses()["h100-0"] + "/health", timeout=5).status_code == 200


def test_a_dropped_stream_is_cut_without_its_closing_events(
    emulator: EmulatorThread, client: httpx.Client
) -> None:
    emulator.set_faults("h100-0", drop_rate=1.0, drop_after_tokens=3)
    request = {"model": MODEL, "prompt": "Count", "max_tokens": 30, "stream": True}
    seen: list[str] = []
    with (
        pytest.raises(httpx.RemoteProtocolError),
        client.stream("POST", "/v1/completions", json=request) as r,
    ):
        for line in r.iter_lines():
            if line.startswith("data: "):
                seen.append(line)
    assert 1 <= len(seen) < 30 and "data: [DONE]" not in seen


def test_the_admin_endpoint_sets_and_clears_faults(emulator: EmulatorThread) -> None:
    admin = emulator.fleet.admin_url
    r = httpx.post(f"{admin}/admin/replicas/h100-1/faults", json={"fail_rate": 1.0}, timeout=5)
    assert r.status_code == 200 and r.json()["fail_rate"] == 1.0
    ask = {"model": MODEL, "prompt": "x", "max_tokens": 1}
    replica = emulator.addresses()["h100-1"]
    assert httpx.post(replica + "/v1/completions", json=ask, timeout=5).status_code == 500
    listed = httpx.get(f"{admin}/admin/replicas", timeout=5).json()["replicas"]
    assert listed["h100-1"]["fail_rate"] == 1.0 and listed["h100-0"]["fail_rate"] == 0.0
    assert httpx.delete(f"{admin}/admin/replicas/h100-1/faults", timeout=5).status_code == 200
    assert httpx.post(replica + "/v1/completions", json=ask, timeout=5).status_code == 200
    bad = httpx.post(f"{admin}/admin/replicas/h100-1/faults", json={"slowdown": -1}, timeout=5)
    assert bad.status_code == 400 and "slowdown" in bad.json()["error"]["message"]
    missing = httpx.post(f"{admin}/admin/replicas/nope/faults", json={}, timeout=5)
    assert missing.status_code == 404


def test_metrics_answer_a_conditional_get_with_304_until_something_changes(
    client: httpx.Client,
) -> None:
    # earlier tests on this module's fleet may still be finishing work on the replica (and a
    # loaded machine makes the engine lag, which the page reports): wait for a page that holds
    for _ in range(100):
        first = client.get("/metrics")
        etag = first.headers["etag"]
        unchanged = client.get("/metrics", headers={"If-None-Match": etag})
        if unchanged.status_code == 304:
            break
        time.sleep(0.05)
    assert unchanged.status_code == 304 and unchanged.content == b""
    assert unchanged.headers["etag"] == etag
    assert client.get("/metrics", headers={"If-None-Match": '"other"'}).status_code == 200
    client.post("/v1/completions", json={"model": MODEL, "prompt": "Hi", "max_tokens": 2})
    changed = client.get("/metrics", headers={"If-None-Match": etag})
    assert changed.status_code == 200 and changed.headers["etag"] != etag
    assert changed.text != first.text
