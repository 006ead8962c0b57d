"""A plan store in a directory: one JSON file per version and a ``LATEST`` pointer.

Writes are atomic on POSIX: a version is written to a temporary file and hard-linked to its
final name (``link`` fails if the name exists, so a version is never overwritten); the pointer
and the credits are replaced with ``os.replace``. Several processes on one machine (or on a
shared filesystem with POSIX semantics) may share the directory.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from placement.errors import InputError
from placement.plan import Plan
from serving.plan_store.base import PlanStoreError, credit_counters

LATEST = "LATEST"
CREDITS = "credits.json"


def _plan_name(version: int) -> str:
    return f"plan-{version:08d}.json"


class DirectoryPlanStore:
    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise PlanStoreError(f"cannot create plan directory {self.root}: {exc}") from None

    def _write_temp(self, text: str) -> Path:
        fd, tmp = tempfile.mkstemp(dir=self.root, prefix=".tmp-")
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        return Path(tmp)

    def _versions(self) -> list[int]:
        out = []
        for p in self.root.glob("plan-*.json"):
            try:
                out.append(int(p.stem.removeprefix("plan-")))
            except ValueError:
                continue
        return sorted(out)

    def next_version(self) -> int:
        # a reservation file makes the number unique across processes
        version = max(self._versions(), default=0) + 1
        while True:
            try:
                fd = os.open(self.root / f".reserved-{version:08d}", os.O_CREAT | os.O_EXCL)
            except FileExistsError:
                version += 1
                continue
            os.close(fd)
            return version

    def put(self, plan: Plan) -> None:
        tmp = self._write_temp(plan.to_json())
        try:
            os.link(tmp, self.root / _plan_name(plan.version))
        except FileExistsError:
            raise PlanStoreError(f"plan version {plan.version} already exists") from None
        finally:
            tmp.unlink(missing_ok=True)
        current = self.latest_version()
        if current is None or plan.version > current:
            os.replace(self._write_temp(str(plan.version)), self.root / LATEST)

    def get(self, version: int) -> Plan | None:
        path = self.root / _plan_name(version)
        try:
            text = path.read_text()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise PlanStoreError(f"cannot read {path}: {exc.strerror}") from None
        try:
            return Plan.from_json(text, source=str(path))
        except InputError as exc:
            raise PlanStoreError(f"corrupt plan in the store: {exc}") from None

    def latest_version(self) -> int | None:
        try:
            return int((self.root / LATEST).read_text().strip())
        except (FileNotFoundError, ValueError):
            versions = self._versions()
            return versions[-1] if versions else None

    def latest(self) -> Plan | None:
        version = self.latest_version()
        return None if version is None else self.get(version)

    def save_credits(self, counters: Mapping[str, float]) -> None:
        os.replace(self._write_temp(json.dumps(dict(counters))), self.root / CREDITS)

    def load_credits(self) -> dict[str, float]:
        path = self.root / CREDITS
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            return {}
        except OSError as exc:
            raise InputError(
                f"cannot read the credit state: {exc.strerror}", source=str(path)
            ) from None
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            line = exc.lineno if isinstance(exc, json.JSONDecodeError) else None
            raise InputError("the credit state is not JSON", source=str(path), line=line) from None
        return credit_counters(raw, source=str(path))
