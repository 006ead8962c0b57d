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
        (
            {"tenants": {"a": {"request_class": "gold"}}},
            "tenants.a.request_class",
            "'gold' is not defined",
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


DIGEST = "sha256:" + "ab" * 32


def test_credits_in_gpu_seconds_become_shares_of_the_fleet() -> None:
    raw = {
        "tenants": {
            "acme": {"credit_gpu_seconds": 7200, "window_s": 3600},  # 2 of 8 GPUs
            "globex": {"credit_share": 0.5},
        }
    }
    tenancy = tenancy_from_dict(raw, fleet_gpus=8)
    assert tenancy.tenants["acme"].credit_share == pytest.approx(0.25)
    with pytest.raises(InputError, match="needs a fleet") as err:
        tenancy_from_dict(raw)
    assert err.value.field == "tenants.acme.credit_gpu_seconds"
    with pytest.raises(InputError, match="sum to"):  # 0.75 + 0.5 on a 4-GPU fleet
        tenancy_from_dict(raw, fleet_gpus=2.6667)
    both = {"tenants": {"acme": {"credit_gpu_seconds": 10, "credit_share": 0.1}}}
    with pytest.raises(InputError, match="not both"):
        tenancy_from_dict(both, fleet_gpus=8)


def test_tenant_keys_and_the_document_round_trip() -> None:
    raw = {
        "classes": {"bulk": {"priority": 2, "ttft_slo_s": 60, "tpot_slo_s": 1, "sheddable": True}},
        "tenants": {
            "acme": {"credit_share": 0.5, "api_keys": [{"name": "app", "digest": DIGEST}]},
            "globex": {},
        },
    }
    tenancy = tenancy_from_dict(raw)
    [key] = tenancy.keys
    assert (key.tenant, key.name, key.digest, key.scopes) == ("acme", "app", DIGEST, ("route",))
    assert tenancy_from_dict(tenancy.doc) == tenancy
    with pytest.raises(InputError) as err:
        tenancy_from_dict({"tenants": {"acme": {"api_keys": [{"name": "x", "digest": "k"}]}}})
    assert err.value.field == "tenants.acme.api_keys.0.digest"
    assert tenancy_from_dict({"tenants": {}}, allow_empty=True).tenants == {}


def test_a_tenant_may_name_the_class_its_requests_come_in() -> None:
    tenancy = tenancy_from_dict(
        {
            "classes": {"gold": {"priority": 0, "ttft_slo_s": 0.5, "tpot_slo_s": 0.04}},
            "tenants": {"a": {"request_class": "gold"}, "b": {"request_class": "batch"}, "c": {}},
        }
    )
    assert dict(tenancy.request_classes) == {"a": "gold", "b": "batch"}
    assert tenancy.classes["gold"].ttft_slo_s == 0.5
