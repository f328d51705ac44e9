"""Agent-outcome benchmark (docs/fault-catalog.md §6): scripted agents driving the chaos server, directly or through
the proxy.

- ``scenarios``: the scenarios, generated from one compact table per fault type (all 27 types);
- ``agents``: the scripted policies P0-P6 (oracle ... noisy_follower), with ``repair`` (how P4 reads observations);
- ``world``: one episode's world: the chaos server, a fake clock, and the agent's connection (direct, or proxied);
- ``runner``: the ReAct-style episode loop with step and call budgets; ``scoring``: one episode's scores (§7.4);
- ``metrics``: aggregation with Wilson intervals; ``latency``: real-transport overhead; ``report``: JSON, Markdown, PNG;
- ``live``: the same scenarios driven by a real model over an OpenAI-compatible endpoint (not run in CI).

Run ``python -m benchmarks.agentbench [--seed 7] [--quick]``.
"""
