"""What-if scenarios: YAML that changes inputs, never code.

```yaml
name: add-h100s
base:
  fleet: ../fleets/hetero.yaml     # relative to this file
  workload: mixed                  # a name from sim.workloads.registry
  window_s: 120                    # seconds of the workload planned for
  seed: 0
  capacity: auto                   # auto (champion, else prior) | prior | champion
  attainment: replica              # predicted attainment per replica | per pool (pooled);
                                   # default: the route profile's (whatif --route-profile)
  tenants: {azure-conv: {credit_share: 0.3}}
  demand: {all: 2.0}               # every case's demand multiplied by this first
accelerators:                      # new kinds from datasheet figures, for this scenario only
  - {kind: X200, dense_bf16_tflops: 1800, hbm_gb: 192, hbm_tbps: 6.0, cost_per_hour: 6.0}
cases:
  - name: double-conv
    demand: {tenants: {azure-conv: 2.0}}
sweep:                             # one case per value, set at ``vary`` inside ``template``
  vary: add_replicas.0.count
  values: [1, 2, 4]
  template: {add_replicas: [{accelerator: H100-SXM, count: 0}]}
capacity_question:                 # the cheapest fleet that holds every SLO
  candidates: [H100-SXM, A100-80G, L40S]
```

The loader works in visible phases: **parse** (YAML) → **defaults** (pydantic, with unknown
keys refused) → **build** (sweep expanded into cases, the fleet file read) → **validate**
(names and contradictions checked against the fleet, the workload's tenants and classes, and
the catalogue). Every error is an :class:`InputError` naming the file and the dotted field,
e.g. ``cases.2.add_replicas.0.accelerator``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from placement.errors import InputError, read_text
from placement.solver.solve import AttainmentModel

BASE_CASE = "base"
CapacityMode = Literal["auto", "prior", "champion"]
DEFAULT_WINDOW_S = 120.0
DEFAULT_TIME_LIMIT_S = 5.0
MAX_CASES = 200


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TenantChange(_Strict):
    """New credit settings for a tenant (unset fields keep the workload's)."""

    credit_share: float | None = Field(default=None, ge=0, le=1)
    burst_cap: float | None = Field(default=None, ge=0, le=1)
    weight: float | None = Field(default=None, gt=0)


class SloChange(_Strict):
    """New p95 SLOs for a request class (unset fields keep the class's)."""

    ttft_slo_s: float | None = Field(default=None, gt=0)
    tpot_slo_s: float | None = Field(default=None, gt=0)


class AddReplicas(_Strict):
    """``count`` more replicas of an accelerator; into the group ``kind`` (default: the group of
    that accelerator, model and TP when the fleet has one, else a new group)."""

    accelerator: str
    count: int = Field(ge=0, le=10_000)
    model: str | None = None  # default: the fleet's model when it has only one
    tp: int = Field(default=1, ge=1, le=64)
    kind: str | None = None


class RemoveReplicas(_Strict):
    """``count`` fewer replicas of the group ``kind`` or of every group of ``accelerator``."""

    kind: str | None = None
    accelerator: str | None = None
    count: int = Field(ge=0, le=10_000)

    @model_validator(mode="after")
    def _one_selector(self) -> RemoveReplicas:
        if (self.kind is None) == (self.accelerator is None):
            raise ValueError("give exactly one of 'kind' (a fleet group) or 'accelerator'")
        return self


class DemandChange(_Strict):
    """Demand multipliers; a request's multiplier is ``all × tenants[t] × classes[c]``."""

    all: float = Field(default=1.0, ge=0, le=100)
    tenants: dict[str, float] = Field(default_factory=dict)
    classes: dict[str, float] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _non_negative(self) -> DemandChange:
        for where, table in (("tenants", self.tenants), ("classes", self.classes)):
            for name, m in table.items():
                if not 0 <= m <= 100:
                    raise ValueError(f"{where}.{name}: multiplier {m} outside [0, 100]")
        return self

    def times(self, other: DemandChange) -> DemandChange:
        """Both multipliers applied (a case's on top of the base's)."""

        def product(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
            return {k: a.get(k, 1.0) * b.get(k, 1.0) for k in sorted(set(a) | set(b))}

        # a product may pass the per-field limit; both factors were checked
        return DemandChange.model_construct(
            all=self.all * other.all,
            tenants=product(self.tenants, other.tenants),
            classes=product(self.classes, other.classes),
        )

    @property
    def is_identity(self) -> bool:
        return (
            self.all == 1.0
            and all(m == 1.0 for m in self.tenants.values())
            and all(m == 1.0 for m in self.classes.values())
        )


class Changes(_Strict):
    """What a case changes against the base (every field optional)."""

    add_replicas: tuple[AddReplicas, ...] = ()
    remove_replicas: tuple[RemoveReplicas, ...] = ()
    demand: DemandChange = DemandChange()
    slos: dict[str, SloChange] = Field(default_factory=dict)
    tenants: dict[str, TenantChange] = Field(default_factory=dict)


class CaseSpec(Changes):
    name: str = Field(min_length=1, max_length=80)


class Sweep(_Strict):
    """One case per value: ``template`` with the value set at the dotted path ``vary``."""

    vary: str = Field(min_length=1)
    values: tuple[float, ...] = Field(min_length=1, max_length=MAX_CASES)
    template: dict[str, Any] = Field(default_factory=dict)
    name: str = "sweep"


class AcceleratorSpec(_Strict):
    """A new accelerator kind from datasheet figures (cost per GPU-hour)."""

    kind: str = Field(min_length=1, max_length=40)
    dense_bf16_tflops: float = Field(gt=0, le=1e6)
    hbm_gb: float = Field(gt=0, le=1e5)
    hbm_tbps: float = Field(gt=0, le=1e4)
    cost_per_hour: float = Field(ge=0)
    interconnect_gbps: float = Field(default=450.0, gt=0)
    boost_clock_ghz: float | None = Field(default=None, gt=0, le=10)
    compute_units: int | None = Field(default=None, gt=0, le=100_000)


class CapacityQuestion(_Strict):
    """The cheapest fleet (replicas per candidate kind) whose capacity at SLO serves the base
    demand with ``changes`` applied (fleet changes are ignored), at most ``max_utilisation``
    of each replica's capacity."""

    candidates: tuple[str, ...] = Field(min_length=1)
    model: str | None = None
    tp: int = Field(default=1, ge=1, le=64)
    min_count: dict[str, int] = Field(default_factory=dict)
    max_count: dict[str, int] = Field(default_factory=dict)
    default_max_count: int = Field(default=64, ge=1, le=10_000)
    max_utilisation: float = Field(default=0.9, gt=0, le=1)
    changes: Changes = Changes()
    verify: bool = True


class Base(_Strict):
    fleet: str | dict[str, Any]
    workload: str
    window_s: float = Field(default=DEFAULT_WINDOW_S, gt=0, le=86_400)
    seed: int = 0
    capacity: CapacityMode = "auto"
    fixed_capacity: dict[str, float] | None = None  # req/s per accelerator (tests, sketches)
    time_limit_s: float = Field(default=DEFAULT_TIME_LIMIT_S, gt=0, le=600)
    tenants: dict[str, TenantChange] = Field(default_factory=dict)
    demand: DemandChange = DemandChange()  # applied to every case (multiplies the case's)
    simulate: bool = True
    attainment: AttainmentModel | None = None  # the plans' predicted-attainment model


class _ScenarioDoc(_Strict):
    name: str = Field(min_length=1, max_length=80)
    description: str = ""
    base: Base
    accelerators: tuple[AcceleratorSpec, ...] = ()
    cases: tuple[CaseSpec, ...] = ()
    sweep: Sweep | None = None
    capacity_question: CapacityQuestion | None = None


class Case(_Strict):
    """One case to run: its changes, and where they were written (for error messages)."""

    name: str
    changes: Changes
    where: str  # "cases.2", "sweep.values.1" or "base"
    swept_value: float | None = None


class Scenario(_Strict):
    """A loaded, validated scenario. ``fleet`` is the fleet document (read from the file),
    so a case can run on a worker that cannot see the scenario's folder."""

    name: str
    description: str
    source: str
    fleet: dict[str, Any]
    workload: str
    window_s: float
    seed: int
    capacity: CapacityMode
    fixed_capacity: dict[str, float] | None
    time_limit_s: float
    base_tenants: dict[str, TenantChange]
    base_demand: DemandChange
    simulate: bool
    attainment: AttainmentModel | None  # None: the route profile's (see plan_attainment)
    accelerators: tuple[AcceleratorSpec, ...]
    cases: tuple[Case, ...]  # the base case first
    sweep_vary: str | None
    capacity_question: CapacityQuestion | None

    @property
    def plan_attainment(self) -> AttainmentModel:
        """The model of the plans' predicted attainment: ``base.attainment``, else the default
        route profile's (its weighted lookup follows the plan's split: per replica)."""
        return self.attainment or "replica"


# ---------------------------------------------------------------- parse


def read_scenario_yaml(path: Path) -> Any:
    text = read_text(path, "scenario")
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise InputError("not valid YAML", source=str(path), line=line) from None


# ---------------------------------------------------------------- defaults


def _validation_error(exc: ValidationError, source: str, prefix: str = "") -> InputError:
    errors = exc.errors()
    err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
    loc = ".".join(str(p) for p in err["loc"])
    msg = err["msg"].removeprefix("Value error, ")
    if err["type"] == "extra_forbidden":
        msg = "unknown field (a typo?)"
    field = f"{prefix}.{loc}" if prefix and loc else (prefix or loc)
    return InputError(msg, source=source, field=field or None)


def _doc(raw: Any, source: str) -> _ScenarioDoc:
    if not isinstance(raw, dict):
        raise InputError(
            "a scenario must be a mapping", source=source, expected="keys 'name' and 'base'"
        )
    try:
        return _ScenarioDoc.model_validate(raw)
    except ValidationError as exc:
        raise _validation_error(exc, source) from None


# ---------------------------------------------------------------- build


def _set_path(doc: dict[str, Any], path: str, value: Any, source: str) -> None:
    """Set ``value`` at the dotted ``path`` inside a case template (lists by index)."""
    parts = path.split(".")
    node: Any = doc
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise InputError(
                    f"'{'.'.join(parts[: i + 1])}' is not in the template",
                    source=source,
                    field="sweep.vary",
                    expected="a path to an existing list item in sweep.template",
                )
            if last:
                node[int(part)] = value
            else:
                node = node[int(part)]
        elif isinstance(node, dict):
            if last:
                node[part] = value
            else:
                node = node.setdefault(part, {})
        else:
            raise InputError(
                f"'{'.'.join(parts[:i])}' is a value, not a mapping or list",
                source=source,
                field="sweep.vary",
            )


def _sweep_cases(sweep: Sweep, source: str) -> list[Case]:
    cases = []
    for i, value in enumerate(sweep.values):
        doc = copy.deepcopy(sweep.template)
        # counts must stay integers for pydantic's int fields
        _set_path(doc, sweep.vary, int(value) if float(value).is_integer() else value, source)
        where = f"sweep.values.{i}"
        try:
            changes = Changes.model_validate(doc)
        except ValidationError as exc:
            raise _validation_error(exc, source, f"{where}({sweep.vary}) template") from None
        label = f"{value:g}"
        cases.append(
            Case(name=f"{sweep.name}={label}", changes=changes, where=where, swept_value=value)
        )
    return cases


def _fleet_doc(fleet: str | dict[str, Any], folder: Path, source: str) -> dict[str, Any]:
    if isinstance(fleet, dict):
        return fleet
    path = Path(fleet)
    if not path.is_absolute():
        path = folder / path
    if not path.exists():
        # also accept the repository's data/fleets/<name>.yaml by bare name
        from placement.paths import repo_root

        named = repo_root() / "data" / "fleets" / f"{fleet}.yaml"
        if named.exists():
            path = named
        else:
            raise InputError(f"fleet file {fleet!r} not found", source=source, field="base.fleet")
    raw = read_scenario_yaml(path)
    if not isinstance(raw, dict):
        raise InputError("a fleet must be a mapping", source=str(path))
    return raw


def build_scenario(raw: Any, *, source: str = "<scenario>", folder: Path | None = None) -> Scenario:
    """Defaults and build: a :class:`Scenario` whose names are not yet checked (see
    :func:`validate_scenario`)."""
    doc = _doc(raw, source)
    cases = [Case(name=BASE_CASE, changes=Changes(), where="base")]
    for i, spec in enumerate(doc.cases):
        cases.append(
            Case(
                name=spec.name,
                changes=Changes.model_validate(spec.model_dump(exclude={"name"})),
                where=f"cases.{i}",
            )
        )
    if doc.sweep is not None:
        cases.extend(_sweep_cases(doc.sweep, source))
    if len(cases) > MAX_CASES:
        raise InputError(
            f"{len(cases)} cases", source=source, field="cases", expected=f"≤ {MAX_CASES}"
        )
    seen: dict[str, str] = {}
    for c in cases:
        if c.name in seen:
            raise InputError(
                f"case name {c.name!r} is used twice (also at {seen[c.name]})",
                source=source,
                field=f"{c.where}.name",
            )
        seen[c.name] = c.where
    b = doc.base
    return Scenario(
        name=doc.name,
        description=doc.description,
        source=source,
        fleet=_fleet_doc(b.fleet, folder or Path.cwd(), source),
        workload=b.workload,
        window_s=b.window_s,
        seed=b.seed,
        capacity=b.capacity,
        fixed_capacity=b.fixed_capacity,
        time_limit_s=b.time_limit_s,
        base_tenants=b.tenants,
        base_demand=b.demand,
        simulate=b.simulate,
        attainment=b.attainment,
        accelerators=doc.accelerators,
        cases=tuple(cases),
        sweep_vary=doc.sweep.vary if doc.sweep is not None else None,
        capacity_question=doc.capacity_question,
    )
