"""Route path pickers (one module per plugin)."""
