"""Route path scorers (one module per plugin)."""
