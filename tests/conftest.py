"""Fixtures shared across the suite: router views of a small fleet and requests for them; a
telemetry store and an MLflow registry with a promoted champion, built once per session."""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from placement.domain.fleet import Fleet, fleet_from_dict
from placement.domain.prefix import chain_block_ids
from placement.domain.requests import Request
from sim.costmodel.linear import LinearCostModel
from sim.router import ReplicaView

if TYPE_CHECKING:
    from registry_builders import Registry

    from placement.plan import Plan

MakeViews = Callable[..., list[ReplicaView]]
MakeRequest = Callable[..., Request]


def _views(
    n: int,
    *,
    outstanding: Sequence[int] | None = None,
    waiting: Sequence[int] | None = None,
    kv_usage: Sequence[float] | None = None,
    models: Sequence[str] | None = None,
    healthy: Sequence[bool] | None = None,
    weights: Sequence[float] | None = None,
    kv_capacity_tokens: int = 1 << 20,
) -> list[ReplicaView]:
    views = []
    for i in range(n):
        v = ReplicaView(
            i,
            f"r{i}",
            model=models[i] if models else "m",
            accelerator="H100-SXM",
            kv_capacity_tokens=kv_capacity_tokens,
            weight=weights[i] if weights else 1.0,
        )
        v.outstanding = outstanding[i] if outstanding else 0
        v.num_waiting = waiting[i] if waiting else 0
        v.kv_usage = kv_usage[i] if kv_usage else 0.0
        v.healthy = healthy[i] if healthy else True
        views.append(v)
    return views


@pytest.fixture
def make_views() -> MakeViews:
    """``make_views(n, outstanding=[...], waiting=[...], kv_usage=[...], models=[...], ...)``."""
    return _views


_next_id = iter(range(1, 1 << 62))


def _request(
    input_tokens: int = 1024,
    *,
    hashes: Sequence[int] = (),
    block_tokens: int = 256,
    output_tokens: int = 64,
    model: str = "",
    tenant: str = "t",
    arrival_s: float = 0.0,
) -> Request:
    return Request(
        next(_next_id),
        arrival_s,
        input_tokens,
        output_tokens,
        tenant=tenant,
        model=model,
        block_hashes=tuple(hashes),
        block_tokens=block_tokens,
    )


@pytest.fixture
def make_request() -> MakeRequest:
    """``make_request(input_tokens, hashes=[...], block_tokens=256, model=..., tenant=...)``."""
    return _request


def _drain(events, views, policy, *, until):
    """Deliver first tokens (kind 0) and completions (kind 1) due by ``until``, as a gateway."""
    while events and events[0][0] <= until:
        t, kind, _, req = heapq.heappop(events)
        v = views[req.replica]
        if kind == 0:
            v.outstanding_prefill_tokens -= req.input_tokens
            v.decoding += 1
            req.first_token_s = t
            policy.on_first_token(req, v, t)
        else:
            v.outstanding -= 1
            v.decoding -= 1
            req.finish_s = t
            policy.on_complete(req, v, t)


@pytest.fixture
def route_random(make_views, make_request):
    """Route 10k random requests (health flaps, scrapes, 3 models) through a policy and
    check each lands on a healthy replica serving its model and all counters drain to 0."""

    def run(policy):
        rng = random.Random(42)
        models = ["llama"] * 12 + ["qwen"] * 4
        views = make_views(16, models=models, kv_capacity_tokens=64 * 512)
        events: list[tuple[float, int, int, object]] = []  # (time, kind, seq, request)
        now, seq = 0.0, 0
        for i in range(10_000):
            now += rng.expovariate(50.0)
            _drain(events, views, policy, until=now)
            if i % 500 == 0:  # health flaps and a metrics scrape; one replica per model stays up
                for v in views:
                    v.healthy = v.index in (0, 12) or rng.random() > 0.2
                    v.num_waiting = rng.randrange(20)
                    v.kv_usage = rng.random()
            group = rng.randrange(30)
            blocks = [group, group % 7] + [rng.randrange(1000) for _ in range(rng.randrange(0, 6))]
            hashes = chain_block_ids(blocks[: rng.randrange(0, len(blocks) + 1)])
            req = make_request(
                rng.randrange(1, 4000),
                hashes=hashes,
                block_tokens=512,
                model=rng.choice(["", "llama", "qwen"]),
                tenant=f"t{rng.randrange(5)}",
                arrival_s=now,
            )
            idx = policy.route(req, views, now)
            assert 0 <= idx < len(views)
            chosen = views[idx]
            assert chosen.healthy
            assert req.model in ("", chosen.model)
            req.replica = idx
            chosen.outstanding += 1
            chosen.outstanding_prefill_tokens += req.input_tokens
            ttft = rng.uniform(0.01, 2.0)
            seq += 1
            heapq.heappush(events, (now + ttft, 0, seq, req))
            seq += 1
            heapq.heappush(events, (now + ttft + rng.uniform(0.1, 20.0), 1, seq, req))
        _drain(events, views, policy, until=float("inf"))
        assert all(v.outstanding == 0 and v.decoding == 0 for v in views)

    return run


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


@pytest.fixture(scope="session")
def telemetry_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A telemetry store of two simulated minutes of Mooncake on 8 × H100, once per session."""
    from registry_builders import make_store, shared_traces_present

    if not shared_traces_present():
        pytest.skip("shared data missing")
    return make_store(tmp_path_factory.mktemp("telemetry"))


@pytest.fixture(scope="session")
def champion_registry(telemetry_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Registry:
    """An MLflow store where `placement train` registered version 1 and it was promoted
    (trained once per session; set ``MLFLOW_TRACKING_URI`` to ``.uri`` to use it)."""
    from registry_builders import train_and_promote

    return train_and_promote(telemetry_store, tmp_path_factory.mktemp("mlflow") / "mlflow.db")


@pytest.fixture(scope="session")
def champion_plan(champion_registry: Registry) -> Plan:
    """A plan solved for real with the champion's capacities (20 s of Mooncake on 8 × H100)."""
    from registry_builders import solve_with_champion

    return solve_with_champion(champion_registry)
