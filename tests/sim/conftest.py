from __future__ import annotations

import random

import pytest

from placement.domain.fleet import Fleet, fleet_from_dict
from placement.domain.requests import Request
from placement.prefix import chain_block_ids
from sim.costmodel.linear import LinearCostModel


class LeastOutstanding:
    """A minimal policy for engine tests (the real ones are tested with the routing plugins)."""

    name = "test-least-outstanding"

    def route(self, req, views, now):
        live = [v for v in views if v.healthy]
        return min(live, key=lambda v: (v.outstanding, v.index)).index if live else -1

    def on_first_token(self, req, replica, now):
        pass

    def on_complete(self, req, replica, now):
        pass


@pytest.fixture
def policy() -> LeastOutstanding:
    return LeastOutstanding()


@pytest.fixture
def fleet() -> Fleet:
    return fleet_from_dict(
        {
            "name": "t",
            "replicas": [
                {
                    "kind": "h100",
                    "accelerator": "H100-SXM",
                    "count": 4,
                    "model": "llama-3-8b",
                    "max_num_batched_tokens": 2048,
                }
            ],
        }
    )


@pytest.fixture
def cost() -> LinearCostModel:
    return LinearCostModel(overhead_s=0.004, per_token_s=6e-5, per_context_token_s=2e-8)


def random_requests(n: int, rate: float, seed: int = 0, roots: int = 20) -> list[Request]:
    rng = random.Random(seed)
    out = []
    t = 0.0
    for i in range(n):
        t += rng.expovariate(rate)
        inp = rng.randint(100, 4000)
        blocks = [rng.randint(0, roots)] + [rng.randint(0, 1 << 40) for _ in range(inp // 512)]
        out.append(
            Request(
                i, t, inp, rng.randint(2, 300), block_hashes=chain_block_ids(blocks)[: inp // 512]
            )
        )
    return out


@pytest.fixture
def make_requests():
    return random_requests
