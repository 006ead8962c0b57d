from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from bench.loop.learn import TRAINING_LOADS, fresh_telemetry
from bench.loop.tuning import TUNE_LOADS


def test_a_rerun_starts_from_an_empty_telemetry_store_and_keeps_the_rest(tmp_path: Path) -> None:
    store = tmp_path / "case"
    first = fresh_telemetry(store)
    (first / "requests").mkdir()
    (first / "requests" / "part-0.parquet").write_bytes(b"old")
    (store / "profiles").mkdir()
    again = fresh_telemetry(store)
    assert again == first and again.is_dir() and not any(again.iterdir())
    assert (store / "profiles").is_dir()  # only the telemetry is replaced


def test_the_telemetry_holds_a_sustained_light_load_below_every_busy_one() -> None:
    # capacity at SLO is read from idle up: the learning window must run the fleet well below
    # the loads it serves busy (half the next one, at most), not only around them
    loads = sorted(TRAINING_LOADS)
    assert loads[0] <= 0.5 * loads[1]
    assert loads[0] <= 0.5 * min(TUNE_LOADS)


class _Stop(Exception):
    pass


@pytest.mark.parametrize("less", [False, True])
def test_the_telemetry_trained_on_leaves_out_the_slot_wait_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, less: bool
) -> None:
    import bench.loop.learn as learn

    asked: list[bool] = []

    def frames(result: object, **kw: bool) -> None:
        asked.append(kw["less_slot_wait"])
        raise _Stop

    named = SimpleNamespace(name="x")
    monkeypatch.setattr(learn, "simulate_for_telemetry", lambda *a, **k: object())
    monkeypatch.setattr(learn, "telemetry_frames", frames)
    with pytest.raises(_Stop):
        learn.learn_capacity(named, named, tmp_path, less_slot_wait=less)  # type: ignore[arg-type]
    assert asked == [less]
