"""Route path filters (one module per plugin)."""
