"""Scenario loading: every refusal names the field; sweeps expand into cases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from placement.domain.accelerators import CATALOGUE
from placement.errors import InputError
from placement.whatif.load import load_scenario


def _refused(write: Any, d: dict[str, Any]) -> InputError:
    with pytest.raises(InputError) as info:
        load_scenario(write(d))
    return info.value


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (
            {"add_replicas": [{"accelerator": "Z9000", "count": 1}]},
            "cases.0.add_replicas.0.accelerator",
        ),
        ({"remove_replicas": [{"kind": "l40s", "count": 3}]}, "cases.0.remove_replicas.0.count"),
        ({"remove_replicas": [{"kind": "a100", "count": 1}]}, "cases.0.remove_replicas.0.kind"),
        (
            {"remove_replicas": [{"kind": "l40s", "accelerator": "L40S", "count": 1}]},
            "cases.0.remove_replicas.0",
        ),
        ({"tenants": {"nobody": {"credit_share": 0.1}}}, "cases.0.tenants.nobody"),
        ({"tenants": {"tenant-0": {"credit_share": 0.9}}}, "cases.0.tenants.tenant-0.credit_share"),
        (
            {"tenants": {"tenant-0": {"credit_share": 0.3, "burst_cap": 0.2}}},
            "cases.0.tenants.tenant-0.burst_cap",
        ),
        ({"demand": {"tenants": {"nobody": 2.0}}}, "cases.0.demand.tenants.nobody"),
        ({"demand": {"classes": {"realtime": 2.0}}}, "cases.0.demand.classes.realtime"),
        ({"slos": {"realtime": {"ttft_slo_s": 1.0}}}, "cases.0.slos.realtime"),
        ({"slos": {"interactive": {"ttft_slo_s": -1.0}}}, "cases.0.slos.interactive.ttft_slo_s"),
        ({"add_replica": []}, "cases.0.add_replica"),
    ],
)
def test_a_bad_case_is_refused_naming_its_field(
    doc: dict[str, Any], write: Any, change: dict[str, Any], field: str
) -> None:
    doc["cases"] = [{"name": "c", **change}]
    err = _refused(write, doc)
    assert err.field == field
    assert "scenario.yaml" in str(err)


def test_removing_every_replica_is_refused(doc: dict[str, Any], write: Any) -> None:
    doc["cases"] = [
        {
            "name": "empty",
            "remove_replicas": [
                {"accelerator": "H100-SXM", "count": 2},
                {"kind": "l40s", "count": 2},
            ],
        }
    ]
    assert _refused(write, doc).field == "cases.0.remove_replicas"


def test_unknown_workload_and_base_tenant_are_named(doc: dict[str, Any], write: Any) -> None:
    bad = {**doc, "base": {**doc["base"], "workload": "nope"}}
    assert _refused(write, bad).field == "base.workload"
    bad = {**doc, "base": {**doc["base"], "tenants": {"ghost": {"credit_share": 0.1}}}}
    assert _refused(write, bad).field == "base.tenants.ghost"


def test_a_new_accelerator_may_not_shadow_the_catalogue(doc: dict[str, Any], write: Any) -> None:
    doc["accelerators"] = [
        {"kind": "h100", "dense_bf16_tflops": 1, "hbm_gb": 80, "hbm_tbps": 1, "cost_per_hour": 1}
    ]
    assert _refused(write, doc).field == "accelerators.0.kind"


def test_capacity_question_contradictions(doc: dict[str, Any], write: Any) -> None:
    doc["capacity_question"] = {
        "candidates": ["H100-SXM", "L40S"],
        "min_count": {"L40S": 5},
        "max_count": {"L40S": 3},
    }
    assert _refused(write, doc).field == "capacity_question.min_count.L40S"
    doc["capacity_question"] = {"candidates": ["H100-SXM", "Z9000"]}
    assert _refused(write, doc).field == "capacity_question.candidates.1"
    doc["capacity_question"] = {"candidates": ["H100-SXM"], "max_count": {"L40S": 3}}
    assert _refused(write, doc).field == "capacity_question.max_count.L40S"


def test_sweep_expands_into_named_cases_after_the_base(doc: dict[str, Any], write: Any) -> None:
    doc["sweep"] = {
        "name": "h100s",
        "vary": "add_replicas.0.count",
        "values": [0, 1, 3],
        "template": {"add_replicas": [{"accelerator": "H100-SXM", "count": 0}]},
    }
    s = load_scenario(write(doc))
    assert [c.name for c in s.cases] == ["base", "h100s=0", "h100s=1", "h100s=3"]
    assert [c.changes.add_replicas[0].count for c in s.cases[1:]] == [0, 1, 3]
    assert s.cases[3].swept_value == 3


def test_sweep_path_outside_the_template_is_named(doc: dict[str, Any], write: Any) -> None:
    doc["sweep"] = {
        "vary": "add_replicas.2.count",
        "values": [1],
        "template": {"add_replicas": [{"accelerator": "H100-SXM", "count": 0}]},
    }
    assert _refused(write, doc).field == "sweep.vary"


def test_duplicate_case_names_are_refused(doc: dict[str, Any], write: Any) -> None:
    doc["cases"] = [{"name": "a"}, {"name": "a"}]
    assert _refused(write, doc).field == "cases.1.name"


def test_fleet_file_is_read_relative_to_the_scenario(
    doc: dict[str, Any], write: Any, tmp_path: Path
) -> None:
    (tmp_path / "f.yaml").write_text(
        "name: f\nreplicas:\n  - {kind: a, accelerator: A100-80G, count: 1, model: llama-3-8b}\n"
    )
    doc["base"]["fleet"] = "f.yaml"
    s = load_scenario(write(doc))
    assert s.fleet["name"] == "f"


def test_loading_leaves_the_catalogue_as_it_was(doc: dict[str, Any], write: Any) -> None:
    before = dict(CATALOGUE)
    doc["accelerators"] = [
        {"kind": "X1", "dense_bf16_tflops": 900, "hbm_gb": 96, "hbm_tbps": 4, "cost_per_hour": 3}
    ]
    doc["cases"] = [{"name": "x", "add_replicas": [{"accelerator": "X1", "count": 1}]}]
    load_scenario(write(doc))
    assert before == CATALOGUE


def test_the_attainment_model_is_one_the_solver_has(doc: dict[str, Any], write: Any) -> None:
    unset = load_scenario(write(doc))
    assert unset.attainment is None and unset.plan_attainment == "replica"
    pooled = {**doc, "base": {**doc["base"], "attainment": "pooled"}}
    assert load_scenario(write(pooled)).attainment == "pooled"
    bad = {**doc, "base": {**doc["base"], "attainment": "queue"}}
    assert _refused(write, bad).field == "base.attainment"
