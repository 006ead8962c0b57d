"""Predictors: features, the roofline prior, LightGBM latency/throughput models, capacity at SLO."""
