"""The SLO gate's settings past capacity (what ``placement bench loop`` tunes on a trace's head)
reach the gate the service builds, and a bad one is refused naming its variable."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement.errors import InputError
from serving.admission.slo_gate import DEFAULT_OVERLOAD_REFUSE_AT
from serving.api.settings import load_settings
from serving.wiring import build_app


def test_the_gate_is_built_with_the_overload_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PLACEMENT_SLO_GATE_STRICT_REFUSE_AT", "0.3")
    monkeypatch.setenv("PLACEMENT_SLO_GATE_COLD_MOVE_TTFT_SHARE", "0.75")
    monkeypatch.setenv("PLACEMENT_SLO_GATE_TPOT_BY_WORK", "1")
    monkeypatch.setenv("PLACEMENT_SLO_GATE_TPOT_COMPUTED", "1")
    monkeypatch.setenv("PLACEMENT_SLO_GATE_TPOT_SHED_FROM", "0.05")
    monkeypatch.setenv("PLACEMENT_SLO_GATE_PRESSURE_BY_MODEL", "1")
    monkeypatch.setenv("PLACEMENT_SLO_GATE_CREDIT_RESERVE", "0.5")
    monkeypatch.setenv("PLACEMENT_SLO_GATE_SHARE_CAP", "1.5")
    monkeypatch.setenv("PLACEMENT_SLO_GATE_SHARE_WINDOW_S", "45")
    monkeypatch.setenv("PLACEMENT_SLO_GATE_SLOT_TURN_S", "1.5")
    settings = load_settings(environment="development", slo_gate=True, plan_dir=tmp_path)
    gate = build_app(settings).state.runtime.service.slo_gate
    assert gate is not None
    assert gate.overload_refuse_at == DEFAULT_OVERLOAD_REFUSE_AT
    assert (gate.strict_refuse_at, gate.cold_move_ttft_share) == (0.3, 0.75)
    assert gate.tpot_by_work
    assert gate.tpot_computed
    assert gate.tpot_shed_from == 0.05
    assert gate.signals.by_model
    assert gate.credit_reserve == 0.5
    assert gate.share_cap is not None
    assert (gate.share_cap.cap, gate.share_cap.window_s) == (1.5, 45.0)
    assert gate.slot_turn_s == 1.5
    # by default neither the strict regime, the cold-move rule nor the TPOT forecast by work
    # is on, nor the overload signals per model pool
    plain = build_app(
        load_settings(
            environment="development",
            slo_gate=True,
            plan_dir=tmp_path,
            slo_gate_strict_refuse_at=None,
            slo_gate_cold_move_ttft_share=None,
            slo_gate_tpot_by_work=False,
            slo_gate_tpot_computed=False,
            slo_gate_tpot_shed_from=None,
            slo_gate_pressure_by_model=False,
            slo_gate_credit_reserve=0.0,
            slo_gate_share_cap=None,
            slo_gate_slot_turn_s=None,
        )
    ).state.runtime.service.slo_gate
    assert plain is not None
    assert (plain.strict_refuse_at, plain.cold_move_ttft_share) == (None, None)
    assert not plain.tpot_by_work
    assert not plain.tpot_computed
    assert plain.tpot_shed_from is None
    assert not plain.signals.by_model
    assert plain.credit_reserve == 0.0
    assert plain.share_cap is None
    assert plain.slot_turn_s is None


@pytest.mark.parametrize(
    ("overrides", "variable"),
    [
        ({"slo_gate_strict_refuse_at": 0.6}, "PLACEMENT_SLO_GATE_STRICT_REFUSE_AT"),
        ({"slo_gate_overload_refuse_at": 0.0}, "PLACEMENT_SLO_GATE_OVERLOAD_REFUSE_AT"),
        ({"slo_gate_overload_refuse_at": 0.95}, "PLACEMENT_SLO_GATE_OVERLOAD_REFUSE_AT"),
        ({"slo_gate_cold_move_ttft_share": -1.0}, "PLACEMENT_SLO_GATE_COLD_MOVE_TTFT_SHARE"),
        ({"slo_gate_tpot_shed_from": 1.5}, "PLACEMENT_SLO_GATE_TPOT_SHED_FROM"),
        ({"slo_gate_credit_reserve": 1.0}, "PLACEMENT_SLO_GATE_CREDIT_RESERVE"),
        ({"slo_gate_share_cap": 0.8}, "PLACEMENT_SLO_GATE_SHARE_CAP"),
        ({"slo_gate_share_window_s": 0.0}, "PLACEMENT_SLO_GATE_SHARE_WINDOW_S"),
        ({"slo_gate_slot_turn_s": 0.0}, "PLACEMENT_SLO_GATE_SLOT_TURN_S"),
    ],
)
def test_a_bad_overload_setting_names_its_variable(
    overrides: dict[str, float], variable: str
) -> None:
    with pytest.raises(InputError) as err:
        load_settings(environment="development", **overrides)
    assert variable in str(err.value)


def test_slot_turns_without_a_share_cap_are_refused_naming_both_variables() -> None:
    with pytest.raises(InputError, match="PLACEMENT_SLO_GATE_SHARE_CAP"):
        load_settings(environment="development", slo_gate_slot_turn_s=1.0, slo_gate_share_cap=None)
