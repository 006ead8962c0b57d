"""The capacity question picks the cheaper kind when capacities and costs make it obvious,
and verifies its answer with a placement solve."""

from __future__ import annotations

from typing import Any

from placement.whatif.load import load_scenario
from placement.whatif.min_cost import answer_capacity_question


def _ask(doc: dict[str, Any], write: Any, rates: dict[str, float], **q: Any) -> Any:
    doc["base"]["fixed_capacity"] = rates
    doc["capacity_question"] = {"candidates": ["H100-SXM", "L40S"], **q}
    return answer_capacity_question(load_scenario(write(doc)))


def test_picks_the_kind_with_the_cheaper_capacity(doc: dict[str, Any], write: Any) -> None:
    # L40S: 10 req/s for $1.2/h; H100: 12 req/s for $4/h → only L40S
    res = _ask(doc, write, {"H100-SXM": 12.0, "L40S": 10.0})
    assert res.counts["H100-SXM"] == 0 and res.counts["L40S"] >= 1
    assert res.verified is True and res.status == "optimal"
    assert abs(res.cost_per_hour - 1.2 * res.counts["L40S"]) < 1e-9
    # enough capacity at the utilisation target, and not one replica more
    n = res.counts["L40S"]
    assert n * 10.0 * res.max_utilisation >= res.demand_rps > (n - 1) * 10.0 * res.max_utilisation


def test_flipped_capacities_flip_the_choice(doc: dict[str, Any], write: Any) -> None:
    res = _ask(doc, write, {"H100-SXM": 60.0, "L40S": 1.0})
    assert res.counts["L40S"] == 0 and res.counts["H100-SXM"] >= 1
    assert res.verify_shed_share is not None and res.verify_shed_share <= 1e-3


def test_max_count_too_low_is_infeasible(doc: dict[str, Any], write: Any) -> None:
    res = _ask(doc, write, {"H100-SXM": 1.0, "L40S": 1.0}, default_max_count=1, verify=False)
    assert res.status == "infeasible" and res.cost_per_hour is None
    assert res.explanation


def test_min_count_is_respected(doc: dict[str, Any], write: Any) -> None:
    res = _ask(
        doc, write, {"H100-SXM": 12.0, "L40S": 10.0}, min_count={"H100-SXM": 1}, verify=False
    )
    assert res.counts["H100-SXM"] == 1
