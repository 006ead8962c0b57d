from __future__ import annotations

import pytest

from bench.loop.fairness import entitlements, jain_overload


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
