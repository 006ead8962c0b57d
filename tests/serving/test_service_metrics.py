"""Label values fed by clients are bounded: undeclared tenants fold into ``other``, and no
input-fed label takes more than its cap of distinct values."""

from __future__ import annotations

from prometheus_client import generate_latest

from serving.metrics import OTHER, BoundedLabel, ServiceMetrics


def test_undeclared_tenants_fold_into_other() -> None:
    label = BoundedLabel(known=("acme",))
    assert label("acme") == "acme"
    assert label("mallory-1") == OTHER
    label.declare(["globex"])
    assert label("globex") == "globex"


def test_an_open_label_stops_at_its_cap_and_keeps_the_values_it_has() -> None:
    label = BoundedLabel(cap=4, known=None)
    assert [label(f"v{i}") for i in range(6)] == ["v0", "v1", "v2", OTHER, OTHER, OTHER]
    assert label("v1") == "v1"


def test_ten_thousand_tenant_names_make_a_handful_of_series() -> None:
    metrics = ServiceMetrics()
    metrics.tenant_label.declare(["acme"])
    for i in range(10_000):
        metrics.count_shed(f"tenant-{i}", "interactive")
        metrics.count_shed("acme", f"class-{i}")  # even a class name out of bounds
        metrics.count_scrape_failure(f"replica-{i}")
    text = generate_latest(metrics.registry).decode()
    shed = [line for line in text.splitlines() if line.startswith("placement_shed_total{")]
    assert 'placement_shed_total{request_class="interactive",tenant="other"} 10000.0' in shed
    assert len(shed) <= metrics.class_label.cap + 1
    assert "tenant-1" not in text
    assert len(text) < 100_000
