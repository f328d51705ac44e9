"""The ``resilient-mcp`` command line. Exit codes: 0 ok, 1 runtime failure, 2 bad configuration or usage."""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from . import __version__
from .ops.logs import configure_logging
from .spawn.prestart import environment, prestart

if TYPE_CHECKING:
    from .policy import Policy, PolicyFile
    from .policy.config import ProxyConfig

# The rest of the package is imported where it is used: ``wrap`` starts its server before it (spawn/prestart.py).

EXIT_OK, EXIT_FAIL, EXIT_CONFIG = 0, 1, 2


def _err(message: str) -> None:
    sys.stderr.write(message.rstrip() + "\n")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="resilient-mcp",
        description="An MCP server that wraps MCP servers and makes their tool calls safe to fail.",
    )
    p.add_argument("--version", action="version", version=f"resilient-mcp {__version__}")
    p.add_argument("--log-level", choices=["debug", "info", "warning", "error"], help="default: from config, or info")
    p.add_argument("--log-format", choices=["auto", "console", "json"], help="auto: console on a TTY, else JSON")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")

    _add_wrap(sub)

    s = sub.add_parser("serve", help="serve the upstreams of a config file")
    s.add_argument("--config", required=True, metavar="FILE")
    s.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP instead of stdio")

    c = sub.add_parser("check", help="validate a config and its policy files without serving")
    c.add_argument("--config", metavar="FILE")
    c.add_argument("--policy", action="append", default=[], metavar="FILE")
    c.add_argument("--connect", action="store_true", help="also start the upstreams and print the catalog")

    e = sub.add_parser("explain", help="print the resolved policy of one tool")
    e.add_argument("--config", metavar="FILE")
    e.add_argument("--policy", action="append", default=[], metavar="FILE")
    e.add_argument("--upstream", help="the upstream (default: found by the tool's prefix, or the only one)")
    e.add_argument(
        "--connect",
        action="store_true",
        help="start the upstreams: an unknown tool is said so (with close names), a known one gets its annotations",
    )
    e.add_argument("tool", help="the tool's host-visible name")

    a = sub.add_parser("audit", help="show recent tool calls from the audit trail")
    a.add_argument("--config", metavar="FILE")
    a.add_argument("--state-dir", metavar="DIR")
    a.add_argument("--limit", type=int, default=20)
    a.add_argument("--session")

    _add_test_tools(sub)
    return p


def _add_wrap(sub: Any) -> None:
    w = sub.add_parser("wrap", help="wrap one stdio MCP server: resilient-mcp wrap -- CMD ARGS...")
    w.add_argument("--policy", action="append", default=[], metavar="FILE", help="policy file or directory (repeat)")
    w.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP instead of stdio")
    w.add_argument("--state-dir", metavar="DIR", help="where idempotency records, outputs and audit are kept")
    w.add_argument("--name", default="upstream", help="the upstream's name in logs and policy (default: upstream)")
    w.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="set for the server (repeat)")
    w.add_argument(
        "--protocol",
        choices=["legacy", "auto"],
        default="auto",
        help="protocol era toward the server (default auto: each host in its own era; over stdio one process, "
        "over --http a 2026-07-28 host gets a second process of the server; legacy: one handshake-era process for "
        "every host, 2026-07-28 hosts bridged)",
    )
    w.add_argument(
        "--trust-annotations",
        action="store_true",
        help="take the server's tool annotations (readOnlyHint, ...) as effect classes; default: every tool unnamed "
        "by a policy is write_unsafe",
    )
    w.add_argument("--faults", metavar="PLAN", help="inject faults from a fault plan file (chaos mode)")
    w.add_argument("cmd", nargs=argparse.REMAINDER, help="-- then the server's command and arguments")


def _add_test_tools(sub: Any) -> None:
    """The subcommands for trying the proxy and watching it: chaos-server, status, demo, schema."""
    ch = sub.add_parser(
        "chaos-server",
        help="run the chaos MCP server: an order service (or files, calendar, tickets) that injects planned faults",
    )
    ch.add_argument("--plan", metavar="FILE", help="fault plan (YAML/JSON); default: no faults")
    ch.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP instead of stdio")
    ch.add_argument("--ledger", metavar="FILE", help="keep the state and the count of committed writes in FILE")
    ch.add_argument("--seed", type=int, help="override the plan's seed")
    ch.add_argument(
        "--domain",
        choices=["orders", "files", "calendar", "tickets"],
        default="orders",
        help="the tools it serves: an order shop (default), a file store, a calendar or a ticket queue",
    )

    st = sub.add_parser("status", help="show the live status of a running proxy (its /status page, as text)")
    where = st.add_mutually_exclusive_group(required=True)
    where.add_argument("--config", metavar="FILE", help="the proxy's config (listen.http or metrics.listen)")
    where.add_argument("--url", metavar="URL", help="the proxy's base URL, e.g. http://127.0.0.1:8080")
    st.add_argument("--json", action="store_true", help="print the status as JSON")
    st.add_argument("--failures", type=int, default=10, metavar="N", help="how many recent failures to list")

    sub.add_parser("demo", help="run the proxy in front of a bundled example server and show what it does")
    sch = sub.add_parser("schema", help="print the JSON Schema of the policy file or of observations")
    sch.add_argument("which", choices=["policy", "observation"])


