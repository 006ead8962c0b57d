"""``placement bench e2e``'s options for how our routers run: the SLO gate's headroom (the knob
tuned on the trace's head) and the gate off, reaching the comparison's options; a bad value is a
one-line error naming the flag."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import bench.e2e
from bench.e2e import E2EOptions
from bench.e2e.operated import SLO_GATE_HEADROOM
from placement.cli import app


def _options_given(monkeypatch: pytest.MonkeyPatch, args: list[str], out: Path) -> E2EOptions:
    seen: list[E2EOptions] = []

    def fake_run(options: E2EOptions, *, out: Path | None = None) -> dict[str, Any]:
        seen.append(options)
        return {}

    monkeypatch.setattr(bench.e2e, "run_e2e_bench", fake_run)
    result = CliRunner().invoke(app, ["bench", "e2e", "--out", str(out), *args])
    assert result.exit_code == 0, result.output
    (options,) = seen
    return options


def test_the_headroom_and_the_gate_reach_our_routers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "e2e.json"
    default = _options_given(monkeypatch, [], out).ours
    assert default.slo_gate and default.slo_gate_headroom == SLO_GATE_HEADROOM
    tuned = _options_given(monkeypatch, ["--slo-gate-headroom", "1.5"], out).ours
    assert tuned.slo_gate and tuned.planner and tuned.slo_gate_headroom == 1.5
    off = _options_given(monkeypatch, ["--no-slo-gate"], out).ours
    assert off.planner and not off.slo_gate


@pytest.mark.parametrize("value", ["0", "-1"])
def test_a_headroom_not_above_zero_is_refused_naming_the_flag(tmp_path: Path, value: str) -> None:
    result = CliRunner().invoke(
        app, ["bench", "e2e", "--out", str(tmp_path / "e.json"), "--slo-gate-headroom", value]
    )
    assert result.exit_code == 2
    assert "--slo-gate-headroom" in result.output
    assert "Traceback" not in result.output
