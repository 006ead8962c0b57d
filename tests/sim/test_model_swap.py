"""Base-model swaps in the simulator: drain, load, serve the new model; nothing lost."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from placement.domain.base_models import DRAIN_LIMIT_S, swap_load_s
from placement.domain.fleet import fleet_from_dict, with_model
from placement.domain.llm import get_model
from placement.domain.requests import Request
from placement.errors import InputError
from sim.model_swap import ModelSwitcher
from sim.router import ReplicaView
from sim.simulator import SimResult, Simulator
from sim.workloads.base import Workload

SWAP_AT = 5.0


def swap_fleet(count: int = 2):
    return fleet_from_dict(
        {
            "name": "swap",
            "replicas": [
                {
                    "kind": "h100",
                    "accelerator": "H100-SXM",
                    "count": count,
                    "model": "llama-3-8b",
                    "models": ["llama-3-8b", "qwen2-7b"],
                    "weights_load_gbps": 4.0,
                    "startup_s": 10.0,
                }
            ],
        }
    )


class ByModel:
    """Least outstanding among the replicas serving the request's model and not loading;
    switches replica 0 to ``target`` at the first route after :data:`SWAP_AT`."""

    name = "by-model"

    def __init__(self, target: str) -> None:
        self.target = target
        self.switcher: ModelSwitcher | None = None
        self.switched: bool | None = None
        self.seen: list[tuple[float, str, int]] = []

    def bind_switcher(self, switcher: ModelSwitcher) -> None:
        self.switcher = switcher

    def route(self, req: Request, replicas: Sequence[ReplicaView], now: float) -> int:
        if now >= SWAP_AT and self.switched is None:
            assert self.switcher is not None
            self.switched = self.switcher.switch_model(0, self.target, now)
        ok = [v for v in replicas if v.model == req.model and not v.loading and v.healthy]
        if not ok:
            return -1
        chosen = min(ok, key=lambda v: (v.outstanding, v.index))
        self.seen.append((now, req.model, chosen.index))
        return chosen.index

    def on_first_token(self, req: Request, replica: ReplicaView, now: float) -> None:
        pass

    def on_complete(self, req: Request, replica: ReplicaView, now: float) -> None:
        pass


def two_models(n: int = 400, rate: float = 20.0, output: int = 200) -> Workload:
    reqs = [
        Request(i, i / rate, 500, output, model="qwen2-7b" if i % 4 == 3 else "llama-3-8b")
        for i in range(n)
    ]
    return Workload(name="two", requests=reqs, tenants={})


def run(cost, target: str = "qwen2-7b", **kw: int) -> tuple[Simulator, SimResult, ByModel]:
    policy = ByModel(target)
    sim = Simulator(swap_fleet(), policy, two_models(**kw), cost_model=lambda s: cost)
    return sim, sim.run(), policy


def test_a_swap_drains_loads_then_serves_the_new_model(cost):
    sim, result, policy = run(cost)
    assert policy.switched is True
    stages = [(e.replica, e.model, e.stage) for e in sim.model_events]
    assert stages == [(0, "qwen2-7b", "drain"), (0, "qwen2-7b", "load"), (0, "qwen2-7b", "serve")]
    drain, load, serve = (e.time_s for e in sim.model_events)
    assert drain == pytest.approx(SWAP_AT, abs=0.1)
    assert drain <= load <= drain + DRAIN_LIMIT_S
    spec = sim.replicas[0].spec
    assert serve - load == pytest.approx(
        swap_load_s(get_model("qwen2-7b"), gbps=4.0, startup_s=10.0)
    )
    assert spec.model.name == "qwen2-7b"
    assert (
        spec.kv_capacity_tokens
        == with_model(swap_fleet().replicas[0], spec.model).kv_capacity_tokens
    )
    # before the swap qwen had no replica: refused; after it, served by replica 0 only
    qwen = [r for r in result.requests if r.model == "qwen2-7b"]
    assert all(r.error for r in qwen if r.arrival_s < SWAP_AT)
    late = [r for r in qwen if r.arrival_s > serve]
    assert late and all(r.replica == 0 and not r.error for r in late)
    # nothing routed to replica 0 while it drained and loaded
    assert not [s for s in policy.seen if drain < s[0] < serve and s[2] == 0]


def test_every_llama_request_survives_the_swap(cost):
    sim, result, _ = run(cost)
    llama = [r for r in result.requests if r.model == "llama-3-8b"]
    assert all(not r.error and r.finish_s >= 0 for r in llama)
    assert sum(v.outstanding for v in sim.gateway.views) == 0


def test_a_drain_that_outlasts_its_limit_retries_the_rest_elsewhere(cost):
    # outputs long enough that the batch cannot finish within the drain limit
    sim, result, _ = run(cost, n=200, rate=20.0, output=20_000)
    drain, load, _ = (e.time_s for e in sim.model_events)
    assert load == pytest.approx(drain + DRAIN_LIMIT_S)
    assert result.retries > 0
    assert sum(v.outstanding for v in sim.gateway.views) == 0


def test_no_swap_to_the_model_held_and_none_to_a_model_not_listed(cost):
    _, _, policy = run(cost, target="llama-3-8b")
    assert policy.switched is False
    with pytest.raises(InputError, match="cannot hold"):
        run(cost, target="llama-3-70b")


def test_a_fleet_lists_only_models_that_fit():
    with pytest.raises(InputError, match="KV cache"):
        fleet_from_dict(
            {
                "name": "x",
                "replicas": [
                    {
                        "kind": "h100",
                        "accelerator": "H100-SXM",
                        "count": 1,
                        "model": "llama-3-8b",
                        "models": ["llama-3-70b"],
                    }
                ],
            }
        )
    spec = swap_fleet().replicas[0]
    assert spec.models == ("llama-3-8b", "qwen2-7b")
    assert with_model(spec, get_model("qwen2-7b")).kv_capacity_tokens > spec.kv_capacity_tokens
