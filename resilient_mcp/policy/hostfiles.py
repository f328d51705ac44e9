"""MCP hosts' config files, read as they are: the servers they list become the proxy's upstreams.

- Claude Desktop, Claude Code (``.mcp.json``), Cursor, Cline, Roo Code, Windsurf, Gemini CLI:
  ``{"mcpServers": {name: {...}}}``;
- VS Code: ``{"servers": {name: {...}}, "inputs": [...]}`` (``.vscode/mcp.json``), or the same under ``"mcp"`` in its
  ``settings.json``;
- Zed: ``{"context_servers": {name: {...}}}`` (``command`` as a string or as ``{"path", "args", "env"}``).

Each server's keys are read as follows:

- ``command``, ``args``, ``env``, ``cwd``, ``url``, ``headers``, ``type`` (``stdio``, ``sse``, ``http``,
  ``streamableHttp``), Cline's ``transportType``, VS Code's and Cursor's ``envFile``, Gemini CLI's ``httpUrl``, Zed's
  ``enabled``: as the host reads them;
- ``disabled: true`` (Cline, Cursor, Roo Code): the server is not started (``upstream_disabled`` is logged once);
- ``timeout`` (Cline, Roo Code: seconds; Gemini CLI: milliseconds; a value above 3600 is read as milliseconds): the
  host's own timeout of this upstream's tool calls; the proxy's deadline (policy ``timeouts.attempt_s`` and
  ``total_s`` of the upstream) is 5/6 of it, so the host gets the proxy's observation before it gives up itself; a
  policy file's timeouts for this upstream or its tools win;
- ``disabledTools`` (Roo Code), ``excludeTools`` (Gemini CLI): those tools are hidden and refused (policy ``deny`` of
  the upstream); ``includeTools`` (Gemini CLI): only those tools are offered (policy ``allow`` of the upstream);
- Windsurf's ``serverUrl`` is its ``url``; an entry with both a command and a url is an error (hosts differ in which
  one they use), and so is a file that lists no servers; an entry that starts resilient-mcp itself (``resilient-mcp
  wrap``/``serve``) is noted, and ``serve``/``check`` of such a file refuse it (the proxy would run inside itself);
- every other key (``autoApprove``, ``alwaysAllow``: the host's own list of tools it runs without asking; ``dev``,
  ``description``, ``source``, ``settings``, ...): ignored, with one info log per server naming them.

VS Code's ``${input:ID}`` (a value the editor prompts for) is read from the environment variable ``MCP_INPUT_<ID>``
(upper case, other characters as ``_``: ``${input:api-key}`` -> ``MCP_INPUT_API_KEY``); when it is not set, loading
fails with a message naming that variable. ``${env:NAME}``, ``${userHome}`` and ``${workspaceFolder}`` (the folder
holding ``.vscode/`` or ``.cursor/``, i.e. the project, else the file's folder) are supported in every config file.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .source import Document, Loc, SourceError

TOPS: tuple[tuple[tuple[str, ...], str], ...] = (
    (("mcpServers",), "mcpServers"),
    (("servers",), "VS Code"),
    (("mcp", "servers"), "VS Code"),
    (("context_servers",), "Zed"),
)
"""Where each host keeps its servers, and the host's name in messages."""

NATIVE_KEYS = frozenset(
    {
        "command",
        "args",
        "env",
        "cwd",
        "url",
        "headers",
        "type",
        "transport",
        "prefix",
        "enabled",
        "disabled",
        "connect_timeout_s",
        "inherit_env",
        "env_file",
    }
)
"""Keys an upstream entry of resilient-mcp's own format has (a host file may use them too)."""

RENAMED = {"envFile": "env_file", "transportType": "type", "httpUrl": "url", "serverUrl": "url"}
TYPES = {
    "streamableHttp": "streamable-http",
    "streamable_http": "streamable-http",
    "streamable-http": "streamable-http",
}
TIMEOUT_MS_ABOVE = 3600
"""A ``timeout`` above this is in milliseconds (Gemini CLI's unit); at most this, in seconds (Cline's, Roo Code's)."""
UNDER_HOST = 5 / 6
"""The share of a host's own ``timeout`` the proxy's deadline takes (60 s -> 50 s, the default's margin): the host
gets the proxy's observation before it gives up itself."""

WHY_IGNORED = {
    "autoApprove": "the host's own list of tools it runs without asking the user; the proxy asks only where a "
    "policy sets require_approval",
    "alwaysAllow": "the host's own list of tools it runs without asking the user; the proxy asks only where a "
    "policy sets require_approval",
}

