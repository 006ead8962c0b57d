"""How fast a replica hands its LoRA slots over, as its engine reports them at each scrape.

The router's own book (:mod:`serving.route.adapter_slots`) counts a slot free when the last of an
adapter's requests past its first token ends; the engine does not hand slots over on that
schedule: vLLM lets the requests of an adapter in a slot pass those waiting for one, so an adapter
whose stream never pauses keeps its slot, and a slot the book counts free may be taken back by
the adapter's own next request. What the engine itself says is vLLM's ``vllm:lora_requests_info``
gauge: the adapters with running requests (``running_lora_adapters``) and those with requests
waiting and none running (``waiting_lora_adapters``), as of the last scrape. From two scrapes in a
row the router reads:

- a **handover**: an adapter listed waiting at the first and running at the second got a slot;
- **exposure**: the time between them, counted only while some adapter was listed waiting (a
  replica where none waits hands nothing over and says nothing of its rate).

The handover rate is the handovers over the exposure, both decayed with time constant
:data:`HORIZON_S` (the recent past weighs most). It is a censored count: an adapter still waiting
since ``t`` has waited at least ``now - t`` with no handover ahead of it, so the exposure runs on
up to ``now`` (not only to the last scrape), and the count is taken as the handovers seen plus
one (the next, not yet come) — a replica whose waiting list does not turn over reads slower and
slower, and one that has handed nothing over yet reads ``1 / exposure``, not free.

A new request for an adapter waits for no handover when the engine lists its adapter running,
or lists fewer running than the replica's slots and none waiting; else for one handover per
adapter listed waiting ahead of it (its own position in the list, or the whole list when its
adapter is not in it) and its own. Its expected wait is those handovers over the rate.

Replicas without slots (``max_loras`` 0) keep none of this.
"""

from __future__ import annotations

import math

HORIZON_S = 30.0  # the time constant over which handovers and exposure decay
_INF = float("inf")


class EngineSlots:
    """One replica's LoRA slot handovers, as read from its engine's scraped adapter lists."""

    __slots__ = ("_exposure", "_handovers", "_running", "_since", "_waiting", "at", "slots")

    def __init__(self, slots: int) -> None:
        if slots <= 0:
            raise ValueError(f"a replica with LoRA slots has at least one, not {slots}")
        self.slots = slots
        self.at = -_INF  # the time of the last scrape read
        self._running: frozenset[str] = frozenset()
        self._waiting: tuple[str, ...] = ()
        self._since: dict[str, float] = {}  # adapter listed waiting -> first scrape listing it
        self._handovers = 0.0  # decayed
        self._exposure = 0.0  # decayed seconds with some adapter waiting, up to ``at``

    def scraped(self, running: tuple[str, ...], waiting: tuple[str, ...], at: float) -> None:
        """The engine listed ``running`` and ``waiting`` adapters at ``at`` (an older or the
        same scrape again is ignored)."""
        if at <= self.at:
            return
        if self.at > -_INF:
            decay = math.exp(-(at - self.at) / HORIZON_S)
            handed = 0
            if self._waiting:
                now_running = set(running)
                handed = sum(1 for a in self._waiting if a in now_running)
                self._exposure = self._exposure * decay + (at - self.at)
            else:
                self._exposure *= decay
            self._handovers = self._handovers * decay + handed
        since = self._since
        self._since = {a: since.get(a, at) for a in waiting}
        self._running = frozenset(running)
        self._waiting = waiting
        self.at = at

    def waited_s(self, now: float) -> float:
        """How long, at least, the adapter listed waiting longest has waited (0: none waits)."""
        if not self._since:
            return 0.0
        return max(0.0, now - min(self._since.values()))

    def rate(self, now: float) -> float | None:
        """Slot handovers per second: the handovers seen, and the next, over the exposure up to
        ``now`` (None: nothing was ever listed waiting)."""
        exposure = self._exposure
        if self._waiting:
            exposure += max(0.0, now - self.at)  # the wait goes on since the last scrape
        if exposure <= 0.0:
            return None
        return (self._handovers + 1.0) / exposure

    def handovers(self, adapter: str) -> int:
        """How many slot handovers a new request for ``adapter`` waits for, as of the last
        scrape (0: its adapter runs, or a slot is free)."""
        if adapter in self._running:
            return 0
        waiting = self._waiting
        if adapter in waiting:
            return waiting.index(adapter) + 1
        if not waiting and len(self._running) < self.slots:
            return 0
        return len(waiting) + 1

    def wait(self, adapter: str, now: float, at_least: int = 0) -> tuple[float, int]:
        """Seconds a new request for ``adapter`` would wait for a slot at the engine's recent
        handover rate (0: it need not, or nothing was ever seen waiting), and the handovers it
        waits for: its :meth:`handovers`, or ``at_least`` when more (a count the caller saw
        since the scrape)."""
        handovers = max(self.handovers(adapter), at_least)
        if handovers == 0:
            return 0.0, 0
        rate = self.rate(now)
        return (0.0 if rate is None else handovers / rate), handovers
