from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "api"))
sys.path.insert(0, str(Path(__file__).parents[1]))
from api_fakes import make_plan
from redis_server import RedisServer

from serving.plan_store import DirectoryPlanStore, PlanStoreError, open_plan_store
from serving.plan_store.base import PlanStore
from serving.plan_store.redis import RedisPlanStore


@pytest.fixture(params=["directory", "redis"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> PlanStore:
    if request.param == "directory":
        return DirectoryPlanStore(tmp_path / "plans")
    url = request.getfixturevalue("redis_url")
    prefix = f"t{request.node.nodeid.__hash__() & 0xFFFFFF:x}"
    return RedisPlanStore(url, prefix=prefix)


def test_empty_store(store: PlanStore) -> None:
    assert store.latest() is None
    assert store.latest_version() is None
    assert store.get(1) is None
    assert store.load_credits() == {}


def test_put_get_latest_and_never_overwrite(store: PlanStore) -> None:
    v1 = store.next_version()
    v2 = store.next_version()
    assert v2 > v1
    store.put(make_plan(v2, objective=2.0))
    store.put(make_plan(v1, objective=1.0))  # an older version does not move the pointer back
    assert store.latest_version() == v2
    latest = store.latest()
    assert latest is not None and latest.solver.objective == 2.0
    got = store.get(v1)
    assert got is not None and got == make_plan(v1, objective=1.0).model_copy(
        update={"created_at": got.created_at}
    )
    with pytest.raises(PlanStoreError, match="already exists"):
        store.put(make_plan(v2))


def test_publishing_the_same_plan_again_succeeds_and_moves_the_pointer(
    store: PlanStore, tmp_path: Path
) -> None:
    """A publish repeated after a lost reply (the client retried, or the writer crashed
    between storing the plan and moving the pointer) is not refused, and the pointer follows;
    a different plan under a stored version still is."""
    plan = make_plan(7, objective=3.0)
    if isinstance(store, RedisPlanStore):  # the plan stored, the pointer never moved
        store.client.set(f"{store.prefix}:plan:7", plan.to_json())
    else:
        assert isinstance(store, DirectoryPlanStore)
        (store.root / "plan-00000007.json").write_text(plan.to_json())
    assert store.latest_version() in (None, 7)
    store.put(plan)
    assert store.latest_version() == 7
    store.put(plan)
    assert store.latest_version() == 7
    with pytest.raises(PlanStoreError, match="already exists"):
        store.put(make_plan(7, objective=4.0))


def test_versions_stay_above_the_latest(store: PlanStore) -> None:
    store.put(make_plan(40))
    assert store.next_version() > 40


def test_credits_round_trip(store: PlanStore) -> None:
    store.save_credits({"acme": 12.5, "globex": 0.0})
    assert store.load_credits() == {"acme": 12.5, "globex": 0.0}
    store.save_credits({"acme": 1.0})
    assert store.load_credits() == {"acme": 1.0}


def test_two_directory_stores_share_versions(tmp_path: Path) -> None:
    a, b = DirectoryPlanStore(tmp_path), DirectoryPlanStore(tmp_path)
    assert {a.next_version(), b.next_version(), a.next_version()} == {1, 2, 3}
    a.put(make_plan(2))
    assert b.latest_version() == 2


def test_corrupt_plan_file_is_a_store_error(tmp_path: Path) -> None:
    store = DirectoryPlanStore(tmp_path)
    (tmp_path / "plan-00000001.json").write_text("{}")
    with pytest.raises(PlanStoreError, match="corrupt"):
        store.latest()


def test_unreachable_redis_is_a_store_error() -> None:
    store = open_plan_store(plan_dir="unused", redis_url="redis://127.0.0.1:1/0")
    with pytest.raises(PlanStoreError, match="redis"):
        store.latest()


def test_versions_stay_above_the_installed_one_after_redis_restarts_empty(
    redis_server: RedisServer,
) -> None:
    store = RedisPlanStore(redis_server.url)
    try:
        for _ in range(3):
            store.put(make_plan(store.next_version()))
        assert store.latest_version() == 3
        redis_server.restart()  # no persistence: the store comes back empty
        assert store.latest_version() is None
        assert store.next_version() == 1  # numbering restarts: what a service must not follow
        assert store.next_version(above=3) > 3
        assert store.next_version(above=3) > 4  # and stays unique
    finally:
        store.close()


def test_wiped_plan_directory_numbers_above_the_installed_version(tmp_path: Path) -> None:
    store = DirectoryPlanStore(tmp_path)
    assert store.next_version(above=7) == 8
    store.put(make_plan(20))
    assert store.next_version(above=7) == 21


def test_directory_store_writes_latest_and_cleans_up_reservations(tmp_path: Path) -> None:
    store = DirectoryPlanStore(tmp_path)
    published = []
    for _ in range(3):
        version = store.next_version()
        store.put(make_plan(version))
        published.append(version)
        assert (tmp_path / "LATEST").read_text() == str(version)
    assert list(tmp_path.glob(".reserved-*")) == []
    # a solve that failed leaves its reservation until a later version is published
    failed = store.next_version()
    assert (tmp_path / f".reserved-{failed:08d}").exists()
    assert store.next_version() == failed + 1
    store.put(make_plan(failed + 1))
    assert (tmp_path / "LATEST").read_text() == str(failed + 1)
    assert list(tmp_path.glob(".reserved-*")) == []
    # an older version published late does not move the pointer back
    store.put(make_plan(failed))
    assert (tmp_path / "LATEST").read_text() == str(failed + 1)
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == [
        "LATEST",
        *(f"plan-{v:08d}.json" for v in [*published, failed, failed + 1]),
    ]


def test_directory_store_without_a_readable_pointer_reads_the_files(tmp_path: Path) -> None:
    store = DirectoryPlanStore(tmp_path)
    store.put(make_plan(1))
    store.put(make_plan(2))
    (tmp_path / "LATEST").write_text("garbage")
    assert store.latest_version() == 2
    store.put(make_plan(3))
    assert (tmp_path / "LATEST").read_text() == "3"


def test_tenancy_versions_move_forward_and_round_trip(store: PlanStore) -> None:
    assert store.load_tenancy() is None and store.tenancy_version() == 0
    doc = {"tenants": {"acme": {"credit_share": 0.5}}}
    assert store.save_tenancy(doc) == 1
    assert store.save_tenancy({"tenants": {"acme": {"credit_share": 0.4}}}) == 2
    stored = store.load_tenancy()
    assert stored is not None and stored.version == 2
    assert stored.doc == {"tenants": {"acme": {"credit_share": 0.4}}}
    # re-seeding an emptied store keeps the version given, never one below the stored
    assert store.save_tenancy(doc, version=1) == 2
    assert store.save_tenancy(doc, version=7) == 7 and store.tenancy_version() == 7
