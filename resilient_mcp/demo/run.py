"""``resilient-mcp demo``: the bundled order-book server, called directly and through the proxy, side by side.

Everything runs on this machine: the example upstream is a stdio subprocess (``python -m
resilient_mcp.demo.upstream``), one copy called directly (as a host would without the proxy), one behind the proxy,
which runs in this process; both clients speak real JSON-RPC. Each step prints what the agent asked and what it got
back each way. The demo's output goes to stdout (it is a command, not an MCP server).

Nothing else interrupts the steps: the direct server's stderr (its tracebacks, its last words before a crash) is
captured in a file and each step that made it write says so in one line under the direct answer; the proxy's own
stderr (its log lines, and the proxied server's stderr it relays) goes to a second file while the demo runs and is
summarised at the end, or printed whole to stderr if the demo itself fails.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError

from ..host.server import build_server
from ..ops.logs import Level, configure_logging
from ..policy import Policy, PolicyFile
from ..policy.config import ProxyConfig
from ..proxy.pipeline import Pipeline
from ..proxy.proxy import Proxy
from ..verdict.observations import INSTRUCTIONS

DIRECT_TIMEOUT_S = 3.0
"""The host's own timeout for a tool call in the direct runs (hosts have one; the SDK's default is none). It bounds
calls only: starting the server and ``initialize`` get ``START_TIMEOUT_S``, as in a host, so a slow machine does not
turn a server start into a failed step."""
START_TIMEOUT_S = 60.0
"""How long one direct step may take in all: starting a fresh Python server, ``initialize``, the call."""
ATTEMPT_TIMEOUT_S = 1.0
"""The proxy's per-attempt timeout of ``lookup_order`` in the demo's policy (the hanging read's)."""

DEMO_POLICY: dict[str, Any] = {
    "upstreams": {
        "orders": {
            "trust_annotations": True,
            "tools": {
                "create_order": {"verify_with": {"tool": "search_orders", "args": {"customer": "{customer}"}}},
                "lookup_order": {"timeouts": {"attempt_s": ATTEMPT_TIMEOUT_S}},
            },
        }
    },
    "defaults": {"retry": {"backoff_base_ms": 20, "backoff_cap_ms": 200}},
}

Caller = Any  # an object with ``call_tool(name, args)``: mcp.Client


def _say(text: str = "") -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _upstream_params(ledger: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "resilient_mcp.demo.upstream"], env={"DEMO_LEDGER": str(ledger)}
    )


def _summary(result: types.CallToolResult, max_lines: int = 8) -> list[str]:
    lines: list[str] = []
    size = sum(len(c.text.encode()) for c in result.content if isinstance(c, types.TextContent))
    for block in result.content:
        if isinstance(block, types.TextContent):
            shown = block.text.splitlines()
            if len(shown) > max_lines:
                shown = [*shown[: max_lines - 1], f"… [{len(block.text):,} chars in all]"]
            lines.extend("│ " + line for line in shown)
    if size > 20_000:
        lines.append(f"│ ({size:,} bytes of text landed in the agent's context)")
    if result.is_error and result.structured_content:
        obs = result.structured_content
        keys = ("fault_type", "retry_safety", "side_effect_status", "repair_action", "max_retry")
        lines.append("└ observation: " + ", ".join(f"{k}={obs.get(k)}" for k in keys))
    attempts = (result.meta or {}).get("io.github.resilient-mcp/attempts")
    if attempts:
        lines.append("└ absorbed by the proxy: " + ", ".join(f"#{a['n']} {a['outcome']}" for a in attempts))
    return lines


async def _call(client: Caller, tool: str, args: dict[str, Any]) -> list[str]:
    try:
        with anyio.fail_after(START_TIMEOUT_S):
            result = await client.call_tool(tool, args)
    except MCPError as exc:
        lines = [f"✗ JSON-RPC error {exc.code}: {exc.error.message}"]
        data = exc.error.data if isinstance(exc.error.data, dict) else {}
        if data.get("repair_action"):
            candidates = (data.get("details") or {}).get("candidates")
            lines.append(f"└ observation: repair_action={data['repair_action']}, candidates={candidates}")
        return lines
    return [("✗ error" if result.is_error else "✓ ok"), *_summary(result)]


