"""A replica's LoRA adapter slots: which adapters are resident, loading and evicting them.

vLLM keeps at most ``max_loras`` adapters in GPU slots; its scheduler admits a waiting request
only if the request's adapter is in a slot or a slot can take it (one whose adapter no running
request uses), and leaves the others waiting in order. Loading evicts the least recently used
idle adapter and stalls the engine for the adapter's load time
(:func:`placement.domain.adapters.lora_load_s`). Every load and eviction is recorded with its
time, so residency over time can be plotted.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass

from placement.domain.adapters import DEFAULT_LORA_LOAD_FIXED_S, LoraAdapter, lora_load_s
from placement.domain.fleet import ReplicaSpec


@dataclass(frozen=True, slots=True)
class ResidencyEvent:
    """An adapter loaded into (``loaded``) or evicted from a replica's slots at ``time_s``."""

    time_s: float
    replica: int
    adapter: str
    loaded: bool


class AdapterSlots:
    """``slots`` GPU slots; ``load_s[name]`` is the seconds each known adapter takes to load."""

    def __init__(self, replica: int, slots: int, load_s: Mapping[str, float]) -> None:
        self.replica = replica
        self.slots = slots
        self.load_s = load_s
        # resident adapters, least recently used first, with how many running requests use each
        self._users: OrderedDict[str, int] = OrderedDict()
        self.loads = 0
        self.events: list[ResidencyEvent] = []

    @property
    def resident(self) -> tuple[str, ...]:
        return tuple(self._users)

    def active(self) -> tuple[str, ...]:
        """Adapters with running requests (vLLM's ``running_lora_adapters``)."""
        return tuple(a for a, n in self._users.items() if n)

    def acquire(self, adapter: str, now: float) -> float | None:
        """A request for ``adapter`` is admitted: the load seconds it costs (0 when resident),
        or None when every slot holds an adapter in use (the request must wait)."""
        users = self._users
        if adapter in users:
            users[adapter] += 1
            users.move_to_end(adapter)
            return 0.0
        if len(users) >= self.slots:
            idle = next((a for a, n in users.items() if n == 0), None)
            if idle is None:
                return None
            del users[idle]
            self.events.append(ResidencyEvent(now, self.replica, idle, False))
        users[adapter] = 1
        self.loads += 1
        self.events.append(ResidencyEvent(now, self.replica, adapter, True))
        return self.load_s.get(adapter, DEFAULT_LORA_LOAD_FIXED_S)

    def release(self, adapter: str) -> None:
        """A request for ``adapter`` left the running batch (finished or preempted)."""
        if adapter in self._users and self._users[adapter] > 0:
            self._users[adapter] -= 1

    def clear(self, now: float) -> None:
        """The replica died: its slots are empty."""
        for a in self._users:
            self.events.append(ResidencyEvent(now, self.replica, a, False))
        self._users.clear()


def load_times(spec: ReplicaSpec, adapters: Mapping[str, LoraAdapter]) -> dict[str, float]:
    """Load seconds of each of ``adapters`` on ``spec``'s base model (others: none)."""
    return {
        name: lora_load_s(spec.model, a.rank, gbps=spec.lora_load_gbps)
        for name, a in adapters.items()
        if a.base == spec.model.name
    }
