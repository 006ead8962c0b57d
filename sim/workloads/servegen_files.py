"""Reading ServeGen's per-client statistics (Alibaba Bailian), with every field validated.

A client ``i`` of a category/model directory has

* ``chunk-<i>-trace.csv`` — no header; one row per 600 s window:
  ``window_start_s, rate_rps, cv, family, arg1, arg2``. ``family`` names the distribution fitted
  to the window's inter-arrival gaps (Weibull, Gamma or Exponential; empty when idle).
  What the arguments mean, measured on the published m-small and deepseek-r1 files:
  ``arg1`` is the shape and ``arg2`` the scale in seconds. For Gamma, ``1/sqrt(arg1)`` equals the
  ``cv`` column exactly and ``arg1·arg2·rate_rps`` is 1.000 at the median (0.97 at p10, 0.04 at
  p1: a few fits disagree with the window's rate). For Weibull, ``arg2·Γ(1+1/arg1)·rate_rps``
  has median 1.22 and spans 0.25–3.2 (p1–p99), and its CV matches the ``cv`` column only loosely
  (median ratio 0.80). The fitted *shape* is therefore kept and the scale is always re-derived
  from ``rate_rps`` (see :mod:`sim.workloads.servegen`).
* ``chunk-<i>-dataset.json`` (missing for some clients) — ``{window_start_s: {"input_tokens":
  "<{tokens: probability}>", "output_tokens": "<...>", ...}}`` over 6 h windows; the PMFs are
  Python dict literals (parsed with :func:`ast.literal_eval`, never ``eval``) and ``"{}"`` when
  the window saw no request. Extra keys (deepseek-r1's ``reason_ratio``) are ignored.
"""

from __future__ import annotations

import ast
import csv
import json
import math
import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import numpy.typing as npt

from placement.errors import InputError

RATE_WINDOW_S = 600.0
LENGTH_WINDOW_S = 21600.0
FAMILIES = ("Weibull", "Gamma", "Exponential")
_TRACE_NAME = re.compile(r"chunk-(\d+)-trace\.csv")
_FIELDS = ("window_start_s", "rate_rps", "cv", "family", "arg1", "arg2")


@dataclass(frozen=True, slots=True)
class RateWindow:
    """One 600 s window of a client: its mean rate and fitted inter-arrival distribution."""

    start_s: float
    end_s: float
    rate_rps: float
    cv: float
    family: str  # "" when idle
    shape: float  # arg1
    scale_s: float  # arg2 (kept for reference; the sampler re-derives the scale from the rate)


@dataclass(frozen=True, slots=True)
class LengthPMF:
    """A probability mass function over token counts, ready for inverse-CDF sampling."""

    tokens: npt.NDArray[np.int64]
    cdf: npt.NDArray[np.float64]  # normalised, last element exactly 1.0

    @classmethod
    def from_weights(cls, weights: dict[int, float]) -> LengthPMF:
        tokens = np.array(sorted(weights), dtype=np.int64)
        cdf = np.cumsum(np.array([weights[t] for t in tokens.tolist()], dtype=np.float64))
        cdf /= cdf[-1]
        cdf[-1] = 1.0
        return cls(tokens=tokens, cdf=cdf)

    def probabilities(self) -> dict[int, float]:
        return dict(zip(self.tokens.tolist(), np.diff(self.cdf, prepend=0.0).tolist(), strict=True))

    def mean(self) -> float:
        return float(np.dot(self.tokens, np.diff(self.cdf, prepend=0.0)))

    def sample(self, rng: np.random.Generator, n: int) -> npt.NDArray[np.int64]:
        """``n`` independent token counts."""
        return self.tokens[np.searchsorted(self.cdf, rng.random(n), side="right")]


def mixture(parts: Sequence[tuple[float, LengthPMF]]) -> LengthPMF:
    """The PMF of a weighted mixture (weights need not sum to 1; at least one must be > 0)."""
    total: dict[int, float] = {}
    for weight, pmf in parts:
        for tokens, p in pmf.probabilities().items():
            total[tokens] = total.get(tokens, 0.0) + weight * p
    return LengthPMF.from_weights(total)


def client_ids(directory: Path) -> list[int]:
    """The client ids of a ServeGen category/model directory, ascending."""
    if not directory.is_dir():
        raise InputError("no such ServeGen directory", source=str(directory))
    ids = sorted(
        int(m.group(1)) for p in directory.iterdir() if (m := _TRACE_NAME.fullmatch(p.name))
    )
    if not ids:
        raise InputError("no chunk-<i>-trace.csv files", source=str(directory))
    return ids


