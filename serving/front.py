"""One address in front of several ``placement serve`` processes: an Envoy bootstrap.

The processes share plans, credit counters, admission state, replica health and tenants
through Redis (:mod:`serving.shared`), so any of them may answer any request. Envoy spreads
requests over those that are ready (an active health check of ``/readyz``) and retries a
request on *another* process when the one it tried refuses the connection or dies before
answering (``connect-failure``, ``reset``, ``refused-stream``; the previous hosts are skipped),
so killing a process loses no request. Outlier detection ejects a process that keeps failing
before the health check notices. ``scripts/front`` runs it.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3."
_ROUTER = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
_PREVIOUS_HOSTS = (
    "type.googleapis.com/envoy.extensions.retry.host.previous_hosts.v3.PreviousHostsPredicate"
)
RETRY_ON = "connect-failure,reset,refused-stream"
MAX_IN_FLIGHT = 100_000
MAX_RETRIES_IN_FLIGHT = 10_000


@dataclass(frozen=True, slots=True, kw_only=True)
class FrontConfig:
    """``services``: the processes' ``host:port`` (IP addresses: a STATIC cluster)."""

    services: Sequence[str]
    listen_port: int
    admin_port: int
    listen_address: str = "127.0.0.1"
    retries: int = 3
    health_interval_s: float = 0.5
    request_timeout_s: float = 30.0

    def bootstrap(self) -> dict[str, Any]:
        return {
            "admin": {"address": _socket(self.listen_address, self.admin_port)},
            "static_resources": {
                "listeners": [self._listener()],
                "clusters": [self._cluster()],
            },
        }

    def _listener(self) -> dict[str, Any]:
        route = {
            "cluster": "placement",
            "timeout": f"{self.request_timeout_s}s",
            "retry_policy": {
                "retry_on": RETRY_ON,
                "num_retries": self.retries,
                "retry_host_predicate": [
                    {
                        "name": "envoy.retry_host_predicates.previous_hosts",
                        "typed_config": {"@type": _PREVIOUS_HOSTS},
                    }
                ],
                "host_selection_retry_max_attempts": 5,
                "retry_back_off": {"base_interval": "0.01s", "max_interval": "0.1s"},
            },
        }
        manager = {
            "@type": _HCM + "HttpConnectionManager",
            "stat_prefix": "front",
            "codec_type": "AUTO",
            "route_config": {
                "virtual_hosts": [
                    {
                        "name": "placement",
                        "domains": ["*"],
                        "routes": [{"match": {"prefix": "/"}, "route": route}],
                    }
                ]
            },
            "http_filters": [
                {"name": "envoy.filters.http.router", "typed_config": {"@type": _ROUTER}}
            ],
        }
        return {
            "name": "front",
            "address": _socket(self.listen_address, self.listen_port),
            "filter_chains": [
                {
                    "filters": [
                        {
                            "name": "envoy.filters.network.http_connection_manager",
                            "typed_config": manager,
                        }
                    ]
                }
            ],
        }

    def _cluster(self) -> dict[str, Any]:
        endpoints = []
        for service in self.services:
            host, _, port = service.rpartition(":")
            endpoints.append({"endpoint": {"address": _socket(host, int(port))}})
        interval = f"{self.health_interval_s}s"
        return {
            "name": "placement",
            "type": "STATIC",
            "connect_timeout": "0.25s",
            "lb_policy": "ROUND_ROBIN",
            # Envoy's default allows 3 retries in flight per cluster: a process dying with
            # more requests than that on it would see the rest answered 503, not retried
            "circuit_breakers": {
                "thresholds": [
                    {
                        "max_retries": MAX_RETRIES_IN_FLIGHT,
                        "max_connections": MAX_IN_FLIGHT,
                        "max_pending_requests": MAX_IN_FLIGHT,
                        "max_requests": MAX_IN_FLIGHT,
                    }
                ]
            },
            "load_assignment": {
                "cluster_name": "placement",
                "endpoints": [{"lb_endpoints": endpoints}],
            },
            "health_checks": [
                {
                    "timeout": interval,
                    "interval": interval,
                    "unhealthy_threshold": 1,
                    "healthy_threshold": 1,
                    "http_health_check": {"path": "/readyz"},
                }
            ],
            "outlier_detection": {
                "consecutive_gateway_failure": 2,
                "consecutive_local_origin_failure": 2,
                "split_external_local_origin_errors": True,
                "interval": interval,
                "base_ejection_time": "2s",
                "max_ejection_percent": 50,
            },
        }


def _socket(host: str, port: int) -> dict[str, Any]:
    return {"socket_address": {"address": host, "port_value": port}}


def to_json(bootstrap: dict[str, Any]) -> str:
    return json.dumps(bootstrap, indent=2)


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m serving.front LISTEN_PORT ADMIN_PORT HOST:PORT…``: print the bootstrap."""
    import sys

    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or not args[0].isdigit() or not args[1].isdigit():
        raise SystemExit("usage: python -m serving.front LISTEN_PORT ADMIN_PORT HOST:PORT ...")
    config = FrontConfig(services=args[2:], listen_port=int(args[0]), admin_port=int(args[1]))
    print(to_json(config.bootstrap()))


if __name__ == "__main__":
    main()
