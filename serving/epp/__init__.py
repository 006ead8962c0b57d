"""The Envoy ext_proc endpoint picker: the Gateway API Inference Extension's protocol in front
of the placement service (``placement serve --epp``)."""

from serving.epp.body import BadBody, InferenceBody, parse_body
from serving.epp.picker import EndpointPicker, Pick, PickerConfig, endpoint_of
from serving.epp.refusals import Refusal
from serving.epp.server import EppServer, serve_epp

__all__ = [
    "BadBody",
    "EndpointPicker",
    "EppServer",
    "InferenceBody",
    "Pick",
    "PickerConfig",
    "Refusal",
    "endpoint_of",
    "parse_body",
    "serve_epp",
]
