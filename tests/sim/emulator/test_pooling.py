"""The emulator's pooling side: the embeddings and classification protocols' parsing and the
pooling engine's cost (a fixed cost per pass, so a batch of inputs costs far less than as many
requests)."""

from __future__ import annotations

import asyncio
import base64

import numpy as np
import pytest

from placement.domain.accelerators import get_accelerator
from placement.domain.llm import get_model
from sim.costmodel.factory import cost_model_for
from sim.emulator.classify_api import LABELS, class_probs, parse_classify
from sim.emulator.embeddings_api import (
    embedding_vector,
    encode_vector,
    parse_embedding,
)
from sim.emulator.openai_api import ApiError
from sim.emulator.pooling import PoolingEngine

MODEL = "bge-base-en-v1.5"


@pytest.mark.parametrize(
    ("raw", "inputs"),
    [
        ("one text", ("one text",)),
        (["a", "b"], ("a", "b")),
        ([1, 2, 3], ((1, 2, 3),)),
        ([[1, 2], [3]], ((1, 2), (3,))),
    ],
)
def test_every_input_shape_the_protocol_allows(raw: object, inputs: tuple[object, ...]) -> None:
    assert parse_embedding({"model": MODEL, "input": raw}).inputs == inputs


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"input": "x"}, "model"),
        ({"model": MODEL, "input": []}, "input"),
        ({"model": MODEL, "input": ["ok", ""]}, "input"),
        ({"model": MODEL, "input": [1.5]}, "input"),
        ({"model": MODEL, "input": "x", "encoding_format": "int8"}, "encoding_format"),
        ({"model": MODEL, "input": "x", "dimensions": 0}, "dimensions"),
    ],
)
def test_bad_requests_name_the_parameter(body: dict[str, object], param: str) -> None:
    with pytest.raises(ApiError) as err:
        parse_embedding(body)
    assert err.value.status == 400 and err.value.param == param


def test_a_vector_depends_on_its_input_alone_and_base64_carries_it() -> None:
    v = embedding_vector("text", 16)
    assert np.allclose(v, embedding_vector("text", 16))
    assert not np.allclose(v, embedding_vector("other", 16))
    assert float(np.linalg.norm(v)) == pytest.approx(1.0, abs=1e-5)
    decoded = np.frombuffer(base64.b64decode(encode_vector(v, "base64")), dtype="<f4")
    assert np.array_equal(decoded, v)


def test_a_batch_costs_far_less_than_its_requests_one_by_one() -> None:
    cost = cost_model_for(get_accelerator("L4"), get_model(MODEL), 1)

    async def main() -> tuple[float, float, float, float]:
        engine = PoolingEngine(cost, max_num_seqs=16)
        try:
            one = engine.request_s((200,))
            batch = engine.request_s((200,) * 32)
            split = engine.pass_s((200,) * 16) * 2
            job = await engine.embed((10, 20))
            return one, batch, split, job.finish_s - job.arrival_s
        finally:
            engine.stop()

    one, batch, split, waited = asyncio.run(main())
    assert cost.overhead_s > 0
    assert one < batch < 32 * one / 3  # the fixed cost is paid once per pass
    assert batch == pytest.approx(split)  # 32 inputs over two passes of at most 16
    assert waited > 0


def test_classification_parses_like_embeddings_and_gives_probabilities() -> None:
    ask = parse_classify({"model": "m", "input": ["a", [1, 2]]})
    assert ask.inputs == ("a", (1, 2))
    with pytest.raises(ApiError) as err:
        parse_classify({"model": "m", "input": 3})
    assert err.value.param == "input"
    probs = class_probs("a")
    assert len(probs) == len(LABELS) and sum(probs) == pytest.approx(1.0)
    assert probs == class_probs("a") and probs != class_probs("b")
