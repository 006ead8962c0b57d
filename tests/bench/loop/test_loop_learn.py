from __future__ import annotations

from pathlib import Path

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
