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


def test_a_cached_prefix_is_free_to_compute_but_not_to_attend_over() -> None:
    fleet = load_fleet(repo_root() / "data" / "fleets" / "h100x8.yaml")
    table = EngineCapacity(fleet).table("H100-SXM", "llama-3-8b", 1)
    slo = table.slo_index(Slo(2.0, 0.1))
    fresh = table.lookup(1_000, 200, slo)  # 1k tokens, nothing before them
    after_doc = table.lookup_cached(1_000, 30_000, 200, slo)  # the same 1k after a 30k document
    whole = table.lookup(31_000, 200, slo)  # the document computed too
    assert whole < after_doc < fresh
    assert table.lookup_cached(1_000, 0, 200, slo) == fresh


def test_a_tight_tpot_slo_caps_the_decode_batch() -> None:
    fleet = load_fleet(repo_root() / "data" / "fleets" / "h100x8.yaml")
    table = EngineCapacity(fleet).table("H100-SXM", "llama-3-8b", 1)
    loose = table.lookup_cached(500, 30_000, 500, table.slo_index(Slo(2.0, 1.0)))
    tight = table.lookup_cached(500, 30_000, 500, table.slo_index(Slo(2.0, 0.03)))
    # long contexts slow every decode step: at 30 ms a token fewer sequences share one
    assert 0 < tight < loose
