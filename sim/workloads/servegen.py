"""Multi-tenant request streams sampled from ServeGen's per-client statistics.

Each ServeGen client becomes a tenant ``<tenant_prefix>-<i>``. Its arrivals are a renewal process
whose gap distribution changes every 600 s window: the family and *shape* fitted by ServeGen
(Gamma shape ``arg1``; Weibull shape ``arg1``; Exponential) with the scale chosen so that the mean
gap is exactly ``1 / rate_rps``. (The published scales do not always give that mean — see
:mod:`sim.workloads.servegen_files` for what was measured — and the rate column is the quantity
the fleet must carry.) The process runs on across window boundaries (the gap that straddles a
boundary was drawn in the earlier window); an idle window ends it, and every fresh start — the
period's first window or the first after an idle one — draws its first arrival from the
equilibrium forward-recurrence distribution, so the rate is unbiased from the first second.
Input and output lengths are drawn from the client's PMF for the covering 6 h window (nearest
earlier window with data, else nearest later); a client without a dataset file uses the mixture
of all clients' PMFs for that window, weighted by their rates in it.

Tenants' ``credit_share`` is proportional to their mean rate over the period in the trace
(normalised to sum to 1); clients idle over the whole period are left out. ``rate_scale``
multiplies every rate (what-if demand changes; the "mixed" workload uses it to tone ServeGen
down). Every client draws from its own random stream ``default_rng((seed, client))``, so a
tenant's requests do not change when ``clients`` includes more or fewer others. All requests
are ``interactive``; no prefix information exists.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt

from placement.domain.requests import Tenant
from placement.errors import InputError
from placement.paths import shared_file
from sim.workloads.assemble import assemble
from sim.workloads.base import Workload
from sim.workloads.servegen_files import (
    LENGTH_WINDOW_S,
    LengthPMF,
    LengthTable,
    RateWindow,
    client_ids,
    dataset_path,
    mixture,
    read_rate_windows,
    trace_path,
)

SERVEGEN_DIR = Path("tenants/servegen")
SERVEGEN_CLASS = "interactive"

FloatArray = npt.NDArray[np.float64]


def load_servegen(
    category: str = "language",
    model: str = "m-small",
    *,
    duration_s: float,
    start_s: float = 0.0,
    seed: int,
    clients: int | None = None,
    tenant_prefix: str = "sg",
    rate_scale: float = 1.0,
    root: Path | None = None,
) -> Workload:
    """Requests of ServeGen clients arriving in ``[start_s, start_s + duration_s)``.

    ``clients`` keeps the first N client ids (ascending); ``rate_scale`` multiplies every
    client's rate (gap shapes, hence burstiness, unchanged); ``root`` is the ServeGen directory
    holding ``<category>/<model>/`` (default: the shared copy). Arrivals are re-timed so the
    first request arrives at 0.0. Raises InputError for a malformed file, an unknown
    category/model or a period the statistics do not cover.
    """
    if not rate_scale > 0 or not math.isfinite(rate_scale):
        raise InputError(f"rate_scale={rate_scale!r}", field="rate_scale", expected="> 0")
    if seed < 0:
        raise InputError(f"seed={seed!r}", field="seed", expected=">= 0")
    stats = _Directory(servegen_directory(category, model, root))
    rates = _client_rates(stats, duration_s=duration_s, start_s=start_s, clients=clients)
    active = [client for client, rate in rates.items() if rate > 0]
    total_rate = sum(rates[c] for c in active)
    names = [f"{tenant_prefix}-{c}" for c in active]
    tenants = {
        name: Tenant(name=name, credit_share=rates[c] / total_rate)
        for name, c in zip(names, active, strict=True)
    }
    streams = [
        _sample_client(
            c, stats, start_s=start_s, end_s=start_s + duration_s, seed=seed, rate_scale=rate_scale
        )
        for c in active
    ]
    arrivals = [a for s in streams for a in s.arrivals]
    return assemble(
        f"servegen-{category}-{model}",
        arrival_s=np.concatenate(arrivals) if arrivals else np.empty(0),
        input_tokens=_concat([a for s in streams for a in s.input_tokens]),
        output_tokens=_concat([a for s in streams for a in s.output_tokens]),
        tenant_index=_concat(
            [np.full(a.size, k, dtype=np.int64) for k, s in enumerate(streams) for a in s.arrivals]
        ),
        tenant_names=names,
        class_index=np.zeros(sum(a.size for a in arrivals), dtype=np.int64),
        class_names=[SERVEGEN_CLASS],
        tenants=tenants,
    )


def servegen_client_rates(
    category: str = "language",
    model: str = "m-small",
    *,
    duration_s: float,
    start_s: float = 0.0,
    clients: int | None = None,
    root: Path | None = None,
) -> dict[int, float]:
    """Each client's mean rate (requests/s) over the period according to its trace."""
    stats = _Directory(servegen_directory(category, model, root))
    return _client_rates(stats, duration_s=duration_s, start_s=start_s, clients=clients)


