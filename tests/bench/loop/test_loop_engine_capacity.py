from __future__ import annotations

from bench.loop.engine_capacity import EngineCapacity
from models.capacity import Slo
from placement.domain.fleet import load_fleet
from placement.paths import repo_root


def test_shorter_prompts_and_looser_slos_give_more_fluid_capacity() -> None:
    fleet = load_fleet(repo_root() / "data" / "fleets" / "h100x8.yaml")
    table = EngineCapacity(fleet).table("H100-SXM", "llama-3-8b", 1)
    slo = table.slo_index(Slo(2.0, 0.1))
    short, long_ = table.lookup(500, 200, slo), table.lookup(8000, 200, slo)
    assert short > long_ > 0
    # a prompt whose prefill alone takes longer than the TTFT SLO has no capacity at all
    assert table.lookup(100_000, 200, slo) == 0.0
    assert table.lookup(100_000, 200, table.slo_index(Slo(120.0, 0.1))) > 0
