"""The first-hour benchmark runs the real commands and reads real figures."""

from __future__ import annotations

import subprocess
import time

import pytest

from bench.usability import _wait_ready, free_port, measure_help, measure_service


def test_help_is_timed_from_the_real_command() -> None:
    help_s = measure_help(1)
    assert 0.0 < help_s < 60.0


def test_the_demo_service_gets_ready_and_its_idle_cost_is_measured() -> None:
    ready_s, idle = measure_service(idle_s=1.0)
    assert 0.0 < ready_s < 180.0
    assert 0.0 <= idle < 2.5  # a share of one core on a two-core machine


def test_a_service_that_exits_is_reported_not_waited_for() -> None:
    child = subprocess.Popen(["false"])
    child.wait()
    with pytest.raises(RuntimeError, match="exited"):
        _wait_ready(child, free_port(), time.perf_counter())
