"""The call vocabulary every stage speaks: ``chain`` (the ``ToolCall`` and the ``Stage`` seam), ``fingerprint``
(call identity), ``hostcontext`` (what the upstream side may know of the host), ``events`` (the side channel the
chain reports to) and ``meta`` (the ``_meta`` keys). Imports only ``text``, ``faults`` and the policy models."""