_VSCODE_VAR = re.compile(
    r"\$\{(input|env):([^}]+)\}|\$\{(userHome|workspaceFolder|workspaceFolderBasename|pathSeparator|/)\}"
)


def input_variable(input_id: str) -> str:
    """The environment variable that answers VS Code's ``${input:ID}``."""
    return "MCP_INPUT_" + re.sub(r"[^A-Za-z0-9]", "_", input_id).upper()


@dataclass
class HostSettings:
    """What a host's file says beyond each server's command or URL."""

    app: str = ""
    notes: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """Info logs for the start of ``serve`` and for ``check``: (event, fields)."""
    attempt_s: dict[str, float] = field(default_factory=dict)
    """upstream -> per-attempt timeout of its tool calls (from ``timeout``)."""
    deny_tools: dict[str, list[str]] = field(default_factory=dict)
    """upstream -> tool names hidden and refused (from ``disabledTools``/``excludeTools``)."""
    allow_tools: dict[str, list[str]] = field(default_factory=dict)
    """upstream -> the only tool names offered (Gemini CLI's ``includeTools``)."""
    itself: list[str] = field(default_factory=list)
    """Why each server that is resilient-mcp itself cannot be served (a host's file written for the host, listing
    wrapped servers, is valid; ``serve`` and ``check`` of it refuse, ``ProxyConfig.refuse_itself``)."""
    inputs: dict[str, str] = field(default_factory=dict)
    """VS Code input id -> its description."""
    workspace: str | None = None
    renamed: dict[str, dict[str, str]] = field(default_factory=dict)
    """upstream -> native key -> the key as the host's file spells it (for error locations)."""

    def key_of(self, upstream: str, native: str) -> str:
        return self.renamed.get(upstream, {}).get(native, native)

    def policy(self) -> dict[str, Any] | None:
        """The policy layer the per-server keys imply, as a ``PolicyFile`` mapping (None when there is none)."""
        ups: dict[str, Any] = {}
        for name, seconds in self.attempt_s.items():
            deadline = round(seconds * UNDER_HOST, 3)
            timeouts = {"attempt_s": deadline, "total_s": deadline}
            ups.setdefault(name, {})["defaults"] = {"timeouts": timeouts}
        for name, tools in self.deny_tools.items():
            ups.setdefault(name, {})["deny"] = list(tools)
        for name, tools in self.allow_tools.items():
            ups.setdefault(name, {})["allow"] = list(tools)
        return {"upstreams": ups} if ups else None

    def expand_variables(self, value: str, environ: dict[str, str], path: str) -> str:
        """VS Code's ``${input:ID}``, ``${env:NAME}``, ``${userHome}``, ``${workspaceFolder}``; a missing value is
        a ``KeyError`` whose message says what to set."""

        def sub(m: re.Match[str]) -> str:
            kind, name, plain = m.group(1), m.group(2), m.group(3)
            if plain == "userHome":
                return str(Path.home())
            if plain == "workspaceFolder":
                return self.workspace or str(_workspace_of(path))
            if plain == "workspaceFolderBasename":
                return Path(self.workspace or _workspace_of(path)).name
            if plain in ("pathSeparator", "/"):
                return os.sep
            if kind == "env":
                if name in environ:
                    return environ[name]
                raise KeyError(f"environment variable {name} (from ${{env:{name}}}) is not set")
            var = input_variable(name)
            if var in environ:
                return environ[var]
            what = f' ("{self.inputs[name]}")' if self.inputs.get(name) else ""
            raise KeyError(
                f"${{input:{name}}}{what} is a value VS Code prompts for; resilient-mcp cannot prompt: set the "
                f"environment variable {var} for it"
            )

        return _VSCODE_VAR.sub(sub, value) if "${" in value else value


@dataclass
class HostFile:
    servers: dict[str, Any]
    """Each server's entry in resilient-mcp's own upstream shape (validated by ``config``)."""
    servers_loc: tuple[str, ...]
    settings: HostSettings


def _at(data: Any, loc: tuple[str, ...]) -> Any:
    for part in loc:
        data = data.get(part) if isinstance(data, dict) else None
    return data


def _workspace_of(path: str) -> Path:
    """The project a host file belongs to: the folder holding ``.vscode/`` or ``.cursor/``, else the file's folder."""
    folder = Path(path).resolve().parent
    return folder.parent if folder.name in (".vscode", ".cursor") else folder


