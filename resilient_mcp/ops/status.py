"""The live status page's data: per-tool calls of the last hour, the last failures with their observation, what the
proxy absorbed, and the upstreams' state. Rendered as HTML by the server (usable without JavaScript; a small script
served by the package refreshes it in place) and as JSON (``/status.json``, ``resilient-mcp status``).
"""

from __future__ import annotations

import collections
import html
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..call.chain import ToolCall
from ..call.events import CallEnd, CallEvents, Sleep, UpstreamState
from ..state.stored_outputs import owner_principal
from .metrics import OTHER, UNKNOWN, CappedLabels
from .secrets import Scrubber

if TYPE_CHECKING:
    from .view import ProxyView

WINDOW_S = 3600.0
FAILURES_KEPT = 50
VALUELESS = ("id", "at", "upstream", "tool", "outcome", "fault_type", "category", "repair_action", "attempts")
"""The fields of a failure shown without its values (no observation: it quotes arguments and error texts)."""
ABSORBED = (
    ("recovered", "calls that succeeded after a retry"),
    ("retries", "extra upstream attempts"),
    ("backoff_s", "seconds waited between attempts"),
    ("replays", "writes answered from their idempotency record"),
    ("cache_hits", "calls answered from the response cache"),
    ("caps", "results cut to the output cap"),
    ("fallbacks", "calls answered by a fallback tool"),
    ("refusals", "calls refused before reaching an upstream"),
)


@dataclass(slots=True, frozen=True)
class _Sample:
    ts: float
    latency_s: float
    failed: bool
    category: str | None


def _iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def _percentile(sorted_values: list[float], q: float) -> float:
    """Nearest-rank percentile of an ascending list."""
    index = max(0, min(len(sorted_values) - 1, round(q * len(sorted_values) + 0.5) - 1))
    return sorted_values[index]


