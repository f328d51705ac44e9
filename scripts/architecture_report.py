"""Figures about the package's shape: modules per package, import arrows and cycles, long functions, a call's path.

    python scripts/architecture_report.py                  # this checkout
    python scripts/architecture_report.py --root DIR       # another checkout (e.g. an older commit, for a before/after)
    python scripts/architecture_report.py --no-trace       # static figures only
    python scripts/architecture_report.py --write docs/architecture.md   # the document (tests/test_docs_fresh.py)

Static figures come from the source with ``ast`` (nothing is imported). An arrow is one ``(importer, imported)`` pair
of modules of the package; ``from pkg import name`` points at ``pkg.name`` when that is a module, else at ``pkg``.
Arrows are sorted by when the import runs: at module level (what Python executes on import), deferred (inside a
function) or typing-only (under ``if TYPE_CHECKING:``). Import cycles are the strongly connected components of the
module-level graph (a real import-order cycle), and separately of all arrows (modules that know each other).
Levels: the longest chain of module-level arrows, cycles collapsed.

The call path is measured, in a subprocess run with the checkout first on ``sys.path``, recorded with
``sys.setprofile`` on the event loop's thread, for one successful ``tools/call`` of an unannotated tool (the default
policy: a ``write_unsafe`` tool, so idempotency, retry and breaker are all composed) after a first, warming one, and
the same for a tool its (local) server annotates ``readOnlyHint`` (``read_only`` under the default policy: no
idempotency stage), on two paths:

- **stdio**: ``wrap`` as the host runs it, in-process: ``app._serve`` on pipes in place of fds 0 and 1 (the stdio
  transport and the raw tools/call lane, ``host/stdio.py`` -> ``host/toolcall.py``), a host thread writing JSON-RPC
  lines to them, an in-memory upstream;
- **SDK**: the real client -> proxy -> in-memory upstream path of ``tests/harness.py`` (the SDK's server session and
  the tools/call fast path: what the HTTP host and a stdio host the raw lane does not serve go through).

Files entered: the package's files whose code ran during the call. Entries: how many times the call moved into that
file from another of the package's files (a resumed coroutine counts as moving back in). Work of the state store's
worker thread is not counted (the profile is the loop's); the traced call starts once the worker has written what
the warming call queued (``StateStore.flush``), as a host's next request usually finds it: else the event loop's
thread may write those jobs itself before its claim (``sqlite.Worker.now``), and the count would depend on a race.

``--write FILE`` writes the document form (``docs/architecture.md``): every package and module with the first line
of its docstring, the arrows between packages, the cycles, the functions over ``LONG_FUNCTION`` lines and the files
one call enters in order, without the figures that move with every edit (line counts, entry counts), so that the
document changes only when the package's shape does.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import os
import subprocess
import sys
import tokenize
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

PACKAGE = "resilient_mcp"
KINDS = ("module", "deferred", "typing")
LONG_FUNCTION = 60
"""Functions longer than this many lines are named in the document."""


@dataclass
class Module:
    name: str
    path: Path
    is_package: bool
    lines: int
    arrows: dict[str, set[str]] = field(default_factory=lambda: {k: set() for k in KINDS})


def module_name(root: Path, path: Path) -> tuple[str, bool]:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        return ".".join(parts[:-1]), True
    return ".".join(parts), False


def load_modules(root: Path) -> dict[str, Module]:
    modules: dict[str, Module] = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        name, is_package = module_name(root, path)
        modules[name] = Module(name, path, is_package, len(path.read_text().splitlines()))
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(tree: ast.Module) -> list[tuple[str, ast.Import | ast.ImportFrom]]:
    """Every import statement with its kind (module-level, deferred into a function, typing-only)."""
    found: list[tuple[str, ast.Import | ast.ImportFrom]] = []

    def walk(nodes: list[ast.stmt], kind: str) -> None:
        for node in nodes:
            if isinstance(node, ast.Import | ast.ImportFrom):
                found.append((kind, node))
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                walk(node.body, "typing" if kind == "typing" else "deferred")
            elif isinstance(node, ast.If) and _is_type_checking(node.test):
                walk(node.body, "typing")
                walk(node.orelse, kind)
            else:
                for child_field in ("body", "orelse", "finalbody", "handlers"):
                    children = getattr(node, child_field, None)
                    if isinstance(children, list):
                        stmts = [c for c in children if isinstance(c, ast.stmt)]
                        stmts += [s for h in children if isinstance(h, ast.ExceptHandler) for s in h.body]
                        walk(stmts, kind)

    walk(tree.body, "module")
    return found


def _resolve(modules: dict[str, Module], target: str) -> str | None:
    """The longest prefix of ``target`` that is a module of the package."""
    parts = target.split(".")
    while parts:
        name = ".".join(parts)
        if name in modules:
            return name
        parts.pop()
    return None


def collect_arrows(modules: dict[str, Module]) -> None:
    for mod in modules.values():
        tree = ast.parse(mod.path.read_text(), str(mod.path))
        for kind, node in _imports(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base = mod.name.split(".") if mod.is_package else mod.name.split(".")[:-1]
                    base = base[: len(base) - (node.level - 1)]
                    source = ".".join(base + ([node.module] if node.module else []))
                else:
                    source = node.module or ""
                for alias in node.names:
                    sub = f"{source}.{alias.name}"
                    targets.append(sub if sub in modules else source)
            for target in targets:
                resolved = _resolve(modules, target) if target.startswith(PACKAGE) else None
                if resolved and resolved != mod.name:
                    mod.arrows[kind].add(resolved)


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components of more than one module only."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return sorted(components, key=lambda c: (-len(c), c))


def levels(graph: dict[str, set[str]]) -> int:
    """The longest chain of arrows, each cycle collapsed to one node."""
    component_of = {n: n for n in graph}
    for component in strongly_connected(graph):
        for member in component:
            component_of[member] = component[0]
    dag: dict[str, set[str]] = defaultdict(set)
    for node, targets in graph.items():
        for target in targets:
            if component_of[node] != component_of[target]:
                dag[component_of[node]].add(component_of[target])
    depth: dict[str, int] = {}

    def longest(node: str) -> int:
        if node not in depth:
            depth[node] = 1 + max((longest(t) for t in dag.get(node, ())), default=0)
        return depth[node]

    sys.setrecursionlimit(10_000)
    return max((longest(component_of[n]) for n in graph), default=0)


def package_of(name: str) -> str:
    """The sub-package a module belongs to; ``(root)`` for the modules beside them, ``__init__`` for the package's."""
    parts = name.split(".")
    if len(parts) == 1:
        return "__init__"
    return parts[1] if len(parts) > 2 or _is_dir_package(name) else "(root)"


