"""The ``tiers`` workload: interactive and batch tenants of real traces, unequal credits."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from placement.domain.fleet import load_fleet
from sim.workloads.base import Workload
from sim.workloads.registry import WORKLOADS, load_workload
from sim.workloads.tiers import TIERS_FLEET, load_tiers


def test_tiers_is_a_registered_workload_of_interactive_and_batch_tenants() -> None:
    assert "tiers" in WORKLOADS
    w = load_workload("tiers", duration_s=120.0)
    classes = {t: {r.request_class for r in w.requests if r.tenant == t} for t in w.tenants}
    assert classes == {
        "chat": {"interactive"},
        "code": {"interactive"},
        "docs": {"batch"},
        "evals": {"batch"},
    }
    interactive, batch = w.classes["interactive"], w.classes["batch"]
    assert interactive.ttft_slo_s < 1.0 < 30.0 < batch.ttft_slo_s  # tight vs loose
    assert not interactive.sheddable and batch.sheddable
    credits = sorted(t.credit_share for t in w.tenants.values())
    assert len(set(credits)) == len(credits) and sum(credits) <= 1.0 + 1e-9  # unequal
    prompts = {
        t: float(np.median([r.input_tokens for r in w.requests if r.tenant == t]))
        for t in w.tenants
    }
    assert prompts["docs"] > 4 * prompts["chat"]  # long documents
    outputs = {
        t: float(np.median([r.output_tokens for r in w.requests if r.tenant == t]))
        for t in w.tenants
    }
    assert outputs["evals"] > 4 * outputs["chat"] > 4 * outputs["code"]


def test_tiers_runs_on_the_heterogeneous_fleet() -> None:
    fleet = load_fleet(TIERS_FLEET)
    costs = {r.accelerator.kind: r.cost_per_hour for r in fleet.replicas}
    assert len(costs) >= 3 and max(costs.values()) > 3 * min(costs.values())


def test_the_sources_come_from_the_callers_loader() -> None:
    asked: list[tuple[str, float]] = []

    def load(name: str, seed: int, span: float) -> Workload:
        asked.append((name, span))
        return load_workload("synthetic", seed=seed, duration_s=span)

    w = load_tiers(
        load, ("azure-conv", "azure-code", "mooncake", "servegen-reason"), seed=3, duration_s=30.0
    )
    assert sorted(n for n, _ in asked) == [
        "azure-code",
        "azure-conv",
        "mooncake",
        "servegen-reason",
    ]
    assert {s for _, s in asked} == {30.0}
    counts = Counter(r.tenant for r in w.requests)
    # request counts in the file's traffic shares (0.45 : 0.25 : 0.1 : 0.2)
    assert counts["chat"] / sum(counts.values()) == pytest.approx(0.45, abs=0.02)
