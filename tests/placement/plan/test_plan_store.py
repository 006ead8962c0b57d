from __future__ import annotations

from pathlib import Path

import pytest
from plan_builders import make_plan

from placement.errors import InputError
from placement.plan.schema import Plan
from placement.plan.store import DirectoryPlanStore, PlanStore, read_plan


def _v(version: int) -> Plan:
    return make_plan(version=version)


def test_round_trip_and_latest(tmp_path: Path) -> None:
    store: PlanStore = DirectoryPlanStore(tmp_path / "plans")
    assert store.latest() is None
    store.put(_v(1))
    store.put(_v(2))
    assert store.get(1) == _v(1)
    latest = store.latest()
    assert latest is not None and latest.version == 2
    assert (tmp_path / "plans" / "plan-00000002.json").exists()
    assert (tmp_path / "plans" / "latest").read_text().strip() == "plan-00000002.json"
    assert not list((tmp_path / "plans").glob("*.tmp"))  # nothing left half-written


def test_a_published_version_is_immutable(tmp_path: Path) -> None:
    store = DirectoryPlanStore(tmp_path)
    store.put(_v(1))
    with pytest.raises(InputError, match="already published"):
        store.put(_v(1))


def test_bad_plan_file_names_the_field(tmp_path: Path) -> None:
    p = tmp_path / "plan.json"
    p.write_text(_v(1).to_json().replace('"version":1', '"version":0'))
    with pytest.raises(InputError, match="version"):
        read_plan(p)
    with pytest.raises(InputError, match="cannot read"):
        read_plan(tmp_path / "missing.json")
