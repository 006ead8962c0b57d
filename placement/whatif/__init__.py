"""What-if scenarios for capacity planners: change the inputs (replicas, accelerators, demand,
SLOs, credits), solve each case, compare cost and predicted (and simulated) attainment, and
answer the capacity question (the cheapest fleet that holds every SLO)."""

from placement.whatif.load import load_scenario
from placement.whatif.min_cost import MinCostResult, answer_capacity_question
from placement.whatif.run import CaseResult, ScenarioResult, run_case, run_scenario
from placement.whatif.scenario import Scenario, build_scenario

__all__ = [
    "CaseResult",
    "MinCostResult",
    "Scenario",
    "ScenarioResult",
    "answer_capacity_question",
    "build_scenario",
    "load_scenario",
    "run_case",
    "run_scenario",
]
