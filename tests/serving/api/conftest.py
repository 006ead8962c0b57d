"""Starlette 1.x warns when its TestClient runs on httpx (it wants httpx2, not installed here);
the warning is raised at import, so import it once with that one warning silenced."""

import warnings

with warnings.catch_warnings():
    warnings.filterwarnings("ignore", message="Using `httpx` with `starlette.testclient`")
    import starlette.testclient  # noqa: F401
