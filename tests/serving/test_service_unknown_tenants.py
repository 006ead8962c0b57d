"""The policy for tenants the tenants file does not declare: admitted as newcomers by
default, refused by name with ``unknown_tenants: reject``."""

from __future__ import annotations

import pytest
from one_replica import one_h100

from placement.domain.requests import Tenant
from placement.errors import InputError
from serving.route import PlacementRoutePath, RouteQuery
from serving.service import PlacementService


def _service(*, reject: bool, declared: bool = True) -> PlacementService:
    service = PlacementService(
        route_path_factory=lambda r: PlacementRoutePath(list(r.values())),
        tenants={"acme": Tenant(name="acme", credit_share=0.5)} if declared else {},
        reject_unknown_tenants=reject,
    )
    service.register_replica(one_h100())
    return service


def _query(tenant: str) -> RouteQuery:
    return RouteQuery(
        tenant=tenant,
        model="llama-3-8b",
        request_class="interactive",
        block_hashes=(1,),
        input_tokens=100,
        max_output_tokens=10,
    )


def test_undeclared_tenants_are_newcomers_by_default() -> None:
    assert _service(reject=False).route(_query("stranger")).decision.replica_id == "h100-0"


def test_reject_refuses_an_undeclared_tenant_by_name() -> None:
    service = _service(reject=True)
    with pytest.raises(InputError, match="unknown tenant 'stranger'") as err:
        service.route(_query("stranger"))
    assert err.value.field == "tenant"
    assert service.route(_query("acme")).decision.replica_id == "h100-0"


def test_reject_without_a_tenants_file_refuses_nobody() -> None:
    service = _service(reject=True, declared=False)
    assert service.route(_query("anyone")).decision.replica_id == "h100-0"
