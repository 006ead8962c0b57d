"""The telemetry store: Parquet files partitioned by UTC day, one folder per table.

```
<store>/requests/date=2026-01-01/part-<uuid>-0.parquet
<store>/replica_samples/date=2026-01-01/part-<uuid>-0.parquet
```

Hive-style partitions, so pandas (``pd.read_parquet(store / "requests")``), pyarrow.dataset and
DuckDB (``read_parquet('<store>/requests/*/*.parquet', hive_partitioning = true)``) read it
as is. Each write adds new, uniquely named files and never rewrites existing ones. A file is
written in a staging folder (``<store>/_staging-<uuid>``, which readers skip) and then renamed
into its partition, so a reader sees each file whole or not at all. Frames are validated
before anything is written, and again when read.
"""

from __future__ import annotations

import os
import shutil
import uuid
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from placement.errors import InputError
from training.telemetry.schema import (
    REPLICA_SAMPLES,
    REQUESTS,
    SORT_KEYS,
    TABLES,
    TIME_COLUMN,
    arrow_schema,
    empty_frame,
    to_frame,
    to_table,
)
from training.telemetry.validate import validate_requests, validate_samples

PARTITION = "date"
_PARTITIONING = ds.partitioning(pa.schema([(PARTITION, pa.string())]), flavor="hive")
_VALIDATORS = {REQUESTS: validate_requests, REPLICA_SAMPLES: validate_samples}


@dataclass(frozen=True, slots=True)
class DaySummary:
    """Rows of one table on one UTC day, and the first and last time in them."""

    table: str
    date: str
    rows: int
    first: pd.Timestamp
    last: pd.Timestamp


def write_telemetry(
    store: Path | str, requests: pd.DataFrame | None, samples: pd.DataFrame | None
) -> list[Path]:
    """Validate both frames (either may be ``None``), then append them to the store (created
    if missing) as new Parquet files, one or more per UTC day; columns outside the schema are
    not stored. Returns the files written."""
    frames = {REQUESTS: requests, REPLICA_SAMPLES: samples}
    for name, frame in frames.items():
        if frame is not None:
            _VALIDATORS[name](frame)
    root = Path(store)
    root.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    for name, frame in frames.items():
        if frame is not None and len(frame):
            written += _append(root, name, frame)
    return written


def _append(root: Path, name: str, frame: pd.DataFrame) -> list[Path]:
    """Write one table's rows into new files of its day partitions, each renamed into place
    only once complete."""
    columns = TABLES[name]
    table = to_table(frame, columns)
    day = pc.strftime(table[TIME_COLUMN[name]], format="%Y-%m-%d")
    table = table.append_column(PARTITION, day)
    batch = uuid.uuid4().hex
    staging = root / f"_staging-{batch}"
    staged: list[str] = []
    try:
        ds.write_dataset(
            table,
            staging,
            format="parquet",
            partitioning=_PARTITIONING,
            basename_template=f"part-{batch}-{{i}}.parquet",
            file_visitor=lambda f: staged.append(f.path),
        )
        final: list[Path] = []
        for path in staged:
            source = Path(path)
            target = root / name / source.relative_to(staging)
            target.parent.mkdir(parents=True, exist_ok=True)
            os.replace(source, target)
            final.append(target)
        return final
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _utc(moment: datetime | None, field: str) -> pa.Scalar | None:
    if moment is None:
        return None
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise InputError(
            f"{moment.isoformat()} has no time zone",
            field=field,
            expected="a timezone-aware time, e.g. 2026-01-01T00:00:00+00:00",
        )
    return pa.scalar(pd.Timestamp(moment).tz_convert("UTC").as_unit("us"))


def _dataset(root: Path, name: str) -> ds.Dataset | None:
    if not root.is_dir():
        raise InputError(
            "telemetry store does not exist",
            source=str(root),
            expected="a folder written by write_telemetry or `placement telemetry export`",
        )
    folder = root / name
    if not folder.is_dir():
        return None
    schema = arrow_schema(TABLES[name]).append(pa.field(PARTITION, pa.string()))
    return ds.dataset(folder, schema=schema, format="parquet", partitioning=_PARTITIONING)


