"""The chaos server's state: orders and stock (or the records of another domain's surface: files, events, tickets),
and a count of committed writes per logical operation.

The count is what a benchmark's oracle reads: "exactly one order for client_ref=R1" is
``ledger.commits_for("create_order", "R1") == 1``; a duplicate caused by an unsafe retry shows up as 2. Each commit is
also logged in order (tool, operation key, arguments), and the number of server spawns is kept for startup faults.

With a ``path`` the ledger is a JSON file, rewritten after every commit (before the response is sent, so a server
that dies right after committing leaves the commit on disk) and read back by a restarted server and by tests.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

SKUS = ("apple", "pear", "plum")
START_STOCK = {"apple": 40, "pear": 25, "plum": 0}


class Ledger:
    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self.orders: dict[str, dict[str, Any]] = {}
        self.stock: dict[str, int] = dict(START_STOCK)
        self.commits: dict[str, int] = {}
        """Logical operation ("create_order:R1") -> committed writes."""
        self.log: list[dict[str, Any]] = []
        """Every commit in order: {"n", "tool", "op", "args"}."""
        self.records: dict[str, dict[str, dict[str, Any]]] = {}
        """The other domains' state: collection ("files", "events", "tickets") -> key -> record."""
        self.counters: dict[str, int] = {}
        """Collection -> the next number of a new record's id (events, tickets)."""
        self.spawns = 0
        self.next_id = 1
        if self.path is not None and self.path.exists() and self.path.stat().st_size:
            self._load(json.loads(self.path.read_text(encoding="utf-8")))

    # --- queries ----------------------------------------------------------------------------------------------------

    def commits_for(self, tool: str, key: str | None = None) -> int:
        """Committed writes of ``tool`` (for one operation key, e.g. a client_ref or an order id, when given)."""
        if key is not None:
            return self.commits.get(f"{tool}:{key}", 0)
        return sum(n for op, n in self.commits.items() if op.split(":", 1)[0] == tool)

    @property
    def total_commits(self) -> int:
        return len(self.log)

    def orders_with_ref(self, client_ref: str) -> list[dict[str, Any]]:
        return [o for o in self.orders.values() if o.get("client_ref") == client_ref]

    def collection(self, name: str) -> dict[str, dict[str, Any]]:
        """The records of one collection (created empty on first use)."""
        return self.records.setdefault(name, {})

    def snapshot(self) -> dict[str, Any]:
        return {
            "orders": self.orders,
            "records": self.records,
            "counters": self.counters,
            "stock": self.stock,
            "commits": self.commits,
            "log": self.log,
            "spawns": self.spawns,
            "next_id": self.next_id,
        }

    # --- writes -----------------------------------------------------------------------------------------------------

    def commit(self, tool: str, key: str, args: dict[str, Any]) -> None:
        """Count one committed write of operation ``tool:key`` and persist."""
        op = f"{tool}:{key}"
        self.commits[op] = self.commits.get(op, 0) + 1
        self.log.append({"n": len(self.log) + 1, "tool": tool, "op": op, "args": args})
        self.save()

    def new_order_id(self) -> str:
        oid = f"ord-{self.next_id}"
        self.next_id += 1
        return oid

    def new_number(self, collection: str) -> int:
        """The next number for a new record of ``collection`` (past every number its keys already use)."""
        used = [int(k.rsplit("-", 1)[1]) for k in self.collection(collection) if k.rsplit("-", 1)[-1].isdigit()]
        n = max(self.counters.get(collection, 1), max(used, default=0) + 1)
        self.counters[collection] = n + 1
        return n

    def count_spawn(self) -> int:
        self.spawns += 1
        self.save()
        return self.spawns

    def save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".ledger-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(self.snapshot(), f)
        os.replace(tmp, self.path)  # readers never see half a file

    def _load(self, data: dict[str, Any]) -> None:
        self.orders = dict(data.get("orders", {}))
        self.stock = dict(data.get("stock", START_STOCK))
        self.commits = {str(k): int(v) for k, v in data.get("commits", {}).items()}
        self.log = list(data.get("log", []))
        self.records = {str(c): dict(r) for c, r in data.get("records", {}).items()}
        self.counters = {str(c): int(n) for c, n in data.get("counters", {}).items()}
        self.spawns = int(data.get("spawns", 0))
        self.next_id = int(data.get("next_id", len(self.orders) + 1))


def read_ledger(path: str | os.PathLike[str]) -> Ledger:
    """A ledger file as written by a (possibly dead) chaos server."""
    return Ledger(path)
