"""Site files: their schema, loading with line numbers, plan, apply, export."""
