from __future__ import annotations

from pathlib import Path

from bench.loop.prefix_residency import plot_prefix_residency


def test_a_residency_plot_is_written_from_the_solves(tmp_path: Path) -> None:
    solves = [
        {"at_s": 0.0, "residency": [("r0", 11, 4096), ("r1", 12, 30000)]},
        {"at_s": 60.0, "residency": [("r1", 11, 4096), ("r1", 12, 30000), ("r0", 13, 512)]},
    ]
    path = tmp_path / "residency.png"
    assert plot_prefix_residency(solves, path, title="t")
    assert path.stat().st_size > 1000


def test_no_warm_prefix_no_plot(tmp_path: Path) -> None:
    path = tmp_path / "none.png"
    assert not plot_prefix_residency([{"at_s": 0.0, "residency": []}], path, title="t")
    assert not path.exists()
