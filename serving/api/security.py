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

from placement.domain.tenancy import TenantKey
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

    def may_report_for(self, *, tenant: str, routed_by: str | None) -> bool:
        """Whether this caller may report the outcome of a decision made for ``tenant`` at the
        request of the key named ``routed_by``: a tenant-scoped key, its tenant's decisions
        only; a fleet-wide key with the ``telemetry`` scope (a reporter for the whole fleet),
        any decision; a fleet-wide key without it (a router), the decisions it asked for."""
        if self.tenant is not None:
            return self.tenant == tenant
        return "telemetry" in self.scopes or routed_by == self.name


def hash_key(key: str) -> str:
    """The digest to configure for ``key``."""
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


def generate_key() -> str:
    return "plc_" + secrets.token_urlsafe(32)


KNOWN_KEYS = 1024


class KeyRing:
    """Configured keys, looked up by digest, and the tenants' own keys (declared with the
    tenants: the tenants file or the admin API), which :meth:`set_tenant_keys` replaces."""

    def __init__(self, keys: Iterable[ApiKey], *, dev_key: str | None = None) -> None:
        self._configured: dict[str, Principal] = {
            k.digest: Principal(k.name, frozenset(k.scopes), k.tenant) for k in keys
        }
        if dev_key is not None:
            self._configured[hash_key(dev_key)] = Principal(DEV_KEY_NAME, frozenset(SCOPES))
        self._by_digest = dict(self._configured)
        # keys already seen to be valid, so a busy client's key is hashed once, not on every
        # request; bounded, and unknown keys are never kept (a flood of them cannot grow it)
        self._known: dict[str, Principal] = {}

    def set_tenant_keys(self, keys: Iterable[TenantKey]) -> None:
        """The tenants' keys as declared now (a configured key with the same digest wins)."""
        merged = {k.digest: Principal(k.name, frozenset(k.scopes), k.tenant) for k in keys}
        merged.update(self._configured)
        self._by_digest = merged  # one reference swap: lookups never see half a ring
        self._known = {}  # a removed key must stop working at once

    def __len__(self) -> int:
        return len(self._by_digest)

    def authenticate(self, token: str | None) -> Principal | None:
        """The principal holding ``token``, or None for a missing or unknown key."""
        if not token:
            return None
        principal = self._known.get(token)
        if principal is None:
            principal = self._by_digest.get(hash_key(token))
            if principal is not None:
                if len(self._known) >= KNOWN_KEYS:
                    self._known.clear()
                self._known[token] = principal
        return principal


def token_from_headers(authorization: str | None, x_api_key: str | None) -> str | None:
    """The key from ``X-API-Key: <key>``, else from ``Authorization: Bearer <key>``; None
    when neither header is sent. A header that is sent counts even when it holds no usable key
    (empty, or another scheme than Bearer): it yields ``""``, which no key matches, so a
    malformed credential is refused rather than skipped in favour of the other header."""
    if x_api_key is not None:
        return x_api_key.strip()
    if authorization is not None:
        scheme, _, value = authorization.partition(" ")
        return value.strip() if scheme.lower() == "bearer" else ""
    return None


def refusal_of(token: str | None) -> str:
    """Why ``token`` (unmatched) is refused with 401."""
    return "missing API key" if token is None else "invalid API key"
