"""Declared tenants from YAML: credit shares, burst caps, weights; errors name file and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from placement.domain.tenancy import load_tenants, tenancy_from_dict
from placement.errors import InputError


def test_a_tenants_file_is_read_with_defaults(tmp_path: Path) -> None:
    path = tmp_path / "tenants.yaml"
    path.write_text(
        "tenants:\n"
        "  acme: {credit_share: 0.5}\n"
        "  globex: {credit_share: 0.2, burst_cap: 0.6, weight: 2}\n"
        "  initech: {}\n"
    )
    tenants = load_tenants(path)
    assert tenants["acme"].credit_share == 0.5 and tenants["acme"].burst_cap == 1.0
    assert tenants["globex"].burst_cap == 0.6 and tenants["globex"].weight == 2.0
    assert tenants["initech"].credit_share == 0.0


@pytest.mark.parametrize(
    ("raw", "field", "message"),
    [
        ([1, 2], None, "must be a mapping"),
        ({"tenants": {"a": {"credit": 0.5}}}, "tenants.a.credit", "unknown field"),
        ({"tenants": {"a": {"credit_share": 1.5}}}, "tenants.a.credit_share", "less than"),
        ({"tenants": {}}, "tenants", "at least 1"),
        (
            {"tenants": {"a": {"credit_share": 0.5, "burst_cap": 0.2}}},
            "tenants.a.burst_cap",
            "below",
        ),
        (
            {"tenants": {"a": {"credit_share": 0.6}, "b": {"credit_share": 0.6}}},
            "tenants",
            "sum to 1.2",
        ),
    ],
)
def test_bad_tenants_name_the_field(raw: object, field: str | None, message: str) -> None:
    with pytest.raises(InputError, match=message) as err:
        tenancy_from_dict(raw, source="t.yaml")
    assert err.value.field == field
    assert err.value.source == "t.yaml"


def test_a_binary_or_broken_file_is_an_input_error(tmp_path: Path) -> None:
    binary = tmp_path / "b.yaml"
    binary.write_bytes(bytes(range(128, 256)))
    with pytest.raises(InputError, match="cannot read tenants file"):
        load_tenants(binary)
    broken = tmp_path / "c.yaml"
    broken.write_text("tenants: {a: [\n")
    with pytest.raises(InputError, match="not valid YAML"):
        load_tenants(broken)
