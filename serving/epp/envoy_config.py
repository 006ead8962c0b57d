"""An Envoy bootstrap that puts the endpoint picker in front of a fleet (a starting point for
operators, and what the end-to-end tests run).

One listener; an ext_proc filter calling the picker over HTTP/2, failing closed (an
unreachable picker is a 503 with the reason in Envoy's response details, never a request
routed blind); then the router, with one of two ways to reach the endpoint the picker named:

- ``original-dst``: an ORIGINAL_DST cluster that connects to the address in the
  ``x-gateway-destination-endpoint`` header. It reads exactly one ``ip:port``, so run the
  picker with no fallbacks (``--epp-fallbacks 0``); any replica address works, listed or not.
- ``override-host``: a static cluster of the replicas under Envoy's override-host load
  balancer, which reads the picker's list from the ``envoy.lb`` metadata, tries the fallbacks in
  order on retries (connection failures, 503s), and reports the endpoint that served back to the
  picker (``x-gateway-destination-endpoint-served``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from serving.epp.protocol import DESTINATION, DESTINATION_NAMESPACE, SERVED

Routing = Literal["original-dst", "override-host"]
BodyMode = Literal["BUFFERED", "FULL_DUPLEX_STREAMED"]
_HCM = "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3."
_EXT_PROC = "type.googleapis.com/envoy.extensions.filters.http.ext_proc.v3.ExternalProcessor"
_ROUTER = "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
_HTTP_OPTIONS = "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions"
_OVERRIDE = (
    "type.googleapis.com/envoy.extensions.load_balancing_policies.override_host.v3.OverrideHost"
)
_ROUND_ROBIN = (
    "type.googleapis.com/envoy.extensions.load_balancing_policies.round_robin.v3.RoundRobin"
)

# override-host: what sends a request on to the next endpoint of the picker's list
_RETRY_ON = (
    "connect-failure",
    "refused-stream",
    "reset-before-request",
    "retriable-status-codes",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvoyConfig:
    picker: str  # host:port of the picker's ext_proc server
    listen_port: int
    admin_port: int
    routing: Routing = "original-dst"
    replicas: Sequence[str] = ()  # ip:port of every replica (override-host only)
    body_mode: BodyMode = "FULL_DUPLEX_STREAMED"
    listen_host: str = "127.0.0.1"
    message_timeout_s: float = 1.0  # the picker's answer to one message
    request_timeout_s: float = 300.0  # a whole request, stream included
    retries: int = 3  # override-host: fallbacks tried after the primary

    def bootstrap(self) -> dict[str, Any]:
        return {
            "admin": {"address": _address(self.listen_host, self.admin_port)},
            "static_resources": {
                "listeners": [self._listener()],
                "clusters": [self._picker_cluster(), self._replica_cluster()],
            },
        }

    def to_json(self) -> str:
        return json.dumps(self.bootstrap(), indent=2)

    def _listener(self) -> dict[str, Any]:
        route: dict[str, Any] = {"cluster": "replicas", "timeout": f"{self.request_timeout_s}s"}
        if self.routing == "override-host":
            route["retry_policy"] = {
                "retry_on": ",".join(_RETRY_ON),
                "retriable_status_codes": [503],
                "num_retries": self.retries,
            }
        return {
            "name": "inference",
            "address": _address(self.listen_host, self.listen_port),
            "filter_chains": [
                {
                    "filters": [
                        {
                            "name": "envoy.filters.network.http_connection_manager",
                            "typed_config": {
                                "@type": _HCM + "HttpConnectionManager",
                                "stat_prefix": "inference",
                                "route_config": {
                                    "name": "inference",
                                    "virtual_hosts": [
                                        {
                                            "name": "inference",
                                            "domains": ["*"],
                                            "routes": [{"match": {"prefix": "/"}, "route": route}],
                                        }
                                    ],
                                },
                                "http_filters": [self._ext_proc(), _router()],
                            },
                        }
                    ]
                }
            ],
        }

    def _ext_proc(self) -> dict[str, Any]:
        return {
            "name": "envoy.filters.http.ext_proc",
            "typed_config": {
                "@type": _EXT_PROC,
                "grpc_service": {
                    "envoy_grpc": {"cluster_name": "picker"},
                    "timeout": f"{self.request_timeout_s}s",
                },
                "failure_mode_allow": False,
                "status_on_error": {"code": 503},
                "message_timeout": f"{self.message_timeout_s}s",
                "processing_mode": {
                    "request_header_mode": "SEND",
                    "request_body_mode": self.body_mode,
                    "request_trailer_mode": "SEND",
                    "response_header_mode": "SEND",
                    "response_body_mode": "FULL_DUPLEX_STREAMED",
                    "response_trailer_mode": "SEND",
                },
                "metadata_options": {
                    "forwarding_namespaces": {"untyped": [DESTINATION_NAMESPACE]},
                    "receiving_namespaces": {"untyped": [DESTINATION_NAMESPACE]},
                },
            },
        }

    def _picker_cluster(self) -> dict[str, Any]:
        host, port = self.picker.rsplit(":", 1)
        return {
            "name": "picker",
            "type": "STATIC",
            "connect_timeout": "1s",
            "typed_extension_protocol_options": {
                "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                    "@type": _HTTP_OPTIONS,
                    "explicit_http_config": {"http2_protocol_options": {}},
                }
            },
            "load_assignment": _endpoints("picker", [f"{host}:{port}"]),
        }

    def _replica_cluster(self) -> dict[str, Any]:
        if self.routing == "original-dst":
            return {
                "name": "replicas",
                "type": "ORIGINAL_DST",
                "lb_policy": "CLUSTER_PROVIDED",
                "connect_timeout": "1s",
                "original_dst_lb_config": {
                    "use_http_header": True,
                    "http_header_name": DESTINATION,
                },
            }
        metadata_key = {"key": DESTINATION_NAMESPACE, "path": [{"key": DESTINATION}]}
        return {
            "name": "replicas",
            "type": "STATIC",
            "connect_timeout": "1s",
            "load_assignment": _endpoints("replicas", self.replicas),
            "load_balancing_policy": {
                "policies": [
                    {
                        "typed_extension_config": {
                            "name": "envoy.load_balancing_policies.override_host",
                            "typed_config": {
                                "@type": _OVERRIDE,
                                "override_host_sources": [{"metadata": metadata_key}],
                                "selected_host_key": {
                                    "key": DESTINATION_NAMESPACE,
                                    "path": [{"key": SERVED}],
                                },
                                "fallback_policy": {
                                    "policies": [
                                        {
                                            "typed_extension_config": {
                                                "name": "envoy.load_balancing_policies.round_robin",
                                                "typed_config": {"@type": _ROUND_ROBIN},
                                            }
                                        }
                                    ]
                                },
                            },
                        }
                    }
                ]
            },
        }


def _address(host: str, port: int) -> dict[str, Any]:
    return {"socket_address": {"address": host, "port_value": port}}


def _endpoints(name: str, endpoints: Sequence[str]) -> dict[str, Any]:
    lb_endpoints = []
    for endpoint in endpoints:
        host, port = endpoint.rsplit(":", 1)
        lb_endpoints.append({"endpoint": {"address": _address(host, int(port))}})
    return {"cluster_name": name, "endpoints": [{"lb_endpoints": lb_endpoints}]}


def _router() -> dict[str, Any]:
    return {"name": "envoy.filters.http.router", "typed_config": {"@type": _ROUTER}}
