"""Capacities at SLO from the promoted predictor: a plan solved for real records which version
of placement-latency produced them, and falls back to the roofline prior, saying so, when
nothing is promoted."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement.plan import Plan
from placement.plan.capacity_source import ROOFLINE_SOURCE, parse_model_source
from placement.solver import default_capacity
from training.tracking import CHAMPION, LATENCY_MODEL, TRACKING_URI_ENV


def test_a_plan_records_the_champion_version_that_produced_its_capacities(
    champion_plan: Plan,
) -> None:
    assert champion_plan.capacity_source == f"models:/{LATENCY_MODEL}/1 (@{CHAMPION})"
    source = parse_model_source(champion_plan.capacity_source)
    assert source is not None and (source.version, source.alias) == (1, CHAMPION)
    assert Plan.from_json(champion_plan.to_json()) == champion_plan  # a valid plan document


def test_without_a_champion_the_prior_is_used_and_the_reason_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TRACKING_URI_ENV, f"sqlite:///{tmp_path / 'mlflow.db'}")
    capacity = default_capacity()
    assert capacity.source == ROOFLINE_SOURCE
    assert CHAMPION in capacity.note
