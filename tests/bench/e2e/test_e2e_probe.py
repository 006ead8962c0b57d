"""The probe's row: added latency over the direct phase, and CPU per request less the quieter of
two idle samples (one taken while the planner solves would swallow the hop's own cost)."""

from __future__ import annotations

from typing import Any

import pytest

from bench.e2e import probe
from bench.e2e.routers import RouterStack


class _Stack(RouterStack):
    """CPU seconds as scripted: each read moves the counter on by the next step."""

    def __init__(self, steps: list[float]) -> None:
        super().__init__(name="gateway", urls=["http://127.0.0.1:1"])
        self.steps = steps
        self.total = 0.0

    def cpu_s(self) -> float:
        self.total += self.steps.pop(0)
        return self.total


def _phase(sent: int, latencies_s: list[float]) -> dict[str, Any]:
    return {"latencies": latencies_s, "failed": 0, "sent": sent, "wall_s": 10.0, "statuses": {}}


def test_busy_cpu_is_less_the_quieter_idle_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    async def fake_phase(*args: Any) -> dict[str, Any]:
        return _phase(5000, [0.042] * 10)

    clock = iter([0.0, 3.0, 100.0, 103.0])
    monkeypatch.setattr(probe, "open_loop_phase", fake_phase)
    monkeypatch.setattr(probe.time, "sleep", lambda s: None)
    monkeypatch.setattr(probe.time, "perf_counter", lambda: next(clock))
    # idle before: 0.6 s over 3 s (a solve), the phase 2.0 s, idle after: 0.3 s over 3 s
    stack = _Stack([0.0, 0.6, 0.0, 2.0, 0.0, 0.3])
    row = probe.probe_row(
        stack, "m", _phase(5000, [0.040] * 10), rate=500.0, duration_s=10.0, max_tokens=4
    )
    assert row["idle_cores"] == pytest.approx(0.1)
    assert row["cpu_us_per_request"] == pytest.approx(2.0 / 5000 * 1e6)
    assert row["cpu_us_per_request_busy"] == pytest.approx((2.0 - 0.1 * 10.0) / 5000 * 1e6)
    assert row["added_latency_p50_ms"] == pytest.approx(2.0)
