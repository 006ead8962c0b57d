"""Benchmark tables fit the terminal: as wide as it (or ``$COLUMNS``), cells folded rather than
cut to an ellipsis; a pipe or a file gets one wide line per row."""

from __future__ import annotations

import pytest

from placement.report import PIPE_WIDTH, console, print_table

COLUMNS = ("policy", "ttft.coverage_p95", "tpot.coverage_p95", "goodput_rps_at_slo")


def test_a_narrow_terminal_folds_cells_instead_of_cutting_them(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "40")
    rows = [{"policy": "least-outstanding", COLUMNS[1]: 0.9512, COLUMNS[2]: 0.9, COLUMNS[3]: 12.5}]
    print_table("a benchmark", rows, COLUMNS)
    out = capsys.readouterr().out
    assert "…" not in out
    assert max(len(line) for line in out.splitlines()) <= 40
    assert "0.951" in out and "12.5" in out  # every figure whole


def test_a_pipe_gets_wide_lines(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    assert console().width == PIPE_WIDTH  # pytest captures stdout: not a terminal
    monkeypatch.setenv("COLUMNS", "72")
    assert console().width == 72
