"""A tenant's routed requests, prompt tokens and charge are counted under the same keys whether
its keys were kept or made again (serving.usage: the keys made once per tenant, bounded)."""

from __future__ import annotations

import pytest

from serving import usage
from serving.usage import UsageBook


def test_routed_counts_add_up_past_the_bound_on_kept_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(usage, "MAX_TENANT_KEYS_KEPT", 3)
    book = UsageBook()
    for k in range(40):
        book.routed(f"t{k % 7}", 10 + k, 1.5 * k)
    counts = book.pending()
    for t in range(7):
        ks = [k for k in range(40) if k % 7 == t]
        assert counts[(f"t{t}", "requests")] == len(ks)
        assert counts[(f"t{t}", "prompt_tokens")] == sum(10 + k for k in ks)
        assert counts[(f"t{t}", "charged")] == sum(1.5 * k for k in ks)
    assert len(book._routed_keys) <= 3
    view = book.view("t3", credit_share=0.0, now=book.since + 1.0)
    assert view.requests == len([k for k in range(40) if k % 7 == 3])
