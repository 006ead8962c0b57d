"""The route path: plan lookup, greedy fallbacks, live replica state."""

from serving.route.path import PlacementRoutePath
from serving.route.profile import RouteProfile, load_profile, profile_from_text
from serving.route.types import (
    Decision,
    NoReplica,
    ReplicaState,
    RoutePath,
    RouteQuery,
    UnservedModel,
)

__all__ = [
    "Decision",
    "NoReplica",
    "PlacementRoutePath",
    "ReplicaState",
    "RoutePath",
    "RouteProfile",
    "RouteQuery",
    "UnservedModel",
    "load_profile",
    "profile_from_text",
]