def read_host_file(doc: Document, data: dict[str, Any]) -> HostFile | None:
    """The servers of a host's file, or None for resilient-mcp's own format (``upstreams:``)."""
    if "upstreams" in data:
        return None
    found = next(((loc, app) for loc, app in TOPS if _at(data, loc) is not None), None)
    if found is None:
        return None
    loc, app = found
    node = _at(data, loc)
    if isinstance(node, list) and all(isinstance(s, dict) and isinstance(s.get("name"), str) for s in node):
        node, app = _named_list(node, doc, loc), "Continue"  # Continue: a list of servers, each with its name
    if not isinstance(node, dict):
        line = doc.line_of(loc) or "?"
        raise SourceError(doc.path, [f"{doc.path}:{line}: {'.'.join(loc)}: must map each server's name to its entry"])
    settings = HostSettings(app=app, workspace=str(_workspace_of(doc.path)))
    inputs = _at(data, (*loc[:-1], "inputs"))
    if isinstance(inputs, list):
        settings.inputs = {
            str(i["id"]): str(i.get("description") or "") for i in inputs if isinstance(i, dict) and "id" in i
        }
    if not node:
        line = doc.line_of(loc) or "?"
        raise SourceError(
            doc.path, [f"{doc.path}:{line}: {'.'.join(loc)}: lists no servers: add the servers the proxy should serve"]
        )
    problems: list[str] = []
    servers: dict[str, Any] = {}
    for name, raw in node.items():
        entry = _server(str(name), raw, settings, doc, (*loc, name), problems)
        if entry is not None:
            servers[str(name)] = entry
    if problems:
        raise SourceError(doc.path, problems)
    return HostFile(servers, loc, settings)


def _named_list(items: list[dict[str, Any]], doc: Document, loc: tuple[str, ...]) -> dict[str, Any]:
    """Continue's ``mcpServers: [{name, command, ...}]`` as a mapping by name; a repeated name is an error."""
    out: dict[str, Any] = {}
    for i, item in enumerate(items):
        name = item["name"]
        if name in out:
            line = doc.line_of((*loc, i)) or "?"
            raise SourceError(doc.path, [f"{doc.path}:{line}: {'.'.join(loc)}[{i}]: a second server named {name!r}"])
        out[name] = {k: v for k, v in item.items() if k != "name"}
    return out


def _server(name: str, raw: Any, settings: HostSettings, doc: Document, loc: Loc, problems: list[str]) -> Any:
    """The entry in resilient-mcp's shape (None: nothing to start; a non-mapping is returned for validation)."""
    if not isinstance(raw, dict):
        return raw  # validation names what is wrong
    entry: dict[str, Any] = {}
    ignored: list[str] = []
    command = raw.get("command")
    if isinstance(command, dict):  # Zed's older shape: "command": {"path", "args", "env"}
        raw = {k: v for k, v in raw.items() if k != "command"} | {
            ("command" if k == "path" else k): v for k, v in command.items()
        }
    for key, value in raw.items():
        where = f"{doc.path}:{doc.line_of((*loc, key)) or '?'}: {'.'.join(map(str, (*loc, key)))}"
        if key in RENAMED:
            entry[RENAMED[key]] = value
            settings.renamed.setdefault(name, {})[RENAMED[key]] = key
        elif key in NATIVE_KEYS:
            entry[key] = value
        elif key == "timeout":
            problems += _host_timeout(name, value, where, settings)
        elif key in ("disabledTools", "excludeTools", "includeTools"):
            problems += _tool_list(name, key, value, where, settings)
        else:
            ignored.append(str(key))
    if isinstance(entry.get("type"), str) and entry["type"] in TYPES:
        entry["type"] = TYPES[entry["type"]]
    here = f"{doc.path}:{doc.line_of(loc) or '?'}: {'.'.join(map(str, loc))}"
    if "command" in entry and "url" in entry:
        via = settings.renamed.get(name, {}).get("url", "url")
        problems.append(
            f"{here}: has both command and {via}; hosts differ in which one they use (Gemini CLI prefers the url, "
            f"most others the command): keep command to start a local server, or {via} for a remote one"
        )
        return None
    proxy = _proxy_itself(entry)
    if proxy is not None and entry.get("enabled") is not False and entry.get("disabled") is not True:
        settings.itself.append(
            f"{here}: this server is resilient-mcp itself ({proxy}): serving this file would start the proxy inside "
            "itself. Give resilient-mcp a file that lists the servers as they are (it wraps them all), e.g. the "
            "command after `wrap --`"
        )
    if "command" not in entry and "url" not in entry and settings.app == "Zed":
        # a server provided by a Zed extension: nothing this proxy can start
        settings.notes.append(
            ("host_server_skipped", {"upstream": name, "reason": "no command or url (provided by the host itself)"})
        )
        return None
    if ignored and entry.get("enabled") is not False and entry.get("disabled") is not True:
        why = sorted({WHY_IGNORED.get(k, "not used by resilient-mcp") for k in ignored})
        settings.notes.append(("host_keys_ignored", {"upstream": name, "keys": ignored, "why": why}))
    return entry


