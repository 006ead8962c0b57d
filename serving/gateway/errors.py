"""What the gateway refuses, in OpenAI's error format and with the status a client expects.

Every refusal is a :class:`GatewayError`: 400 bad input, 401 missing or unknown key, 403 a key
without the scope or acting for another tenant, 404 unknown model, 413 body too large, 429
refused by admission (with Retry-After), 503 nothing can serve. Its body is OpenAI's
``{"error": {"message", "type", "param", "code"}}``, which the ``openai`` client raises as the
matching ``APIStatusError`` subclass.
"""

from __future__ import annotations

from sim.emulator.openai_api import error_body

_TYPES = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}


class GatewayError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        code: str | None = None,
        param: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.headers = headers or {}

    @property
    def type(self) -> str:
        if self.status >= 500:
            return "server_error"
        return _TYPES.get(self.status, "invalid_request_error")

    def body(self) -> bytes:
        return error_body(self.message, type=self.type, param=self.param, code=self.code)
