"""A plan store in a directory: one JSON file per version and a ``LATEST`` pointer.

Writes are atomic on POSIX: a version is written to a temporary file and hard-linked to its
final name (``link`` fails if the name exists, so a version is never overwritten); the pointer
and the credits are replaced with ``os.replace``. Several processes on one machine (or on a
shared filesystem with POSIX semantics) may share the directory: the pointer is read, compared
and moved under an exclusive ``flock`` so two writers cannot move it back.

``next_version`` reserves a number with an ``O_EXCL`` file ``.reserved-<version>``; a
reservation at or below the newest published version can never be handed out again (numbers
start above it), so publishing removes those, and the directory holds at most the
reservations of solves still running or failed since the last publication.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from placement.errors import InputError
from placement.plan import Plan
from serving.plan_store.base import (
    CorruptPlan,
    PlanStoreError,
    StoredTenancy,
    credit_counters,
    tenancy_doc,
)

LATEST = "LATEST"
CREDITS = "credits.json"
TENANCY = "tenants.json"
LOCK = ".lock"
RESERVED = ".reserved-"


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

    def _reservations(self) -> list[tuple[int, Path]]:
        out = []
        for p in self.root.glob(RESERVED + "*"):
            try:
                out.append((int(p.name.removeprefix(RESERVED)), p))
            except ValueError:
                continue
        return out

    def next_version(self, *, above: int = 0) -> int:
        # a reservation file makes the number unique across processes
        version = max(max(self._versions(), default=0), above) + 1
        while True:
            reservation = self.root / f"{RESERVED}{version:08d}"
            try:
                fd = os.open(reservation, os.O_CREAT | os.O_EXCL)
            except FileExistsError:
                version += 1
                continue
            os.close(fd)
            if (self.root / _plan_name(version)).exists():
                # published since the scan above, and its reservation already cleaned up
                reservation.unlink(missing_ok=True)
                version += 1
                continue
            return version

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self.root / LOCK, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def _pointer(self) -> int | None:
        try:
            return int((self.root / LATEST).read_text().strip())
        except (FileNotFoundError, ValueError):
            return None

    def put(self, plan: Plan) -> None:
        text = plan.to_json()
        tmp = self._write_temp(text)
        path = self.root / _plan_name(plan.version)
        try:
            os.link(tmp, path)
        except FileExistsError:
            # the same plan again (a publish repeated after a crash) still moves the pointer
            if path.read_text() != text:
                raise PlanStoreError(f"plan version {plan.version} already exists") from None
        finally:
            tmp.unlink(missing_ok=True)
        with self._locked():
            current = self._pointer()
            if current is None:  # no pointer yet (or an unreadable one): the files say
                current = max((v for v in self._versions() if v != plan.version), default=0)
            if plan.version > current:
                os.replace(self._write_temp(str(plan.version)), self.root / LATEST)
        newest = max(self._versions(), default=0)
        for version, path in self._reservations():
            if version <= newest:
                path.unlink(missing_ok=True)

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
            raise CorruptPlan(f"corrupt plan in the store: {exc}") from None

    def latest_version(self) -> int | None:
        pointer = self._pointer()
        if pointer is not None:
            return pointer
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

    def save_tenancy(self, doc: Mapping[str, Any], *, version: int | None = None) -> int:
        with self._locked():
            stored = self.tenancy_version()
            new = stored + 1 if version is None else max(version, stored)
            text = json.dumps({"version": new, "doc": dict(doc)})
            os.replace(self._write_temp(text), self.root / TENANCY)
        return new

    def load_tenancy(self) -> StoredTenancy | None:
        path = self.root / TENANCY
        try:
            raw = json.loads(path.read_text())
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise PlanStoreError(f"cannot read {path}: {exc.strerror}") from None
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise InputError("the stored tenants are not JSON", source=str(path)) from None
        return tenancy_doc(raw, source=str(path))

    def tenancy_version(self) -> int:
        stored = self.load_tenancy()
        return 0 if stored is None else stored.version
