"""Admission and fairness: priority classes, in-flight budgets, Virtual Token Counters."""

from serving.admission.admission import (
    ADMITTED,
    AdmissionController,
    ClassBudget,
    Verdict,
    class_budgets,
)
from serving.admission.vtc import TokenWeights, VirtualTokenCounter

__all__ = [
    "ADMITTED",
    "AdmissionController",
    "ClassBudget",
    "TokenWeights",
    "Verdict",
    "VirtualTokenCounter",
    "class_budgets",
]
