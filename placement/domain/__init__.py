"""The domain: accelerators, model architectures, fleets, tenants, request classes, requests."""
