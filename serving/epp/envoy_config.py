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

# a failed ext_proc call (picker down, too slow) answers 503 with the reason in OpenAI's error
# shape; the picker's own refusals (ImmediateResponses) keep their bodies
_PICKER_DOWN_REPLY = {
    "mappers": [
        {
            "filter": {
                "extension_filter": {
                    "name": "envoy.access_loggers.extension_filters.cel",
                    "typed_config": {
                        "@type": "type.googleapis.com/"
                        "envoy.extensions.access_loggers.filters.cel.v3.ExpressionFilter",
                        "expression": "response.code_details.startsWith('ext_proc_error')",
                    },
                }
            },
            "body_format_override": {
                "json_format": {
                    "error": {
                        "message": "The endpoint picker is unavailable: %RESPONSE_CODE_DETAILS%",
                        "type": "service_unavailable",
                        "param": None,
                        "code": "endpoint_picker_unavailable",
                    }
                }
            },
        }
    ]
}


@dataclass(frozen=True, slots=True, kw_only=True)
class EnvoyConfig:
    picker: str  # host:port of the picker's ext_proc server
    listen_port: int
    admin_port: int
    routing: Routing = "original-dst"
    replicas: Sequence[str] = ()  # ip:port of every replica (override-host only)
    body_mode: BodyMode = "FULL_DUPLEX_STREAMED"
    # the response body through the picker (each chunk a round trip) tells it when a request
    # ends and how many tokens it produced; NONE: it learns the status only, and the lease
    # ends with the response headers (cheaper, less exact in-flight counts)
    response_body_mode: Literal["FULL_DUPLEX_STREAMED", "NONE"] = "FULL_DUPLEX_STREAMED"
    listen_host: str = "127.0.0.1"
    message_timeout_s: float = 1.0  # the picker's answer to one message
    # … up to this long when the picker asks for more (a request waiting in its flow-control
    # queue: override_message_timeout)
    max_message_timeout_s: float = 60.0
    request_timeout_s: float = 300.0  # a whole request, stream included
    retries: int = 3  # override-host: fallbacks tried after the primary
    name: str = "inference"  # of the listener; its clusters are "<name>-picker", "<name>-replicas"

    def bootstrap(self) -> dict[str, Any]:
        return bootstrap([self], admin_port=self.admin_port, admin_host=self.listen_host)

    def resources(self) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        """This listener and its two clusters."""
        return self._listener(), [self._picker_cluster(), self._replica_cluster()]

    def _listener(self) -> dict[str, Any]:
        route: dict[str, Any] = {
            "cluster": f"{self.name}-replicas",
            "timeout": f"{self.request_timeout_s}s",
        }
        if self.routing == "override-host":
            route["retry_policy"] = {
                "retry_on": ",".join(_RETRY_ON),
                "retriable_status_codes": [503],
                "num_retries": self.retries,
            }
        return {
            "name": self.name,
            "address": _address(self.listen_host, self.listen_port),
            "filter_chains": [
                {
                    "filters": [
                        {
                            "name": "envoy.filters.network.http_connection_manager",
                            "typed_config": {
                                "@type": _HCM + "HttpConnectionManager",
                                "stat_prefix": self.name,
                                "route_config": {
                                    "name": self.name,
                                    "virtual_hosts": [
                                        {
                                            "name": self.name,
                                            "domains": ["*"],
                                            "routes": [{"match": {"prefix": "/"}, "route": route}],
                                        }
                                    ],
                                },
                                "http_filters": [self._ext_proc(), _router()],
                                "local_reply_config": _PICKER_DOWN_REPLY,
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
                    "envoy_grpc": {"cluster_name": f"{self.name}-picker"},
                    "timeout": f"{self.request_timeout_s}s",
                },
                "failure_mode_allow": False,
                "status_on_error": {"code": 503},
                "message_timeout": f"{self.message_timeout_s}s",
                "max_message_timeout": f"{self.max_message_timeout_s}s",
                "processing_mode": {
                    "request_header_mode": "SEND",
                    "request_body_mode": self.body_mode,
                    "request_trailer_mode": "SEND",
                    "response_header_mode": "SEND",
                    "response_body_mode": self.response_body_mode,
                    "response_trailer_mode": (
                        "SEND" if self.response_body_mode == "FULL_DUPLEX_STREAMED" else "SKIP"
                    ),
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
            "name": f"{self.name}-picker",
            "type": "STATIC",
            "connect_timeout": "1s",
            "typed_extension_protocol_options": {
                "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                    "@type": _HTTP_OPTIONS,
                    "explicit_http_config": {"http2_protocol_options": {}},
                }
            },
            "load_assignment": _endpoints(f"{self.name}-picker", [f"{host}:{port}"]),
        }

    def _replica_cluster(self) -> dict[str, Any]:
        if self.routing == "original-dst":
            return {
                "name": f"{self.name}-replicas",
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
            "name": f"{self.name}-replicas",
            "type": "STATIC",
            "connect_timeout": "1s",
            "load_assignment": _endpoints(f"{self.name}-replicas", self.replicas),
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


def bootstrap(
    configs: Sequence[EnvoyConfig], *, admin_port: int, admin_host: str = "127.0.0.1"
) -> dict[str, Any]:
    """One Envoy serving every listener of ``configs`` (distinct names and ports)."""
    listeners = []
    clusters = []
    for config in configs:
        listener, own = config.resources()
        listeners.append(listener)
        clusters.extend(own)
    return {
        "admin": {"address": _address(admin_host, admin_port)},
        "static_resources": {"listeners": listeners, "clusters": clusters},
    }


def to_json(bootstrap: dict[str, Any]) -> str:
    return json.dumps(bootstrap, indent=2)


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
