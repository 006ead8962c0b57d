"""The printed what-if table says only what is true: attainment per request class or per tenant
only where demand has more than one, and no cell cut to an ellipsis in a narrow terminal."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from placement.whatif.load import load_scenario
from placement.whatif.report import print_results
from placement.whatif.run import run_scenario


def _printed(doc: dict[str, Any], write: Any, widths: tuple[int, ...] = (80, 50)) -> list[str]:
    """What ``print_results`` prints for the scenario at each terminal width."""
    scenario = load_scenario(write(doc))
    result = run_scenario(scenario, sync=True)
    texts = []
    for width in widths:
        console = Console(width=width, record=True, file=io.StringIO())
        print_results(scenario, result.cases, console, result.min_cost)
        texts.append(console.export_text())
    return texts


def _fits(text: str, width: int) -> bool:
    return "…" not in text and max(len(line) for line in text.splitlines()) <= width


def test_one_class_one_tenant_gets_no_breakdown(doc: dict[str, Any], write: Any) -> None:
    doc["base"]["workload"] = "mooncake"  # every request interactive, one tenant
    text, narrow = _printed(doc, write)
    assert "attainment" in text
    assert "interactive" not in text  # the column would repeat attainment
    assert "per request class" not in text and "per tenant" not in text
    assert _fits(text, 80) and _fits(narrow, 50)


def test_two_classes_get_a_column_each(doc: dict[str, Any], write: Any) -> None:
    doc["cases"] = [{"name": "busier", "demand": {"all": 2.0}}]
    text, narrow = _printed(doc, write)  # the synthetic workload: interactive and batch
    assert "attainment per request" in text
    assert any("batch" in line and "interactive" in line for line in text.splitlines())
    assert _fits(text, 80) and _fits(narrow, 50)
