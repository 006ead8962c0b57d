"""The loader's last phase: every name a scenario uses resolved, every contradiction refused.

Cases are checked by building their inputs exactly as a worker will (fleet, tenants, classes,
demand), so a scenario that passes here does not fail on a worker for a name; what is left for
the workers is the solving.
"""

from __future__ import annotations

from placement.domain.accelerators import get_accelerator
from placement.domain.llm import get_model
from placement.errors import InputError
from placement.whatif.accelerators import check_new_kinds, scenario_accelerators
from placement.whatif.inputs import case_inputs
from placement.whatif.scenario import CapacityQuestion, Case, Scenario
from sim.workloads.registry import WORKLOADS


def _check_capacity_question(q: CapacityQuestion, scenario: Scenario) -> None:
    src, where = scenario.source, "capacity_question"
    kinds: list[str] = []
    for i, name in enumerate(q.candidates):
        kind = get_accelerator(name, source=src, field=f"{where}.candidates.{i}").kind
        if kind in kinds:
            raise InputError(
                f"candidate {name!r} is listed twice", source=src, field=f"{where}.candidates.{i}"
            )
        kinds.append(kind)
    if q.model is not None:
        get_model(q.model, source=src, field=f"{where}.model")
    elif len({g.get("model") for g in scenario.fleet.get("replicas", [])}) != 1:
        raise InputError(
            "the base fleet serves several models: say which",
            source=src,
            field=f"{where}.model",
        )
    for table_name, table in (("min_count", q.min_count), ("max_count", q.max_count)):
        for name, n in table.items():
            field = f"{where}.{table_name}.{name}"
            kind = get_accelerator(name, source=src, field=field).kind
            if kind not in kinds:
                raise InputError(
                    f"{name!r} is not a candidate",
                    source=src,
                    field=field,
                    expected="one of " + ", ".join(kinds),
                )
            if n < 0:
                raise InputError(f"{n}", source=src, field=field, expected="a count ≥ 0")
    canon_max = {get_accelerator(k).kind: v for k, v in q.max_count.items()}
    for name, lo in q.min_count.items():
        kind = get_accelerator(name).kind
        hi = canon_max.get(kind, max(q.default_max_count, lo))
        if lo > hi:
            raise InputError(
                f"min_count {lo} > max_count {hi} for {kind}",
                source=src,
                field=f"{where}.min_count.{name}",
                expected="min_count ≤ max_count",
            )
    if all(canon_max.get(k, q.default_max_count) == 0 for k in kinds):
        raise InputError("every candidate's max_count is 0", source=src, field=f"{where}.max_count")
    if q.changes.add_replicas or q.changes.remove_replicas:
        raise InputError(
            "the capacity question chooses the fleet itself",
            source=src,
            field=f"{where}.changes.add_replicas"
            if q.changes.add_replicas
            else f"{where}.changes.remove_replicas",
            expected="only demand, slos and tenants changes",
        )
    case_inputs(
        scenario,
        Case(name="capacity_question", changes=q.changes, where=f"{where}.changes"),
        fleet_changes=False,
    )


def validate_scenario(scenario: Scenario) -> None:
    """Raise an :class:`InputError` naming the field of the first problem found."""
    src = scenario.source
    check_new_kinds(scenario.accelerators, source=src)
    if scenario.workload not in WORKLOADS:
        raise InputError(
            f"unknown workload {scenario.workload!r}",
            source=src,
            field="base.workload",
            expected="one of " + ", ".join(WORKLOADS),
        )
    with scenario_accelerators(scenario.accelerators):
        for name in scenario.fixed_capacity or {}:
            get_accelerator(name, source=src, field=f"base.fixed_capacity.{name}")
        for case in scenario.cases:
            case_inputs(scenario, case)
        if scenario.capacity_question is not None:
            _check_capacity_question(scenario.capacity_question, scenario)