class StatusRecorder(CallEvents):
    enabled = True

    def __init__(
        self,
        *,
        scrubber: Scrubber | None = None,
        max_tools: int = 100,
        per_tool: int = 5000,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._scrub = scrubber or Scrubber(())
        self._tool = CappedLabels(max_tools)
        self._per_tool = per_tool
        self._clock = clock
        self._samples: dict[tuple[str, str], collections.deque[_Sample]] = {}
        self._failures: collections.deque[dict[str, Any]] = collections.deque(maxlen=FAILURES_KEPT)
        self._seq = 0
        self.absorbed: dict[str, float] = {key: 0 for key, _ in ABSORBED}
        self._changes: dict[str, tuple[float, str]] = {}
        self.started = clock()

    # --- events -----------------------------------------------------------------------------------------------------

    def call_finished(self, call: ToolCall, end: CallEnd) -> None:
        now = self._clock()
        key = (call.upstream or "-", self._tool(call.name) if call.known else UNKNOWN)
        samples = self._samples.get(key)
        if samples is None:
            samples = self._samples[key] = collections.deque(maxlen=self._per_tool)
        failed = end.outcome in ("error", "refused", "abandoned")
        samples.append(_Sample(now, end.latency_s, failed, end.category if failed else None))
        absorbed = self.absorbed
        if end.retries:
            absorbed["retries"] += end.retries
            if end.outcome == "ok":
                absorbed["recovered"] += 1
        absorbed["replays"] += end.replay
        absorbed["cache_hits"] += end.cache_hit
        absorbed["caps"] += end.capped
        absorbed["fallbacks"] += end.fallback
        absorbed["refusals"] += end.outcome == "refused"
        if failed:
            self._seq += 1
            self._failures.appendleft(
                {
                    "id": self._seq,
                    "at": _iso(now),
                    "upstream": call.upstream,
                    "tool": call.name,
                    "outcome": end.outcome,
                    "fault_type": end.fault_type,
                    "category": end.category,
                    "repair_action": end.repair_action,
                    "attempts": end.attempts,
                    "decided_by": end.decided_by,
                    "observation": end.observation,
                    "principal": owner_principal(call.owner),
                }
            )

    def wrap_sleep(self, sleep: Sleep) -> Sleep:
        absorbed = self.absorbed

        async def counted(delay_s: float) -> None:
            await sleep(delay_s)
            absorbed["backoff_s"] += delay_s

        return counted

    def upstream_state(self, upstream: UpstreamState) -> None:
        self._changes[upstream.name] = (self._clock(), upstream.state)

    # --- the page's data --------------------------------------------------------------------------------------------

    def snapshot(self, proxy: ProxyView, *, viewer: str | None = None, values: bool = True) -> dict[str, Any]:
        """The page's data. ``viewer``: a bearer-token principal that sees only its own failures (the listener has
        ``auth_tokens``: tenants never see each other's arguments or errors); ``values=False``: failures without their
        observations (a page no credential protects). Counts, latencies and upstream states are not per tenant."""
        now = self._clock()
        absorbed = {k: (round(v, 3) if k == "backoff_s" else int(v)) for k, v in self.absorbed.items()}
        return {
            "generated_at": _iso(now),
            "up_since": _iso(self.started),
            "window_s": int(WINDOW_S),
            "upstreams": self._upstream_rows(proxy),
            "tools": self._tool_rows(now - WINDOW_S),
            "absorbed": absorbed,
            "failures": self._scrub.data(_failures(self._failures, viewer, values)),
            "treatment": list(proxy.services.treatment),
            "tasks": proxy.services.tasks.summary(viewer),
        }

    def _upstream_rows(self, proxy: ProxyView) -> list[dict[str, Any]]:
        """Each upstream: its state and since when, restarts, tools, its circuit and its tools' open circuits."""
        breakers: dict[str, str] = {}
        open_tools: dict[str, list[str]] = {}
        for upstream, tool, state, _ in proxy.services.board.circuit_states():
            if tool is None:
                breakers[upstream] = state
            elif state != "closed":
                open_tools.setdefault(upstream, []).append(f"{tool} ({state})")
        upstreams = []
        for name, up in proxy.upstreams.items():
            changed = self._changes.get(name)
            upstreams.append(
                {
                    "name": name,
                    "state": up.state,
                    "since": _iso(changed[0]) if changed else None,
                    "restarts": up.restarts,
                    "tools": len(up.catalog.tools),
                    "breaker": breakers.get(name, "closed"),
                    "open_tool_circuits": sorted(open_tools.get(name, [])),
                    "last_error": self._scrub.text(up.last_error) if up.last_error else None,
                    "refused_tools": list(getattr(up, "refused_tools", ())),
                }
            )
        return upstreams

    def _tool_rows(self, since: float) -> list[dict[str, Any]]:
        """Each tool called within the window: calls, failures by category, p50 and p95 latency."""
        tools = []
        for (upstream, tool), samples in sorted(self._samples.items()):
            while samples and samples[0].ts < since:
                samples.popleft()
            if not samples:
                continue
            latencies = sorted(s.latency_s for s in samples)
            by_category: dict[str, int] = {}
            for s in samples:
                if s.failed:
                    cat = s.category or "unclassified"
                    by_category[cat] = by_category.get(cat, 0) + 1
            tools.append(
                {
                    "upstream": upstream,
                    "tool": tool if tool != OTHER else "(other tools)",
                    "calls": len(samples),
                    "failures": sum(by_category.values()),
                    "failures_by_category": dict(sorted(by_category.items())),
                    "p50_ms": round(_percentile(latencies, 0.50) * 1000, 1),
                    "p95_ms": round(_percentile(latencies, 0.95) * 1000, 1),
                }
            )
        return tools


def _failures(failures: collections.deque[dict[str, Any]], viewer: str | None, values: bool) -> list[dict[str, Any]]:
    out = []
    for f in failures:
        if viewer is not None and f["principal"] != viewer:
            continue
        if values:
            out.append({k: v for k, v in f.items() if k != "principal"})
        else:
            out.append({**{k: f[k] for k in VALUELESS}, "observation": None, "values_hidden": True})
    return out


# --- HTML ---------------------------------------------------------------------------------------------------------

_e = html.escape


def _state_class(state: str) -> str:
    return {"ready": "ok", "closed": "ok", "starting": "warn", "half_open": "warn", "down": "bad"}.get(state, "bad")


def render_live(snap: dict[str, Any]) -> str:
    """The part of the page that changes: upstreams, absorbed counts, tools, failures."""
    out: list[str] = [f'<p class="meta">Updated {_e(snap["generated_at"])} · up since {_e(snap["up_since"])}</p>']
    out.append(
        '<section id="upstreams"><h2>Upstreams</h2><table><thead><tr><th>Upstream</th><th>State</th><th>Since</th>'
        "<th>Restarts</th><th>Tools</th><th>Breaker</th><th>Last error</th></tr></thead><tbody>"
    )
    for up in snap["upstreams"]:
        circuits = ", ".join(up["open_tool_circuits"])
        breaker = up["breaker"] + (f"; tools: {circuits}" if circuits else "")
        out.append(
            f'<tr data-upstream="{_e(up["name"])}"><td>{_e(up["name"])}</td>'
            f'<td class="{_state_class(up["state"])}">{_e(up["state"])}</td><td>{_e(up["since"] or "")}</td>'
            f'<td class="num">{up["restarts"]}</td><td class="num">{up["tools"]}</td>'
            f'<td class="{_state_class(up["breaker"])}">{_e(breaker)}</td><td>{_e(up["last_error"] or "")}</td></tr>'
        )
    out.append("</tbody></table></section>")
    out.append('<section id="absorbed"><h2>Absorbed by the proxy</h2><table><tbody>')
    for key, label in ABSORBED:
        out.append(f'<tr data-absorbed="{key}"><th>{_e(label)}</th><td class="num">{snap["absorbed"][key]}</td></tr>')
    out.append("</tbody></table></section>")
    out.append(f'<section id="tools"><h2>Tools (last {snap["window_s"] // 60} minutes)</h2>')
    if not snap["tools"]:
        out.append('<p class="empty">No calls yet.</p>')
    else:
        out.append(
            "<table><thead><tr><th>Tool</th><th>Upstream</th><th>Calls</th><th>Failures</th>"
            "<th>By category</th><th>p50 ms</th><th>p95 ms</th></tr></thead><tbody>"
        )
        for t in snap["tools"]:
            cats = ", ".join(f"{k}: {v}" for k, v in t["failures_by_category"].items())
            failed = " bad" if t["failures"] else ""
            out.append(
                f'<tr data-tool="{_e(t["tool"])}"><td>{_e(t["tool"])}</td><td>{_e(t["upstream"])}</td>'
                f'<td class="num">{t["calls"]}</td><td class="num{failed}">{t["failures"]}</td>'
                f'<td>{_e(cats)}</td><td class="num">{t["p50_ms"]}</td><td class="num">{t["p95_ms"]}</td></tr>'
            )
        out.append("</tbody></table>")
    out.append("</section>")
    out.append(_render_treatment(snap.get("treatment", [])))
    out.append(f'<section id="failures"><h2>Last {FAILURES_KEPT} failures</h2>')
    if not snap["failures"]:
        out.append('<p class="empty">No failures.</p>')
    for f in snap["failures"]:
        summary = f"{f['at']} · {f['tool']} · {f['outcome']} · {f['fault_type'] or 'unclassified'}"
        if f.get("decided_by"):
            summary += f" · by {f['decided_by']}"
        if f.get("values_hidden"):
            body = "(not shown: set metrics.token and send it to see observations)"
        elif f["observation"]:
            body = json.dumps(f["observation"], indent=2, ensure_ascii=False)
        else:
            body = "(no observation)"
        out.append(
            f'<details class="failure" data-id="{f["id"]}"><summary>{_e(summary)}</summary>'
            f"<pre>{_e(body)}</pre></details>"
        )
    out.append("</section>")
    return "".join(out)


def _render_treatment(rows: list[dict[str, str]]) -> str:
    """Which tools are treated how and why (effect class, its source, what is retried)."""
    out = ['<section id="treatment"><h2>How tools are treated</h2>']
    if not rows:
        out.append('<p class="empty">No tools served.</p></section>')
        return "".join(out)
    out.append(
        "<table><thead><tr><th>Tool</th><th>Upstream</th><th>Effect</th><th>Why</th><th>Retried on</th></tr>"
        "</thead><tbody>"
    )
    for row in rows:
        out.append(
            f'<tr data-treatment="{_e(row["tool"])}"><td>{_e(row["tool"])}</td><td>{_e(row["upstream"])}</td>'
            f"<td>{_e(row['effect'])}</td><td>{_e(row['effect_from'])}</td><td>{_e(row['retried_on'])}</td></tr>"
        )
    out.append("</tbody></table></section>")
    return "".join(out)


def render_page(snap: dict[str, Any]) -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>resilient-mcp status</title>"
        '<link rel="stylesheet" href="status/static/status.css">'
        '<noscript><meta http-equiv="refresh" content="15"></noscript>'
        '<script defer src="status/static/status.js"></script></head>'
        '<body><header><h1>resilient-mcp status</h1><span id="live-state" class="meta"></span></header>'
        f'<main id="live">{render_live(snap)}</main></body></html>'
    )
