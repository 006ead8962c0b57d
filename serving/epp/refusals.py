"""Refusals the picker answers itself, as an Envoy ImmediateResponse in OpenAI's error format.

The status says what happened (the Inference Extension's 429 when admission sheds the request,
with Retry-After; 503 when nothing can serve it) and the body says why, in the shape an OpenAI
client parses: ``{"error": {"message", "type", "param", "code"}}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from serving.epp.protocol import Message, immediate_response

_TYPES = {429: "rate_limit_error", 503: "service_unavailable"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    status: int
    message: str
    code: str  # OpenAI-style error code: model_not_found, rate_limit_exceeded, …
    param: str | None = None
    retry_after_s: int | None = None

    @property
    def error_type(self) -> str:
        return _TYPES.get(self.status, "invalid_request_error")

    def body(self) -> bytes:
        error = {
            "message": self.message,
            "type": self.error_type,
            "param": self.param,
            "code": self.code,
        }
        return json.dumps({"error": error}).encode()

    def headers(self) -> dict[str, str]:
        headers = {"content-type": "application/json"}
        if self.retry_after_s is not None:
            headers["retry-after"] = str(self.retry_after_s)
        return headers

    def response(self) -> Message:
        return immediate_response(
            self.status,
            self.body(),
            headers=self.headers(),
            details=f"placement_epp_{self.code}",
        )
