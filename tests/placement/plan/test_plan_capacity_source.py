"""A plan's capacity_source names the model version behind its capacities; older plans, which
named only the alias, still load and read."""

from __future__ import annotations

import pytest
from plan_builders import make_plan

from placement.plan import Plan
from placement.plan.capacity_source import ModelSource, model_source, parse_model_source


def test_a_champion_source_records_the_version_and_the_alias() -> None:
    source = model_source("placement-latency", "3", "champion")
    assert source == "models:/placement-latency/3 (@champion)"
    assert parse_model_source(source) == ModelSource("placement-latency", 3, "champion")


@pytest.mark.parametrize(
    ("source", "parsed"),
    [
        ("models:/placement-latency/12", ModelSource("placement-latency", 12, None)),
        ("models:/placement-latency@champion", ModelSource("placement-latency", None, "champion")),
        ("roofline-prior", None),
        ("fixed", None),
        ("models:/placement-latency/3 (@champion", None),
    ],
)
def test_sources_read_as_a_model_version_or_none(source: str, parsed: ModelSource | None) -> None:
    assert parse_model_source(source) == parsed


@pytest.mark.parametrize(
    "source", ["models:/placement-latency@champion", "models:/placement-latency/3 (@champion)"]
)
def test_plans_with_either_form_stay_valid(source: str) -> None:
    plan = make_plan(capacity_source=source)
    again = Plan.from_json(plan.to_json())
    assert again.capacity_source == source
