from __future__ import annotations

import pytest

from bench.loop.fairness import entitlements, jain_overload, request_gpu_seconds


def test_entitlements_water_fill_by_credit_capped_at_demand() -> None:
    fair = entitlements({"a": 1.0, "b": 10.0, "c": 10.0}, {"a": 0.5, "b": 0.25, "c": 0.25}, 9.0)
    # a asks for less than its half: served in full, the rest split evenly between b and c
    assert fair == pytest.approx({"a": 1.0, "b": 4.0, "c": 4.0})


def test_jain_is_one_when_goodput_matches_entitlement_and_drops_when_one_starves() -> None:
    offered = {"a": 10.0, "b": 10.0}
    credits = {"a": 0.75, "b": 0.25}
    assert jain_overload({"a": 6.0, "b": 2.0}, offered, credits) == pytest.approx(1.0)
    assert jain_overload({"a": 8.0, "b": 0.0}, offered, credits) == pytest.approx(0.5)


def test_tenants_with_too_few_requests_share_the_split_but_not_the_index() -> None:
    # "one" sent a single request and was served; its entitlement is below that request
    offered = {"a": 10.0, "b": 10.0, "one": 2.0}
    credits = {"a": 0.5, "b": 0.5, "one": 0.01}
    goodput = {"a": 5.0, "b": 5.0, "one": 2.0}
    requests = {"a": 500, "b": 400, "one": 1}
    everyone = jain_overload(goodput, offered, credits)
    assert everyone < 0.5
    assert jain_overload(goodput, offered, credits, requests) == pytest.approx(1.0)
    # a starved tenant with enough requests still counts
    starved = {"a": 9.0, "b": 1.0, "one": 2.0}
    assert jain_overload(starved, offered, credits, requests) < 0.7


def test_goodput_is_counted_in_gpu_seconds_with_cache_hits_discounted() -> None:
    from placement.domain.fleet import load_fleet
    from placement.domain.requests import DEFAULT_CLASSES, Request
    from placement.paths import repo_root
    from serving.admission.cost import gpu_rates
    from sim.metrics import request_table

    fleet = load_fleet(repo_root() / "data" / "fleets" / "hetero.yaml")
    reasoning = Request(0, 0.0, 56, 980)
    code = Request(1, 0.0, 2048, 28)
    cached = Request(2, 0.0, 2048, 28)
    cached.cached_tokens = 2000
    cost = request_gpu_seconds(fleet, request_table([reasoning, code, cached], DEFAULT_CLASSES))
    # the fleet's average replica: between its fastest (H100) and slowest (L40S) kinds
    h100, l40s = (gpu_rates(a, "llama-3-8b", 1).request(56, 0, 980) for a in ("H100-SXM", "L40S"))
    assert h100 < cost[0] < l40s
    assert cost[0] > 4 * cost[1]  # a long answer holds GPUs longer than a long prompt
    assert cost[2] < 0.5 * cost[1]  # a prompt found in the cache costs a fraction
