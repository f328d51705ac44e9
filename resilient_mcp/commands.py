"""The CLI's offline commands: ``check`` (validate config and policy, optionally connect), ``explain`` (one tool's
resolved policy) and ``audit`` (recent calls from the state store). Output goes to stdout; diagnostics to stderr."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types

from .policy import Policy
from .policy.config import ProxyConfig, StdioUpstream, command_problem
from .policy.hostfiles import describe
from .proxy.catalog import Catalog, CatalogConflict, prefixes_for, public_name
from .proxy.pipeline import Pipeline
from .proxy.proxy import Proxy
from .proxy.routing import retried_on
from .stages.idempotency import identical_call
from .stages.validate import suggest_tools

Loader = Callable[[argparse.Namespace], tuple[ProxyConfig, Policy]]


def _out(text: str) -> None:
    sys.stdout.write(text.rstrip() + "\n")


PORTABLE_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What every popular model API accepts as a function name (OpenAI's ``^[a-zA-Z0-9_-]{1,64}$``; Anthropic's and
Gemini's rules are as strict or looser)."""


def name_problem(name: str) -> str | None:
    """Why some hosts or model APIs refuse ``name`` as a tool (function) name, or None."""
    if PORTABLE_NAME.fullmatch(name):
        return None
    problems = []
    if len(name) > 64:
        problems.append(f"{len(name)} characters (at most 64)")
    odd = sorted({c for c in name if not (c.isascii() and (c.isalnum() or c in "_-"))})
    if odd:
        problems.append("the character(s) " + " ".join(repr(c) for c in odd[:8]))
    return ", ".join(problems) + " refused by OpenAI-style function names (^[a-zA-Z0-9_-]{1,64}$)"


def _catalog(config: ProxyConfig, policy: Policy) -> tuple[dict[str, Any], int]:
    """Start the upstreams, read their catalogs, stop them. Returns a report and an exit code."""
    report: dict[str, Any] = {}

    async def run() -> int:
        proxy = Proxy(config, policy, Pipeline)
        async with proxy.running():
            code = 0
            for name, up in proxy.upstreams.items():
                report[name] = {"state": up.state, "error": up.last_error, "tools": []}
                if up.state != "ready":
                    code = 1
            for public, compiled in proxy.routing.chains.items():
                entry, rule = compiled.entry, compiled.rule
                annotations = entry.tool.annotations if entry.tool is not None else None
                report[entry.upstream]["tools"].append(
                    {
                        "name": public,
                        "effect": rule.effect.value,
                        "upstream_name": entry.name,
                        "effect_from": policy.effect_source(entry.upstream, rule, annotations),
                        "retried_on": retried_on(rule),
                        "identical_call": identical_call(rule, entry.tool),
                    }
                )
            for public, entry in proxy.routing.catalog.tools.items():
                if public not in proxy.routing.chains:
                    report[entry.upstream]["tools"].append({"name": public, "hidden_by_policy": True})
            return code

    return report, anyio.run(run)


def check(args: argparse.Namespace, load: Loader) -> int:
    config, policy = load(args)
    ups = config.enabled_upstreams()
    for name, up in config.upstreams.items():
        if not up.enabled:
            sys.stderr.write(f"upstream {name!r} is disabled: not started\n")
    for line in describe(config.host):
        sys.stderr.write(f"note: {line}\n")
    missing = {
        name: problem
        for name, up in ups.items()
        if isinstance(up, StdioUpstream) and (problem := command_problem(up)) is not None
    }
    for name, problem in missing.items():
        sys.stderr.write(f"upstream {name!r} cannot start: {problem}\n")
    if missing:
        sys.stderr.write(f"config not ok: {len(missing)} of {len(ups)} upstream command(s) not found\n")
        return 2
    sys.stderr.write(
        f"config ok: {len(ups)} upstream(s) ({', '.join(ups) or 'none'}); {len(policy.sources)} policy file(s) valid\n"
    )
    if not args.connect:
        return 0
    try:
        report, code = _catalog(config, policy)
    except CatalogConflict as exc:
        sys.stderr.write(f"resilient-mcp: name conflict: {exc}\n")
        return 2
    _out(json.dumps(report, indent=2))
    for name, up in report.items():
        for tool in up["tools"]:
            problem = name_problem(tool["name"])
            if problem is not None and not tool.get("hidden_by_policy"):
                sys.stderr.write(
                    f"warning: tool {tool['name'][:100]!r} of upstream {name!r}: {problem}; a shorter prefix "
                    f"(prefix: in the config) or a policy deny avoids it\n"
                )
    if code:
        failed = [n for n, r in report.items() if r["state"] != "ready"]
        sys.stderr.write(f"upstream(s) not available: {', '.join(failed)}\n")
    return code


