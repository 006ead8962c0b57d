"""Engine priorities from a request's class and its tenant's credit standing."""

from __future__ import annotations

import pytest

from placement.domain.requests import DEFAULT_CLASSES
from placement.errors import InputError
from serving.admission.engine_priority import CLASS, CREDIT, OWED_AT, EnginePriority


def test_by_class_the_class_priority_is_sent() -> None:
    p = EnginePriority(DEFAULT_CLASSES, mode=CLASS)
    assert p.of("acme", "interactive") == 0
    assert p.of("acme", "batch") == 1


def test_by_credit_owed_tenants_go_first_within_their_class_and_classes_stay_apart() -> None:
    standing = {"owed": 0.0, "edge": OWED_AT, "over": 1.0}
    p = EnginePriority(DEFAULT_CLASSES, mode=CREDIT, standing=standing.__getitem__)
    assert p.of("owed", "interactive") == 0
    assert p.of("edge", "interactive") == 0
    assert p.of("over", "interactive") == 1
    # an owed batch request still goes after every interactive one
    assert p.of("owed", "batch") == 2 > p.of("over", "interactive")
    assert p.of("over", "batch") == 3


def test_credit_without_a_standing_and_unknown_inputs_are_refused() -> None:
    with pytest.raises(InputError, match="credit standing"):
        EnginePriority(DEFAULT_CLASSES, mode=CREDIT)
    with pytest.raises(InputError, match="engine_priority"):
        EnginePriority(DEFAULT_CLASSES, mode="fifo")
    with pytest.raises(InputError, match="unknown request class"):
        EnginePriority(DEFAULT_CLASSES).of("acme", "gold")