async def _step(direct: _Direct, proxied: Caller, title: str, tool: str, args: dict[str, Any]) -> None:
    _say(f"\n▶ {title}\n  {tool}({json.dumps(args)})")
    _say("  direct:")
    for line in [*await _call(direct, tool, args), *_stderr_summary(direct.new_stderr())]:
        _say("    " + line)
    _say("  through resilient-mcp:")
    for line in await _call(proxied, tool, args):
        _say("    " + line)


def _stderr_summary(text: str) -> list[str]:
    """One line for what the direct server wrote to stderr during a step: a traceback by its last line."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    if any(line.startswith("Traceback") for line in lines):
        return [f"└ the server's stderr: a Python traceback ({len(lines)} lines) ending in {lines[-1].strip()[:160]}"]
    more = f" (+{len(lines) - 1} more lines)" if len(lines) > 1 else ""
    return [f"└ the server's stderr: {lines[0].strip()[:160]}{more}"]


@asynccontextmanager
async def _proxied(tmp: Path) -> AsyncIterator[Client]:
    params = _upstream_params(tmp / "proxied-ledger.json")
    config = ProxyConfig.model_validate(
        {
            "upstreams": {"orders": {"command": params.command, "args": params.args, "env": params.env}},
            "state_dir": str(tmp / "state"),
        }
    )
    proxy = Proxy(config, Policy(PolicyFile.model_validate(DEMO_POLICY)), Pipeline)
    async with proxy.running(), Client(build_server(proxy, instructions=INSTRUCTIONS), mode="legacy", cache=None) as c:
        yield c


class _Direct:
    """The server called without the proxy, as a host would: one connection, started again for the next step once
    the server died (the orders are kept in its ledger file). Its stderr goes to a file, read after each step."""

    def __init__(self, ledger: Path, stderr: Path) -> None:
        self.ledger = ledger
        self.stderr_path = stderr
        self._stderr_read = 0
        self._stack = AsyncExitStack()
        self._client: Client | None = None
        self._done = anyio.Event()

    async def __aenter__(self) -> _Direct:
        self._errlog = self._stack.enter_context(self.stderr_path.open("w", encoding="utf-8"))
        self._tg = await self._stack.enter_async_context(anyio.create_task_group())
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._done.set()
        await self._stack.aclose()

    async def _connection(self, *, task_status: anyio.abc.TaskStatus[Client]) -> None:
        """One connection to a fresh server process, held in its own task until it died or the demo ends."""
        self._done = anyio.Event()
        transport = stdio_client(_upstream_params(self.ledger), errlog=self._errlog)
        async with Client(transport, mode="legacy", cache=None) as client:
            task_status.started(client)
            await self._done.wait()

    async def call_tool(self, tool: str, args: dict[str, Any]) -> types.CallToolResult:
        if self._client is None:
            self._client = await self._tg.start(self._connection)
        try:
            return await self._client.call_tool(tool, args, read_timeout_seconds=DIRECT_TIMEOUT_S)
        except MCPError as exc:
            if exc.code == types.CONNECTION_CLOSED:  # the server died: the next step starts it again
                self._client = None
                self._done.set()
            raise

    def new_stderr(self) -> str:
        """What the server wrote to stderr since the last call (it writes before it answers or exits)."""
        data = self.stderr_path.read_bytes()
        new, self._stderr_read = data[self._stderr_read :], len(data)
        return new.decode("utf-8", "replace")


@contextmanager
def _stderr_to(path: Path) -> Iterator[None]:
    """The process's stderr (file descriptor 2: the proxy's logs, the proxied server's relayed stderr) into ``path``
    while the demo runs; printed whole to the real stderr when the demo fails, so nothing is lost."""
    sys.stderr.flush()
    saved = os.dup(2)
    ok = False
    try:
        with path.open("wb") as sink:
            os.dup2(sink.fileno(), 2)
        yield
        ok = True
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)
        if not ok:
            sys.stderr.write(path.read_text(encoding="utf-8", errors="replace"))
            sys.stderr.flush()


def _log_summary(text: str) -> list[str]:
    """The captured stderr in a few lines: the proxy's log events by level and name, then the relayed server lines."""
    events: Counter[str] = Counter()
    relayed: list[str] = []
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            record = None
        if isinstance(record, dict) and "event" in record:
            where = f" ({record['upstream']})" if isinstance(record.get("upstream"), str) else ""
            events[f"{record.get('level', 'info')} {record['event']}{where}"] += 1
        elif line.strip():
            relayed.append(line.strip())
    out = [
        "the proxy's log: "
        + (", ".join(f"{e}" + (f" ({n} times)" if n > 1 else "") for e, n in events.items()) if events else "nothing")
    ]
    if relayed:
        more = f" (+{len(relayed) - 1} more lines)" if len(relayed) > 1 else ""
        out.append(f"the proxied server's stderr, relayed by the proxy: {relayed[0][:160]}{more}")
    return out