def explain(args: argparse.Namespace, load: Loader) -> int:
    config, policy = load(args)
    ups = config.enabled_upstreams()
    prefixes = prefixes_for({name: up.prefix for name, up in ups.items()}, config.prefix_separator)
    upstream = args.upstream
    if upstream is None:
        upstream = Catalog(prefixes=prefixes).upstream_for_name(args.tool) or (next(iter(ups)) if len(ups) == 1 else "")
    prefix = prefixes.get(upstream, "") if upstream else ""
    tool = args.tool[len(prefix) :] if prefix and args.tool.startswith(prefix) else args.tool
    public = public_name(tool, prefix) if prefix else tool
    annotations = None
    if getattr(args, "connect", False):
        known = _known_tools(config, policy)
        public = args.tool if args.tool in known else public
        if public not in known:
            close = suggest_tools(args.tool, list(known))
            hint = f"; close names: {', '.join(close)}" if close else ""
            sys.stderr.write(f"unknown tool {args.tool[:200]!r}: no upstream offers it{hint}\n")
            return 1
        upstream, tool, annotations = known[public]
    rule = policy.resolve(upstream, tool, public, annotations)
    report = {
        "tool": public,
        "upstream": upstream or None,
        "upstream_tool_name": tool,
        "visible": policy.is_visible(upstream, tool, public),
        "policy_files": policy.sources,
        "note": "checked against the servers' tools, with their annotations"
        if getattr(args, "connect", False)
        else "not checked against the servers' tools, nor their annotations (a local stdio server's readOnlyHint "
        "makes a tool read_only unless trust_annotations: false): explain --connect says whether the tool exists "
        "and resolves it with its annotations",
        "rule": json.loads(rule.model_dump_json()),
        "effect_from": policy.effect_source(upstream, rule, annotations),
        "idempotency_on": rule.idempotency_on,
        "identical_call": identical_call(rule, None),
    }
    _out(json.dumps(report, indent=2))
    return 0


def _known_tools(config: ProxyConfig, policy: Policy) -> dict[str, tuple[str, str, types.ToolAnnotations | None]]:
    """Every host-visible tool name of the running upstreams -> (upstream, upstream's name, annotations)."""
    known: dict[str, tuple[str, str, types.ToolAnnotations | None]] = {}

    async def run() -> None:
        proxy = Proxy(config, policy, Pipeline)
        async with proxy.running():
            for public, entry in proxy.routing.catalog.tools.items():
                annotations = entry.tool.annotations if entry.tool is not None else None
                known[public] = (entry.upstream, entry.name, annotations)

    anyio.run(run)
    return known


def audit(args: argparse.Namespace) -> int:
    from .policy.config import load_config
    from .state.sqlite import recent_audit

    config = load_config(args.config) if args.config else ProxyConfig()
    state_dir = args.state_dir or str(config.state_path())
    if config.state.backend == "redis" and not args.state_dir:
        from .state.redis import read_audit

        state_dir = f"Redis ({config.state.key_prefix}audit)"
        rows = read_audit(config.state, limit=args.limit, session=args.session)
    else:
        rows = recent_audit(state_dir, limit=args.limit, session=args.session)
    for row in rows:
        _out(json.dumps(row, ensure_ascii=False))
    if not rows:
        sys.stderr.write(f"no audit records in {state_dir}\n")
    return 0
