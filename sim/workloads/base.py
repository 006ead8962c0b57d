"""A workload: requests sorted by arrival, with the tenants and classes they name."""

from __future__ import annotations

from dataclasses import dataclass, field

from placement.domain.adapters import LoraAdapter
from placement.domain.requests import DEFAULT_CLASSES, Request, RequestClass, Tenant


@dataclass(kw_only=True)
class Workload:
    """Requests in arrival order plus what they refer to.

    ``block_tokens`` is the size of one prefix block in tokens (512 for Mooncake's hash_ids).
    """

    name: str
    requests: list[Request]
    tenants: dict[str, Tenant]
    classes: dict[str, RequestClass] = field(default_factory=lambda: dict(DEFAULT_CLASSES))
    block_tokens: int = 512
    adapters: dict[str, LoraAdapter] = field(default_factory=dict)  # LoRA adapters by name

    @property
    def duration_s(self) -> float:
        if not self.requests:
            return 0.0
        return self.requests[-1].arrival_s - self.requests[0].arrival_s

    def __len__(self) -> int:
        return len(self.requests)

    def scaled(self, rate: float) -> Workload:
        """The same requests arriving ``rate`` times as fast (fresh Request objects)."""
        if rate <= 0:
            raise ValueError("rate must be positive")
        reqs = [r.unserved(arrival_s=r.arrival_s / rate) for r in self.requests]
        return Workload(
            name=self.name,
            requests=reqs,
            tenants=self.tenants,
            classes=self.classes,
            block_tokens=self.block_tokens,
            adapters=self.adapters,
        )

    def window(self, start_s: float, end_s: float) -> Workload:
        """Requests arriving in [start_s, end_s), re-timed to start at 0 (fresh objects)."""
        reqs = [
            r.unserved(arrival_s=r.arrival_s - start_s)
            for r in self.requests
            if start_s <= r.arrival_s < end_s
        ]
        return Workload(
            name=self.name,
            requests=reqs,
            tenants=self.tenants,
            classes=self.classes,
            block_tokens=self.block_tokens,
            adapters=self.adapters,
        )

    def split(self, fraction: float) -> tuple[Workload, Workload]:
        """Split by time into a head (tuning) and a tail (reporting) — never by random rows."""
        if not self.requests:
            return self, self
        t0 = self.requests[0].arrival_s
        cut = t0 + fraction * self.duration_s
        return self.window(t0, cut), self.window(cut, float("inf"))
