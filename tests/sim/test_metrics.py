from __future__ import annotations

import math

import pytest

from placement.domain.fleet import fleet_from_dict
from placement.domain.requests import Request, Tenant
from sim.metrics import jain_index, request_table, summarise
from sim.simulator import ReplicaStats, SimResult
from sim.workloads.base import Workload


def served(i, arrival, first, finish, out, *, tenant="a", cls="interactive", cached=0):
    r = Request(i, arrival, 1000, out, tenant=tenant, request_class=cls)
    r.first_token_s, r.finish_s, r.cached_tokens = first, finish, cached
    return r


@pytest.mark.parametrize(
    ("values", "expected"),
    [([1, 1, 1, 1], 1.0), ([1, 0, 0, 0], 0.25), ([2, 1], 0.9), ([], math.nan)],
)
def test_jain_index(values, expected):
    got = jain_index([float(v) for v in values])
    assert (math.isnan(got) and math.isnan(expected)) or got == pytest.approx(expected)


def test_request_judged_against_its_own_class():
    from placement.domain.requests import DEFAULT_CLASSES

    reqs = [
        served(0, 0.0, 1.0, 2.0, 11),  # TTFT 1 s, TPOT 0.1 s: meets interactive
        served(1, 0.0, 3.0, 4.0, 11),  # TTFT 3 s: misses interactive
        served(2, 0.0, 3.0, 4.0, 11, cls="batch"),  # meets batch
        served(3, 0.0, -1.0, -1.0, 11),  # never finished
    ]
    t = request_table(reqs, DEFAULT_CLASSES)
    assert t.met.tolist() == [True, False, True, False]
    assert t.tpot[0] == pytest.approx(0.1)
    assert math.isnan(t.ttft[3])


def test_summary_goodput_fairness_and_cost():
    fleet = fleet_from_dict(
        {
            "name": "f",
            "replicas": [
                {
                    "kind": "h",
                    "accelerator": "H100-SXM",
                    "count": 1,
                    "model": "llama-3-8b",
                    "cost_per_hour": 3.6,
                }
            ],
        }
    )
    reqs = [
        served(0, 0.0, 0.5, 1.0, 11, tenant="a", cached=500),
        served(1, 10.0, 10.5, 11.0, 11, tenant="b"),
        served(2, 20.0, 29.0, 30.0, 11, tenant="b"),
    ]
    wl = Workload(
        name="w",
        requests=reqs,
        tenants={"a": Tenant(name="a", credit_share=0.5), "b": Tenant(name="b", credit_share=0.5)},
    )
    result = SimResult(
        policy="p",
        workload="w",
        fleet=fleet,
        requests=reqs,
        replicas=[
            ReplicaStats(
                id="h-0",
                accelerator="H100-SXM",
                busy_s=18.0,
                iterations=1,
                preemptions=0,
                prompt_tokens=3000,
                cached_tokens=500,
                cost_per_hour=3.6,
            )
        ],
        end_s=36.0,
        wall_s=0.0,
        events=0,
        refused=0,
        retries=0,
    )
    m = summarise(result, wl)
    assert m.goodput_rps == pytest.approx(2 / 20.0)
    assert m.slo_attainment == pytest.approx(2 / 3)
    assert m.jain == pytest.approx(1.0)  # one SLO-meeting request each, equal credits
    assert m.prefix_hit_rate == pytest.approx(500 / 3000)
    assert m.utilisation == pytest.approx(0.5)
    # 36 s at $3.6/h = $0.036 for 33 output tokens
    assert m.cost_per_m_output_tokens == pytest.approx(0.036 / 33e-6)
