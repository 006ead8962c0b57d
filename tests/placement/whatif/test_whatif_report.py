"""The printed what-if table says only what is true: attainment per request class or per tenant
only where demand has more than one, and no cell cut to an ellipsis in a narrow terminal."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from placement.whatif.load import load_scenario
from placement.whatif.report import disagreement, disagrees, print_results, table_rows
from placement.whatif.run import CaseResult, run_scenario


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


def _case(name: str, predicted: float, simulated: float | None) -> CaseResult:
    return CaseResult(
        case=name,
        where="cases.0",
        swept_value=None,
        status="optimal",
        fleet="h100×1",
        replicas=1,
        cost_per_hour=1.0,
        demand_rps=1.0,
        attainment=predicted,
        shed_share=0.0,
        simulated=None if simulated is None else {"attainment": simulated},
    )


def test_cases_whose_prediction_the_simulator_contradicts_are_flagged(
    doc: dict[str, Any], write: Any
) -> None:
    scenario = load_scenario(write(doc))
    close, far, unsimulated = (
        _case("close", 0.93, 0.95),
        _case("far", 0.95, 0.80),
        _case("alone", 0.90, None),
    )
    assert not disagrees(close) and disagrees(far) and not disagrees(unsimulated)
    assert abs((disagreement(far) or 0.0) - 15.0) < 1e-9 and disagreement(unsimulated) is None
    console = Console(width=120, record=True, file=io.StringIO())
    print_results(scenario, [close, far, unsimulated], console)
    text = console.export_text()
    assert "+15.0 !" in text and "-2.0" in text and "-2.0 !" not in text
    assert "far: predicted and simulated attainment differ by +15.0 points" in text
    assert "close: predicted" not in text
    rows = {r["case"]: r for r in table_rows([close, far, unsimulated])}
    assert rows["far"]["disagrees"] is True and rows["close"]["disagrees"] is False
    assert rows["alone"]["disagrees"] is None
