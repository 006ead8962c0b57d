"""A plan store in Redis, for many service processes on many machines.

Keys under one prefix: ``<prefix>:plan:<version>`` (the plan's JSON, never overwritten) and
``<prefix>:latest`` (moved forward only, so two writers cannot move it back), both written by
one Lua script, so a plan is never stored without the pointer seeing it, and a publish the
client retried after a lost reply finds its own plan and succeeds; ``<prefix>:seq`` (``INCR``
hands out versions), ``<prefix>:credits`` (a hash of tenant → counter) and
``<prefix>:tenancy`` (the tenants document with its version, replaced by a Lua script that
only moves the version forward).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import redis

from placement.errors import InputError
from placement.plan import Plan
from serving.plan_store.base import (
    CorruptPlan,
    PlanStoreError,
    StoredTenancy,
    credit_counters,
    tenancy_doc,
)

DEFAULT_PREFIX = "placement"
_PUBLISH = """
local stored = redis.call('GET', KEYS[1])
if stored and stored ~= ARGV[1] then return 0 end
if not stored then redis.call('SET', KEYS[1], ARGV[1]) end
local current = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[2]) > current then redis.call('SET', KEYS[2], ARGV[2]) end
return 1
"""


_SAVE_TENANCY = """
local raw = redis.call('GET', KEYS[1])
local current = 0
if raw then current = cjson.decode(raw)['version'] or 0 end
local version = tonumber(ARGV[2])
if version < 0 then version = current + 1 end
if version < current then version = current end
redis.call('SET', KEYS[1], '{"version":' .. version .. ',"doc":' .. ARGV[1] .. '}')
return version
"""


class RedisPlanStore:
    def __init__(self, url: str, *, prefix: str = DEFAULT_PREFIX, timeout_s: float = 2.0) -> None:
        try:
            self._redis: Any = redis.Redis.from_url(
                url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s
            )
        except ValueError as exc:
            raise InputError(str(exc), field="redis_url", expected="redis://host:port/db") from None
        self._prefix = prefix
        self._publish = self._redis.register_script(_PUBLISH)
        self._save_tenancy = self._redis.register_script(_SAVE_TENANCY)

    @property
    def client(self) -> Any:
        """The Redis client (shared state of the service processes uses the same server)."""
        return self._redis

    @property
    def prefix(self) -> str:
        return self._prefix

    def _key(self, *parts: object) -> str:
        return ":".join((self._prefix, *map(str, parts)))

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except redis.RedisError as exc:
            raise PlanStoreError(f"redis: cannot {what}: {exc}") from None

    def close(self) -> None:
        """Close the connections (a store is usable again after: they reopen on demand)."""
        self._redis.close()

    def ping(self) -> bool:
        return bool(self._call("ping", self._redis.ping))

    def next_version(self, *, above: int = 0) -> int:
        # never below a version already published (a store seeded by hand) nor the caller's
        # installed one (a flushed Redis restarts ``seq`` at 1)
        floor = max(self.latest_version() or 0, above)
        version = int(self._call("allocate a version", self._redis.incr, self._key("seq")))
        if version <= floor:
            version = int(
                self._call("allocate a version", self._redis.incrby, self._key("seq"), floor)
            )
        return version

    def put(self, plan: Plan) -> None:
        stored = self._call(
            "publish a plan",
            self._publish,
            keys=[self._key("plan", plan.version), self._key("latest")],
            args=[plan.to_json(), plan.version],
        )
        if not stored:
            raise PlanStoreError(f"plan version {plan.version} already exists")

    def get(self, version: int) -> Plan | None:
        text = self._call("read a plan", self._redis.get, self._key("plan", version))
        if text is None:
            return None
        try:
            return Plan.from_json(text, source=f"redis {self._key('plan', version)}")
        except InputError as exc:
            raise CorruptPlan(f"corrupt plan in the store: {exc}") from None

    def latest_version(self) -> int | None:
        raw = self._call("read the latest pointer", self._redis.get, self._key("latest"))
        return None if raw is None else int(raw)

    def latest(self) -> Plan | None:
        version = self.latest_version()
        return None if version is None else self.get(version)

    def save_credits(self, counters: Mapping[str, float]) -> None:
        key = self._key("credits")
        pipe = self._redis.pipeline(transaction=True)
        pipe.delete(key)
        if counters:
            pipe.hset(key, mapping={t: repr(float(c)) for t, c in counters.items()})
        self._call("save the credit state", pipe.execute)

    def load_credits(self) -> dict[str, float]:
        key = self._key("credits")
        raw = self._call("read the credit state", self._redis.hgetall, key)
        return credit_counters(raw, source=f"redis key {key}")

    def save_tenancy(self, doc: Mapping[str, Any], *, version: int | None = None) -> int:
        return int(
            self._call(
                "save the tenants",
                self._save_tenancy,
                keys=[self._key("tenancy")],
                args=[json.dumps(dict(doc)), -1 if version is None else version],
            )
        )

    def load_tenancy(self) -> StoredTenancy | None:
        key = self._key("tenancy")
        raw = self._call("read the tenants", self._redis.get, key)
        if raw is None:
            return None
        try:
            parsed = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise InputError("the stored tenants are not JSON", source=f"redis key {key}") from None
        return tenancy_doc(parsed, source=f"redis key {key}")

    def tenancy_version(self) -> int:
        stored = self.load_tenancy()
        return 0 if stored is None else stored.version
