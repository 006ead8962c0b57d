"""Multi-group conformal calibration of an upper quantile: one factor per decision-time group.

One global conformal shift makes a p95 cover 0.95 of the calibration rows overall, not of each
kind of request: long prompts, deep backlogs or one accelerator can sit at 0.87 while the rest
sit at 0.97. Here every row belongs to one group of each :data:`PARTITIONS` entry — its prompt
length, the router's requests in flight on the replica at routing, its expected output length
(the request's own ``output_tokens``: the router knows it as an expectation) and its
accelerator (by the datasheet's dense TFLOPS, which tells the catalogue's accelerators apart) —
and the prediction is multiplied by the product of its groups' factors, i.e. shifted in log
space by the sum of their offsets. Only features the service has when it decides define groups.

The offsets are fitted jointly by raking (:func:`fit_group_calibration`): sweep over the
partitions, and in each group move its offset by the split-conformal shift of the group's
residuals left after every other offset (the ⌈(n+1)·α⌉-th of n), until no offset moves by more
than :data:`TOLERANCE` or after :data:`MAX_SWEEPS` sweeps. A group with fewer than
:data:`MIN_GROUP_ROWS` calibration rows keeps offset 0 and an accelerator the calibration rows
never saw gets none.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from models.features import FEATURE_INDEX, FeatureMatrix
from models.quantile import PROMPT_EDGES, conformal_offset
from models.roofline_prior import FloatArray
from placement.errors import InputError

# decision-time partitions: feature → bucket edges ([lo, hi) buckets cut at each edge), or
# None for a categorical feature (one group per value seen in the calibration rows)
PARTITIONS: dict[str, tuple[float, ...] | None] = {
    "input_tokens": PROMPT_EDGES,
    "backlog_requests": (1.0, 4.0, 8.0),  # 0, 1–3, 4–7, 8+ requests in flight at routing
    "output_tokens": (64.0, 256.0, 1024.0),
    "gpu_dense_tflops": None,  # the accelerator
}
MIN_GROUP_ROWS = 30
MAX_SWEEPS = 25
TOLERANCE = 1e-3  # log units: a 0.1% change of a factor


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupPartition:
    """One partition's groups and their log offsets. Ranged (``categorical`` False): group k
    holds values in [edges[k−1], edges[k]). Categorical: group k holds value ``edges[k]``;
    values not listed get no offset."""

    feature: str
    edges: tuple[float, ...]
    categorical: bool
    offsets: tuple[float, ...]

    def __post_init__(self) -> None:
        if self.feature not in FEATURE_INDEX:
            raise InputError(
                f"unknown feature {self.feature}", field="feature", expected="a model feature"
            )
        groups = len(self.edges) if self.categorical else len(self.edges) + 1
        if len(self.offsets) != groups:
            raise InputError(
                f"{len(self.offsets)} offsets for {groups} groups of {self.feature}",
                field="offsets",
                expected=f"{groups} numbers",
            )

    def groups(self, features: FeatureMatrix) -> npt.NDArray[np.int64]:
        """Each row's group index (−1: a categorical value with no group)."""
        return group_index(features.column(self.feature), self.edges, self.categorical)

    def log_shift(self, features: FeatureMatrix) -> FloatArray:
        group = self.groups(features)
        offsets = np.append(np.asarray(self.offsets, dtype=np.float64), 0.0)
        return offsets[group]  # index −1 reads the appended 0


def group_index(
    values: FloatArray, edges: tuple[float, ...], categorical: bool
) -> npt.NDArray[np.int64]:
    """Group of every value: the bucket of ``edges`` it falls in, or for a categorical
    partition the position of its value among ``edges`` (−1 if absent)."""
    if not categorical:
        return np.searchsorted(np.asarray(edges), values, side="right").astype(np.int64)
    group = np.full(len(values), -1, dtype=np.int64)
    for k, key in enumerate(edges):
        group[values == key] = k
    return group


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupCalibration:
    """Every partition's offsets; a prediction's log shift is their sum."""

    partitions: tuple[GroupPartition, ...]

    def log_shift(self, features: FeatureMatrix) -> FloatArray:
        total = np.zeros(len(features.values))
        for partition in self.partitions:
            total += partition.log_shift(features)
        return total

    def to_json(self) -> list[dict[str, object]]:
        return [
            {
                "feature": p.feature,
                "edges": list(p.edges),
                "categorical": p.categorical,
                "offsets": list(p.offsets),
            }
            for p in self.partitions
        ]

    @classmethod
    def from_json(cls, entries: list[dict[str, object]]) -> GroupCalibration:
        partitions = []
        for entry in entries:
            edges, offsets = entry["edges"], entry["offsets"]
            if not isinstance(edges, list) or not isinstance(offsets, list):
                raise InputError("edges and offsets must be lists", field="group_calibration")
            partitions.append(
                GroupPartition(
                    feature=str(entry["feature"]),
                    edges=tuple(float(x) for x in edges),
                    categorical=bool(entry["categorical"]),
                    offsets=tuple(float(x) for x in offsets),
                )
            )
        return cls(partitions=tuple(partitions))


def fit_group_calibration(
    residual: FloatArray,
    features: FeatureMatrix,
    alpha: float,
    partitions: dict[str, tuple[float, ...] | None] = PARTITIONS,
) -> GroupCalibration:
    """Offsets per group of every partition such that, in each group with at least
    :data:`MIN_GROUP_ROWS` rows, a share ``alpha`` of ``residual`` (log observed − log
    predicted, one per row of ``features``) lies at or below the row's summed offset."""
    if len(residual) != len(features.values):
        raise InputError(
            f"{len(residual)} residuals for {len(features.values)} rows",
            field="residual",
            expected="one residual per calibration row",
        )
    specs: list[tuple[str, tuple[float, ...], bool]] = []
    for feature, edges in partitions.items():
        if edges is None:
            seen = np.unique(features.column(feature))
            specs.append((feature, tuple(float(v) for v in seen), True))
        else:
            specs.append((feature, edges, False))
    groups = [group_index(features.column(f), e, c) for f, e, c in specs]
    offsets = [np.zeros(len(e) if c else len(e) + 1) for _, e, c in specs]
    shift = np.zeros(len(residual))
    for _ in range(MAX_SWEEPS):
        moved = 0.0
        for group, offset in zip(groups, offsets, strict=True):
            for k in range(len(offset)):
                rows = group == k
                if int(rows.sum()) < MIN_GROUP_ROWS:
                    continue
                step = conformal_offset(residual[rows] - shift[rows], alpha)
                offset[k] += step
                shift[rows] += step
                moved = max(moved, abs(step))
        if moved < TOLERANCE:
            break
    return GroupCalibration(
        partitions=tuple(
            GroupPartition(
                feature=f, edges=e, categorical=c, offsets=tuple(float(x) for x in offset)
            )
            for (f, e, c), offset in zip(specs, offsets, strict=True)
        )
    )
