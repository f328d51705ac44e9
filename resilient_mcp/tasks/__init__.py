"""Work that outlives the host request that started it: ``bridge`` runs a 2026-07-28 host's upstream work detached
from its request and turns what a handshake-era upstream asks into ``InputRequiredResult`` rounds; durable tasks (the
2026-07-28 tasks extension, ``io.modelcontextprotocol/tasks``) served by the proxy for every tool build on it:
``manager`` runs and records them (``state.tasks`` keeps the records), ``host`` answers the host's ``tasks/*``
requests. See docs/tasks.md."""