async def run_demo(log_level: Level = "warning") -> int:
    with tempfile.TemporaryDirectory(prefix="resilient-mcp-demo-") as name:
        tmp = Path(name)
        with _stderr_to(tmp / "proxy-stderr.log"):
            configure_logging(log_level, "json")  # summarised below, so read as JSON lines
            async with (
                _Direct(tmp / "direct-ledger.json", tmp / "direct-stderr.log") as direct,
                _proxied(tmp) as proxied,
            ):
                await _script(direct, proxied)
        _say("\n▶ Behind the scenes: stderr, kept out of the steps above")
        for line in _log_summary((tmp / "proxy-stderr.log").read_text(encoding="utf-8", errors="replace")):
            _say("    " + line)
        _say("\nDone. Put `resilient-mcp wrap -- <your server>` in your MCP host's config to get the same guards.")
    return 0


async def _script(direct: _Direct, proxied: Caller) -> None:
    _say("resilient-mcp demo: an order-book MCP server, called directly and through the proxy.")
    tools = (await proxied.list_tools()).tools
    _say(f"\n▶ tools/list through the proxy: {len(tools)} tools, advertised unchanged")
    for tool in tools:
        _say(f"    {tool.name}: {tool.description}")
    await _step(
        direct,
        proxied,
        "Invalid arguments: the proxy answers before anything is sent, with every fix",
        "create_order",
        {"customer": "ada", "sku": "banana", "qty": "two"},
    )
    await _step(direct, proxied, "A typo in a tool name", "lookup_ordr", {"order_id": "ord-1"})
    await _step(
        direct,
        proxied,
        "A read that hangs once (the host gives up after "
        f"{DIRECT_TIMEOUT_S:.0f} s; the proxy's attempt timeout is {ATTEMPT_TIMEOUT_S:.0f} s, then it retries "
        "the read)",
        "lookup_order",
        {"order_id": "ord-1-slow"},
    )
    await _step(
        direct,
        proxied,
        "A read that fails transiently: absorbed by the proxy's retry",
        "lookup_order",
        {"order_id": "ord-2-flaky"},
    )
    await _step(
        direct,
        proxied,
        "A write whose server dies after committing: never retried; the agent is told to verify first",
        "create_order",
        {"customer": "bob", "sku": "pear", "qty": 1, "client_ref": "r-2-crash"},
    )
    await _step(
        direct,
        proxied,
        "Verifying, as the observation said: the order exists exactly once",
        "search_orders",
        {"customer": "bob"},
    )
    await _step(
        direct,
        proxied,
        "A 5 MB result: the proxy caps it (valid text, a note, the rest readable in pages)",
        "sales_report",
        {"rows": 190_000},
    )
    await _step(
        direct,
        proxied,
        "The same bad call again: the loop guard answers without calling the server",
        "create_order",
        {"customer": "ada", "sku": "banana", "qty": "two"},
    )
