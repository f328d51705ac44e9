"""A stdio upstream started while the proxy is still importing itself (``wrap`` over stdio).

A stdio host spawns ``resilient-mcp wrap -- CMD`` and waits for the answer to its first request. Importing the proxy
(the MCP SDK's models, pydantic, jsonschema, the chain) takes about as long as a Python MCP server takes to start,
and used to come first: the first call waited for both, one after the other. Here the server's *process* is started
first thing, before those imports, and both start-ups run side by side; the MCP session with it (``initialize``,
declaring exactly the host's capabilities) still begins only once the host's opening request has been read
(``host/opening.py``). The server is started once per session, as before.

The first ``stdio_upstream`` asking for exactly the same command line, environment, working directory and stderr
handling adopts the process (``adopt``); anything else starts its own, and a process nobody adopted is stopped
(``upstream.stdio.stop_unadopted``). This module imports nothing of the proxy: it runs before the rest is loaded.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import anyio
import anyio.abc
import structlog

log = structlog.get_logger(__name__)

#: What the MCP SDK passes to a stdio upstream when ``env`` is given: nothing else of the proxy's environment.
SDK_INHERITED_ENV = ("HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER")


def environment(
    inherit: str | Sequence[str], extra: Mapping[str, str], environ: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The complete environment of a stdio upstream: ``inherit`` (``"minimal"``: the SDK's names, ``"all"``, or a
    list of names added to the SDK's) taken from ``environ`` (default: this process's), then ``extra`` on top."""
    env = os.environ if environ is None else environ
    if inherit == "all":
        base = dict(env)
    else:
        names = set(SDK_INHERITED_ENV) | (set(inherit) if not isinstance(inherit, str) else set())
        base = {k: v for k, v in env.items() if k in names}
    base.update(extra)
    return base


@dataclass(slots=True)
class Prestarted:
    """A started server process waiting for its ``stdio_upstream``."""

    argv: list[str]
    env: dict[str, str]
    cwd: str | None
    process: anyio.abc.Process
    watchdog: Watchdog

    def matches(self, argv: Sequence[str], env: Mapping[str, str], cwd: str | None) -> bool:
        return self.argv == list(argv) and self.env == dict(env) and self.cwd == cwd


_waiting: list[Prestarted] = []


async def prestart(argv: Sequence[str], env: Mapping[str, str], cwd: str | None = None) -> bool:
    """Start ``argv`` now, as ``stdio_upstream`` would (new session, stdin/stdout/stderr piped), for it to adopt.
    ``False`` when it cannot be started here: the regular start then runs (and reports why)."""
    try:
        process = await anyio.open_process(
            list(argv), env=dict(env), cwd=cwd, stderr=subprocess.PIPE, start_new_session=True
        )
    except OSError:
        return False
    _waiting.append(Prestarted(list(argv), dict(env), cwd, process, await arm_watchdog(process.pid)))
    return True


def adopt(argv: Sequence[str], env: Mapping[str, str], cwd: str | None) -> tuple[anyio.abc.Process, Watchdog] | None:
    """The waiting process started as ``argv``/``env``/``cwd`` and its watchdog (handed over once), else ``None``."""
    for n, waiting in enumerate(_waiting):
        if waiting.matches(argv, env, cwd):
            del _waiting[n]
            return waiting.process, waiting.watchdog
    return None


def unadopted() -> list[tuple[anyio.abc.Process, Watchdog]]:
    """Every process still waiting and its watchdog, handed over (to be stopped): nobody asked for it."""
    found = [(w.process, w.watchdog) for w in _waiting]
    _waiting.clear()
    return found


# The watchdog: reads one line; anything but "disarm" (EOF when the proxy died) kills the upstream's group.
_WATCHDOG = 'read -r word; [ "$word" = disarm ] || kill -s KILL -- "-$1" 2>/dev/null; exit 0'

Watchdog = tuple[anyio.abc.Process, int] | None
"""A watchdog process and the write end of its pipe (``None``: none could be started)."""


async def arm_watchdog(pgid: int) -> Watchdog:
    """Start the watchdog that kills process group ``pgid`` if this process dies without stopping it (see
    ``upstream/stdio.py``)."""
    read_end, write_end = os.pipe()  # both close-on-exec: no upstream inherits the write end
    try:
        proc = await anyio.open_process(
            ["/bin/sh", "-c", _WATCHDOG, "resilient-mcp-watchdog", str(pgid)],
            stdin=read_end,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
    except OSError as exc:
        os.close(write_end)
        log.warning("upstream_watchdog_unavailable", error=str(exc))
        return None
    finally:
        os.close(read_end)
    return proc, write_end