def trace_path(directory: Path, client: int) -> Path:
    return directory / f"chunk-{client}-trace.csv"


def dataset_path(directory: Path, client: int) -> Path:
    return directory / f"chunk-{client}-dataset.json"


def read_rate_windows(path: Path) -> tuple[RateWindow, ...]:
    """A client's 600 s windows in time order; raises InputError naming line and field.

    Parsed once per file version (path, size, modification time) and cached.
    """
    try:
        status = path.stat()
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=str(path)) from exc
    return _read_rate_windows(path, status.st_size, status.st_mtime_ns)


@lru_cache(maxsize=512)
def _read_rate_windows(path: Path, size: int, mtime_ns: int) -> tuple[RateWindow, ...]:
    del size, mtime_ns  # only part of the cache key
    windows: list[RateWindow] = []
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            reader = csv.reader(handle)
            for row in reader:
                if not row:
                    continue
                window = _parse_window(row, str(path), reader.line_num)
                if windows and window.start_s < windows[-1].end_s:
                    raise InputError(
                        f"window starts at {window.start_s:g} s, before the previous one ends",
                        source=str(path),
                        line=reader.line_num,
                        field=_FIELDS[0],
                        expected=f"increasing starts {RATE_WINDOW_S:g} s apart or more",
                    )
                windows.append(window)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise InputError("not UTF-8 text", source=str(path)) from exc
    except csv.Error as exc:
        raise InputError(f"malformed CSV ({exc})", source=str(path)) from exc
    return tuple(windows)


def _parse_window(row: list[str], source: str, line: int) -> RateWindow:
    """One window; a row the quick reading cannot vouch for goes through every check, which
    names the line and field of what is wrong."""
    try:
        start_text, rate_text, cv_text, family, shape_text, scale_text = row
        start, rate, cv = float(start_text), float(rate_text), float(cv_text)
        shape, scale = float(shape_text), float(scale_text)
    except ValueError:  # not six columns, or not numbers
        return _checked_window(row, source, line)
    family = family.strip()
    if (
        math.isfinite(start + rate + cv + shape + scale)
        and min(start, rate, cv) >= 0
        and (family in FAMILIES if family else rate == 0)
        and (rate == 0 or family not in _SHAPED or shape > 0)
    ):
        return RateWindow(start, start + RATE_WINDOW_S, rate, cv, family, shape, scale)
    return _checked_window(row, source, line)


_SHAPED = ("Weibull", "Gamma")


def _checked_window(row: list[str], source: str, line: int) -> RateWindow:
    if len(row) != len(_FIELDS):
        raise InputError(
            f"{len(row)} columns",
            source=source,
            line=line,
            expected=f"{len(_FIELDS)} columns: " + ",".join(_FIELDS),
        )
    start, rate, cv = (_number(row[i], _FIELDS[i], source, line) for i in range(3))
    family = row[3].strip()
    shape, scale = (_number(row[i], _FIELDS[i], source, line) for i in (4, 5))
    for value, name in ((start, 0), (rate, 1), (cv, 2)):
        if value < 0:
            raise InputError(
                f"got {value:g}",
                source=source,
                line=line,
                field=_FIELDS[name],
                expected="a number >= 0",
            )
    if family and family not in FAMILIES:
        raise InputError(
            f"got {family!r}",
            source=source,
            line=line,
            field="family",
            expected=" / ".join(FAMILIES) + " or empty when idle",
        )
    if rate > 0 and not family:
        raise InputError(
            f"empty while rate_rps is {rate:g}",
            source=source,
            line=line,
            field="family",
            expected="a fitted distribution for an active window",
        )
    if rate > 0 and family in ("Weibull", "Gamma") and shape <= 0:
        raise InputError(
            f"shape {shape:g}",
            source=source,
            line=line,
            field="arg1",
            expected=f"a positive {family} shape",
        )
    return RateWindow(
        start_s=start,
        end_s=start + RATE_WINDOW_S,
        rate_rps=rate,
        cv=cv,
        family=family,
        shape=shape,
        scale_s=scale,
    )


def _number(text: str, name: str, source: str, line: int) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise InputError(
            f"got {text!r}", source=source, line=line, field=name, expected="a finite number"
        )
    return value


