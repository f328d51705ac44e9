"""A corpus record back into what the proxy's rules see, and the rules' verdict on it.

``rules_verdict`` runs the same code the proxy runs on that outcome: ``classify_result`` for an ``isError`` result,
``classify_exception`` for a JSON-RPC error or a transport exception, ``classify_http_status`` for an HTTP status,
then ``plan_repair`` for the tool's effect class (the repair the observation would carry).
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types as types
import pydantic_core
from mcp.shared.exceptions import MCPError

from resilient_mcp.call.chain import ToolCall
from resilient_mcp.faults import BY_TYPE, EffectClass, Fault, RepairAction, RetrySafety, SideEffectStatus, vocab
from resilient_mcp.faults.classify import classify_exception, classify_http_status, classify_result
from resilient_mcp.policy import ToolRule
from resilient_mcp.verdict.observations import plan_repair
from resilient_mcp.verdict.repeat import decide

CORPUS = Path(__file__).resolve().parent / "corpus.jsonl"
SUCCESS_SHAPED = CORPUS.with_name("success_shaped.jsonl")
"""Failures the server answered as a successful result (no ``isError``): the test set for ``result_errors``."""


def load(path: Path = CORPUS) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def tool_of(record: dict[str, Any]) -> types.Tool:
    t = record["tool"]
    return types.Tool(name=t["name"], description=t["description"], input_schema=t["input_schema"])


def call_of(record: dict[str, Any]) -> ToolCall:
    rule = ToolRule(effect=EffectClass(record["effect"]))
    tool = tool_of(record)
    return ToolCall(
        name=tool.name,
        arguments=record["arguments"],
        upstream=record["source"],
        upstream_tool=tool.name,
        rule=rule,
        tool=tool,
    )


def _exception(raw: dict[str, Any]) -> BaseException:
    module, _, name = raw["type"].partition(".")
    message = raw["message"]
    if module == "builtins" and isinstance(cls := getattr(builtins, name, None), type):
        return cls(message)
    if raw["type"] == "pydantic_core.ValidationError":  # the SDK could not parse the upstream's result
        return pydantic_core.ValidationError.from_exception_data(message.split("\n", 1)[0], [])
    for mod in (anyio, httpx2):
        if module == mod.__name__ and isinstance(cls := getattr(mod, name, None), type):
            return cls(message) if message else cls()
    return RuntimeError(message)


def raw_fault(record: dict[str, Any]) -> Fault:
    """The fault the rules make of this record's raw outcome."""
    raw = record["raw"]
    kind = raw["kind"]
    if kind == "result":
        result = types.CallToolResult.model_validate(raw["result"])
        fault = classify_result(result, tool=tool_of(record))
        assert fault is not None
        return fault
    if kind == "mcp_error":
        return classify_exception(MCPError(raw["code"], raw["message"], raw.get("data")), sent=True)
    if kind == "http_status":
        return classify_http_status(raw["status"], raw["headers"], message=raw.get("message"))
    if kind == "exception":
        return classify_exception(_exception(raw), sent=raw["sent"])
    cls = BY_TYPE[raw["fault_type"]]  # proxy_fault: detected by the proxy itself (its own timeout, a failed start)
    repair, max_retry = raw.get("repair_action"), raw.get("max_retry")
    if repair is None and raw["details"].get("startup_failure") and raw["details"].get("permanent"):
        # Recorded before the repair was: a permanent start-up failure asks the user (StartFailure.fault).
        repair, max_retry = RepairAction.ASK_USER.value, 0
    return cls(
        raw["message"],
        transient=raw["transient"],
        retry_safety=RetrySafety(raw["retry_safety"]),
        side_effect_status=SideEffectStatus(raw["side_effect_status"]),
        repair_action=RepairAction(repair) if repair is not None else None,
        max_retry=max_retry,
        details=dict(raw["details"]),
    )


