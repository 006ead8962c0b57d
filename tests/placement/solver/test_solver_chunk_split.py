"""Which classes each replica serves where a prompt chunk breaks a class's TPOT."""

from __future__ import annotations

from placement.domain.fleet import fleet_from_dict
from placement.domain.requests import DEFAULT_CLASSES, Request
from placement.solver.capacity import FixedCapacity
from placement.solver.chunk_split import full_chunk_step_s, with_class_split
from placement.solver.instance import Instance, build_instance
from placement.solver.solve import solve_plan

MODEL = "llama-3-8b"


def _fleet(*kinds: tuple[str, str, int]):  # type: ignore[no-untyped-def]
    return fleet_from_dict(
        {
            "name": "t",
            "replicas": [
                {"kind": kind, "accelerator": acc, "count": n, "model": MODEL}
                for kind, acc, n in kinds
            ],
        }
    )


HETERO = (("h100", "H100-SXM", 1), ("a100", "A100-80G", 2), ("l40s", "L40S", 3))


def _requests(interactive_rps: float, batch_rps: float, window_s: float = 20.0) -> list[Request]:
    reqs: list[Request] = []
    for tenant, cls, rps, prompt, out in (
        ("chat", "interactive", interactive_rps, 1500, 200),
        ("docs", "batch", batch_rps, 3000, 650),
    ):
        n = round(rps * window_s)
        reqs += [
            Request(
                len(reqs) + i,
                window_s * i / max(n, 1),
                prompt,
                out,
                tenant=tenant,
                request_class=cls,
                model=MODEL,
                block_hashes=(len(reqs) + i + 10_000,),
            )
            for i in range(n)
        ]
    return reqs


CAPACITY = FixedCapacity({"H100-SXM": 8.0, "A100-80G": 3.0, "L40S": 2.0})


def _instance(fleet_kinds=HETERO, interactive_rps=12.0, batch_rps=4.0) -> Instance:  # type: ignore[no-untyped-def]
    return with_class_split(
        build_instance(
            _fleet(*fleet_kinds),
            _requests(interactive_rps, batch_rps),
            {},
            DEFAULT_CLASSES,
            window_s=20.0,
            capacity=CAPACITY,
        )
    )


def _served(inst: Instance) -> dict[str, set[str]]:
    """Replica id → the classes it serves."""
    return {
        rid: {c for c, ok in zip(inst.classes, row, strict=True) if ok}
        for rid, row in zip(inst.replica_ids, inst.replica_classes, strict=True)
    }


def test_a_full_chunk_breaks_the_interactive_tpot_on_an_a100_and_an_l40s_not_an_h100() -> None:
    tpot = DEFAULT_CLASSES["interactive"].tpot_slo_s
    assert full_chunk_step_s("H100-SXM", MODEL, 1) < tpot
    assert full_chunk_step_s("A100-80G", MODEL, 1) > tpot
    assert full_chunk_step_s("L40S", MODEL, 1) > tpot
    assert full_chunk_step_s("no-such-gpu", MODEL, 1) == 0.0  # unknown: never splits


def test_the_fast_kinds_are_kept_for_interactive_when_its_demand_overflows_them() -> None:
    # 12 interactive req/s against an H100's 8: the H100 takes interactive only
    served = _served(_instance(interactive_rps=12.0, batch_rps=4.0))
    assert served["h100-0"] == {"interactive"}
    assert all(served[r] == {"interactive", "batch"} for r in served if r != "h100-0")


def test_with_room_on_the_fast_kinds_nothing_is_split() -> None:
    assert _instance(interactive_rps=6.0, batch_rps=4.0).replica_classes.all()


def test_the_plan_sends_batch_to_the_slow_kinds_only() -> None:
    plan = solve_plan(_instance(interactive_rps=12.0, batch_rps=4.0), time_limit_s=5.0)
    classes = {r.id: r.classes for r in plan.replicas}
    assert classes["h100-0"] == ("interactive",)
    assert all(c == () for r, c in classes.items() if r != "h100-0")
    (docs,) = [d for d in plan.defaults if d.tenant == "docs"]
    assert docs.route.replicas and "h100-0" not in docs.route.replicas


def test_a_fleet_with_no_fast_kind_or_only_fast_kinds_is_not_split() -> None:
    assert _instance((("h100", "H100-SXM", 1),), interactive_rps=30.0).replica_classes.all()
    assert _instance((("a100", "A100-80G", 2),), interactive_rps=30.0).replica_classes.all()


def test_without_demand_of_both_kinds_of_class_nothing_is_split() -> None:
    assert _instance(interactive_rps=30.0, batch_rps=0.0).replica_classes.all()
    assert _instance(interactive_rps=0.0, batch_rps=30.0).replica_classes.all()