class LengthTable:
    """A client's 6 h input/output length PMFs, parsed on first use.

    :meth:`at` answers for the window covering a time, falling back to the nearest earlier window
    with data, then the nearest later one; None when the client has no data at all.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._raw = _read_dataset(path)
        self._starts = sorted(self._raw)
        self._parsed: dict[float, tuple[LengthPMF, LengthPMF] | None] = {}

    def at(self, time_s: float) -> tuple[LengthPMF, LengthPMF] | None:
        """(input PMF, output PMF) to use for an arrival at ``time_s``."""
        here = bisect_right(self._starts, time_s)
        earlier = reversed(self._starts[:here])
        later = self._starts[here:]
        for start in (*earlier, *later):
            pmfs = self._window(start)
            if pmfs is not None:
                return pmfs
        return None

    def _window(self, start: float) -> tuple[LengthPMF, LengthPMF] | None:
        if start not in self._parsed:
            key, entry = self._raw[start]
            pmfs = (
                _parse_pmf(entry, "input_tokens", self.path, key),
                _parse_pmf(entry, "output_tokens", self.path, key),
            )
            if (pmfs[0] is None) != (pmfs[1] is None):
                raise InputError(
                    "one PMF empty and the other not",
                    source=str(self.path),
                    field=key,
                    expected="both empty or both given",
                )
            self._parsed[start] = None if pmfs[0] is None or pmfs[1] is None else (pmfs[0], pmfs[1])
        return self._parsed[start]


def _read_dataset(path: Path) -> dict[float, tuple[str, dict[str, object]]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", source=str(path)) from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InputError(f"not valid JSON ({exc})", source=str(path)) from exc
    if not isinstance(data, dict):
        raise InputError("not a JSON object", source=str(path), expected="{window_start_s: {...}}")
    out: dict[float, tuple[str, dict[str, object]]] = {}
    for key, entry in data.items():
        try:
            start = float(key)
        except ValueError:
            start = math.nan
        if not math.isfinite(start) or start < 0:
            raise InputError(
                f"window key {key!r}",
                source=str(path),
                field=key,
                expected="a window start in seconds >= 0",
            )
        if not isinstance(entry, dict):
            raise InputError(
                "not an object",
                source=str(path),
                field=key,
                expected='{"input_tokens": ..., "output_tokens": ...}',
            )
        out[start] = (key, entry)
    return out


def _parse_pmf(entry: dict[str, object], name: str, path: Path, key: str) -> LengthPMF | None:
    """A PMF from its dict-literal text; None for an empty window."""
    where = f"{key}.{name}"
    text = entry.get(name)
    if not isinstance(text, str):
        raise InputError(
            "missing or not a string",
            source=str(path),
            field=where,
            expected="a dict literal {tokens: probability}",
        )
    quick = _plain_dict(text)
    if quick is not None and min(quick, default=0) >= 0 and min(quick.values(), default=0) >= 0:
        if not quick:
            return None
        if sum(quick.values()) <= 0:
            raise InputError(
                "probabilities sum to 0", source=str(path), field=where, expected="a positive total"
            )
        return LengthPMF.from_weights(quick)
    try:
        weights = ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError) as exc:
        raise InputError(
            f"not a literal ({exc.__class__.__name__})",
            source=str(path),
            field=where,
            expected="a dict literal {tokens: probability}",
        ) from None
    if not isinstance(weights, dict):
        raise InputError(
            f"got a {type(weights).__name__}",
            source=str(path),
            field=where,
            expected="a dict literal {tokens: probability}",
        )
    if not weights:
        return None
    for tokens, p in weights.items():
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
            raise InputError(
                f"token count {tokens!r}",
                source=str(path),
                field=where,
                expected="integer token counts >= 0",
            )
        if isinstance(p, bool) or not isinstance(p, int | float) or not 0 <= p < math.inf:
            raise InputError(
                f"probability {p!r} for {tokens}",
                source=str(path),
                field=where,
                expected="probabilities >= 0",
            )
    if sum(weights.values()) <= 0:
        raise InputError(
            "probabilities sum to 0", source=str(path), field=where, expected="a positive total"
        )
    return LengthPMF.from_weights({int(t): float(p) for t, p in weights.items()})


def _plain_dict(text: str) -> dict[int, float] | None:
    """``{tokens: probability, …}`` read without Python's parser (ten times faster on these
    files' megabytes of literals): integer keys, finite numbers; None for anything else, which
    the full literal reading then judges and names."""
    if not text.isascii():
        return None
    body = text.strip()
    if len(body) < 2 or body[0] != "{" or body[-1] != "}":
        return None
    inner = body[1:-1]
    if not inner.strip():
        return {}
    parts = inner.replace(":", ",").split(",")
    if len(parts) % 2:
        return None
    try:
        keys = [int(k) for k in parts[0::2]]
        values = [float(v) for v in parts[1::2]]
    except ValueError:
        return None
    if not all(map(math.isfinite, values)):
        return None
    return dict(zip(keys, values, strict=True))
