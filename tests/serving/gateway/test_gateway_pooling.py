"""The pooling endpoints through the gateway: ``/v1/embeddings`` driven by the official
``openai`` client, and ``/classify``, in front of emulated embedding and classification
replicas (and an LLM one beside them): every request gets its own inputs' results back,
concurrent requests go to the replica in batches, a request the replica refuses does not fail
the rest of its batch, a failing replica's batch goes on to another, bad input is a 4xx in
OpenAI's format."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest
from gateway_harness import KEY, MODEL, Running, running_gateway

from sim.emulator.classify_api import LABELS, class_probs
from sim.emulator.embeddings_api import embedding_vector

EMBED = "bge-base-en-v1.5"
CLASSIFIER = "distilbert-base-uncased-finetuned-sst-2-english"
GROUPS = [
    {"kind": "bge", "accelerator": "L4", "count": 1, "model": EMBED},
    {"kind": "sst2", "accelerator": "L4", "count": 1, "model": CLASSIFIER},
    {"kind": "h100", "accelerator": "H100-SXM", "count": 1, "model": MODEL},
]


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    # the replica 10× slower than the cost model: a pass takes ~50 ms, long enough for
    # concurrent requests to gather behind it on a loaded machine
    with running_gateway(
        tmp_path_factory.mktemp("embed"), groups=GROUPS, time_scale=10.0, embed_batch_max_wait_s=0.5
    ) as running:
        yield running


@pytest.fixture
def client(gateway: Running) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=gateway.url + "/v1", api_key=KEY, max_retries=0) as c:
        yield c


def _same(vector: list[float], text: str) -> bool:
    return bool(np.allclose(vector, embedding_vector(text, len(vector)), atol=1e-6))


def test_the_openai_client_gets_each_inputs_embedding(client: openai.OpenAI) -> None:
    # the client asks for base64 by default and decodes it
    one = client.embeddings.create(model=EMBED, input="hello world")
    assert len(one.data) == 1 and len(one.data[0].embedding) == 768
    assert _same(one.data[0].embedding, "hello world")
    texts = ["first text", "second, longer text here", "third"]
    many = client.embeddings.create(model=EMBED, input=texts, encoding_format="float")
    assert [d.index for d in many.data] == [0, 1, 2]
    assert all(_same(d.embedding, t) for d, t in zip(many.data, texts, strict=True))
    assert many.usage.prompt_tokens >= 3
    short = client.embeddings.create(model=EMBED, input=[[1, 2, 3]], dimensions=64)
    assert len(short.data[0].embedding) == 64


def test_concurrent_requests_are_batched_and_each_gets_its_own_answer(gateway: Running) -> None:
    async def burst() -> list[tuple[str, openai.types.CreateEmbeddingResponse, str]]:
        async with openai.AsyncOpenAI(
            base_url=gateway.url + "/v1", api_key=KEY, max_retries=0
        ) as ac:

            async def one(i: int) -> tuple[str, openai.types.CreateEmbeddingResponse, str]:
                text = f"request number {i} " * (1 + i % 5)
                raw = await ac.embeddings.with_raw_response.create(model=EMBED, input=text)
                return text, raw.parse(), raw.headers["x-placement-batch"]

            return await asyncio.gather(*(one(i) for i in range(30)))

    with httpx.Client(base_url=gateway.url) as c:
        before = gateway.metric(c.get("/metrics").text, "placement_gateway_batch_requests_count")
        results = asyncio.run(burst())
        after = gateway.metric(c.get("/metrics").text, "placement_gateway_batch_requests_count")
    for text, answer, _ in results:
        assert len(answer.data) == 1 and answer.data[0].index == 0
        assert _same(answer.data[0].embedding, text)  # its own input's, not a neighbour's
        assert answer.usage.prompt_tokens >= 1
    sizes = [int(size) for _, _, size in results]
    assert max(sizes) > 1  # they went together
    assert after - before < 30  # fewer batches than requests


def test_a_request_the_replica_refuses_fails_alone(gateway: Running) -> None:
    # ~1,500 tokens of one-letter words: past the 512-token window, yet under the gateway's
    # lower bound (characters / 8), so only the replica can tell
    long_text = "a " * 1500

    async def mixed() -> list[int]:
        async with httpx.AsyncClient(
            base_url=gateway.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=30
        ) as c:

            async def one(text: str) -> int:
                r = await c.post("/v1/embeddings", json={"model": EMBED, "input": text})
                if r.status_code == 400:
                    assert r.json()["error"]["code"] == "context_length_exceeded"
                return r.status_code

            texts = ["warm up the replica", *(f"fine {i}" for i in range(4)), long_text]
            texts += [f"fine again {i}" for i in range(4)]
            return await asyncio.gather(*(one(t) for t in texts))

    statuses = asyncio.run(mixed())
    assert statuses.count(400) == 1 and statuses[5] == 400
    assert statuses.count(200) == len(statuses) - 1


def test_bad_input_is_an_openai_error(client: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as err:
        client.embeddings.create(model=EMBED, input=[])
    assert err.value.body is not None and err.value.body["param"] == "input"  # type: ignore[index]
    with pytest.raises(openai.NotFoundError):
        client.embeddings.create(model="no-such-model", input="x")
    with pytest.raises(openai.BadRequestError) as err:
        client.embeddings.create(model=EMBED, input=[list(range(600))])
    assert err.value.code == "context_length_exceeded"
    with pytest.raises(openai.BadRequestError):  # an embedding model serves no completions
        client.completions.create(model=EMBED, prompt="hi", max_tokens=2)


def test_an_idle_replica_is_not_made_to_wait(gateway: Running) -> None:
    headers = {"Authorization": f"Bearer {KEY}"}
    with httpx.Client(base_url=gateway.url, headers=headers, timeout=30) as c:
        r = c.post("/v1/embeddings", json={"model": EMBED, "input": "alone"})
    assert r.status_code == 200
    assert r.headers["x-placement-batch"] == "1"
    # the budget here is 0.5 s: a lone request on an idle replica goes at once, in ~50 ms
    assert r.elapsed.total_seconds() < 0.4


def test_classification_requests_are_batched_and_each_gets_its_own_classes(
    gateway: Running,
) -> None:
    texts = [f"review number {i}: " + "great " * (i % 4) for i in range(20)]

    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(
            base_url=gateway.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=30
        ) as c:
            return await asyncio.gather(
                *(c.post("/classify", json={"model": CLASSIFIER, "input": t}) for t in texts)
            )

    answers = asyncio.run(burst())
    assert [a.status_code for a in answers] == [200] * len(texts)
    assert max(int(a.headers["x-placement-batch"]) for a in answers) > 1
    for text, answer in zip(texts, answers, strict=True):
        body = answer.json()
        (result,) = body["data"]
        assert result["index"] == 0 and result["num_classes"] == len(LABELS)
        assert np.allclose(result["probs"], class_probs(text))  # its own input's classes
        assert result["label"] == LABELS[int(np.argmax(result["probs"]))]
        assert body["usage"]["prompt_tokens"] >= 1 and body["model"] == CLASSIFIER
    # two inputs in one request come back in order
    headers = {"Authorization": f"Bearer {KEY}"}
    with httpx.Client(base_url=gateway.url, headers=headers, timeout=30) as c:
        pair = c.post("/classify", json={"model": CLASSIFIER, "input": ["good", "bad"]}).json()
        wrong = c.post("/classify", json={"model": EMBED, "input": "x"})
    assert [d["index"] for d in pair["data"]] == [0, 1]
    assert np.allclose(pair["data"][1]["probs"], class_probs("bad"))
    assert wrong.status_code == 400  # an embedding model classifies nothing
    assert wrong.json()["error"]["param"] == "model"


def test_a_failing_replica_s_batch_is_served_by_another(tmp_path: Path) -> None:
    groups = [{"kind": "bge", "accelerator": "L4", "count": 2, "model": EMBED}]
    with running_gateway(tmp_path, groups=groups, time_scale=10.0) as gateway:
        broken = "bge-0"
        gateway.emulator.set_faults(broken, fail_rate=1.0, fail_status=500)

        async def burst() -> list[httpx.Response]:
            async with httpx.AsyncClient(
                base_url=gateway.url, headers={"Authorization": f"Bearer {KEY}"}, timeout=30
            ) as c:
                return await asyncio.gather(
                    *(
                        c.post("/v1/embeddings", json={"model": EMBED, "input": f"text {i}"})
                        for i in range(8)
                    )
                )

        answers = asyncio.run(burst())
        with httpx.Client(base_url=gateway.url) as c:
            metrics = c.get("/metrics").text
    assert [a.status_code for a in answers] == [200] * 8
    assert {a.headers["x-placement-replica"] for a in answers} == {"bge-1"}
    # least-outstanding sent some to the broken one: their batches went on to bge-1
    assert gateway.metric(metrics, 'placement_gateway_retries_total{cause="5xx"}') >= 1
    for i, answer in enumerate(answers):
        assert _same(answer.json()["data"][0]["embedding"], f"text {i}")
