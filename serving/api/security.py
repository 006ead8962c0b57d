"""API keys with scopes: who is calling and what they may do.

A key is a random token; only its SHA-256 digest is configured, so a leaked settings file
does not leak keys. Keys are long random strings, so a plain digest (no salt, no stretching)
is enough: there is no dictionary to attack.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from serving.api.settings import SCOPES, ApiKey

DEV_KEY_NAME = "development"


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated caller. ``tenant`` is set for a tenant-scoped key: it may route and
    read decisions only for that tenant."""

    name: str
    scopes: frozenset[str]
    tenant: str | None = None

    def may_act_for(self, tenant: str) -> bool:
        return self.tenant is None or self.tenant == tenant


def hash_key(key: str) -> str:
    """The digest to configure for ``key``."""
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def generate_key() -> str:
    return "plc_" + secrets.token_urlsafe(32)


class KeyRing:
    """Configured keys, looked up by digest."""

    def __init__(self, keys: Iterable[ApiKey], *, dev_key: str | None = None) -> None:
        self._by_digest: dict[str, Principal] = {
            k.digest: Principal(k.name, frozenset(k.scopes), k.tenant) for k in keys
        }
        if dev_key is not None:
            self._by_digest[hash_key(dev_key)] = Principal(DEV_KEY_NAME, frozenset(SCOPES))

    def __len__(self) -> int:
        return len(self._by_digest)

    def authenticate(self, token: str | None) -> Principal | None:
        """The principal holding ``token``, or None for a missing or unknown key."""
        if not token:
            return None
        return self._by_digest.get(hash_key(token))


def token_from_headers(authorization: str | None, x_api_key: str | None) -> str | None:
    """The key from ``Authorization: Bearer <key>`` or ``X-API-Key: <key>``."""
    if x_api_key:
        return x_api_key
    if authorization:
        scheme, _, value = authorization.partition(" ")
        if scheme.lower() == "bearer" and value:
            return value.strip()
    return None
