"""Measured operator tables (NVIDIA AIConfigurator, vLLM) loaded once and indexed for lookup.

The tables of a profile live under ``<profile>/<op>/vllm/<version>/`` (``gemm``, ``attention``,
``comm``, ``moe``), found by :func:`find_profile` in the catalogue folders (``PLACEMENT_PROFILES``,
``--profiles``; ``<folder>/<profile>`` or ``<folder>/aiconfigurator/<profile>``) and in
``<shared data>/profiles/aiconfigurator``. Latencies there are milliseconds per call on one
GPU; every :class:`Curve` here holds **seconds**.

Which rows are kept (one value per measured point):

- dtype ``bfloat16`` for GEMM, attention (``attn_dtype`` and ``kv_cache_dtype``), MoE and
  all-reduce; ``window_size == 0`` (full attention) where the column exists;
- MoE with ``moe_ep_size == 1`` and ``distribution == 'balanced'`` when the table has it for the
  shape, else ``power_law_1.01`` (the mildest skew measured);
- kernel variant: **the fastest per point**. After the filters above the tables hold one kernel per
  point almost everywhere (e.g. FA3 on H100, ``torch.nn.functional.linear`` GEMMs); where several
  remain (all-reduce in CUDA-graph and eager mode, a FA4 row beside FA3) the fastest is the GPU time
  an engine that picks its best kernel would see. For all-reduce that is the CUDA-graph variant:
  the eager rows add the host launch latency, which a busy engine overlaps with GPU work.
- the newest ``<version>`` folder when there are several.

Generation attention rows are indexed by the context length ``isl + step`` (the KV tokens each
decoding sequence reads); context attention rows by ``isl`` (a prefill of ``isl`` tokens with no
cached context).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from placement.domain.catalogue import profile_folders
from placement.errors import InputError, ProfileUnavailable
from placement.paths import shared_data

DTYPE = "bfloat16"
MOE_DISTRIBUTIONS = ("balanced", "power_law_1.01")
BALANCED = MOE_DISTRIBUTIONS[0]
FRAMEWORK = "vllm"
_MS = 1e-3


class ShapeNotProfiled(ProfileUnavailable):
    """The tables exist but do not cover a shape the model needs (the reason says which)."""


@dataclass(frozen=True, slots=True)
class Curve:
    """Latency (s) measured at increasing ``xs`` (tokens, context, bytes…); at least one point."""

    xs: tuple[float, ...]
    ys: tuple[float, ...]


HeadKey = tuple[int, int, int]  # (num_heads, num_kv_heads, head_dim) on one GPU
MoeKey = tuple[int, int, int, int, int]  # (hidden, inter, topk, num_experts, moe_tp_size)


@dataclass(frozen=True, slots=True, kw_only=True)
class OperatorProfile:
    """All tables of one accelerator, indexed for the cost model.

    ``gemm[(n, k)]`` is latency over ``m``; ``context_attention[head][batch]`` latency over
    ``isl``; ``generation_attention[head][batch]`` latency over context length;
    ``all_reduce[num_gpus]`` latency over message bytes; ``moe[key]`` latency over tokens,
    measured under the token routing ``moe_routing[key]`` (``balanced`` when absent).
    """

    name: str
    version: str
    gemm: dict[tuple[int, int], Curve]
    gemm_ns: tuple[int, ...]
    gemm_ks: tuple[int, ...]
    context_attention: dict[HeadKey, dict[int, Curve]]
    generation_attention: dict[HeadKey, dict[int, Curve]]
    all_reduce: dict[int, Curve]
    moe: dict[MoeKey, Curve]
    moe_routing: dict[MoeKey, str] = field(default_factory=dict)
    # operators predicted from a datasheet rather than measured (synthetic profiles only)
    predicted: tuple[str, ...] = ()


def profiles_root() -> Path:
    """Folder holding one sub-folder of measured tables per accelerator profile."""
    return shared_data() / "profiles" / "aiconfigurator"


def _is_profile(folder: Path) -> bool:
    return (folder / "gemm" / FRAMEWORK).is_dir()


def profile_roots() -> tuple[Path, ...]:
    """Folders searched for ``<profile>/``: the catalogue folders, latest first (each itself
    and its ``aiconfigurator/``), then the shared data's."""
    roots: list[Path] = []
    for folder in reversed(profile_folders()):
        roots += [folder, folder / "aiconfigurator"]
    return (*roots, profiles_root())


