"""Telemetry datasets, training and evaluation runs in MLflow, registration and promotion."""
