"""Two ``placement serve`` processes behind one address (``scripts/front``: Envoy), sharing
plans, credit counters, admission state, replica health and tenants through a real Redis:
a process killed under load, Redis killed and back, both processes restarted.

The processes start once for the module (each start costs seconds on a busy machine); each
test leaves them running as it found them. Figures are printed (``-s``) and recorded in
bench/RESULTS.md."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1]))
sys.path.insert(0, str(Path(__file__).parents[1] / "epp"))
from active_active_harness import Front, ServiceProcess, get_json, run_load
from envoy_harness import envoy_binary
from redis_server import RedisServer

from placement.domain.fleet import load_fleet
from placement.domain.requests import DEFAULT_CLASSES, Request, Tenant
from placement.solver import build_instance, solve_plan
from placement.solver.capacity import FixedCapacity
from serving.api.security import hash_key
from serving.plan_store.redis import RedisPlanStore

KEY = "active-active-key-0123456789"  # every scope: the load generator and the operator
TENANTS = {"acme": 0.5, "globex": 0.3, "initech": 0.1}
FIGURES: dict[str, object] = {}


def _fleet(path: Path) -> Path:
    lines = ["name: aa", "replicas:"]
    for i in range(8):
        lines += [
            f"  - kind: llama{i}",
            "    count: 1",
            "    accelerator: H100-SXM",
            "    model: llama-3-8b",
            "    labels: {address: 127.0.0.1:" + str(19000 + i) + "}",
        ]
    path.write_text("\n".join(lines) + "\n")
    return path


def _seed_plan(fleet: Path, url: str) -> int:
    """A real plan for the fleet, published to the store as another process would."""
    spec = load_fleet(fleet)
    requests = [
        Request(
            i + 1,
            i * 0.1,
            256,
            32,
            tenant=t,
            request_class="interactive",
            model="llama-3-8b",
            block_hashes=(i % 17, 100 + i % 5),
        )
        for i, t in enumerate(list(TENANTS) * 40)
    ]
    tenants = {t: Tenant(name=t, credit_share=s) for t, s in TENANTS.items()}
    instance = build_instance(
        spec, requests, tenants, DEFAULT_CLASSES, capacity=FixedCapacity({"H100-SXM": 40.0})
    )
    store = RedisPlanStore(url)
    plan = solve_plan(instance, previous=None, time_limit_s=5, version=store.next_version())
    store.put(plan)
    store.close()
    return plan.version


@dataclass
class Cluster:
    redis: RedisServer
    a: ServiceProcess
    b: ServiceProcess
    front: Front
    plan_version: int

    @property
    def processes(self) -> tuple[ServiceProcess, ServiceProcess]:
        return self.a, self.b

    def owners(self) -> dict[str, str]:
        return {f"{p.pid:x}": p.url for p in self.processes}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    envoy_binary()  # installs Envoy on first use (scripts/front runs it), or skips without one
    work = tmp_path_factory.mktemp("active-active")
    fleet = _fleet(work / "fleet.yaml")
    tenants = work / "tenants.yaml"
    tenants.write_text(
        "tenants:\n" + "".join(f"  {t}: {{credit_share: {s}}}\n" for t, s in TENANTS.items())
    )
    redis = RedisServer(work).start()
    try:
        version = _seed_plan(fleet, redis.url)
    except BaseException:
        redis.stop()
        raise
    env = {
        "PLACEMENT_API_KEYS": json.dumps(
            [{"name": "ops", "digest": hash_key(KEY), "scopes": ["route", "telemetry", "admin"]}]
        ),
        "PLACEMENT_SCRAPE_INTERVAL_S": "3600",  # no engines behind the addresses: one scrape
        "PLACEMENT_SOLVE_PERIOD_S": "3600",
        "PLACEMENT_SHARED_TTL_S": "1.0",
        "PLACEMENT_TELEMETRY_DIR": str(work / "telemetry"),
    }
    argv = ["--fleet", str(fleet), "--tenants", str(tenants), "--redis", redis.url]
    a = ServiceProcess(work, "a", argv, env).start()
    b = ServiceProcess(work, "b", argv, env).start()
    front = None
    try:
        FIGURES["process_ready_s"] = round(max(a.wait_ready(), b.wait_ready()), 2)
        front = Front(work, [f"127.0.0.1:{a.port}", f"127.0.0.1:{b.port}"])
        front.wait_ready(healthy=2)
        yield Cluster(redis, a, b, front, version)
    finally:
        for part in (front, a, b):
            if part is not None:
                part.stop()
        redis.stop()
        print("\nactive-active figures:", json.dumps(FIGURES))


def _wait(what: str, check: object, timeout_s: float = 10.0) -> float:
    """Seconds until ``check()`` holds."""
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        try:
            if check():  # type: ignore[operator]
                return time.monotonic() - started
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    raise AssertionError(f"not within {timeout_s} s: {what}")


def _health(p: ServiceProcess) -> dict[str, str]:
    body = get_json(f"{p.url}/healthz")
    assert isinstance(body, dict)
    return body


def _plan_version(p: ServiceProcess) -> int:
    body = get_json(f"{p.url}/v1/plan", KEY)
    assert isinstance(body, dict)
    return int(body["version"])


def test_killing_a_process_under_load_loses_no_request(cluster: Cluster) -> None:
    assert _plan_version(cluster.a) == _plan_version(cluster.b) == cluster.plan_version
    killed_at = 1.0
    victim = cluster.a
    victim_id, survivor_id = f"{victim.pid:x}", f"{cluster.b.pid:x}"
    timer = threading.Timer(killed_at, victim.kill)
    timer.start()
    try:
        result = run_load(cluster.front.url, KEY, seconds=3.0, owners=cluster.owners())
    finally:
        timer.join()
        victim.start()  # whatever happened, the next tests find two processes
    answers = result.answers
    FIGURES["kill_requests"] = len(answers)
    FIGURES["kill_lost"] = len(result.lost)
    FIGURES["kill_refused_429"] = sum(a.status == 429 for a in answers)
    FIGURES["kill_longest_gap_ms"] = round(1000 * result.longest_gap_s(killed_at, 3.0), 1)
    assert not result.lost, result.lost[:5]
    assert len(answers) > 50
    before = {a.process for a in answers if a.at < killed_at and a.status == 200}
    assert before == {victim_id, survivor_id}  # both decided before the kill
    assert result.processes_after(killed_at + 0.5) == {survivor_id}
    assert result.longest_gap_s(killed_at, 3.0) < 1.0  # decisions kept flowing

    # the killed process comes back with the last plan
    FIGURES["restart_ready_s"] = round(victim.wait_ready(), 2)
    assert _plan_version(victim) == cluster.plan_version
    cluster.front.wait_ready(healthy=2)


def _ready(cluster: Cluster) -> None:
    """Both processes ready and behind the front (whatever an earlier test left)."""
    for p in cluster.processes:
        if p.proc is None:
            p.start()
        p.wait_ready()
    cluster.front.wait_ready(healthy=2)


def test_redis_killed_every_process_routes_on_local_state_and_converges(
    cluster: Cluster,
) -> None:
    _ready(cluster)
    run_load(cluster.front.url, KEY, seconds=0.5, owners=cluster.owners())
    cluster.redis.stop()
    lost = time.monotonic()
    for p in cluster.processes:
        _wait("healthz says degraded", lambda p=p: _health(p)["status"] == "degraded")
    FIGURES["redis_down_detected_s"] = round(time.monotonic() - lost, 2)
    for p in cluster.processes:
        health = _health(p)
        assert (
            "local state" in health["detail"] and f"plan {cluster.plan_version}" in health["detail"]
        )
        metrics = httpx.get(f"{p.url}/metrics", timeout=5).text
        assert "placement_shared_state_up 0.0" in metrics
    down = run_load(cluster.front.url, KEY, seconds=1.0, owners=cluster.owners())
    FIGURES["redis_down_requests"] = len(down.answers)
    FIGURES["redis_down_lost"] = len(down.lost)
    assert not down.lost and sum(a.status == 200 for a in down.answers) > 20
    assert len(down.processes_after(0)) == 2  # both keep deciding

    cluster.redis.start()  # back, and empty: a replaced Redis
    back = time.monotonic()
    store = RedisPlanStore(cluster.redis.url)
    try:
        for p in cluster.processes:
            _wait("healthz ok", lambda p=p: _health(p)["status"] == "ok")
        # the installed plan is re-published, or a newer one solved since (the replicas' shared
        # health was lost with Redis, and a health change re-solves); both processes follow it
        _wait(
            "the plan re-published",
            lambda: (store.latest_version() or 0) >= cluster.plan_version,
        )
        for p in cluster.processes:
            _wait(
                "both processes on the store's plan",
                lambda p=p: _plan_version(p) == store.latest_version(),
            )
        _wait("the tenants re-published", lambda: store.tenancy_version() > 0)
        _wait("the counters re-seeded", lambda: set(store.load_credits()) >= set(TENANTS))
        FIGURES["redis_back_converged_s"] = round(time.monotonic() - back, 2)
        cluster.plan_version = store.latest_version() or 0
    finally:
        store.close()
    answers = run_load(cluster.front.url, KEY, seconds=0.5, owners=cluster.owners())
    assert not answers.lost


def test_a_restart_brings_back_the_last_plan_credit_state_and_tenants(
    cluster: Cluster, tmp_path: Path
) -> None:
    _ready(cluster)
    headers = {"X-API-Key": KEY}
    created = httpx.post(
        f"{cluster.a.url}/v1/admin/tenants",
        json={"name": "umbrella", "credit_share": 0.05},
        headers=headers,
        timeout=5,
    )
    assert created.status_code == 201, created.text
    # an edit through A applies in B
    _wait(
        "B applies A's tenant",
        lambda: any(
            t["name"] == "umbrella"
            for t in get_json(f"{cluster.b.url}/v1/admin/tenants", KEY)["tenants"]  # type: ignore[index]
        ),
    )
    # a plan another process publishes is followed by both
    store = RedisPlanStore(cluster.redis.url)
    try:
        newer = store.latest()
        assert newer is not None
        version = store.next_version(above=newer.version)
        store.put(newer.model_copy(update={"version": version, "previous_version": newer.version}))
        for p in cluster.processes:
            FIGURES["plan_followed_s"] = round(
                _wait("plan followed", lambda p=p: _plan_version(p) == version), 2
            )
        run_load(cluster.front.url, KEY, seconds=0.5, owners=cluster.owners())
        time.sleep(0.5)  # an exchange or two: the counters are in Redis
        credits = store.load_credits()
        usage = get_json(f"{cluster.b.url}/v1/usage", KEY)
        assert isinstance(usage, list)
        requests = {u["tenant"]: u["requests"] for u in usage}
        for p in cluster.processes:
            p.stop()
        for p in cluster.processes:
            p.start()
        FIGURES["both_restarted_ready_s"] = round(max(p.wait_ready() for p in cluster.processes), 2)
        for p in cluster.processes:
            assert _plan_version(p) == version
            tenants = get_json(f"{p.url}/v1/admin/tenants", KEY)
            assert isinstance(tenants, dict)
            assert {t["name"] for t in tenants["tenants"]} == {*TENANTS, "umbrella"}
        after = store.load_credits()
        assert set(after) >= set(TENANTS)
        assert all(after[t] >= credits[t] - 1e-6 for t in TENANTS)
        usage = get_json(f"{cluster.a.url}/v1/usage", KEY)
        assert isinstance(usage, list)
        assert {u["tenant"]: u["requests"] for u in usage}["acme"] >= requests["acme"] > 0
        cluster.plan_version = version
    finally:
        store.close()
    cluster.front.wait_ready(healthy=2)
