"""What the defaults deliver: errors reaching the host and duplicated writes, with no proxy, with the proxy and no
policy at all, and with ``trust_annotations: true`` (``--trust-annotations``), under the same injected faults.

Upstreams, both local stdio servers: the reference ``@modelcontextprotocol/server-everything`` (``echo`` and
``get-sum``, both ``readOnlyHint: true``) and the project's chaos server (``get_stock``, ``readOnlyHint: true``, and
``create_order``, a write with no hint that it is safe to repeat, whose ledger counts every order it committed).
Each round calls the four tools once; ``create_order`` gets a fresh ``client_ref``, so any ``client_ref`` committed
more than once is a duplicate the proxy caused.

Faults: one seeded fault plan (``resilient_mcp.chaos``) puts a transient fault on about 10 % of calls, in four kinds
of 2.5 % each: connection refused (C1: not sent), rate limited (D2: rejected, the upstream's typed claim), HTTP 503
after the call was forwarded (C4, it ran) and HTTP 502 without forwarding (C4: the proxy cannot tell it did not
run). With the proxy it is applied by proxy chaos mode, between the proxy and the upstream; without it, the same
``FaultInjector`` wraps a direct client's calls, so the host sees each fault as it arrives. Retries draw from the
plan again, as a flaky server would.

The rules under test were written from the fault catalog, not from this run; ``--seed`` picks another draw of the
faults (benchmarks/RESULTS.md quotes two seeds).

Usage: ``python benchmarks/defaults.py [--rounds 30] [--seed 11] [--json]``. Needs Node and the reference server
installed by ``scripts/install-peers.sh`` (``.tools/npm``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import yaml
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from resilient_mcp.chaos.inject import FaultInjector
from resilient_mcp.chaos.plan import FaultPlan
from resilient_mcp.faults import Fault

ROOT = Path(__file__).resolve().parents[1]
EVERYTHING = ROOT / ".tools/npm/node_modules/@modelcontextprotocol/server-everything/dist/index.js"
READS = ("echo", "get-sum", "get_stock")
WRITES = ("create_order",)


def fault_plan(seed: int) -> dict[str, Any]:
    share = {"probability": 0.025}
    return {
        "seed": seed,
        "rules": [
            {"match": share, "fault": "C1_connect_failure"},
            {"match": share, "fault": "rate_limit", "params": {"retry_after_ms": 50}},
            {"match": share, "fault": "C4_gateway_5xx", "params": {"status": 503, "forward": True}},
            {"match": share, "fault": "C4_gateway_5xx", "params": {"status": 502}},
        ],
    }


def _everything() -> dict[str, Any]:
    return {"command": "node", "args": [str(EVERYTHING), "stdio"]}


def _orders(ledger: Path) -> dict[str, Any]:
    return {"command": sys.executable, "args": ["-m", "resilient_mcp.cli", "chaos-server", "--ledger", str(ledger)]}


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _arguments(tool: str, i: int) -> dict[str, Any]:
    return {
        "echo": {"message": f"m{i}"},
        "get-sum": {"a": i, "b": 1},
        "get_stock": {"sku": "apple"},
        "create_order": {"customer": f"c{i}", "sku": ("apple", "pear")[i % 2], "qty": 1, "client_ref": f"R{i}"},
    }[tool]


class Tally:
    def __init__(self) -> None:
        self.calls = {"read": 0, "write": 0}
        self.errors = {"read": 0, "write": 0}

    def add(self, tool: str, failed: bool) -> None:
        kind = "write" if tool in WRITES else "read"
        self.calls[kind] += 1
        self.errors[kind] += failed


class _Direct:
    """A direct client shaped like ``Upstream.call_tool`` for the ``FaultInjector`` (no proxy in between)."""

    def __init__(self, name: str, client: Client) -> None:
        self.name, self.client = name, client

    async def call_tool(
        self, name: str, arguments: dict[str, Any] | None, meta: Any = None, **kw: Any
    ) -> types.CallToolResult:
        return await self.client.session.send_request(
            types.CallToolRequest(params=types.CallToolRequestParams(name=name, arguments=arguments)),
            types.CallToolResult,
        )

    def request_restart(self) -> None:  # pragma: no cover - the plan has no crash
        raise AssertionError("no restarts in this plan")


async def run_direct(rounds: int, seed: int, work: Path) -> tuple[Tally, Path, int]:
    ledger = work / "direct-ledger.json"
    injector = FaultInjector(FaultPlan.model_validate(fault_plan(seed)))
    decide, injected = injector.planner.decide, []

    def counted(*args: Any, **kw: Any) -> Any:
        decision = decide(*args, **kw)
        injected.append(decision is not None)
        return decision

    injector.planner.decide = counted  # type: ignore[method-assign]
    tally = Tally()
    ev, orders = _everything(), _orders(ledger)
    ev_params = StdioServerParameters(command=ev["command"], args=ev["args"], env=_env())
    or_params = StdioServerParameters(command=orders["command"], args=orders["args"], env=_env())
    errlog = (work / "direct.stderr").open("w")
    async with (
        Client(stdio_client(ev_params, errlog=errlog), mode="legacy", cache=None) as ev_client,
        Client(stdio_client(or_params, errlog=errlog), mode="legacy", cache=None) as or_client,
    ):
        ups = {"echo": _Direct("everything", ev_client), "get-sum": _Direct("everything", ev_client)}
        ups |= {"get_stock": _Direct("orders", or_client), "create_order": _Direct("orders", or_client)}
        for i in range(rounds):
            for tool in (*READS, *WRITES):
                try:
                    result = await injector.call(ups[tool], tool, _arguments(tool, i), timeout_s=50.0)  # type: ignore[arg-type]
                    failed = bool(result.is_error)
                except Fault:
                    failed = True
                tally.add(tool, failed)
    return tally, ledger, sum(injected)


async def run_proxy(rounds: int, seed: int, work: Path, mode: str) -> tuple[Tally, Path, int]:
    ledger = work / f"{mode}-ledger.json"
    config: dict[str, Any] = {
        "upstreams": {"everything": _everything(), "orders": _orders(ledger)},
        "state_dir": str(work / f"{mode}-state"),
        "faults": {"rules": fault_plan(seed)["rules"], "seed": seed},
    }
    if mode == "trust":
        policy = {"upstreams": {"everything": {"trust_annotations": True}, "orders": {"trust_annotations": True}}}
        (work / "trust-policy.yaml").write_text(yaml.safe_dump(policy))
        config["policies"] = [str(work / "trust-policy.yaml")]
    config_path = work / f"{mode}.yaml"
    config_path.write_text(yaml.safe_dump(config))
    argv = [sys.executable, "-m", "resilient_mcp.cli", "--log-format", "json", "serve", "--config", str(config_path)]
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=_env())
    stderr = work / f"{mode}.stderr"
    tally = Tally()
    with stderr.open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog), mode="legacy", cache=None) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            public = {tool: next(n for n in names if n.endswith("__" + tool)) for tool in (*READS, *WRITES)}
            for i in range(rounds):
                for tool in (*READS, *WRITES):
                    result = await client.call_tool(public[tool], _arguments(tool, i))
                    tally.add(tool, bool(result.is_error))
    injected = sum('"chaos_fault_injected"' in line for line in stderr.read_text().splitlines())
    return tally, ledger, injected


def duplicates(ledger: Path) -> int:
    commits: dict[str, int] = json.loads(ledger.read_text())["commits"] if ledger.exists() else {}
    return sum(n - 1 for op, n in commits.items() if op.startswith("create_order:") and n > 1)


async def measure(rounds: int, seed: int) -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="rmcp-defaults-") as tmp:
        work = Path(tmp)
        tally, ledger, injected = await run_direct(rounds, seed, work)
        rows.append(_row("no proxy", tally, duplicates(ledger), injected))
        for mode, label in (("defaults", "proxy, no policy"), ("trust", "proxy, trust_annotations: true")):
            tally, ledger, injected = await run_proxy(rounds, seed, work, mode)
            rows.append(_row(label, tally, duplicates(ledger), injected))
    return rows


def _row(label: str, tally: Tally, dups: int, injected: int | None) -> dict[str, Any]:
    return {
        "setup": label,
        "reads": tally.calls["read"],
        "read_errors": tally.errors["read"],
        "writes": tally.calls["write"],
        "write_errors": tally.errors["write"],
        "duplicates": dups,
        "faults_injected": injected,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=30, help="rounds of the four calls (default 30)")
    ap.add_argument("--seed", type=int, default=11, help="the fault plan's seed")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if not EVERYTHING.exists():
        sys.stderr.write(f"missing {EVERYTHING}: run scripts/install-peers.sh\n")
        return 2
    rows = anyio.run(measure, args.rounds, args.seed)
    if args.json:
        sys.stdout.write(json.dumps(rows, indent=2) + "\n")
        return 0
    sys.stdout.write(f"seed {args.seed}, {args.rounds} rounds of 3 reads + 1 write, ~10 % transient faults\n\n")
    sys.stdout.write(
        "| setup | read errors reaching the host | write errors reaching the host | duplicate writes "
        "| faults injected (attempts) |\n"
    )
    sys.stdout.write("|---|---|---|---|---|\n")
    for r in rows:
        sys.stdout.write(
            f"| {r['setup']} | {r['read_errors']}/{r['reads']} | {r['write_errors']}/{r['writes']} "
            f"| {r['duplicates']} | {r['faults_injected']} |\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
