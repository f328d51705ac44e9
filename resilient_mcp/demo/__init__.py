"""``resilient-mcp demo`` and its bundled order-book server; outside the product's imports."""
