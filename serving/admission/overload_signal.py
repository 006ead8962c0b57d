"""The SLO gate's overload signal, one per model pool.

The gate reads a fleet past its capacity off the share of its own SLO refusals, averaged
over the tightest TTFT SLO (:mod:`serving.admission.slo_gate`, "Overload"), and the share of
those led by the first token (its strict regime). A request can only go to the replicas that
serve its model — its model's pool — so what overloads one pool says nothing about another's
room: on ``multi-model`` (eight 1-H100 replicas for the 7–8B models beside two 70B TP4
replicas) one fleet-wide signal, set by the 7–8B pool's overload, made the gate refuse 70B
requests at its overload threshold while the 70B pool had room (bench/RESULTS.md). So the
gate keeps one signal per model, and judges each request by its model's.
"""

from __future__ import annotations

from dataclasses import dataclass

# the signal of requests that name no model, and of every request when the gate keeps one
# signal for the whole fleet
FLEET = ""


@dataclass(slots=True)
class OverloadSignal:
    """One pool's overload signal: the share of SLO refusals (``pressure``), the share of
    refusals led by the first token (``ttft_pressure``), both averaged in time, and the time
    of their last update (``at``; None before the first)."""

    pressure: float = 0.0
    ttft_pressure: float = 0.0
    at: float | None = None


class PoolSignals:
    """The overload signal of each model's pool (``by_model``), or one for the fleet."""

    def __init__(self, *, by_model: bool = True) -> None:
        self.by_model = by_model
        self._signals: dict[str, OverloadSignal] = {FLEET: OverloadSignal()}

    def of(self, model: str) -> OverloadSignal:
        """The signal a request for ``model`` is judged by (created quiet when first asked)."""
        key = model if self.by_model else FLEET
        signal = self._signals.get(key)
        if signal is None:
            signal = self._signals[key] = OverloadSignal()
        return signal

    def pressures(self) -> dict[str, float]:
        """Each pool's share of SLO refusals, by model (:data:`FLEET`: the fleet's, or that of
        requests without a model)."""
        return {model: s.pressure for model, s in self._signals.items()}
