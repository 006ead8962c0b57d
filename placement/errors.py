"""The project's one exception hierarchy.

Every error a user can cause derives from :class:`PlacementError`; the CLI turns these into a
one-line message and a non-zero exit, never a traceback.
"""

from __future__ import annotations

from pathlib import Path


class PlacementError(Exception):
    """Base of every error this project raises on purpose."""


class InputError(PlacementError):
    """Bad input: a file, a line or a field that is not what was expected.

    The message names where the problem is (``source``, ``line``, ``field``) and what was
    expected, so the user can fix it without reading code.
    """

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        line: int | None = None,
        field: str | None = None,
        expected: str | None = None,
    ) -> None:
        self.source = source
        self.line = line
        self.field = field
        self.expected = expected
        where = []
        if source is not None:
            where.append(str(source) if line is None else f"{source}:{line}")
        if field is not None:
            where.append(f"field '{field}'")
        prefix = ", ".join(where)
        text = f"{prefix}: {message}" if prefix else message
        if expected is not None:
            text += f" (expected {expected})"
        super().__init__(text)


def read_text(path: str | Path, what: str) -> str:
    """The UTF-8 text of a file a user gave; a missing, unreadable or binary file is an
    :class:`InputError` naming it (``cannot read <what>: …``)."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
    except UnicodeDecodeError as exc:
        reason = f"byte {exc.start} is not UTF-8 text (a binary file?)"
    raise InputError(f"cannot read {what}: {reason}", source=str(path))


class UnknownAccelerator(InputError):
    """An accelerator kind that the catalogue does not know."""


class UnknownModel(InputError):
    """A model architecture that the catalogue does not know."""


class ProfileUnavailable(PlacementError):
    """Measured operator profiles for an accelerator could not be read."""


class ScrapeFailed(PlacementError):
    """A replica's Prometheus ``/metrics`` could not be fetched (connection refused, timeout,
    a non-200 answer) or did not hold vLLM metrics in the text exposition format."""


class PredictorUnavailable(PlacementError):
    """No latency predictor can be loaded: none registered, no ``champion`` alias yet, or the
    tracking store cannot be reached."""


class InfeasiblePlan(PlacementError):
    """The solver instance cannot be satisfied as stated: guaranteed credits or SLOs that cannot
    hold together. The message explains which, by how much, and what capacity would fix it;
    nothing is silently relaxed."""

    def __init__(self, message: str, *, explanation: list[str] | None = None) -> None:
        self.explanation = list(explanation or [])
        super().__init__(
            message if not self.explanation else message + ": " + "; ".join(self.explanation)
        )


class PlanRejected(PlacementError):
    """A plan failed validation (capacity, coverage, credits) and must not be published."""
