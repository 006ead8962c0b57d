"""The closed-loop benchmark: train, solve, route, re-solve, in the simulator."""
