"""Text and bytes, the leaf every floor may use: ``cut`` (UTF-8 length and chunked encoding, byte budgets, JSON
shapes), ``canonical`` (canonical JSON), ``jsoncount`` (a bounded item count). Imports nothing of the package."""