def _host_timeout(name: str, value: Any, where: str, settings: HostSettings) -> list[str]:
    """A host's per-server ``timeout`` (seconds, or Gemini CLI's milliseconds) as the upstream's attempt timeout;
    the problem with it, if any."""
    seconds = _timeout_s(value)
    if seconds is None:
        return [
            f"{where}: a number of seconds (Cline, Roo Code) or milliseconds above "
            f"{TIMEOUT_MS_ABOVE} (Gemini CLI) (got {value!r})"
        ]
    settings.attempt_s[name] = seconds
    unit = "milliseconds" if value > TIMEOUT_MS_ABOVE else "seconds"
    applied = {"upstream": name, "timeout": value, "read_as": unit, "deadline_s": round(seconds * UNDER_HOST, 3)}
    settings.notes.append(("host_timeout_applied", applied))
    return []


def _tool_list(name: str, key: str, value: Any, where: str, settings: HostSettings) -> list[str]:
    """A host's ``includeTools`` (allowed) or ``disabledTools`` / ``excludeTools`` (denied); the problem, if any."""
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        return [f"{where}: a list of tool names (got {value!r})"]
    lists = settings.allow_tools if key == "includeTools" else settings.deny_tools
    lists.setdefault(name, []).extend(value)
    return []


_PROXY_NAMES = frozenset({"resilient-mcp", "resilient_mcp", "resilient_mcp.cli"})
_RUNNERS = frozenset({"uvx", "pipx", "uv", "pip-run"})
_RUNNER_WORDS = frozenset({"run", "tool"})
_VALUED_OPTIONS = frozenset({"--log-level", "--log-format", "--from", "--with", "--python"})


def _package(word: str) -> str:
    """``resilient-mcp==1.2`` / ``resilient-mcp@latest`` / ``resilient-mcp[redis]`` -> ``resilient-mcp``."""
    for sep in "=@[<>~ ":
        word = word.split(sep, 1)[0]
    return word


def _proxy_itself(entry: dict[str, Any]) -> str | None:
    """``resilient-mcp wrap/serve ...`` (also as ``python -m resilient_mcp.cli``, ``uvx resilient-mcp``, ``pipx run
    resilient-mcp``), as the words that start it, or None."""
    command, args = entry.get("command"), entry.get("args")
    if not isinstance(command, str):
        return None
    words = [command, *(a for a in args if isinstance(a, str))] if isinstance(args, list) else [command]
    program = Path(command).name.removesuffix(".exe")
    at: int | None = None
    if program in _PROXY_NAMES:
        at = 0
    elif program.startswith("python") and words[1:2] == ["-m"] and len(words) > 2 and words[2] in _PROXY_NAMES:
        at = 2
    elif program in _RUNNERS:
        i = 1
        while i < len(words) and (words[i] in _RUNNER_WORDS or words[i].startswith("-")):
            i += 2 if words[i] in _VALUED_OPTIONS else 1
        at = i if i < len(words) and _package(words[i]) in _PROXY_NAMES else None
    if at is None:
        return None
    i = at + 1
    while i < len(words) and words[i].startswith("-"):  # the proxy's own options before its command
        i += 2 if words[i] in _VALUED_OPTIONS else 1
    if i < len(words) and words[i] in ("wrap", "serve"):
        return " ".join(words[: i + 1])
    return None


def _timeout_s(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        return None
    seconds = value / 1000 if value > TIMEOUT_MS_ABOVE else float(value)
    return seconds if 0 < seconds <= 86_400 else None


def describe(settings: HostSettings) -> list[str]:
    """The notes as lines for ``check``."""
    out = []
    for event, fields in settings.notes:
        out.append(f"{event}: " + ", ".join(f"{k}={v}" for k, v in fields.items()))
    return out


__all__ = ["HostFile", "HostSettings", "describe", "input_variable", "read_host_file"]
