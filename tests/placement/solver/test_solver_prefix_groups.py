from __future__ import annotations

import pytest

from placement.domain.llm import get_model
from placement.domain.prefix import chain_block_ids
from placement.domain.requests import Request
from placement.solver.demand import DEFAULT_KEY, aggregate_demand
from placement.solver.prefix_groups import GroupRule, assign_groups, find_groups


def _req(i: int, blocks: list[int], tenant: str = "a") -> Request:
    return Request(
        i,
        float(i),
        len(blocks) * 512 + 100,
        50,
        tenant=tenant,
        model="m",
        block_hashes=chain_block_ids(blocks),
    )


def test_chain_carrying_most_traffic_is_grouped_at_its_deepest_node() -> None:
    # 10 requests share blocks 1,2,3; 9 of them continue with 4: the group is at block 4
    reqs = [_req(i, [1, 2, 3, 4, 100 + i]) for i in range(9)] + [_req(9, [1, 2, 3, 7])]
    groups = find_groups(reqs, window_s=10.0, block_tokens=512, rule=GroupRule(min_saved_share=0.0))
    keys = {g.key: g for g in groups}
    deep = chain_block_ids([1, 2, 3, 4])[-1]
    assert deep in keys and keys[deep].depth_blocks == 4 and keys[deep].requests == 9
    assert chain_block_ids([1, 2, 3])[-1] not in keys  # followed by its majority child


def test_branching_point_is_a_group_and_requests_take_the_deepest() -> None:
    # 3 branches of 4 requests each under a shared prefix: no child carries most traffic
    reqs = [_req(4 * b + i, [1, 2, 10 + b, 1000 + 4 * b + i]) for b in range(3) for i in range(4)]
    rule = GroupRule(min_saved_share=0.0)
    groups = find_groups(reqs, window_s=10.0, block_tokens=512, rule=rule)
    root = chain_block_ids([1, 2])[-1]
    assert root in {g.key for g in groups}
    assigned = assign_groups(reqs, groups)
    # every request belongs to its branch's group (depth 3), deeper than the shared root
    assert all(g is not None and g.depth_blocks == 3 for g in assigned)


def test_cold_traffic_is_default_demand() -> None:
    reqs = [_req(i, [500 + i]) for i in range(5)]
    units = aggregate_demand(reqs, window_s=5.0, block_tokens=512)
    assert len(units) == 1 and units[0].key == DEFAULT_KEY
    assert units[0].rate_rps == 1.0 and units[0].prefix_tokens == 0


def test_tenants_get_their_own_groups() -> None:
    reqs = [_req(i, [1, 2, 200 + i], tenant="a") for i in range(4)]
    reqs += [_req(10 + i, [1, 2, 300 + i], tenant="b") for i in range(4)]
    groups = find_groups(reqs, window_s=8.0, block_tokens=512, rule=GroupRule(min_saved_share=0.0))
    assert {g.tenant for g in groups} == {"a", "b"}


def test_one_request_longer_than_the_context_window_counts_only_up_to_it() -> None:
    # 19 ordinary requests and one of 9 million tokens: the unit's mean prompt stays what a
    # llama-3-8b replica can hold, so the tenant's ordinary traffic is not priced out with it
    reqs = [_req(i, [500 + i]) for i in range(19)]
    huge = _req(19, [999])
    huge.input_tokens = 9_000_000
    for r in [*reqs, huge]:
        r.model = "llama-3-8b"
    (unit,) = aggregate_demand([*reqs, huge], window_s=20.0, block_tokens=512)
    context = get_model("llama-3-8b").context_tokens
    assert unit.mean_input_tokens == pytest.approx((19 * 612 + context) / 20)
    assert unit.mean_input_tokens < context


def test_a_model_outside_the_catalogue_is_not_clipped() -> None:
    reqs = [_req(i, [500 + i]) for i in range(4)]
    reqs[0].input_tokens = 9_000_000
    (unit,) = aggregate_demand(reqs, window_s=4.0, block_tokens=512)
    assert unit.mean_input_tokens == pytest.approx((9_000_000 + 3 * 612) / 4)
