"""The call vocabulary every stage speaks: ``chain`` (the ``ToolCall``, its identity (fingerprints), the ``Stage``
seam, and the host request's envelope and timers), ``events`` (the side channel the chain reports to) and ``meta``
(the ``_meta`` keys). Imports only ``text``, ``faults`` and the policy models."""
