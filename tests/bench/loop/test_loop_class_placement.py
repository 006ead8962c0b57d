"""Which accelerators served which class: the figures and the plot."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.loop.class_placement import (
    REFUSED,
    class_placement_figures,
    plot_class_placement,
    several_classes_on_several_kinds,
)
from placement.domain.fleet import load_fleet
from placement.domain.requests import DEFAULT_CLASSES, Request
from placement.paths import repo_root
from sim.simulator import SimResult

FLEET = load_fleet(repo_root() / "data" / "fleets" / "hetero.yaml")
KIND = [r.accelerator.kind for r in FLEET.replicas]


def _served(i: int, cls: str, replica: int, ttft: float) -> Request:
    r = Request(i, float(i), 100, 11, request_class=cls)
    r.replica = replica
    r.first_token_s = r.arrival_s + ttft
    r.finish_s = r.first_token_s + 0.1
    return r


def _result() -> SimResult:
    h100, l40s = KIND.index("H100-SXM"), KIND.index("L40S")
    requests = [
        _served(0, "interactive", h100, 0.1),  # meets 2 s
        _served(1, "interactive", l40s, 3.0),  # misses
        _served(2, "batch", l40s, 3.0),  # meets 30 s
        _served(3, "batch", l40s, 3.0),
    ]
    refused = Request(4, 4.0, 100, 11, request_class="interactive")
    refused.error = "refused"
    requests.append(refused)
    return SimResult(
        policy="x",
        workload="w",
        fleet=FLEET,
        requests=requests,
        replicas=[],
        end_s=5.0,
        wall_s=0.0,
        events=0,
        refused=1,
        retries=0,
    )


def test_figures_give_each_class_its_kinds_shares_and_attainment() -> None:
    got = class_placement_figures(_result(), DEFAULT_CLASSES)
    inter, batch = got["interactive"], got["batch"]
    assert inter["H100-SXM"] == {"requests": 1, "share": pytest.approx(1 / 3), "attainment": 1.0}
    assert inter["L40S"]["attainment"] == 0.0 and inter[REFUSED]["requests"] == 1
    assert batch == {"L40S": {"requests": 2, "share": 1.0, "attainment": 1.0}}


def test_the_plot_is_written_for_several_classes_on_several_kinds(tmp_path: Path) -> None:
    runs = [("ours", _result()), ("peer", _result())]
    assert several_classes_on_several_kinds(runs)
    path = tmp_path / "placed.png"
    plot_class_placement(runs, DEFAULT_CLASSES, path, title="t")
    assert path.stat().st_size > 0
    one_class = _result()
    one_class.requests = [r for r in one_class.requests if r.request_class == "batch"]
    assert not several_classes_on_several_kinds([("ours", one_class)])
