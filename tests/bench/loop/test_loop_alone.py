"""Each tenant alone on the kinds that served it, beside what it got in the shared run."""

from __future__ import annotations

from bench.loop.alone import alone_figures, tenant_kinds
from bench.policies import make_policy
from placement.domain.fleet import load_fleet
from placement.domain.requests import DEFAULT_CLASSES, Request, Tenant
from placement.paths import repo_root
from sim.simulator import SimResult
from sim.workloads.base import Workload

FLEET = load_fleet(repo_root() / "data" / "fleets" / "hetero.yaml")
KIND = [r.accelerator.kind for r in FLEET.replicas]
H100, L40S = KIND.index("H100-SXM"), KIND.index("L40S")


def _request(i: int, tenant: str, at: float, prompt: int = 200) -> Request:
    return Request(i, at, prompt, 20, tenant=tenant, model="llama-3-8b")


def _shared_run(requests: list[Request]) -> SimResult:
    """What a shared run left: ``a`` missed on the H100s (one on an L40S), ``b`` refused."""
    for r in requests:
        if r.tenant == "a":
            r.replica = L40S if r.id == 0 else H100
            r.first_token_s = r.arrival_s + 5.0  # misses the interactive TTFT SLO
            r.finish_s = r.first_token_s + 1.0
        else:
            r.error = "refused"
    return SimResult(
        policy="x",
        workload="w",
        fleet=FLEET,
        requests=requests,
        replicas=[],
        end_s=20.0,
        wall_s=0.0,
        events=0,
        refused=0,
        retries=0,
    )


def _workload() -> Workload:
    requests = [_request(i, "a", 0.5 * i) for i in range(12)] + [_request(100, "b", 1.0)]
    return Workload(
        name="w",
        requests=requests,
        tenants={"a": Tenant(name="a", credit_share=0.5), "b": Tenant(name="b", credit_share=0.5)},
        classes=dict(DEFAULT_CLASSES),
    )


def test_a_tenants_kinds_are_those_that_served_a_tenth_of_its_served_requests() -> None:
    got = tenant_kinds(_shared_run(_workload().requests))
    assert got == {"a": ["H100-SXM"], "b": []}  # 1 of 12 on an L40S is under a tenth


def test_alone_on_its_kinds_a_tenant_meets_what_the_shared_run_missed() -> None:
    wl = _workload()  # routed: its requests carry the shared run's outcome
    got = alone_figures(_shared_run(wl.requests), wl, FLEET, make_policy)
    a, b = got["a"], got["b"]
    assert a["kinds"] == ["H100-SXM"] and a["requests"] == 12
    assert a["ours"] == 0.0
    assert a["alone"] == 1.0  # 12 short requests on three idle H100s all meet
    assert b == {"requests": 1, "kinds": [], "ours": 0.0, "alone": None}  # nowhere to run it
    # the routed workload's requests are copied, not served again
    assert all(r.first_token_s == r.arrival_s + 5.0 for r in wl.requests if r.tenant == "a")
