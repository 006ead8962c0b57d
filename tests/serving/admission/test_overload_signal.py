from __future__ import annotations

from serving.admission.overload_signal import FLEET, OverloadSignal, PoolSignals


def test_each_model_has_its_own_signal_created_quiet() -> None:
    signals = PoolSignals()
    big = signals.of("llama-3-70b")
    assert big == OverloadSignal(pressure=0.0, ttft_pressure=0.0, at=None)
    big.pressure = 0.4
    assert signals.of("llama-3-70b") is big
    assert signals.of("llama-3-8b").pressure == 0.0
    assert signals.pressures() == {FLEET: 0.0, "llama-3-70b": 0.4, "llama-3-8b": 0.0}


def test_one_signal_for_the_fleet_when_not_by_model() -> None:
    signals = PoolSignals(by_model=False)
    assert signals.of("llama-3-70b") is signals.of("llama-3-8b") is signals.of(FLEET)
    signals.of("qwen2-7b").ttft_pressure = 0.2
    assert signals.of("llama-3-70b").ttft_pressure == 0.2
    assert list(signals.pressures()) == [FLEET]
