"""``resilient-mcp status [--config F | --url U]``: the status page of a running proxy, as text in the terminal."""

from __future__ import annotations

import json
import os
import sys
import urllib.error
import urllib.request
from typing import Any

from ..policy.config import load_config


def status_url(config_path: str | None, url: str | None) -> tuple[str, str | None]:
    """The proxy's base URL and the bearer token to send (from ``--url``/``RESILIENT_MCP_TOKEN`` or the config)."""
    token = os.environ.get("RESILIENT_MCP_TOKEN") or None
    if url:
        return url.rstrip("/").removesuffix("/status").removesuffix("/status.json"), token
    if config_path is None:
        raise ValueError("give --url http://HOST:PORT (a running proxy) or --config FILE")
    config = load_config(config_path)
    if config.listen.http:
        host, _, port = config.listen.http.rpartition(":")
        host = host.strip("[]")
        host = "127.0.0.1" if host in ("", "0.0.0.0") else ("[::1]" if host == "::" else host)
        host = f"[{host}]" if ":" in host and not host.startswith("[") else host
        return f"http://{host}:{port}", token or (config.listen.auth_tokens[0] if config.listen.auth_tokens else None)
    if config.metrics.listen:
        return f"http://{config.metrics.listen}", token or config.metrics.token
    raise ValueError(
        f"{config_path}: the proxy serves no status page: set listen.http (HTTP mode) or metrics.listen (stdio mode)"
    )


def fetch_status(base: str, token: str | None, timeout_s: float = 10.0) -> dict[str, Any]:
    request = urllib.request.Request(f"{base}/status.json", headers={"Accept": "application/json"})
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=timeout_s) as response:
        data: dict[str, Any] = json.load(response)
    return data


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in rows]


def render_text(snap: dict[str, Any], failures: int = 10) -> str:
    out = [f"resilient-mcp status at {snap['generated_at']} (up since {snap['up_since']})", "", "Upstreams"]
    rows = [["NAME", "STATE", "RESTARTS", "TOOLS", "BREAKER", "LAST ERROR"]]
    for up in snap["upstreams"]:
        breaker = up["breaker"] + (f" ({', '.join(up['open_tool_circuits'])})" if up["open_tool_circuits"] else "")
        rows.append([up["name"], up["state"], str(up["restarts"]), str(up["tools"]), breaker, up["last_error"] or ""])
    out += ["  " + line for line in _table(rows)]
    out += ["", f"Tools (last {snap['window_s'] // 60} minutes)"]
    if snap["tools"]:
        rows = [["TOOL", "UPSTREAM", "CALLS", "FAILURES", "BY CATEGORY", "P50 MS", "P95 MS"]]
        for t in snap["tools"]:
            cats = ", ".join(f"{k}: {v}" for k, v in t["failures_by_category"].items())
            numbers = [str(t["calls"]), str(t["failures"]), cats, str(t["p50_ms"]), str(t["p95_ms"])]
            rows.append([t["tool"], t["upstream"], *numbers])
        out += ["  " + line for line in _table(rows)]
    else:
        out.append("  no calls yet")
    if snap.get("treatment"):
        out += ["", "How tools are treated"]
        rows = [["TOOL", "EFFECT", "WHY", "RETRIED ON"]]
        rows += [[t["tool"], t["effect"], t["effect_from"], t["retried_on"]] for t in snap["treatment"]]
        out += ["  " + line for line in _table(rows)]
    tasks = snap.get("tasks")
    if tasks and (tasks["running"] or tasks["finished"]):
        counts = ", ".join(f"{k} {v}" for k, v in tasks["counts"].items())
        out += ["", f"Tasks ({len(tasks['running'])} running; since start: {counts})"]
        rows = [["TASK", "TOOL", "STATUS", "CREATED", "UPDATED"]]
        rows += [[t["task"], t["tool"], t["status"], t["created_at"], t["updated_at"]] for t in tasks["running"]]
        rows += [[t["task"], t["tool"], t["status"], t["created_at"], t["updated_at"]] for t in tasks["finished"]]
        out += ["  " + line for line in _table(rows)]
    out += ["", "Absorbed by the proxy"]
    out += ["  " + line for line in _table([[k, str(v)] for k, v in snap["absorbed"].items()])]
    out += ["", f"Last failures (newest first, {min(failures, len(snap['failures']))} of {len(snap['failures'])})"]
    for f in snap["failures"][:failures]:
        line = f"  {f['at']}  {f['tool']}  {f['outcome']}  {f['fault_type'] or 'unclassified'}"
        if f.get("repair_action"):
            line += f"  repair: {f['repair_action']}"
        out.append(line)
    if not snap["failures"]:
        out.append("  none")
    return "\n".join(out) + "\n"


def status_command(config_path: str | None, url: str | None, *, as_json: bool, failures: int) -> int:
    try:
        base, token = status_url(config_path, url)
        snap = fetch_status(base, token)
    except ValueError as exc:
        sys.stderr.write(f"resilient-mcp status: {exc}\n")
        return 2
    except urllib.error.HTTPError as exc:
        hint = " (set RESILIENT_MCP_TOKEN to one of listen.auth_tokens)" if exc.code == 401 else ""
        sys.stderr.write(f"resilient-mcp status: {exc.url} answered HTTP {exc.code}{hint}\n")
        return 1
    except OSError as exc:
        sys.stderr.write(f"resilient-mcp status: cannot reach {base}: {exc}; is the proxy running?\n")
        return 1
    sys.stdout.write(json.dumps(snap, indent=2) + "\n" if as_json else render_text(snap, failures))
    return 0