def error_text(record: dict[str, Any]) -> str:
    """The upstream's own words (what a model would read as the untrusted error text)."""
    raw = record["raw"]
    if raw["kind"] == "result":
        return "\n".join(c.get("text", "") for c in raw["result"].get("content", []) if c.get("type") == "text")
    if raw["kind"] == "http_status":
        return f"HTTP {raw['status']} {raw.get('message') or ''}".strip()
    if raw["kind"] == "mcp_error":
        return f"JSON-RPC error {raw['code']}: {raw['message']}"
    return f"{raw.get('type', raw['kind'])}: {raw['message']}"


@dataclass(frozen=True, slots=True)
class Verdict:
    fault_type: str
    transient: bool
    repair_action: str
    retry_safety: str
    max_retry: int
    suggestion: str = ""
    proxy_retries: bool = False
    """Whether the proxy's retry stage would repeat this call on its own (rule R, ``repeat.decide``)."""
    basis: str = ""
    """How the rules reached the verdict (``details.basis``)."""

    def get(self, axis: str) -> Any:
        return {
            "fault_type": self.fault_type,
            "category": self.fault_type[:1],
            "transient": self.transient,
            "repair_action": self.repair_action,
            "retry_safety": self.retry_safety,
        }[axis]


def verdict_of(fault: Fault, record: dict[str, Any]) -> Verdict:
    call = call_of(record)
    action, max_retry, _ = plan_repair(fault, call)
    return Verdict(
        fault.fault_type,
        fault.is_transient,
        action.value,
        fault.retry_safety.value,
        max_retry,
        fault.suggestion or "",
        decide(fault, call.rule).repeat,
        str(fault.details.get("basis", "")),
    )


def server_of(record: dict[str, Any]) -> str:
    """The server a record came from, without its version or transport: the unit held out by leave-one-server-out
    (``@modelcontextprotocol/server-git@1.2`` and ``mcp-server-git==1.2`` -> ``server-git``, ``mcp-server-git``;
    the chaos server over stdio and over HTTP is one server)."""
    if isinstance(record.get("server"), str):
        return str(record["server"])
    name = str(record["source"]).split()
    head = name[1] if name[0] == "resilient-mcp" and len(name) > 1 else name[0]
    head = head.split("==", 1)[0]
    if head.startswith("@"):
        head = head.split("/", 1)[-1]
    return head.split("@", 1)[0]


def rules_verdict(
    record: dict[str, Any], *, loso: bool = False, off: frozenset[tuple[str, str]] = frozenset()
) -> Verdict:
    """The rules' verdict; with ``loso``, with the rules learned only from this record's server switched off, and
    the wordings ``off`` (``(family, key)``) too."""
    with vocab.held_out(frozenset({server_of(record)}) if loso else frozenset(), off):
        return verdict_of(raw_fault(record), record)


def firing(records: list[dict[str, Any]]) -> dict[tuple[str, str], set[str]]:
    """Each wording the rules read in-sample, as ``(family, key)``, with the servers whose records it decided."""
    out: dict[tuple[str, str], set[str]] = {}
    for record in records:
        details = raw_fault(record).details
        if details.get("basis") == vocab.Basis.WORDING.value and "recognised" in details:
            out.setdefault((str(details["vocabulary"]), str(details["recognised"])), set()).add(server_of(record))
    return out


def strict_verdicts(records: list[dict[str, Any]]) -> list[Verdict]:
    """Strict leave-one-server-out: as ``loso``, and every wording (standard, generic or a server's) that decided
    records of the held-out server only is off too: what a server gets whose words no other server of the corpus
    used, whoever the rule is credited to. A lower bound for rules written after the corpus was read."""
    fired = firing(records)
    verdicts = []
    for record in records:
        server = server_of(record)
        off = frozenset(rule for rule, servers in fired.items() if servers == {server})
        verdicts.append(rules_verdict(record, loso=True, off=off))
    return verdicts


def iter_records(path: Path = CORPUS) -> Iterator[dict[str, Any]]:
    yield from load(path)
