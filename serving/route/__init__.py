"""The route path: plan lookup, greedy fallbacks, live replica state."""

from serving.route.types import Decision, NoReplica, ReplicaState, RoutePath, RouteQuery

__all__ = ["Decision", "NoReplica", "ReplicaState", "RoutePath", "RouteQuery"]
