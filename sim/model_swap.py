"""Base-model swaps in the simulated fleet: the contract between a planner and the simulator.

A planner that decides which base model each replica holds (the bench loop's re-plan) is
handed a :class:`ModelSwitcher` (the simulator) through :meth:`SwitchesModels.bind_switcher`;
``switch_model`` starts a swap: the replica drains (its waiting requests are routed
elsewhere at once; running ones get :data:`~placement.domain.base_models.DRAIN_LIMIT_S` to
finish, then are retried elsewhere), loads the new weights
(:func:`~placement.domain.base_models.swap_load_s`) and serves the new model with an empty KV
cache and no adapter. Its :class:`~sim.router.ReplicaView` shows the new model with
``loading`` set from the start of the drain to the end of the load. Every stage is recorded
as a :class:`ModelEvent`, so residency over time can be plotted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

Stage = Literal["drain", "load", "serve"]


@dataclass(frozen=True, slots=True)
class ModelEvent:
    """Replica ``replica`` entered ``stage`` of a swap to ``model`` at ``time_s``."""

    time_s: float
    replica: int
    model: str
    stage: Stage


class ModelSwitcher(Protocol):
    def switch_model(self, replica: int, model: str, now: float) -> bool:
        """Start swapping ``replica`` to ``model``; False when it holds it or is swapping."""
        ...


@runtime_checkable
class SwitchesModels(Protocol):
    """A routing policy that moves base models (the simulator binds itself at the start)."""

    def bind_switcher(self, switcher: ModelSwitcher) -> None: ...
