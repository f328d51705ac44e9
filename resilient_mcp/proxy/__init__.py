"""The assembly: the chain compiled per tool, the catalog, and the proxy that routes between them.

- ``pipeline``: compiles one tool's chain from policy, in the fixed order, and its terminal (the upstream call);
- ``routing``: the routing in force and the layer that sends calls to an upstream;
- ``catalog``: the aggregated names the host sees; ``drift``: what an attempt does when the upstream changed;
- ``proxy``: upstream lifecycle and the routing snapshot.
"""
