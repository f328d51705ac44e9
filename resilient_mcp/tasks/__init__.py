"""Durable tasks (the 2026-07-28 tasks extension, ``io.modelcontextprotocol/tasks``) served by the proxy for every
tool: ``manager`` runs and records them (``state.tasks`` keeps the records), ``host`` answers the host's ``tasks/*``
requests. See docs/tasks.md."""
