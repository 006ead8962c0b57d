"""assemble / merge: the ordering, re-timing and id promises every loader relies on."""

from __future__ import annotations

import gc

from placement.domain.requests import Tenant
from sim.workloads.assemble import assemble, merge
from sim.workloads.base import Workload


def build(name: str, arrivals: list[float], tenant: str) -> Workload:
    return assemble(
        name,
        arrival_s=arrivals,
        input_tokens=[10 + i for i in range(len(arrivals))],
        output_tokens=[1] * len(arrivals),
        tenant_index=[0] * len(arrivals),
        tenant_names=[tenant],
        class_index=[0] * len(arrivals),
        class_names=["interactive"],
        tenants={tenant: Tenant(name=tenant)},
    )


def test_assemble_sorts_stably_retimes_and_numbers() -> None:
    workload = assemble(
        "t",
        arrival_s=[7.0, 5.0, 5.0, 6.0],
        input_tokens=[1, 2, 3, 4],
        output_tokens=[0, 0, 0, 0],
        tenant_index=[0, 1, 0, 1],
        tenant_names=["a", "b"],
        class_index=[1, 0, 0, 0],
        class_names=["interactive", "batch"],
        tenants={},
        block_hashes=[(1,), (2,), (3,), (4,)],
        limit=3,
    )
    assert [r.input_tokens for r in workload.requests] == [2, 3, 4]
    assert [r.arrival_s for r in workload.requests] == [0.0, 0.0, 1.0]
    assert [r.id for r in workload.requests] == [0, 1, 2]
    assert [r.tenant for r in workload.requests] == ["b", "a", "b"]
    assert [r.block_hashes for r in workload.requests] == [(2,), (3,), (4,)]
    assert gc.isenabled()


def test_merge_interleaves_by_arrival_with_fresh_ids() -> None:
    first = build("x", [0.0, 2.0, 4.0], "x")
    second = build("y", [0.0, 1.0, 5.0], "y")
    merged = merge("xy", [first, second], {"x": Tenant(name="x"), "y": Tenant(name="y")})
    assert [(r.tenant, r.arrival_s) for r in merged.requests] == [
        ("x", 0.0),
        ("y", 0.0),
        ("y", 1.0),
        ("x", 2.0),
        ("x", 4.0),
        ("y", 5.0),
    ]
    assert [r.id for r in merged.requests] == list(range(6))
    assert set(merged.tenants) == {"x", "y"}