_PACKAGES: set[str] = set()


def _is_dir_package(name: str) -> bool:
    return name in _PACKAGES


def longest_functions(modules: dict[str, Module], count: int) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for mod in modules.values():
        tree = ast.parse(mod.path.read_text())

        def visit(node: ast.AST, prefix: str, mod: Module = mod) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    qual = f"{prefix}{child.name}"
                    if not isinstance(child, ast.ClassDef):
                        size = (child.end_lineno or child.lineno) - child.lineno + 1
                        found.append((size, f"{mod.name}:{qual}"))
                    visit(child, qual + ".")

        visit(tree, "")
    return sorted(found, key=lambda f: (-f[0], f[1]))[:count]


def fmt_skips(root: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for folder in (PACKAGE, "tests", "benchmarks", "scripts"):
        total = 0
        for path in sorted((root / folder).rglob("*.py")):
            try:
                tokens = tokenize.generate_tokens(io.StringIO(path.read_text()).readline)
                total += sum(1 for t in tokens if t.type == tokenize.COMMENT and "fmt: skip" in t.string)
            except (tokenize.TokenError, SyntaxError):
                continue
        counts[folder] = total
    return counts


PROBE_COMMON = r"""
import json, os, sys, anyio
import mcp_types as types
from mcp.server import Server

ROOT, TOOL, EFFECT = sys.argv[1:4]
PKG = ROOT.rstrip("/") + "/resilient_mcp/"
entries, last = [], [None]


def profile(frame, event, arg):
    if event != "call":
        return
    filename = frame.f_code.co_filename
    if not filename.startswith(PKG):
        return
    rel = filename[len(PKG):]
    if rel != last[0]:
        entries.append(rel)
        last[0] = rel


def upstream():
    async def list_tools(ctx, params):
        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        read_only = types.ToolAnnotations(read_only_hint=True)  # a local server's hint: read_only by default
        tools = [types.Tool(name="echo", input_schema=schema), types.Tool(name="lookup", input_schema=schema,
                 annotations=read_only)]
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx, params):
        return types.CallToolResult(content=[types.TextContent(text=str(params.arguments))])

    return Server("echo", on_list_tools=list_tools, on_call_tool=call_tool)
"""

PROBE_SDK = r"""
from tests.harness import proxied


async def main():
    async with proxied({"only": upstream()}) as h:
        await h.client.call_tool(TOOL, {"text": "warm"})
        await h.proxy.pipeline.services.store.flush()  # the warm call's settling written: the state worker is idle
        sys.setprofile(profile)
        result = await h.client.call_tool(TOOL, {"text": "hello"})
        sys.setprofile(None)
        assert not result.is_error, result
        assert h.proxy.router.routing.chains[TOOL].rule.effect.value == EFFECT
    print(json.dumps(entries))


anyio.run(main)
"""

PROBE_STDIO = r"""
import anyio.from_thread, anyio.to_thread
from mcp.client._memory import InMemoryTransport
from resilient_mcp import app
from resilient_mcp.ops.logs import configure_logging
from resilient_mcp.ops.runtime import Ops
from resilient_mcp.policy import Policy, PolicyFile
from resilient_mcp.policy.config import ProxyConfig
from resilient_mcp.proxy.proxy import Proxy


def host(wire_in, reader, services):
    def request(rid, method, params):
        message = {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}
        os.write(wire_in, json.dumps(message).encode() + b"\n")
        while True:
            answer = json.loads(reader.readline())
            if answer.get("id") == rid:
                return answer

    hello = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "probe", "version": "0"}}
    assert "result" in request(1, "initialize", hello)
    os.write(wire_in, b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
    assert "result" in request(2, "ping", {})  # answered after the notification: the raw lane knows the connection
    assert not request(3, "tools/call", {"name": TOOL, "arguments": {"text": "warm"}})["result"].get("isError")
    anyio.from_thread.run(services.store.flush)  # the warm call's settling written: the state worker is idle
    anyio.from_thread.run_sync(sys.setprofile, profile)
    answer = request(4, "tools/call", {"name": TOOL, "arguments": {"text": "hello"}})
    anyio.from_thread.run_sync(sys.setprofile, None)
    assert not answer["result"].get("isError"), answer
    os.close(wire_in)  # the host's input ends: the proxy stops


async def main():
    configure_logging("warning", "json")
    result_out = os.dup(1)
    proxy_in, wire_in = os.pipe()
    reader_fd, proxy_out = os.pipe()
    os.dup2(proxy_in, 0)
    os.dup2(proxy_out, 1)
    os.close(proxy_in)
    os.close(proxy_out)
    config = ProxyConfig.model_validate(
        {"upstreams": {"only": {"command": "in-memory", "protocol": "legacy"}}, "state_dir": ":memory:"}
    )
    server = upstream()
    ops = Ops.from_config(config, http=False)
    proxy = Proxy(
        config,
        Policy(PolicyFile.model_validate({})),
        app.pipeline_factory(ops),
        transports={"only": lambda: InMemoryTransport(server)},
        calls=app.chaos_calls(config),
    )
    with os.fdopen(reader_fd, "rb") as reader:
        async with anyio.create_task_group() as tg:
            tg.start_soon(app._serve, proxy, config, None, None, ops)
            await anyio.to_thread.run_sync(host, wire_in, reader, proxy.pipeline.services)
    assert proxy.router.routing.chains[TOOL].rule.effect.value == EFFECT
    ops.shutdown()
    os.write(result_out, json.dumps(entries).encode() + b"\n")


anyio.run(main)
"""

LANES = {
    "stdio": (PROBE_STDIO, "echo", "write_unsafe"),
    "sdk": (PROBE_SDK, "echo", "write_unsafe"),
    "stdio-read": (PROBE_STDIO, "lookup", "read_only"),
    "sdk-read": (PROBE_SDK, "lookup", "read_only"),
}
"""The two paths a traced call takes (see the module's docstring), for the default write and the default read: the
probe, the tool called and the effect class the default policy gives it (checked by the probe)."""


def trace_call(root: Path, lane: str = "stdio") -> list[str]:
    """The package files one successful tools/call enters on ``lane``, in order, one item per entry."""
    env = dict(os.environ, PYTHONPATH=str(root))
    out = subprocess.run(
        [sys.executable, "-c", PROBE_COMMON + LANES[lane][0], str(root), *LANES[lane][1:]],
        cwd=root,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if out.returncode != 0:
        raise SystemExit(f"the traced call ({lane}) failed:\n{out.stderr}")
    entries: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return entries


def report(root: Path, trace: bool, top: int) -> None:
    modules = load_modules(root)
    _PACKAGES.update(name for name, m in modules.items() if m.is_package)
    collect_arrows(modules)
    by_package: dict[str, list[str]] = defaultdict(list)
    for name, mod in modules.items():
        by_package[package_of(name)].append(name.split(".")[-1] + ("/__init__" if mod.is_package else ""))
    print(f"# {root}\n")
    total_lines = sum(m.lines for m in modules.values())
    print(f"## Modules per package ({len(modules)} modules, {total_lines} lines)\n")
    for package in sorted(by_package, key=lambda p: (p != "(root)", p)):
        print(f"- {package} ({len(by_package[package])}): {', '.join(sorted(by_package[package]))}")

    module_graph = {n: set(m.arrows["module"]) for n, m in modules.items()}
    all_graph = {n: set().union(*m.arrows.values()) for n, m in modules.items()}
    counts = {k: sum(len(m.arrows[k]) for m in modules.values()) for k in KINDS}
    print(f"\n## Import arrows: {sum(len(v) for v in all_graph.values())} distinct")
    kinds = f"module-level {counts['module']}, deferred {counts['deferred']}, typing-only {counts['typing']}"
    print(f"\n- by kind: {kinds}")
    print(f"- levels (longest module-level chain): {levels(module_graph)}")
    package_arrows: Counter[tuple[str, str]] = Counter()
    for src, targets in all_graph.items():
        for dst in targets:
            if package_of(src) != package_of(dst):
                package_arrows[(package_of(src), package_of(dst))] += 1
    print(f"- between packages: {sum(package_arrows.values())}")
    for (src, dst), n in sorted(package_arrows.items()):
        print(f"  - {src} -> {dst}: {n}")
    package_graph: dict[str, set[str]] = defaultdict(set)
    for src, dst in package_arrows:
        package_graph[src].add(dst)
        package_graph.setdefault(dst, set())

    print("\n## Import cycles\n")
    for title, graph in (
        ("module-level (import order)", module_graph),
        ("all arrows (modules that know each other)", all_graph),
        ("between packages", dict(package_graph)),
    ):
        cycles = strongly_connected(graph)
        print(f"- {title}: {len(cycles)}")
        for cycle in cycles:
            print(f"  - {' <-> '.join(cycle)}")

    print("\n## Who imports the test tools (chaos, demo) from outside them\n")
    for tool in ("chaos", "demo"):
        importers = [
            f"{name} ({kind})"
            for name, mod in sorted(modules.items())
            if package_of(name) != tool
            for kind in KINDS
            if any(package_of(target) == tool for target in mod.arrows[kind])
        ]
        print(f"- {tool}: {', '.join(importers) or 'nobody'}")

    print(f"\n## Longest functions (top {top})\n")
    for size, name in longest_functions(modules, top):
        print(f"- {size:4d} {name}")

    skips = fmt_skips(root)
    print(f"\n## `# fmt: skip`: {sum(skips.values())}\n")
    print("- " + ", ".join(f"{k} {v}" for k, v in skips.items()))

    if trace:
        for lane, title in TRACE_TITLES.items():
            entries = trace_call(root, lane)
            per_file = Counter(entries)
            first_seen = list(dict.fromkeys(entries))
            print(f"\n## One tools/call, {title}: {len(per_file)} files entered, {len(entries)} entries\n")
            print("- in order of first entry (entries): " + ", ".join(f"{f} ({per_file[f]})" for f in first_seen))


TRACE_TITLES = {
    "stdio": "stdio (the raw lane)",
    "sdk": "the SDK's path",
    "stdio-read": "a read_only tool, stdio (the raw lane)",
    "sdk-read": "a read_only tool, the SDK's path",
}


def _first_line(path: Path) -> str:
    doc = ast.get_docstring(ast.parse(path.read_text()))
    if not doc:
        return "(no docstring)"
    first = " ".join(doc.split("\n\n")[0].split())
    end = first.find(". ")
    if end >= 0:  # the first sentence
        first = first[: end + 1]
    return first.replace("|", "\\|")


def document(root: Path, trace: bool = True) -> str:
    """The Markdown of ``docs/architecture.md``: the package's shape, generated (see the module's docstring)."""
    modules = load_modules(root)
    _PACKAGES.update(name for name, m in modules.items() if m.is_package)
    collect_arrows(modules)
    module_graph = {n: set(m.arrows["module"]) for n, m in modules.items()}
    all_graph = {n: set().union(*m.arrows.values()) for n, m in modules.items()}
    counts = {k: sum(len(m.arrows[k]) for m in modules.values()) for k in KINDS}
    package_arrows: Counter[tuple[str, str]] = Counter()
    for src, targets in all_graph.items():
        for dst in targets:
            if package_of(src) != package_of(dst):
                package_arrows[(package_of(src), package_of(dst))] += 1
    package_graph: dict[str, set[str]] = defaultdict(set)
    for src, dst in package_arrows:
        package_graph[src].add(dst)
        package_graph.setdefault(dst, set())
    by_package: dict[str, list[str]] = defaultdict(list)
    for name in modules:
        by_package[package_of(name)].append(name)
    md = [
        "# The shape of the code",
        "",
        "<!-- Generated by `python scripts/architecture_report.py --write docs/architecture.md`; do not edit by hand:",
        "tests/test_docs_fresh.py fails when this file and the code differ. -->",
        "",
        "Every package and module of `resilient_mcp` with the first line of its docstring, the import arrows",
        "between them, and the files one `tools/call` enters, generated from the source (`ast`: nothing is imported)",
        "and one traced call. `python scripts/architecture_report.py` prints the same with the figures that move with",
        "every edit (lines, entries, function sizes); its `--help` says how each figure is counted. Earlier",
        "before/after measurements of restructurings: [architecture-history.md](architecture-history.md).",
        "",
        "## Packages and modules",
        "",
        f"{len(modules)} modules in {len(_PACKAGES)} packages (package `__init__` files included).",
        "",
        "| module | what it is |",
        "|---|---|",
    ]
    order = sorted(by_package, key=lambda p: (p not in ("__init__", "(root)"), p != "__init__", p))
    for package in order:
        paths = sorted(modules[n].path.relative_to(root) for n in by_package[package])
        for rel in sorted(paths, key=lambda p: (p.parent.as_posix(), p.name != "__init__.py", p.name)):
            md.append(f"| `{rel.as_posix()}` | {_first_line(root / rel)} |")
    md += [
        "",
        "## Import arrows",
        "",
        f"{sum(len(v) for v in all_graph.values())} distinct arrows between modules: module-level {counts['module']}, "
        f"deferred (inside a function) {counts['deferred']}, typing-only {counts['typing']}; the longest chain of "
        f"module-level imports is {levels(module_graph)} modules long.",
        "",
        f"Between packages ({sum(package_arrows.values())} arrows; `(root)`: the modules beside the packages):",
        "",
        "| from | to (arrows) |",
        "|---|---|",
    ]
    for src in sorted(package_graph):
        targets = sorted((dst, n) for (s_, dst), n in package_arrows.items() if s_ == src)
        if targets:
            md.append(f"| {src} | " + ", ".join(f"{dst} ({n})" for dst, n in targets) + " |")
    md += ["", "## Import cycles", ""]
    for title, graph in (
        ("module-level (import order)", module_graph),
        ("all arrows (modules that know each other)", all_graph),
        ("between packages", dict(package_graph)),
    ):
        cycles = strongly_connected(graph)
        md.append(f"- {title}: {len(cycles)}")
        md += [f"  - {' ⇄ '.join(cycle)}" for cycle in cycles]
    md += ["", "## Who imports the test tools (chaos, demo) from outside them", ""]
    for tool in ("chaos", "demo"):
        importers = [
            f"{name} ({kind})"
            for name, mod in sorted(modules.items())
            if package_of(name) != tool
            for kind in KINDS
            if any(package_of(target) == tool for target in mod.arrows[kind])
        ]
        md.append(f"- {tool}: {', '.join(importers) or 'nobody'}")
    long = [name for size, name in longest_functions(modules, len(modules) * 100) if size > LONG_FUNCTION]
    md += ["", f"## Functions over {LONG_FUNCTION} lines", ""]
    md += [f"- `{name}`" for name in sorted(long)] or ["- none"]
    if trace:
        stdio = list(dict.fromkeys(trace_call(root, "stdio")))
        sdk = list(dict.fromkeys(trace_call(root, "sdk")))
        stdio_read, sdk_read = set(trace_call(root, "stdio-read")), set(trace_call(root, "sdk-read"))
        md += [
            "",
            "## One tools/call",
            "",
            "A successful `tools/call` of an unannotated tool under the default policy (`write_unsafe`: idempotency, "
            "retry and breaker composed), traced on the event loop's thread "
            "(`scripts/architecture_report.py` says how).",
            "",
            f"Over stdio, as `wrap` serves a host (the stdio transport and its raw tools/call lane), it enters "
            f"{len(stdio)} files of the package, in this order of first entry:",
            "",
            " → ".join(stdio) + ".",
            "",
            f"Through the SDK's server path (the in-memory harness `tests/harness.py`: client → proxy → upstream), "
            f"{len(sdk)} files:",
            "",
            " → ".join(sdk) + ".",
            "",
            f"A read_only tool (its local server's `readOnlyHint`, the default policy: no idempotency stage) enters "
            f"{len(stdio_read)} files over stdio and {len(sdk_read)} through the SDK's path.",
        ]
    return "\n".join(md) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent, help="a checkout")
    parser.add_argument("--no-trace", action="store_true", help="skip the measured tools/call")
    parser.add_argument("--top", type=int, default=10, help="how many long functions to list")
    parser.add_argument("--write", type=Path, metavar="FILE", help="write the document form (docs/architecture.md)")
    args = parser.parse_args(argv)
    if args.write is not None:
        args.write.write_text(document(args.root.resolve(), trace=not args.no_trace), encoding="utf-8")
        return
    report(args.root.resolve(), trace=not args.no_trace, top=args.top)


if __name__ == "__main__":
    main()