def _wrap_command(args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    """``wrap``'s server command line and the variables of its ``--env``."""
    from .policy.source import SourceError

    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise SourceError("command line", ["wrap needs the server's command: resilient-mcp wrap -- CMD ARGS..."])
    env = {}
    for item in args.env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SourceError("command line", [f"--env {item!r}: use KEY=VALUE"])
        env[key] = value
    return cmd, env


def _wrap_config(args: argparse.Namespace) -> ProxyConfig:
    from .policy.config import ProxyConfig, StdioUpstream

    cmd, env = _wrap_command(args)
    data: dict[str, object] = {
        "upstreams": {args.name: StdioUpstream(command=cmd[0], args=cmd[1:], env=env, protocol=args.protocol)},
        "policies": [str(Path(p).resolve()) for p in args.policy],
    }
    if args.state_dir:
        data["state_dir"] = str(Path(args.state_dir).resolve())
    if args.faults:
        data["faults"] = {"plan": str(Path(args.faults).resolve())}
    return ProxyConfig.model_validate(data)


def load_setup(
    config_path: str | Path | None = None, policies: Sequence[str | Path] = ()
) -> tuple[ProxyConfig, Policy]:
    """The config and the merged policy that ``serve``, ``check`` and ``explain`` run with: the config file (a host's
    file such as Claude Desktop's read as it is; none: the defaults), the policy files it names and then
    ``policies``, under the policy layer of the host file's per-server keys (``timeout``, ``disabledTools``).

    For a program that builds the proxy itself (``Proxy(config, policy, Pipeline)``). Raises ``SourceError`` naming
    file, line and key."""
    from .policy.config import ProxyConfig, load_config
    from .policy.files import load_policy
    from .policy.source import SourceError

    config = load_config(config_path) if config_path else ProxyConfig()
    if config.host.itself:
        raise SourceError(str(config_path), config.host.itself)
    extra = [Path(p).resolve() for p in policies]
    if extra:
        config = config.model_copy(update={"policies": [*config.policies, *map(str, extra)]})
    if config.faults is not None:  # chaos mode: the fault plan is checked with the config (errors name file, line)
        from .chaos.inject import injector_for

        injector_for(config)
    return config, load_policy(config.policy_paths(), _host_policy(config)).mark_local(config.local_upstreams())


def _load(args: argparse.Namespace) -> tuple[ProxyConfig, Policy]:
    return load_setup(getattr(args, "config", None), getattr(args, "policy", None) or ())


def _host_policy(config: ProxyConfig) -> PolicyFile | None:
    """The policy layer of a host file's per-server keys (``timeout``, ``disabledTools``), under every policy file."""
    from .policy import PolicyFile
    from .policy.source import SourceError

    layer = config.host_policy()
    if layer is None:
        return None
    try:
        return PolicyFile.model_validate(layer)
    except ValueError as exc:
        raise SourceError(config.base_dir, [f"per-server keys of the config file: {exc}"]) from None


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return EXIT_CONFIG
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        return EXIT_OK
    except Exception as exc:
        problem = _configuration_problem(exc)
        if problem is None:
            raise
        _err(problem)
        return EXIT_CONFIG


def _configuration_problem(exc: Exception) -> str | None:
    """What to tell the user for an error of the configuration or the state directory (else ``None``)."""
    from .policy.source import SourceError
    from .state.errors import StateError

    if isinstance(exc, SourceError):
        return f"resilient-mcp: configuration error\n{exc}"
    if isinstance(exc, StateError):
        return f"resilient-mcp: state directory error: {exc}"
    return None


Setup = Callable[[], "tuple[ProxyConfig, Policy, PolicyFile | None]"]


def _run_proxy(args: argparse.Namespace, setup: Setup, early: tuple[list[str], dict[str, str]] | None = None) -> int:
    """Serve (``wrap`` and ``serve``) until stopped: ``setup()`` gives the config, the policy and the base policy
    layer. With ``early`` (a stdio ``wrap``'s command line and environment) the server's process is started first,
    before the proxy imports itself (``spawn/prestart.py``), and stopped if the proxy never gets to use it."""

    async def main() -> int:
        if early is not None:
            await prestart(*early)
        try:
            return await _serve_proxy(args, setup)
        finally:
            if early is not None:
                from .upstream.stdio import stop_unadopted

                await stop_unadopted()

    return anyio.run(main)


async def _serve_proxy(args: argparse.Namespace, setup: Setup) -> int:
    from .app import StartupError, run_proxy
    from .policy.config import check_http_bind
    from .policy.source import SourceError

    config, policy, base = setup()
    if args.http:
        try:
            check_http_bind(args.http, config.listen)
        except ValueError as exc:
            raise SourceError("--http", [f"--http {args.http}: {exc}"]) from None
    configure_logging(args.log_level or config.logging.level, args.log_format or config.logging.format)
    try:
        await run_proxy(config, policy, http=args.http, base_policy=base)
    except StartupError as exc:
        _err(f"resilient-mcp: cannot start: {exc}")
        return EXIT_CONFIG
    return EXIT_OK


def _wrap(args: argparse.Namespace) -> int:
    def setup() -> tuple[ProxyConfig, Policy, PolicyFile | None]:
        from .policy import PolicyFile
        from .policy.files import load_policy

        config = _wrap_config(args)
        base: PolicyFile | None = None
        if args.trust_annotations:
            base = PolicyFile.model_validate({"upstreams": {args.name: {"trust_annotations": True}}})
        return config, load_policy(config.policy_paths(), base), base

    early: tuple[list[str], dict[str, str]] | None = None
    if not (args.http or args.faults or sys.platform == "win32" or _stdin_is_null_device()):
        # a stdio host waits for this server's start-up as well as the proxy's: both run at once
        cmd, env = _wrap_command(args)
        early = cmd, environment("minimal", env)
    return _run_proxy(args, setup, early)


def _serve(args: argparse.Namespace) -> int:
    from .policy.source import SourceError

    config, policy = _load(args)
    base = _host_policy(config)
    if not config.enabled_upstreams():
        raise SourceError(args.config, [f"{args.config}: no enabled upstreams: add one under upstreams:"])
    if not (args.http or config.listen.http) and _stdin_is_null_device():
        _err(
            "resilient-mcp: stdin is not connected (/dev/null): no host can reach a stdio proxy, so it stops once "
            "started. Serve over HTTP (--http HOST:PORT or listen.http), or give it stdin (docker run -i)."
        )
    return _run_proxy(args, lambda: (config, policy, base))


def _stdin_is_null_device() -> bool:
    """stdin is a character device that is not a terminal (``/dev/null``: ``docker run`` without ``-i``, a service
    manager): a stdio ``serve`` ends as soon as it reads it (``host/stdio.py`` reads it with the SDK's reader)."""
    try:
        mode = os.fstat(0).st_mode
    except OSError:
        return False
    return stat.S_ISCHR(mode) and not os.isatty(0)


def _check(args: argparse.Namespace) -> int:
    from .commands import check

    return check(args, _load)


def _explain(args: argparse.Namespace) -> int:
    from .commands import explain

    return explain(args, _load)


def _audit(args: argparse.Namespace) -> int:
    from .commands import audit

    return audit(args)


def _status(args: argparse.Namespace) -> int:
    from .ops.status_cli import status_command

    return status_command(args.config, args.url, as_json=args.json, failures=args.failures)


def _demo(args: argparse.Namespace) -> int:
    from .demo.run import run_demo

    # The demo captures its own stderr and summarises the proxy's log at the end (JSON lines, at this level).
    return anyio.run(run_demo, args.log_level or "warning")


def _chaos_server(args: argparse.Namespace) -> int:
    from .chaos.transports import chaos_server_main

    configure_logging(args.log_level or "warning", args.log_format or "auto")
    return chaos_server_main(args.plan, http=args.http, ledger_path=args.ledger, seed=args.seed, domain=args.domain)


def _schema(args: argparse.Namespace) -> int:
    if args.which == "policy":
        from .policy.files import policy_schema

        schema = policy_schema()
    else:
        from .verdict.observations import OBSERVATION_SCHEMA

        schema = OBSERVATION_SCHEMA
    sys.stdout.write(json.dumps(schema, indent=2) + "\n")
    return EXIT_OK


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "wrap": _wrap,
    "serve": _serve,
    "check": _check,
    "explain": _explain,
    "audit": _audit,
    "status": _status,
    "chaos-server": _chaos_server,
    "demo": _demo,
    "schema": _schema,
}
"""Each subcommand's function (the parser's subcommands, in its order)."""


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