def servegen_directory(category: str, model: str, root: Path | None = None) -> Path:
    """``<root>/<category>/<model>``; InputError listing the known ones when it does not exist."""
    base = root if root is not None else shared_file(SERVEGEN_DIR)
    directory = base / category / model
    if not directory.is_dir():
        known = sorted(
            f"{c.name}/{m.name}" for c in base.glob("*") for m in c.glob("*") if m.is_dir()
        )
        raise InputError(
            f"no ServeGen statistics for {category}/{model}",
            source=str(base),
            expected="one of " + ", ".join(known) if known else None,
        )
    return directory


def _client_rates(
    stats: _Directory, *, duration_s: float, start_s: float, clients: int | None
) -> dict[int, float]:
    if not duration_s > 0 or not math.isfinite(duration_s):
        raise InputError(f"duration_s={duration_s!r}", field="duration_s", expected="> 0")
    if not start_s >= 0 or not math.isfinite(start_s):
        raise InputError(f"start_s={start_s!r}", field="start_s", expected=">= 0")
    ids = stats.ids if clients is None else stats.ids[: max(clients, 0)]
    end_s = start_s + duration_s
    covered = max((w[-1].end_s for w in map(stats.windows, stats.ids) if w), default=0.0)
    if end_s > covered:
        raise InputError(
            f"period [{start_s:g}, {end_s:g}) s",
            source=str(stats.directory),
            field="duration_s",
            expected=f"a period within [0, {covered:g}) s",
        )
    return {c: _requests(stats.windows(c), start_s, end_s) / duration_s for c in ids}


def _concat(parts: list[npt.NDArray[np.int64]]) -> npt.NDArray[np.int64]:
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.int64)


@dataclass
class _ClientStream:
    """What one client produced over the period, window by window."""

    arrivals: list[FloatArray] = field(default_factory=list)
    input_tokens: list[npt.NDArray[np.int64]] = field(default_factory=list)
    output_tokens: list[npt.NDArray[np.int64]] = field(default_factory=list)


class _Directory:
    """One category/model directory: client traces and length tables, read once on demand."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.ids = client_ids(directory)
        self._tables: dict[int, LengthTable | None] = {}
        self._pooled: dict[float, tuple[LengthPMF, LengthPMF]] = {}

    def windows(self, client: int) -> tuple[RateWindow, ...]:
        return read_rate_windows(trace_path(self.directory, client))

    def lengths(self, client: int, time_s: float) -> tuple[LengthPMF, LengthPMF]:
        """(input PMF, output PMF) for an arrival of ``client`` at ``time_s``."""
        own = self._table(client)
        pmfs = own.at(time_s) if own is not None else None
        return pmfs if pmfs is not None else self._pooled_at(time_s)

    def _table(self, client: int) -> LengthTable | None:
        if client not in self._tables:
            path = dataset_path(self.directory, client)
            self._tables[client] = LengthTable(path) if path.exists() else None
        return self._tables[client]

    def _pooled_at(self, time_s: float) -> tuple[LengthPMF, LengthPMF]:
        """All clients' PMFs for the 6 h window of ``time_s``, weighted by their rate in it."""
        start = math.floor(time_s / LENGTH_WINDOW_S) * LENGTH_WINDOW_S
        if start not in self._pooled:
            parts: list[tuple[float, tuple[LengthPMF, LengthPMF]]] = []
            for client in self.ids:
                table = self._table(client)
                pmfs = table.at(time_s) if table is not None else None
                if pmfs is not None:
                    parts.append((self._requests_in(client, start), pmfs))
            if not parts:
                raise InputError(
                    "no client has a dataset file with lengths",
                    source=str(self.directory),
                    expected="at least one chunk-<i>-dataset.json",
                )
            if sum(w for w, _ in parts) <= 0:
                parts = [(1.0, pmfs) for _, pmfs in parts]
            self._pooled[start] = (
                mixture([(w, p[0]) for w, p in parts]),
                mixture([(w, p[1]) for w, p in parts]),
            )
        return self._pooled[start]

    def _requests_in(self, client: int, start: float) -> float:
        return _requests(self.windows(client), start, start + LENGTH_WINDOW_S)