def find_profile(profile: str) -> Path | None:
    """The folder of ``profile`` (a name, or an absolute path): the first root holding it."""
    path = Path(profile)
    if path.is_absolute():
        return path if _is_profile(path) else None
    return next((root / profile for root in profile_roots() if _is_profile(root / profile)), None)


def available_profiles() -> tuple[str, ...]:
    """Profile names that have at least a GEMM table, in every root."""
    names = {
        p.name
        for root in profile_roots()
        if root.is_dir()
        for p in root.iterdir()
        if _is_profile(p)
    }
    return tuple(sorted(names))


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else -1 for part in version.split("."))


def _version_dir(folder: Path, op: str) -> Path | None:
    base = folder / op / FRAMEWORK
    if not base.is_dir():
        return None
    versions = [p for p in base.iterdir() if p.is_dir()]
    if not versions:
        return None
    return max(versions, key=lambda p: _version_key(p.name))


def _read(path: Path, columns: Iterable[str], optional: Iterable[str] = ()) -> pd.DataFrame:
    """Read ``columns`` (required) and whichever of ``optional`` the table has."""
    wanted = list(columns)
    try:
        present = set(pq.read_schema(path).names)
        missing = [c for c in wanted if c not in present]
        if missing:
            raise InputError(
                "missing column(s) " + ", ".join(missing),
                source=str(path),
                field=missing[0],
                expected="the AIConfigurator schema",
            )
        return pd.read_parquet(path, columns=wanted + [c for c in optional if c in present])
    except (OSError, ValueError) as exc:
        raise ProfileUnavailable(f"{path}: cannot read the table ({exc})") from exc


def _curve(xs: Iterable[float], ys_ms: Iterable[float]) -> Curve:
    pairs = sorted(zip(xs, ys_ms, strict=True))
    return Curve(xs=tuple(float(x) for x, _ in pairs), ys=tuple(float(y) * _MS for _, y in pairs))


def _curves(frame: pd.DataFrame, keys: list[str], x: str) -> dict[tuple[int, ...], Curve]:
    """Fastest latency per (keys, x) point, as one curve over ``x`` per key."""
    fastest = frame.groupby([*keys, x], sort=True)["latency"].min().reset_index()
    key_rows = list(zip(*(fastest[k].astype("int64").tolist() for k in keys), strict=True))
    xs, ys = fastest[x].tolist(), fastest["latency"].tolist()
    out: dict[tuple[int, ...], Curve] = {}
    start = 0
    for i in range(1, len(key_rows) + 1):  # rows are sorted by key: cut where the key changes
        if i == len(key_rows) or key_rows[i] != key_rows[start]:
            out[key_rows[start]] = _curve(xs[start:i], ys[start:i])
            start = i
    return out


def _load_gemm(path: Path) -> dict[tuple[int, int], Curve]:
    frame = _read(path, ("gemm_dtype", "m", "n", "k", "latency"))
    frame = frame[frame["gemm_dtype"] == DTYPE]
    return {(key[0], key[1]): c for key, c in _curves(frame, ["n", "k"], "m").items()}


def _attention_rows(path: Path) -> pd.DataFrame:
    columns = ("batch_size", "isl", "step", "num_heads", "num_key_value_heads", "head_dim")
    frame = _read(path, (*columns, "attn_dtype", "kv_cache_dtype", "latency"), ("window_size",))
    keep = (frame["attn_dtype"] == DTYPE) & (frame["kv_cache_dtype"] == DTYPE)
    if "window_size" in frame.columns:
        keep &= frame["window_size"] == 0
    return frame[keep]


def _by_head(
    curves: dict[tuple[int, ...], Curve],
) -> dict[HeadKey, dict[int, Curve]]:
    out: dict[HeadKey, dict[int, Curve]] = {}
    for (heads, kv_heads, head_dim, batch), curve in curves.items():
        out.setdefault((heads, kv_heads, head_dim), {})[batch] = curve
    return out


