"""The placement service: route path, plan store, planner loop, telemetry intake, metrics."""
