"""The chaos server's tool surfaces, one per domain: ``orders`` (the default, ``tools.py``), ``files``, ``calendar``
and ``tickets``. Each has tools of every effect class (read_only with one outputSchema, write_unsafe,
write_idempotent, destructive), typed business failures and commits counted in the ``Ledger`` per logical operation,
so faults and scoring mean the same on every surface. ``ChaosServer(domain=...)`` and ``chaos-server --domain``
pick one; fault rules match its tool names as on the order tools.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from .. import tools as orders
from ..ledger import Ledger
from . import calendar, files, tickets


@dataclass(frozen=True)
class Surface:
    name: str
    tools: Callable[[], list[types.Tool]]
    """A fresh copy of the tool list (the server mutates its own for A2/A3/F4)."""
    execute: Callable[[str, dict[str, Any], Ledger], types.CallToolResult]
    """Run one tool against the ledger; raises ``tools.ToolError`` for business failures."""
    op_keys: dict[str, str]
    """Write tool -> the argument naming its logical operation in the ledger ("append_line:/notes/todo.txt")."""
    collection: str | None = None
    """The ledger collection holding its records (None: the order shop's own ``orders``/``stock``)."""
    seed: Callable[[Ledger], None] | None = None
    """Fills the collection of a ledger that has none yet (a fresh server starts with a few records)."""

    def prepare(self, ledger: Ledger) -> None:
        """Seed ``ledger`` for this surface unless it already holds the surface's records."""
        if self.seed is not None and self.collection not in ledger.records:
            self.seed(ledger)


SURFACES: dict[str, Surface] = {
    "orders": Surface("orders", orders.default_tools, orders.execute, orders.OP_KEYS),
    "files": Surface("files", files.tools, files.execute, files.OP_KEYS, files.COLLECTION, files.seed),
    "calendar": Surface(
        "calendar", calendar.tools, calendar.execute, calendar.OP_KEYS, calendar.COLLECTION, calendar.seed
    ),
    "tickets": Surface("tickets", tickets.tools, tickets.execute, tickets.OP_KEYS, tickets.COLLECTION, tickets.seed),
}
DOMAINS = tuple(SURFACES)
OP_KEYS: dict[str, str] = {tool: arg for s in SURFACES.values() for tool, arg in s.op_keys.items()}
"""Every surface's write tools -> operation argument (tool names do not clash across surfaces)."""
DESTRUCTIVE_TOOLS = frozenset(
    t.name for s in SURFACES.values() for t in s.tools() if t.annotations and t.annotations.destructive_hint
)


def surface(domain: str) -> Surface:
    """The surface of ``domain``; ValueError naming the known ones otherwise."""
    try:
        return SURFACES[domain]
    except KeyError:
        raise ValueError(f"unknown chaos-server domain {domain!r}; known: {', '.join(DOMAINS)}") from None
