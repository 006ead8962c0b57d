"""Tenants files: credits, classes, models and traffic shares, every error naming its field."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement.domain.tenancy import load_tenancy, tenancy_from_dict
from placement.errors import InputError
from placement.paths import repo_root


def test_the_shipped_example_loads() -> None:
    t = load_tenancy(repo_root() / "data" / "tenants" / "example.yaml")
    assert set(t.tenants) == {"acme", "globex", "initech"}
    assert t.tenants["acme"].credit_share == 0.5
    assert t.tenants["initech"].burst_cap == 0.5
    assert sum(t.traffic_shares.values()) == pytest.approx(1.0)
    assert t.classes["interactive"].ttft_slo_s == 2.0


def test_models_restrict_a_tenant() -> None:
    t = tenancy_from_dict({"tenants": {"a": {"models": ["llama-3-8b"]}, "b": {}}})
    assert t.may_use("a", "llama-3-8b") and not t.may_use("a", "qwen2.5-32b")
    assert t.may_use("b", "qwen2.5-32b")


def test_custom_classes_join_the_defaults() -> None:
    t = tenancy_from_dict(
        {
            "classes": {"realtime": {"priority": 0, "ttft_slo_s": 0.5, "tpot_slo_s": 0.05}},
            "tenants": {"a": {}},
        }
    )
    assert {"interactive", "batch", "realtime"} <= set(t.classes)
    assert t.classes["realtime"].ttft_slo_s == 0.5


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ({"tenants": {"a": {"credit_share": 0.7}, "b": {"credit_share": 0.4}}}, "tenants"),
        ({"tenants": {"a": {"credit_share": 1.5}}}, "tenants.a.credit_share"),
        ({"tenants": {"a": {"credits": 0.5}}}, "tenants.a.credits"),
        ({"tenants": {}}, "tenants"),
        ({"tenants": {"a": {"traffic_share": 0.5}, "b": {}}}, "tenants.b.traffic_share"),
        ({"classes": {"x": {"priority": 0, "ttft_slo_s": -1, "tpot_slo_s": 1}}}, "classes"),
    ],
)
def test_bad_documents_name_the_field(doc: dict[str, object], field: str) -> None:
    with pytest.raises(InputError) as err:
        tenancy_from_dict(doc, source="t.yaml")
    assert field in (err.value.field or "")
    assert "t.yaml" in str(err.value)


def test_unreadable_files_are_input_errors(tmp_path: Path) -> None:
    bad = tmp_path / "t.yaml"
    bad.write_text("tenants: [unclosed")
    with pytest.raises(InputError, match="not valid YAML"):
        load_tenancy(bad)
    with pytest.raises(InputError, match="cannot read"):
        load_tenancy(tmp_path / "missing.yaml")
