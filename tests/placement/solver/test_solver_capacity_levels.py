"""Capacity tables at the SLO levels of the classes planned for: a class tighter than every
default level finds its own level, not an error."""

from __future__ import annotations

from pathlib import Path

import pytest

from models.capacity import DEFAULT_SLOS, Slo
from placement.domain.fleet import fleet_from_dict
from placement.domain.requests import DEFAULT_CLASSES, Request, RequestClass, Tenant
from placement.errors import InputError
from placement.solver.capacity import TableCapacity, class_slos
from placement.solver.instance import build_instance
from training.tracking import TRACKING_URI_ENV

TIGHT = RequestClass(
    name="interactive", priority=0, ttft_slo_s=0.5, tpot_slo_s=0.04, sheddable=False
)


def test_the_default_classes_need_only_the_default_levels() -> None:
    assert class_slos(DEFAULT_CLASSES) == DEFAULT_SLOS


def test_a_tight_class_adds_its_own_level_tightest_first() -> None:
    levels = class_slos({**DEFAULT_CLASSES, "interactive": TIGHT})
    assert levels[0] == Slo(0.5, 0.04) and set(DEFAULT_SLOS) <= set(levels)


def test_a_table_at_the_tight_level_has_less_capacity_than_at_the_loose_ones() -> None:
    plain = TableCapacity(None, "roofline-prior").table("H100-SXM", "llama-3-8b", 1)
    with pytest.raises(InputError) as err:
        plain.slo_index(Slo(0.5, 0.04))
    assert err.value.field == "slo"
    levels = class_slos([TIGHT, *DEFAULT_CLASSES.values()])
    table = TableCapacity(None, "roofline-prior", slos=levels).table("H100-SXM", "llama-3-8b", 1)
    tight = table.lookup(1000, 200, table.slo_index(Slo(0.5, 0.04)))
    loose = table.lookup(1000, 200, table.slo_index(Slo(2.0, 0.1)))
    assert 0 < tight < loose


def test_an_instance_of_a_tight_class_gets_tables_at_its_level(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TRACKING_URI_ENV, f"sqlite:///{tmp_path / 'mlflow.db'}")  # no champion
    fleet = fleet_from_dict(
        {
            "name": "t",
            "replicas": [
                {"kind": "h", "accelerator": "H100-SXM", "count": 1, "model": "llama-3-8b"}
            ],
        }
    )
    requests = [Request(i, float(i), 1000, 100, tenant="a") for i in range(10)]
    classes = {**DEFAULT_CLASSES, "interactive": TIGHT}
    inst = build_instance(fleet, requests, {"a": Tenant(name="a")}, classes)
    loose = build_instance(fleet, requests, {"a": Tenant(name="a")})
    assert 0 < inst.capacity[0, 0] < loose.capacity[0, 0]
