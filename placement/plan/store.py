"""Plan stores: where published plans live. :class:`PlanStore` is the interface (a Redis store
for many router processes implements the same three methods); :class:`DirectoryPlanStore`
keeps ``plan-<version:08d>.json`` files and a ``latest`` pointer in one directory.

Writes are atomic: each file is written to a temporary name in the same directory and moved
into place with ``os.replace``, so a reader sees either the old or the new file, never half of
one. The plan file goes first and the pointer after, so ``latest`` never names a missing plan.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Protocol

from placement.errors import InputError, read_text
from placement.plan.schema import Plan

LATEST = "latest"


class PlanStore(Protocol):
    def put(self, plan: Plan) -> None: ...
    def get(self, version: int) -> Plan: ...
    def latest(self) -> Plan | None: ...


def _atomic_write(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def plan_file_name(version: int) -> str:
    return f"plan-{version:08d}.json"


def read_plan(path: str | Path) -> Plan:
    """A plan from a JSON file; InputError naming the file (and field) otherwise."""
    p = Path(path)
    return Plan.from_json(read_text(p, "plan"), source=str(p))


class DirectoryPlanStore:
    """Plans as files in ``root`` (created if missing)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)

    def path(self, version: int) -> Path:
        return self.root / plan_file_name(version)

    def put(self, plan: Plan) -> None:
        """Publish ``plan``: its file, then the ``latest`` pointer. Versions never change."""
        target = self.path(plan.version)
        if target.exists():
            raise InputError(
                f"plan version {plan.version} is already published",
                source=str(target),
                field="version",
                expected="a new version",
            )
        _atomic_write(target, plan.to_json())
        _atomic_write(self.root / LATEST, target.name + "\n")

    def get(self, version: int) -> Plan:
        return read_plan(self.path(version))

    def latest(self) -> Plan | None:
        pointer = self.root / LATEST
        if not pointer.exists():
            return None
        name = pointer.read_text().strip()
        return read_plan(self.root / name)

    def versions(self) -> list[int]:
        return sorted(int(p.stem.removeprefix("plan-")) for p in self.root.glob("plan-*.json"))
