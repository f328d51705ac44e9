"""Text and bytes, the leaf every floor may use: ``cut`` (byte budgets, JSON shapes), ``utf8`` (length, chunked
encoding), ``canonical`` (canonical JSON), ``jsoncount`` (a bounded item count). Imports nothing of the package."""
