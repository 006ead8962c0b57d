from __future__ import annotations

from pathlib import Path

from bench.loop.learn import fresh_telemetry


def test_a_rerun_starts_from_an_empty_telemetry_store_and_keeps_the_rest(tmp_path: Path) -> None:
    store = tmp_path / "case"
    first = fresh_telemetry(store)
    (first / "requests").mkdir()
    (first / "requests" / "part-0.parquet").write_bytes(b"old")
    (store / "profiles").mkdir()
    again = fresh_telemetry(store)
    assert again == first and again.is_dir() and not any(again.iterdir())
    assert (store / "profiles").is_dir()  # only the telemetry is replaced