def _load_context_attention(path: Path) -> dict[HeadKey, dict[int, Curve]]:
    frame = _attention_rows(path)
    keys = ["num_heads", "num_key_value_heads", "head_dim", "batch_size"]
    return _by_head(_curves(frame, keys, "isl"))


def _load_generation_attention(path: Path) -> dict[HeadKey, dict[int, Curve]]:
    frame = _attention_rows(path)
    frame = frame.assign(context=frame["isl"] + frame["step"])
    keys = ["num_heads", "num_key_value_heads", "head_dim", "batch_size"]
    return _by_head(_curves(frame, keys, "context"))


def _load_all_reduce(path: Path) -> dict[int, Curve]:
    frame = _read(path, ("allreduce_dtype", "num_gpus", "message_size", "latency"))
    frame = frame[frame["allreduce_dtype"] == DTYPE]
    return {key[0]: c for key, c in _curves(frame, ["num_gpus"], "message_size").items()}


def _load_moe(path: Path) -> tuple[dict[MoeKey, Curve], dict[MoeKey, str]]:
    """The MoE curves and the routing distribution each was measured under."""
    keys = ["hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size"]
    frame = _read(
        path, (*keys, "moe_dtype", "moe_ep_size", "distribution", "num_tokens", "latency")
    )
    frame = frame[(frame["moe_dtype"] == DTYPE) & (frame["moe_ep_size"] == 1)]
    out: dict[MoeKey, Curve] = {}
    routing: dict[MoeKey, str] = {}
    # the preferred distribution wins: fill from the least preferred up, overwriting
    for distribution in reversed(MOE_DISTRIBUTIONS):
        rows = frame[frame["distribution"] == distribution]
        for key, curve in _curves(rows, keys, "num_tokens").items():
            moe_key = (key[0], key[1], key[2], key[3], key[4])
            out[moe_key] = curve
            routing[moe_key] = distribution
    return out, routing


def load_profile(profile: str) -> OperatorProfile:
    """Load and index every table of ``profile`` (a name like ``"h100_sxm"`` or a folder);
    cached per process and folder.

    Raises :class:`ProfileUnavailable` when the GEMM or attention tables are missing; the
    all-reduce and MoE tables are optional (empty when absent).
    """
    folder = find_profile(profile)
    if folder is None:
        searched = ", ".join(str(r) for r in profile_roots())
        raise ProfileUnavailable(f"no GEMM/attention tables for profile '{profile}' in {searched}")
    return _load_folder(folder.resolve(), Path(profile).name)


@cache
def _load_folder(folder: Path, name: str) -> OperatorProfile:
    gemm_dir = _version_dir(folder, "gemm")
    attention_dir = _version_dir(folder, "attention")
    if gemm_dir is None or attention_dir is None:
        raise ProfileUnavailable(f"no GEMM/attention tables for profile '{name}' in {folder}")
    gemm = _load_gemm(gemm_dir / "gemm_perf.parquet")
    comm_dir = _version_dir(folder, "comm")
    moe_dir = _version_dir(folder, "moe")
    all_reduce_path = None if comm_dir is None else comm_dir / "custom_allreduce_perf.parquet"
    moe_path = None if moe_dir is None else moe_dir / "moe_perf.parquet"
    moe, routing = ({}, {}) if moe_path is None or not moe_path.exists() else _load_moe(moe_path)
    return OperatorProfile(
        name=name,
        version=gemm_dir.name,
        gemm=gemm,
        gemm_ns=tuple(sorted({n for n, _ in gemm})),
        gemm_ks=tuple(sorted({k for _, k in gemm})),
        context_attention=_load_context_attention(attention_dir / "context_attention_perf.parquet"),
        generation_attention=_load_generation_attention(
            attention_dir / "generation_attention_perf.parquet"
        ),
        all_reduce={}
        if all_reduce_path is None or not all_reduce_path.exists()
        else _load_all_reduce(all_reduce_path),
        moe=moe,
        moe_routing=routing,
    )