def _check_files(dataset: ds.Dataset, name: str, where: Any = None) -> None:
    """Open the footer of every file ``where`` can touch: a damaged file, or one without the
    table's columns (which a read would fill with nulls and count), is refused naming it."""
    required = [c.name for c in TABLES[name]]
    for fragment in dataset.get_fragments(filter=where):
        try:
            present = set(fragment.physical_schema.names)
        except (pa.ArrowException, OSError) as exc:
            raise InputError(
                f"unreadable telemetry: {_reason(exc)}",
                source=fragment.path,
                expected="a Parquet file",
            ) from None
        missing = [c for c in required if c not in present]
        if missing:
            raise InputError(
                f"not a {name} table: missing column{'s' if len(missing) > 1 else ''} "
                + ", ".join(missing),
                source=fragment.path,
                expected="the columns of training/telemetry/schema.py",
            )


def _to_table(dataset: ds.Dataset, folder: Path, **scan: Any) -> pa.Table:
    try:
        return dataset.to_table(**scan)
    except (pa.ArrowException, OSError) as exc:
        raise InputError(
            f"unreadable telemetry: {_reason(exc)}", source=str(folder), expected="Parquet files"
        ) from None


def _reason(exc: BaseException) -> str:
    """An Arrow error's message on one line, without the file name it repeats."""
    text = " ".join(str(exc).split())
    return text.split("': ", 1)[-1] if "input source '" in text else text


def _read(
    store: Path | str, name: str, start: datetime | None, end: datetime | None
) -> pd.DataFrame:
    """Rows of one table with ``start ≤ time < end`` (either bound optional), sorted and
    validated; partitions outside the range are not opened."""
    root = Path(store)
    columns = TABLES[name]
    lo, hi = _utc(start, "start"), _utc(end, "end")
    dataset = _dataset(root, name)
    if dataset is None:
        return empty_frame(columns)
    time = ds.field(TIME_COLUMN[name])
    where: Any = None
    for condition in (
        None if lo is None else (time >= lo) & (ds.field(PARTITION) >= _day(lo)),
        None if hi is None else (time < hi) & (ds.field(PARTITION) <= _day(hi)),
    ):
        if condition is not None:
            where = condition if where is None else where & condition
    _check_files(dataset, name, where)
    table = _to_table(dataset, root / name, filter=where)
    frame = to_frame(table, columns)
    frame = frame.sort_values(SORT_KEYS[name], kind="stable", ignore_index=True)
    _VALIDATORS[name](frame)
    return frame


def _day(moment: pa.Scalar) -> str:
    day: str = moment.as_py().strftime("%Y-%m-%d")
    return day


def read_requests(
    store: Path | str, start: datetime | None = None, end: datetime | None = None
) -> pd.DataFrame:
    """Per-request records arriving in ``[start, end)``, in the ``requests`` schema's dtypes,
    sorted by arrival time then request id."""
    return _read(store, REQUESTS, start, end)


def read_samples(
    store: Path | str, start: datetime | None = None, end: datetime | None = None
) -> pd.DataFrame:
    """Per-replica samples taken in ``[start, end)``, in the ``replica_samples`` schema's
    dtypes, sorted by time then replica."""
    return _read(store, REPLICA_SAMPLES, start, end)


def summarise_store(store: Path | str) -> list[DaySummary]:
    """Rows and time range per table and UTC day, reading only the time column."""
    root = Path(store)
    out: list[DaySummary] = []
    for name in TABLES:
        dataset = _dataset(root, name)
        if dataset is None:
            continue
        column = TIME_COLUMN[name]
        _check_files(dataset, name)
        times = _to_table(dataset, root / name, columns=[column, PARTITION]).to_pandas()
        for date, group in times.groupby(PARTITION, sort=True):
            out.append(
                DaySummary(
                    table=name,
                    date=str(date),
                    rows=len(group),
                    first=group[column].min(),
                    last=group[column].max(),
                )
            )
    return out
