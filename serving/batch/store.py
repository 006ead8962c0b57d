"""Where batch files and jobs live: one SQLite database and a folder of files, on disk.

Every state change is committed before it is acted on, so a process that stops at any moment
loses no job: a file is written (and fsynced) before its row; a job is a row from its creation;
each request of a job is a row whose answer is written the moment it arrives. A request that
was running when the process stopped has no answer row and runs again after the restart (at
least once, never lost). SQLite in WAL mode, one connection, used from the event loop's
thread.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_SCHEMA = """
CREATE TABLE IF NOT EXISTS files (
    id TEXT PRIMARY KEY, tenant TEXT NOT NULL, filename TEXT NOT NULL, purpose TEXT NOT NULL,
    bytes INTEGER NOT NULL, created_at INTEGER NOT NULL, deleted INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS batches (
    id TEXT PRIMARY KEY, tenant TEXT NOT NULL, created_seq INTEGER NOT NULL,
    status TEXT NOT NULL, object TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS requests (
    batch_id TEXT NOT NULL, line INTEGER NOT NULL, custom_id TEXT NOT NULL,
    url TEXT NOT NULL, body TEXT NOT NULL, status INTEGER, answer TEXT,
    PRIMARY KEY (batch_id, line)
);
CREATE INDEX IF NOT EXISTS pending ON requests (batch_id, status);
"""


@dataclass(frozen=True, slots=True)
class StoredFile:
    id: str
    tenant: str
    filename: str
    purpose: str
    bytes: int
    created_at: int

    def as_object(self) -> dict[str, Any]:
        """OpenAI's ``file`` object."""
        return {
            "id": self.id,
            "object": "file",
            "bytes": self.bytes,
            "created_at": self.created_at,
            "filename": self.filename,
            "purpose": self.purpose,
            "status": "processed",
            "status_details": None,
            "expires_at": None,
        }


@dataclass(frozen=True, slots=True)
class BatchRequest:
    batch_id: str
    line: int
    custom_id: str
    url: str
    body: str


def new_id(prefix: str) -> str:
    return f"{prefix}{secrets.token_hex(12)}"


class BatchStore:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.files_dir = root / "files"
        self.files_dir.mkdir(parents=True, exist_ok=True)
        # made where the app is assembled, used from the event loop's thread
        self.db = sqlite3.connect(
            root / "batches.sqlite3", isolation_level=None, check_same_thread=False
        )
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(_SCHEMA)

    def close(self) -> None:
        self.db.close()

    # ---- files ---------------------------------------------------------------------------
    def add_file(
        self, tenant: str, filename: str, purpose: str, content: bytes, *, prefix: str = "file-"
    ) -> StoredFile:
        created = int(time.time())
        stored = StoredFile(new_id(prefix), tenant, filename, purpose, len(content), created)
        path = self.files_dir / stored.id
        tmp = path.with_suffix(".tmp")
        with open(tmp, "wb") as out:
            out.write(content)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
        self.db.execute(
            "INSERT INTO files (id, tenant, filename, purpose, bytes, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (stored.id, tenant, filename, purpose, stored.bytes, stored.created_at),
        )
        return stored

    def file(self, tenant: str, file_id: str) -> StoredFile | None:
        row = self.db.execute(
            "SELECT id, tenant, filename, purpose, bytes, created_at FROM files "
            "WHERE id = ? AND tenant = ? AND deleted = 0",
            (file_id, tenant),
        ).fetchone()
        return None if row is None else StoredFile(*row)

    def files(self, tenant: str) -> list[StoredFile]:
        rows = self.db.execute(
            "SELECT id, tenant, filename, purpose, bytes, created_at FROM files "
            "WHERE tenant = ? AND deleted = 0 ORDER BY created_at DESC, rowid DESC",
            (tenant,),
        )
        return [StoredFile(*row) for row in rows]

    def content(self, file_id: str) -> bytes:
        return (self.files_dir / file_id).read_bytes()

    def delete_file(self, file_id: str) -> None:
        self.db.execute("UPDATE files SET deleted = 1 WHERE id = ?", (file_id,))
        (self.files_dir / file_id).unlink(missing_ok=True)

    # ---- batches -------------------------------------------------------------------------
    def save_batch(self, batch: dict[str, Any], tenant: str) -> None:
        """Insert or update the job (its OpenAI object is stored whole)."""
        seq = self.db.execute("SELECT COALESCE(MAX(created_seq), 0) + 1 FROM batches").fetchone()
        self.db.execute(
            "INSERT INTO batches (id, tenant, created_seq, status, object) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(id) DO UPDATE SET status = excluded.status, object = excluded.object",
            (batch["id"], tenant, seq[0], batch["status"], json.dumps(batch)),
        )

    def batch(self, tenant: str | None, batch_id: str) -> dict[str, Any] | None:
        if tenant is None:
            row = self.db.execute("SELECT object FROM batches WHERE id = ?", (batch_id,))
        else:
            row = self.db.execute(
                "SELECT object FROM batches WHERE id = ? AND tenant = ?", (batch_id, tenant)
            )
        found = row.fetchone()
        return None if found is None else dict(json.loads(found[0]))

    def tenant_of(self, batch_id: str) -> str:
        row = self.db.execute("SELECT tenant FROM batches WHERE id = ?", (batch_id,)).fetchone()
        return str(row[0]) if row is not None else ""

    def batches(self, tenant: str) -> list[dict[str, Any]]:
        rows = self.db.execute(
            "SELECT object FROM batches WHERE tenant = ? ORDER BY created_seq DESC", (tenant,)
        )
        return [dict(json.loads(r[0])) for r in rows]

    def batches_in(self, statuses: Iterable[str]) -> list[dict[str, Any]]:
        wanted = list(statuses)
        marks = ",".join("?" * len(wanted))
        rows = self.db.execute(
            f"SELECT object FROM batches WHERE status IN ({marks}) ORDER BY created_seq",
            wanted,
        )
        return [dict(json.loads(r[0])) for r in rows]

    # ---- the requests of a batch ---------------------------------------------------------
    def add_requests(self, batch_id: str, requests: Iterable[tuple[int, str, str, str]]) -> None:
        """(line, custom_id, url, body) of every request of a validated batch, at once."""
        self.db.execute("BEGIN")
        self.db.executemany(
            "INSERT OR IGNORE INTO requests (batch_id, line, custom_id, url, body) "
            "VALUES (?, ?, ?, ?, ?)",
            ((batch_id, *r) for r in requests),
        )
        self.db.execute("COMMIT")

    def pending(self, batch_id: str, limit: int) -> list[BatchRequest]:
        rows = self.db.execute(
            "SELECT batch_id, line, custom_id, url, body FROM requests "
            "WHERE batch_id = ? AND status IS NULL ORDER BY line LIMIT ?",
            (batch_id, limit),
        )
        return [BatchRequest(*r) for r in rows]

    def answer(self, batch_id: str, line: int, status: int, answer: dict[str, Any]) -> None:
        self.db.execute(
            "UPDATE requests SET status = ?, answer = ? WHERE batch_id = ? AND line = ?",
            (status, json.dumps(answer, separators=(",", ":")), batch_id, line),
        )

    def counts(self, batch_id: str) -> tuple[int, int, int]:
        """(total, answered with 2xx, answered otherwise)."""
        row = self.db.execute(
            "SELECT COUNT(*), SUM(status BETWEEN 200 AND 299), SUM(status IS NOT NULL "
            "AND status NOT BETWEEN 200 AND 299) FROM requests WHERE batch_id = ?",
            (batch_id,),
        ).fetchone()
        return int(row[0]), int(row[1] or 0), int(row[2] or 0)

    def results(self, batch_id: str) -> Iterator[tuple[BatchRequest, int | None, str | None]]:
        rows = self.db.execute(
            "SELECT batch_id, line, custom_id, url, body, status, answer FROM requests "
            "WHERE batch_id = ? ORDER BY line",
            (batch_id,),
        )
        for r in rows:
            yield BatchRequest(*r[:5]), r[5], r[6]