def _overlap(window: RateWindow, start_s: float, end_s: float) -> float:
    return max(0.0, min(window.end_s, end_s) - max(window.start_s, start_s))


def _requests(windows: tuple[RateWindow, ...], start_s: float, end_s: float) -> float:
    """Expected requests in ``[start_s, end_s)``: the windows (in time order, not overlapping)
    that meet the period, found by bisection, each by its rate × overlap."""
    first = bisect_right(windows, start_s, key=lambda w: w.end_s)
    total = 0.0
    for w in windows[first:]:
        if w.start_s >= end_s:
            break
        total += w.rate_rps * _overlap(w, start_s, end_s)
    return total


def _sample_client(
    client: int,
    stats: _Directory,
    *,
    start_s: float,
    end_s: float,
    seed: int,
    rate_scale: float,
) -> _ClientStream:
    """Arrivals and lengths of one client over [start_s, end_s), window by window."""
    rng = np.random.default_rng((seed, client))
    stream = _ClientStream()
    pending: float | None = None  # the next arrival, already drawn, or None after idleness
    for window in stats.windows(client):
        lo, hi = max(window.start_s, start_s), min(window.end_s, end_s)
        if hi <= lo:
            continue
        if window.rate_rps <= 0:
            pending = None
            continue
        rate_rps = window.rate_rps * rate_scale
        if pending is None:
            pending = lo + float(_gaps(rng, window, rate_rps, 1, equilibrium=True)[0])
        times, pending = _renewal(rng, window, rate_rps, pending, hi)
        if times.size == 0:
            continue
        input_pmf, output_pmf = stats.lengths(client, window.start_s)
        stream.arrivals.append(times)
        stream.input_tokens.append(np.maximum(input_pmf.sample(rng, times.size), 1))
        stream.output_tokens.append(output_pmf.sample(rng, times.size))
    return stream


def _renewal(
    rng: np.random.Generator, window: RateWindow, rate_rps: float, first_s: float, end_s: float
) -> tuple[FloatArray, float]:
    """Arrivals in [first_s, end_s) starting with one at ``first_s``, and the next one after."""
    if first_s >= end_s:
        return np.empty(0), first_s
    chunks = [np.array([first_s])]
    last = first_s
    while True:
        expected = (end_s - last) * rate_rps
        n = int(1.1 * expected + 4.0 * math.sqrt(expected)) + 16
        times = last + np.cumsum(_gaps(rng, window, rate_rps, n))
        inside = int(np.searchsorted(times, end_s, side="left"))
        chunks.append(times[:inside])
        if inside < n:
            return np.concatenate(chunks), float(times[inside])
        last = float(times[-1])


def _gaps(
    rng: np.random.Generator,
    window: RateWindow,
    rate_rps: float,
    n: int,
    *,
    equilibrium: bool = False,
) -> FloatArray:
    """``n`` inter-arrival gaps (s) with mean ``1 / rate_rps`` and the window's fitted shape.

    ``equilibrium=True`` draws instead the time from an arbitrary instant to the next arrival
    of the stationary process: ``U · X*`` with ``X*`` the length-biased gap (for Gamma(k) it is
    Gamma(k+1); for Weibull(k), ``X*^k`` is Gamma(1 + 1/k); Exponential is memoryless).
    """
    mean_gap = 1.0 / rate_rps
    k = window.shape
    if window.family == "Gamma":
        raw = rng.standard_gamma(k + 1.0 if equilibrium else k, n) / k
    elif window.family == "Weibull":
        unit = math.exp(math.lgamma(1.0 + 1.0 / k))  # the mean of Weibull(k, scale 1)
        if equilibrium:
            raw = rng.standard_gamma(1.0 + 1.0 / k, n) ** (1.0 / k) / unit
        else:
            raw = rng.weibull(k, n) / unit
    else:  # Exponential
        return rng.exponential(mean_gap, n)
    if equilibrium:
        raw = raw * rng.random(n)
    return np.asarray(raw * mean_gap, dtype=np.float64)
