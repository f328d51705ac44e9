"""The core: the value a tool call is, the chain compiled per tool, the catalog, and the proxy that routes between them.

- ``chain``: ``ToolCall``, the ``Stage`` seam and ``compose``;
- ``pipeline``: compiles one tool's chain from policy, in the fixed order, and its terminal (the upstream call);
- ``catalog``: the aggregated names the host sees; ``drift``: what an attempt does when the upstream changed;
- ``proxy``: upstream lifecycle and the routing snapshot; ``fingerprint``/``textcut``: call identity, byte budgets.
"""
