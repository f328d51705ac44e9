"""Fault injection: the chaos MCP server, chaos mode in the proxy, and a loopback fault shim for HTTP upstreams.

- ``plan``/``params``: fault plans (which call gets which of the catalog's 27 faults) and their deterministic matcher;
- ``server``/``tools``/``ledger``/``mutations``/``responses``/``transports``: ``resilient-mcp chaos-server``, an order
  service that injects a plan's faults the way real servers show them, counting committed writes;
- ``inject``: chaos mode in the proxy (``faults:`` in the config, ``wrap --faults PLAN``);
- ``shim``: a TCP fault shim on 127.0.0.1 in front of an HTTP upstream (refused or reset connections, delays, 5xx/429);
- ``clock``: real and virtual clocks.

Import the submodules directly; this package imports nothing on its own (the config loads ``plan`` only).
"""
