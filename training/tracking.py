"""Where training runs and model versions are recorded, and the names they are recorded under.

The default tracking store is the project's ``mlruns/``: run and registry metadata in the SQLite
database ``mlruns/mlflow.db`` (MLflow ≥ 3.7 makes SQLite its default local backend and keeps the
plain-file store for backward compatibility only), artifacts (model directories, plots) under
``mlruns/artifacts/<experiment>/``. ``MLFLOW_TRACKING_URI`` overrides it — a tracking server
(``http://host:5000``) or another database; the registry always lives beside the runs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from placement.paths import repo_root

if TYPE_CHECKING:
    from mlflow.tracking import MlflowClient

TRACKING_URI_ENV = "MLFLOW_TRACKING_URI"
LOGGING_LEVEL_ENV = "MLFLOW_LOGGING_LEVEL"
LATENCY_MODEL = "placement-latency"
THROUGHPUT_MODEL = "placement-throughput"
CHAMPION = "champion"
DEFAULT_EXPERIMENT = "placement-predictors"
SQLITE_PREFIX = "sqlite:///"


@contextlib.contextmanager
def tracking_to(uri: str) -> Iterator[None]:
    """``MLFLOW_TRACKING_URI`` set to ``uri`` inside the block, restored after."""
    before = os.environ.get(TRACKING_URI_ENV)
    os.environ[TRACKING_URI_ENV] = uri
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(TRACKING_URI_ENV, None)
        else:
            os.environ[TRACKING_URI_ENV] = before


def default_store() -> Path:
    """The project's embedded MLflow folder: ``<repo>/mlruns``."""
    return repo_root() / "mlruns"


def tracking_uri() -> str:
    """``$MLFLOW_TRACKING_URI`` if set, else ``sqlite:///<repo>/mlruns/mlflow.db``."""
    configured = os.environ.get(TRACKING_URI_ENV)
    if configured:
        return configured
    return f"{SQLITE_PREFIX}{default_store() / 'mlflow.db'}"


def artifact_root(uri: str) -> Path | None:
    """Where artifacts go for a local SQLite store (an ``artifacts/`` folder beside the
    database); ``None`` for a server or another database, whose own default then applies."""
    if not uri.startswith(SQLITE_PREFIX):
        return None
    database = Path(uri.removeprefix(SQLITE_PREFIX))
    return database.parent / "artifacts"


@dataclass(frozen=True, slots=True)
class AliasLookup:
    """What the local store says of an alias: ``known`` False when it cannot tell (a tracking
    server, another database, a schema it does not read); else ``version`` (None: no version
    holds the alias, or there is no store yet)."""

    known: bool
    version: str | None = None


def alias_version_in_store(model: str, alias: str) -> AliasLookup:
    """The version of ``model`` holding ``alias`` in the local SQLite store, read without
    MLflow (importing and opening MLflow costs seconds; a fresh install has no store at all).
    One indexed read: cheap enough to poll."""
    uri = tracking_uri()
    if not uri.startswith(SQLITE_PREFIX):
        return AliasLookup(known=False)
    database = Path(uri.removeprefix(SQLITE_PREFIX))
    if not database.exists():
        return AliasLookup(known=True)
    try:
        with contextlib.closing(sqlite3.connect(f"{database.as_uri()}?mode=ro", uri=True)) as db:
            row = db.execute(
                "SELECT version FROM registered_model_aliases WHERE name = ? AND alias = ? LIMIT 1",
                (model, alias),
            ).fetchone()
    except sqlite3.Error:
        return AliasLookup(known=False)  # an older or newer schema: let MLflow read it
    return AliasLookup(known=True, version=None if row is None else str(row[0]))


def alias_in_store(model: str, alias: str) -> bool | None:
    """Whether the local SQLite store holds ``alias`` for ``model``, read without MLflow;
    ``None`` when this cannot tell (a tracking server or another database): ask MLflow."""
    lookup = alias_version_in_store(model, alias)
    return lookup.version is not None if lookup.known else None


def champion_version() -> str | None:
    """The version of ``placement-latency`` holding ``@champion`` now (None: none does):
    from the local store without MLflow when it can, else asked of MLflow (seconds the first
    time: call it off the event loop)."""
    lookup = alias_version_in_store(LATENCY_MODEL, CHAMPION)
    if lookup.known:
        return lookup.version
    from mlflow.exceptions import MlflowException

    try:
        return str(connect().get_model_version_by_alias(LATENCY_MODEL, CHAMPION).version)
    except MlflowException:
        return None


def missing_champion() -> str | None:
    """Why no champion can be loaded, when the local store says so without MLflow; ``None``
    when one may exist (then MLflow is asked)."""
    if alias_in_store(LATENCY_MODEL, CHAMPION) is not False:
        return None
    return (
        f"no version of {LATENCY_MODEL} holds the {CHAMPION} alias in {tracking_uri()}; "
        "train one with `placement train` and promote it with `placement models promote`"
    )


def mlflow_warnings_only() -> None:
    """Let MLflow's own log through from WARNING up, unless ``MLFLOW_LOGGING_LEVEL`` says
    otherwise: MLflow logs routine steps (creating the store's tables, validating the input
    example) at INFO, which a command reporting its own progress would print twice."""
    if os.environ.get(LOGGING_LEVEL_ENV):
        return
    import mlflow  # noqa: F401  (configures its loggers when imported; the level goes after)

    logging.getLogger("mlflow").setLevel(logging.WARNING)


def connect() -> MlflowClient:
    """Point MLflow's fluent API at :func:`tracking_uri` (runs and registry) and return a
    client for the same store. A local store's folder is created if missing."""
    import mlflow
    from mlflow.tracking import MlflowClient

    # MLflow draws a tqdm bar per artifact download, which would break up the CLI's own output
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    uri = tracking_uri()
    root = artifact_root(uri)
    if root is not None:
        root.parent.mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    return MlflowClient(tracking_uri=uri, registry_uri=uri)


def ensure_experiment(client: MlflowClient, name: str) -> str:
    """The id of experiment ``name``, created (artifacts under :func:`artifact_root`) if new."""
    existing = client.get_experiment_by_name(name)
    if existing is not None:
        return str(existing.experiment_id)
    root = artifact_root(tracking_uri())
    location = None if root is None else (root / name).resolve().as_uri()
    return str(client.create_experiment(name, artifact_location=location))
