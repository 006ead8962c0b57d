"""Declared tenants and their credits, loaded from YAML.

```yaml
tenants:
  acme:   {credit_share: 0.5}                  # a guaranteed half of the fleet
  globex: {credit_share: 0.2, burst_cap: 0.6}  # at most 60 % when others are idle
  initech: {}                                  # known, no guarantee
```

``credit_share`` is the guaranteed share of fleet capacity (0..1; the shares sum to at most 1),
``burst_cap`` the most it may take (≥ its credit share), ``weight`` its weight in the solver's
objective. A tenant the file does not declare has no credit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from placement.domain.requests import Tenant
from placement.errors import InputError, read_text

CREDIT_TOLERANCE = 1e-9  # shares read from decimal text may sum to 1 + rounding


class _TenantSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    credit_share: float = Field(default=0.0, ge=0, le=1)
    burst_cap: float = Field(default=1.0, ge=0, le=1)
    weight: float = Field(default=1.0, gt=0)


class _TenantsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    tenants: dict[str, _TenantSpec]


def tenants_from_dict(raw: Any, *, source: str = "<tenants>") -> dict[str, Tenant]:
    """Build and validate the declared tenants from parsed YAML."""
    if not isinstance(raw, dict):
        raise InputError(
            "a tenants file must be a mapping", source=source, expected="a 'tenants' key"
        )
    try:
        spec = _TenantsFile.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        msg = "unknown field (a typo?)" if err["type"] == "extra_forbidden" else err["msg"]
        raise InputError(msg, source=source, field=loc) from None
    tenants: dict[str, Tenant] = {}
    for name, t in spec.tenants.items():
        if not name.strip():
            raise InputError("a tenant needs a name", source=source, field="tenants")
        if t.burst_cap + CREDIT_TOLERANCE < t.credit_share:
            raise InputError(
                f"burst_cap {t.burst_cap:g} is below credit_share {t.credit_share:g}",
                source=source,
                field=f"tenants.{name}.burst_cap",
                expected="burst_cap ≥ credit_share",
            )
        tenants[name] = Tenant(
            name=name, credit_share=t.credit_share, burst_cap=t.burst_cap, weight=t.weight
        )
    total = sum(t.credit_share for t in tenants.values())
    if total > 1 + CREDIT_TOLERANCE:
        raise InputError(
            f"credit shares sum to {total:g}",
            source=source,
            field="tenants",
            expected="at most 1: they are shares of one fleet",
        )
    return tenants


def load_tenants(path: str | Path) -> dict[str, Tenant]:
    """Read a tenants YAML file; every error names the file and the field."""
    p = Path(path)
    text = read_text(p, "tenants file")
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = None if mark is None else mark.line + 1
        raise InputError("not valid YAML", source=str(p), line=line) from None
    return tenants_from_dict(raw, source=str(p))
