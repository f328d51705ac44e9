"""What a scenario is: the task (steps the agent plans), the fault plans, the proxy policy, and the oracle (§7.1).

A task is three tool calls. One of them is the *target*: the step the fault is aimed at; the other two are reads
that only have to succeed. The ledger starts from ``SEED_ORDERS``; the end state decides success (``check.py``).
A scenario runs in a *domain*: the order shop (``ORDERS``, the main set) or another tool surface of the chaos server
(files, calendar, tickets: the held-out set, ``heldout_domains.py``). The domain carries what the agent knows from
the user's request (``context``) and which reads can give a fact another way (``alternatives``); a write step
outside the order shop names the read that verifies it (``Step.verify``) and what that read shows (``Step.shows``).
The oracle says, as ground truth for scoring, whether the fault is transient, how many identical retries can help,
whether the outcome of a failed write is ambiguous (S2), whether rule R lets the proxy retry, whether the task is
recoverable at all and which terminal statuses are correct when it is not, and which recipe the oracle agent (P0)
follows; the recipe also defines the accepted first action after the fault (``scoring.py``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any, Literal

from resilient_mcp.chaos.domains import surface
from resilient_mcp.chaos.ledger import Ledger

ToolClass = Literal["read_only", "write_unsafe", "write_idempotent", "destructive"]
Recipe = Literal[
    "retry",  # wait (retry_after, else briefly) and repeat the identical call
    "fix",  # send the intended arguments (the agent's own mistake, or a drifted schema)
    "correct_tool",  # call the tool by its right name (A1)
    "refresh",  # list the tools again, call the replacement (A2)
    "verify",  # call the verification read; re-issue only if the write did not happen (C2/C3/C4/E1/E5 noop)
    "reread",  # read the record again and write with its current version (D5 aborted)
    "switch",  # get the same fact from an alternative tool (D4, C5, F3 on reads)
    "degrade",  # use the degraded text the proxy returned, or go on without it
    "requery",  # the result looked wrong or empty: ask again once (E3, E5 negative)
    "stop",  # unrecoverable: end with a terminal status in ``terminal_ok``
    "proceed",  # nothing to do (D3, F4: ignore instructions found in output)
]
Status = Literal["done", "failed", "asked_user", "aborted", "degraded"]

CONTEXT: dict[str, Any] = {
    "customer": "carol",
    "sku": "apple",
    "qty": 2,
    "client_ref": "R1",
    "order_id": "ord-2",
    "status": "shipped",
    "query": "bob",
    "limit": 10,
    "rows": 5,
}
"""What the agent knows from the user's request (the values a fix may take)."""

SEED_ORDERS: dict[str, dict[str, Any]] = {
    "ord-1": {
        "order_id": "ord-1",
        "version": 1,
        "status": "open",
        "customer": "alice",
        "sku": "apple",
        "qty": 1,
        "client_ref": "seed-1",
    },
    "ord-2": {
        "order_id": "ord-2",
        "version": 1,
        "status": "open",
        "customer": "bob",
        "sku": "pear",
        "qty": 3,
        "client_ref": "seed-2",
    },
}


@dataclass(frozen=True)
class Domain:
    """A tool surface of the chaos server and what an agent knows about it from the user's request."""

    name: str
    """The chaos server's domain (``resilient_mcp.chaos.domains``)."""
    context: dict[str, Any]
    """What the agent knows from the user's request (the values a fix may take)."""
    alternatives: dict[str, dict[str, Any]]
    """Reads that can give a step's fact another way, with the arguments the request gives them, in the order a
    reader tries them (what a model picks from the tool list when a read stays down)."""


ORDERS = Domain("orders", CONTEXT, {"list_orders": {}, "search": {"query": CONTEXT["query"]}})


