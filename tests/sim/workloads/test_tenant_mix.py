"""Tenant mixes: a tenants file whose tenants each send the requests of their own source."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from placement.domain.tenancy import load_tenancy, tenancy_from_dict
from placement.errors import InputError
from placement.paths import repo_root
from sim.workloads.tenant_mix import tenant_mix

TENANTS = repo_root() / "data" / "tenants"
SPAN_S = 300.0


def _by_tenant(path: Path) -> dict[str, dict[str, float]]:
    w = tenant_mix(load_tenancy(path), name=path.stem, duration_s=SPAN_S)
    out: dict[str, dict[str, float]] = {}
    for t in sorted(w.tenants):
        mine = [r for r in w.requests if r.tenant == t]
        out[t] = {
            "n": len(mine),
            "prompt": float(np.mean([r.input_tokens for r in mine])),
            "output": float(np.median([r.output_tokens for r in mine])),
        }
    assert sum(int(v["n"]) for v in out.values()) == len(w.requests)
    return out


def test_reasoning_and_code_differ_by_an_order_of_magnitude_in_their_outputs() -> None:
    shape = _by_tenant(TENANTS / "reason-code.yaml")
    assert shape["reasoning"]["output"] > 10 * shape["code"]["output"]
    # request counts in the traffic shares' ratio (0.15 : 0.85)
    share = shape["reasoning"]["n"] / (shape["reasoning"]["n"] + shape["code"]["n"])
    assert share == pytest.approx(0.15, abs=0.01)


def test_long_documents_beside_chat_differ_by_an_order_of_magnitude_in_their_prompts() -> None:
    shape = _by_tenant(TENANTS / "chat-longdoc-code.yaml")
    assert set(shape) == {"chat", "longdoc", "code"}
    assert shape["longdoc"]["prompt"] > 5 * shape["chat"]["prompt"]
    assert shape["chat"]["output"] > 5 * shape["code"]["output"]


def test_the_same_seed_gives_the_same_mix() -> None:
    tenancy = load_tenancy(TENANTS / "reason-code.yaml")
    a = tenant_mix(tenancy, name="m", seed=4, duration_s=120.0)
    b = tenant_mix(tenancy, name="m", seed=4, duration_s=120.0)
    assert [(r.arrival_s, r.tenant, r.input_tokens) for r in a.requests] == [
        (r.arrival_s, r.tenant, r.input_tokens) for r in b.requests
    ]


@pytest.mark.parametrize(
    ("tenants", "field"),
    [
        ({"a": {"source": "nope"}, "b": {"source": "azure-code"}}, "tenants.a.source"),
        ({"a": {"source": "azure-code"}, "b": {"source": "azure-code"}}, "tenants"),
    ],
)
def test_bad_sources_name_the_field(tenants: dict[str, dict[str, str]], field: str) -> None:
    with pytest.raises(InputError) as err:
        tenant_mix(tenancy_from_dict({"tenants": tenants}), name="m", duration_s=60.0)
    assert err.value.field == field


def test_a_source_for_some_tenants_only_names_the_first_without() -> None:
    with pytest.raises(InputError) as err:
        tenancy_from_dict({"tenants": {"a": {"source": "azure-code"}, "b": {}}})
    assert err.value.field == "tenants.b.source"


def test_a_tenants_file_with_sources_is_the_loops_workload() -> None:
    from bench.loop.cases import build_cases

    root = repo_root()
    (case,) = build_cases(
        workloads="ignored",
        fleets=f"{root}/data/fleets/hetero.yaml",
        tenants=TENANTS / "reason-code.yaml",
        loads=(1.0,),
        peers=("round_robin",),
        duration_s=120.0,
        period_s=10.0,
        learn=False,
        seed=0,
    )
    assert case.workload.name == "reason-code"
    assert {t: x.credit_share for t, x in case.workload.tenants.items()} == {
        "reasoning": 0.5,
        "code": 0.5,
    }
