"""What service processes sharing one fleet exchange through Redis, beside the plans.

Keys under the plan store's prefix:

- ``<prefix>:epoch`` — a random id set once; a process that finds another one (or none) knows
  the state was lost (a Redis replaced or flushed) and re-seeds its part of it;
- ``<prefix>:credits`` — tenant → Virtual Token Counter, moved by each process's increments
  (``HINCRBYFLOAT``; re-seeded with ``HSETNX``, so the first process back sets each counter);
- ``<prefix>:usage`` — ``tenant|field`` → count (each process adds what it counted);
- ``<prefix>:demand`` — the recent routed requests, a list of JSON chunks each process
  appends (the planner of any process solves for all of them);
- ``<prefix>:proc:<id>`` — each process's admission state (in flight, per tenant) and the
  replicas it found down, with a time to live, listed in ``<prefix>:procs``.

:meth:`RedisSharedState.exchange` does one round trip's worth of this in a pipeline.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from serving.usage import Key

USAGE_SEP = "|"
DEMAND_CHUNKS = 2_000  # chunks kept (one per process per exchange with new requests)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessState:
    """One process's share of the fleet's state, as the others read it."""

    process: str
    in_flight: int = 0
    sheddable: int = 0
    by_tenant: Mapping[str, int] = field(default_factory=dict)
    down: tuple[str, ...] = ()  # replicas its own scrapes found down
    plan_version: int | None = None

    def to_json(self) -> str:
        return json.dumps(
            {
                "in_flight": self.in_flight,
                "sheddable": self.sheddable,
                "by_tenant": dict(self.by_tenant),
                "down": list(self.down),
                "plan_version": self.plan_version,
            }
        )

    @staticmethod
    def from_json(process: str, raw: bytes | str) -> ProcessState:
        d = json.loads(raw)
        return ProcessState(
            process=process,
            in_flight=int(d.get("in_flight", 0)),
            sheddable=int(d.get("sheddable", 0)),
            by_tenant={str(t): int(n) for t, n in d.get("by_tenant", {}).items()},
            down=tuple(str(r) for r in d.get("down", ())),
            plan_version=d.get("plan_version"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Outgoing:
    """What this process adds: its state, its new requests, its counts since the last
    exchange (``reseed``: the whole of them, the shared state having been lost)."""

    state: ProcessState
    epoch: str | None  # the epoch this process last exchanged with
    demand: bytes | None = None
    credits: Mapping[str, float] = field(default_factory=dict)
    usage: Mapping[Key, float] = field(default_factory=dict)
    reseed: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Incoming:
    epoch: str
    lost: bool = False  # the epoch changed: nothing was added; re-seed on the next exchange
    credits: Mapping[str, float] = field(default_factory=dict)
    usage: Mapping[Key, float] = field(default_factory=dict)
    others: tuple[ProcessState, ...] = ()


class RedisSharedState:
    """``client`` is a redis-py client (the plan store's); ``ttl_s`` how long a process's
    state counts after its last exchange."""

    def __init__(self, client: Any, *, prefix: str, process: str, ttl_s: float) -> None:
        self._redis = client
        self._prefix = prefix
        self.process = process
        self.ttl_ms = max(1, int(ttl_s * 1000))

    def _key(self, *parts: str) -> str:
        return ":".join((self._prefix, *parts))

    def epoch(self) -> str:
        key = self._key("epoch")
        self._redis.set(key, uuid.uuid4().hex, nx=True)
        raw = self._redis.get(key)
        return raw.decode() if isinstance(raw, bytes) else str(raw)

    def exchange(self, out: Outgoing) -> Incoming:
        """Add ``out`` and read the fleet's state back (raises redis errors)."""
        epoch = self.epoch()
        if out.epoch is not None and epoch != out.epoch and not out.reseed:
            return Incoming(epoch=epoch, lost=True)
        pipe = self._redis.pipeline(transaction=False)
        credits, usage = self._key("credits"), self._key("usage")
        for tenant, value in out.credits.items():
            if out.reseed:
                pipe.hsetnx(credits, tenant, repr(float(value)))
            elif value:
                pipe.hincrbyfloat(credits, tenant, value)
        for (tenant, name), value in out.usage.items():
            pipe.hincrbyfloat(usage, f"{tenant}{USAGE_SEP}{name}", value)
        if out.demand is not None:
            demand = self._key("demand")
            pipe.rpush(demand, out.demand)
            pipe.ltrim(demand, -DEMAND_CHUNKS, -1)
        me = out.state.process
        pipe.set(self._key("proc", me), out.state.to_json(), px=self.ttl_ms)
        pipe.sadd(self._key("procs"), me)
        pipe.hgetall(credits)
        pipe.hgetall(usage)
        pipe.smembers(self._key("procs"))
        answers = pipe.execute()
        credit_totals = {_text(t): float(v) for t, v in answers[-3].items()}
        usage_totals: dict[Key, float] = {}
        for k, v in answers[-2].items():
            tenant, _, name = _text(k).rpartition(USAGE_SEP)
            usage_totals[(tenant, name)] = float(v)
        others = sorted(_text(p) for p in answers[-1] if _text(p) != me)
        return Incoming(
            epoch=epoch,
            credits=credit_totals,
            usage=usage_totals,
            others=self._states(others),
        )

    def _states(self, processes: list[str]) -> tuple[ProcessState, ...]:
        if not processes:
            return ()
        raws = self._redis.mget([self._key("proc", p) for p in processes])
        gone = [p for p, raw in zip(processes, raws, strict=True) if raw is None]
        if gone:
            self._redis.srem(self._key("procs"), *gone)
        return tuple(
            ProcessState.from_json(p, raw)
            for p, raw in zip(processes, raws, strict=True)
            if raw is not None
        )

    def demand_chunks(self) -> list[bytes]:
        """Every process's recent requests (:func:`serving.demand.shared_chunk`'s chunks)."""
        return list(self._redis.lrange(self._key("demand"), 0, -1))

    def leave(self) -> None:
        """This process stops: its state no longer counts."""
        self._redis.delete(self._key("proc", self.process))
        self._redis.srem(self._key("procs"), self.process)


def _text(raw: bytes | str) -> str:
    return raw.decode() if isinstance(raw, bytes) else raw