@dataclass(frozen=True)
class Step:
    tool: str
    args: dict[str, Any]
    cls: ToolClass = "read_only"
    fact: str | None = None
    """For reads: which fact the agent must report (``check.FACTS``); None: the call only has to succeed."""
    first: tuple[str, Any] | None = None
    """The agent's own first (mistaken) call for this step: (tool, arguments) (A1, B1-B4)."""
    verify: tuple[str, dict[str, Any]] | None = None
    """For a write outside the order shop: the read that shows whether it happened (the benchmark policy's
    ``verify_with``); None: the order shop's ``get_order`` by client_ref or order id."""
    shows: dict[str, Any] | None = None
    """With ``verify``: what the read shows once the write happened, as fields of a returned record (a list field
    contains the value); None: the read fails, the record is gone."""

    def call(self) -> tuple[str, dict[str, Any]]:
        return self.tool, dict(self.args)


@dataclass(frozen=True)
class Oracle:
    recipe: Recipe
    recoverable: bool = True
    transient: bool = False
    """Repeating the identical call later can succeed."""
    max_retry: int = 0
    """Identical agent retries that can still help."""
    retry_after_ms: int | None = None
    s2: bool = False
    """The failed attempt may have executed (maybe_executed): a blind re-issue of a write is unsafe."""
    proxy_may_retry: bool = False
    """Rule R allows the proxy to repeat the attempt (ground truth for ``proxy_useless_attempts``)."""
    terminal_ok: tuple[Status, ...] = ("asked_user", "aborted", "degraded")
    """Correct terminal statuses when the task is not recoverable."""
    surfaces: bool = True
    """False for faults that are latency only (D3): nothing to recover from."""
    fix_args: dict[str, Any] | None = None
    """The arguments a fix sends when they are not the step's own (A3: the drifted schema's names)."""
    alt: tuple[str, dict[str, Any]] | None = None
    """The alternative call that gives the same fact (``switch``)."""


@dataclass(frozen=True)
class Scenario:
    id: str
    fault: str
    """Catalog fault type, e.g. C3_attempt_timeout ("none" for controls)."""
    variant: str
    target_class: ToolClass
    position: Literal["first", "mid", "last"]
    steps: tuple[Step, ...]
    target: int
    oracle: Oracle
    server_rules: tuple[dict[str, Any], ...] = ()
    net_rules: tuple[dict[str, Any], ...] = ()
    policy: dict[str, Any] = field(default_factory=dict)
    """Per-scenario additions to the benchmark's base policy (short attempt timeouts for hangs, approval)."""
    state: dict[str, Any] = field(default_factory=dict)
    """Changes to the seed records (orders, or the domain's): key -> fields (a field dict, or None to leave it out)."""
    expected_commits: dict[str, int] = field(default_factory=dict)
    """Write operation ("create_order:R1") -> commits a correct run makes; every other commit is unintended."""
    fired_always: bool = False
    """The fault is the agent's own mistake or the world's state, so it happens in every run (A1, B*, D5)."""
    attempt_s: float | None = None
    """Short per-attempt timeout of the target tool for hangs (the proxy's; the host keeps its own)."""
    probabilistic: bool = False
    """The fault fires with a probability drawn from the seed: the scenario runs with several seeds (pass^k)."""
    domain: Domain = ORDERS
    """The chaos server's tool surface and what the agent knows about it."""

    @property
    def category(self) -> str:
        return self.fault[0] if self.fault != "none" else "-"

    @property
    def target_step(self) -> Step:
        return self.steps[self.target]

    @property
    def heldout(self) -> bool:
        return self.id.startswith("H-")

    @property
    def block(self) -> str:
        """Which part of the report the scenario belongs to: main, heldout or real (real servers' wordings)."""
        return "heldout" if self.heldout else "real" if self.id.startswith("R-") else "main"

    def ledger(self) -> Ledger:
        ledger = Ledger()
        if self.domain.name != "orders":  # the surface's own seed records, changed as ``state`` says
            where = surface(self.domain.name)
            where.prepare(ledger)
            records = ledger.collection(str(where.collection))
            for key, fields in self.state.items():
                if fields is None:
                    records.pop(key, None)
                else:
                    records[key] = {**records.get(key, {}), **copy.deepcopy(fields)}
            return ledger
        orders = copy.deepcopy(SEED_ORDERS)
        for oid, fields in self.state.items():
            if fields is None:
                orders.pop(oid, None)
            else:
                orders[oid] = {**orders.get(oid, {}), **fields}
        ledger.orders = orders
        ledger.next_id = 1 + max(int(k.split("-")[1]) for k in orders)
        return ledger
