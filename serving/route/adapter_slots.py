"""Which of a replica's in-flight LoRA requests wait for an adapter slot: the router's own book.

vLLM holds at most ``max_loras`` adapters in GPU slots, and a slot belongs to an adapter while
any of its requests runs; a request whose adapter has no slot while every slot is in use
waits, in order, and the scheduler lets the requests behind it pass (base-model requests, and
those of the adapters in slots). So the prompt tokens such a request holds in the replica's
queue delay nobody else, and its own first token waits for a slot to free.

The router sees neither directly (vLLM's ``vllm:lora_requests_info`` gauge names the running and
waiting adapters, as of the last scrape, without their requests), but it knows every request it
sent and when each got its first token and ended. It books each replica's *live* adapters (with
a request in flight there) in the order they became live:

- an adapter with a request past its first token is **running**: it holds a slot;
- the slots left go to the adapters none of whose requests has started, first come first
  served (vLLM grants a freed slot to the first waiting request); the rest **wait for a slot**.

A slot frees when a running adapter's last running request ends (its other requests, still
waiting, then wait for a slot like any other's: the scheduler hands the idle slot to the first
request waiting). The book keeps the times of
the last :data:`RELEASES` such frees; a request whose adapter would wait behind ``k`` waiting
adapters expects to wait ``(k + 1) / rate`` for its slot, ``rate`` the frees per second over
them (counted up to now, so a replica whose slots stop turning over is read as slower and
slower). Until :data:`MIN_RELEASES` frees were seen the wait is unknown and taken as none — or,
with ``censored`` (the route profile's ``lora_slots.censored_rate``), read from what the book did
see: ``n`` frees in the ``T`` seconds since its first request was sent, the next not yet come, put
the rate at ``(n + 1) / T`` (a censored count: no free in ``T`` seconds is evidence of a rate of
about ``1 / T`` or less), so a replica whose slots never turn over reads slower and slower
instead of free.

What it gives the route path (:mod:`serving.route.path`):

- :meth:`SlotBook.blocked` — requests and prompt tokens waiting for a slot, which the admission
  gate's queue signal leaves out (:func:`serving.route.plugins.base.queued_ahead_tokens`);
- :meth:`SlotBook.handovers` — how many slot handovers a new request for an adapter would wait
  for (the adapters waiting ahead of it, and its own);
- :meth:`SlotBook.wait` — how long that would take at the recent release rate (the admission
  gate forecasts by the handovers instead while the fleet keeps up: :mod:`serving.admission.
  slo_gate`, "LoRA slots");
- :meth:`SlotBook.starved` — since when the adapters now waiting for a slot have waited, and
  their tenants: a running adapter whose stream never pauses never yields its slot (vLLM lets
  its requests pass the waiting ones), so the admission gate may make one yield
  (:mod:`serving.admission.slo_gate`, "Slot turns");
- :meth:`SlotBook.waiting` — ``blocked`` and ``starved`` in one walk, as the route path
  publishes them after each dispatch and completion.

The route profile's ``lora_slots.engine_wait`` reads the wait from the engine's own lists instead
(:mod:`serving.route.engine_slots`): the book's frees are not the engine's handovers.

Replicas without slots (``max_loras`` 0: no LoRA serving) keep no book.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass

RELEASES = 32  # slot frees the release rate is measured over
MIN_RELEASES = 4
_INF = float("inf")


@dataclass(slots=True)
class _Live:
    """One live adapter on a replica."""

    in_flight: int = 0
    pending_requests: int = 0  # in flight, not yet past the first token
    pending_tokens: int = 0  # their prompt tokens
    tenant: str = ""  # whose requests (the first one's)
    since: float = 0.0  # when it last became live or stopped running

    @property
    def running(self) -> bool:
        return self.in_flight > self.pending_requests


class SlotBook:
    """One replica's live adapters, in the order they became live."""

    __slots__ = ("_live", "_opened", "_releases", "censored", "slots")

    def __init__(self, slots: int, *, censored: bool = False) -> None:
        self.slots = slots
        self.censored = censored
        self._live: dict[str, _Live] = {}  # insertion order = the order they became live
        self._releases: deque[float] = deque(maxlen=RELEASES)
        self._opened: float | None = None  # when its first request was sent

    def dispatched(
        self, adapter: str, prompt_tokens: int, *, tenant: str = "", now: float = 0.0
    ) -> None:
        """A request of ``tenant`` for ``adapter`` was sent at ``now``."""
        if self._opened is None:
            self._opened = now
        live = self._live.get(adapter)
        if live is None:
            live = self._live[adapter] = _Live(tenant=tenant, since=now)
        live.in_flight += 1
        live.pending_requests += 1
        live.pending_tokens += prompt_tokens

    def first_token(self, adapter: str, prompt_tokens: int) -> None:
        """A request for ``adapter`` got its first token: its prompt no longer waits."""
        live = self._live.get(adapter)
        if live is not None and live.pending_requests > 0:
            live.pending_requests -= 1
            live.pending_tokens -= prompt_tokens

    def completed(self, adapter: str, pending_tokens: int, now: float) -> None:
        """A request for ``adapter`` ended at ``now`` (``pending_tokens``: its prompt, when it
        ended without a first token; else 0)."""
        live = self._live.get(adapter)
        if live is None:
            return
        was_running = live.running
        live.in_flight -= 1
        if pending_tokens and live.pending_requests > 0:
            live.pending_requests -= 1
            live.pending_tokens -= pending_tokens
        if was_running and not live.running:
            self._releases.append(now)  # its slot goes to the next adapter waiting
            live.since = now
        if live.in_flight <= 0:
            del self._live[adapter]

    def _free_slots(self) -> int:
        running = sum(1 for live in self._live.values() if live.running)
        return self.slots - running if self.slots > running else 0

    def _waiting(self) -> Iterator[_Live]:
        """The adapters in flight that wait for a slot: not running, and past the free slots
        the first of the others will take, in arrival order."""
        if len(self._live) <= self.slots:
            return
        free = self._free_slots()
        for live in self._live.values():
            if live.running:
                continue
            if free > 0:
                free -= 1
                continue
            yield live

    def waiting(self) -> tuple[int, int, float, tuple[str, ...]]:
        """What waits for a slot, in one walk: :meth:`blocked`'s (requests, prompt tokens)
        and :meth:`starved`'s (since when, tenants)."""
        requests = tokens = 0
        since = _INF
        tenants: list[str] = []
        for live in self._waiting():
            requests += live.pending_requests
            tokens += live.pending_tokens
            since = min(since, live.since)
            tenants.append(live.tenant)
        return requests, tokens, since, tuple(tenants)

    def blocked(self) -> tuple[int, int]:
        """(requests, prompt tokens) in flight that wait for a slot."""
        requests, tokens, _, _ = self.waiting()
        return requests, tokens

    def starved(self) -> tuple[float, tuple[str, ...]]:
        """(since when, at the earliest, an adapter now waiting for a slot has waited; the
        tenants of those waiting) — (inf, ()) when none waits."""
        _, _, since, tenants = self.waiting()
        return since, tenants

    def release_rate(self, now: float) -> float | None:
        """Slot frees per second over the last :data:`RELEASES` (None: too few seen — with
        :attr:`censored`, the frees seen and the next over the time since the book opened)."""
        releases = self._releases
        if len(releases) < MIN_RELEASES:
            if not self.censored or self._opened is None:
                return None
            return (len(releases) + 1) / max(now - self._opened, 1e-3)
        return len(releases) / max(now - releases[0], 1e-3)

    def handovers(self, adapter: str) -> int:
        """How many slot handovers a new request for ``adapter`` waits for: one for each adapter
        waiting ahead of it, and its own (0: it holds a slot, or one is free for it)."""
        live = self._live
        if self.slots <= 0 or len(live) < self.slots:
            return 0
        own = live.get(adapter)
        if own is not None and own.running:
            return 0
        ahead = -self._free_slots()
        for name, entry in live.items():
            if name == adapter:
                break
            if not entry.running:
                ahead += 1
        return ahead + 1 if ahead >= 0 else 0  # ahead < 0: a slot is free for it

    def wait(self, adapter: str, now: float) -> tuple[float, int]:
        """Seconds a new request for ``adapter`` would wait for a slot at the recent release
        rate (0: none, or unknown), and the :meth:`handovers` it waits for — counted once."""
        handovers = self.handovers(adapter)
        if handovers == 0:
            return 0.0, 0
        rate = self.release_rate(now)
        return (0.0 if rate is None else handovers / rate), handovers

    def wait_s(self, adapter: str, now: float) -> float:
        """The seconds of :meth:`wait` alone."""
        return self.wait(adapter, now)[0]
