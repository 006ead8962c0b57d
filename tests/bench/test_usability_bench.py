"""The first-hour benchmark runs the real commands and reads real figures."""

from __future__ import annotations

import subprocess
import time

import pytest

from bench.usability import _wait_ready, free_port, measure_help, measure_service


def test_help_is_timed_from_the_real_command() -> None:
    help_s, cpu_s = measure_help(1)
    assert 0.0 < help_s < 60.0
    assert 0.0 < cpu_s < 60.0  # the command's own CPU, not this process's


def test_the_demo_service_gets_ready_and_its_idle_cost_is_measured() -> None:
    figures = measure_service(idle_s=1.0)
    assert 0.0 < figures.ready_s < 180.0
    # the demo's worker solves its first plan after ready: idle is measured once it is in
    assert figures.first_plan_s is not None and figures.first_plan_s >= figures.ready_s
    for share in (figures.settling_cpu_share, figures.idle_cpu_share):
        assert 0.0 <= share < 2.5  # a share of one core on a two-core machine


def test_a_service_that_exits_is_reported_not_waited_for() -> None:
    child = subprocess.Popen(["false"])
    child.wait()
    with pytest.raises(RuntimeError, match="exited"):
        _wait_ready(child, free_port(), time.perf_counter())
