"""A plan says, per replica kind, where its engine timings come from."""

from __future__ import annotations

from pathlib import Path

import pytest
from catalogue_builders import restore_catalogue, write_catalogue

from placement.domain.catalogue import add_profile_folders
from placement.domain.fleet import fleet_from_dict
from placement.domain.prefix import chain_block_ids
from placement.domain.requests import DEFAULT_CLASSES, Request, Tenant
from placement.plan.schema import Plan
from placement.solver import FixedCapacity, build_instance, solve_plan
from sim.costmodel.profiles import profiles_root

__all__ = ["restore_catalogue"]


@pytest.mark.skipif(not profiles_root().is_dir(), reason="profiles missing")
@pytest.mark.usefixtures("restore_catalogue")
def test_plan_names_each_kinds_timing_source(tmp_path: Path) -> None:
    add_profile_folders([write_catalogue(tmp_path / "mine")])
    fleet = fleet_from_dict(
        {
            "name": "mixed",
            "replicas": [
                {"kind": "h100", "accelerator": "H100-SXM", "count": 1, "model": "llama-3-8b"},
                {"kind": "mi", "accelerator": "MI355X", "count": 1, "model": "llama-3-8b"},
            ],
        }
    )
    requests = [
        Request(
            i, i * 0.1, 800, 100, tenant="t", request_class="interactive", model="llama-3-8b",
            block_hashes=chain_block_ids([5_000_000 + i]),
        )
        for i in range(50)
    ]  # fmt: skip
    inst = build_instance(
        fleet,
        requests,
        {"t": Tenant(name="t", credit_share=1.0)},
        dict(DEFAULT_CLASSES),
        window_s=5.0,
        capacity=FixedCapacity({"H100-SXM": 10.0, "MI355X": 10.0}),
    )
    plan = solve_plan(inst, time_limit_s=5.0)
    by_kind = {t.accelerator: t for t in plan.timing_sources}
    assert by_kind["H100-SXM"].source == "profiles"
    assert by_kind["MI355X"].source == "roofline only"
    assert by_kind["MI355X"].model == "llama-3-8b" and by_kind["MI355X"].tp == 1
    again = Plan.from_json(plan.to_json())
    assert again.timing_sources == plan.timing_sources
    old = plan.to_dict()
    del old["timing_sources"]
    assert Plan.from_dict(old).timing_sources == ()
