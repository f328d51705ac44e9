"""Fault plans: which call gets which fault, as strict models, and the deterministic matcher that applies them.

A plan (YAML or JSON; ``load_plan`` names file, line and key in every error)::

    seed: 7                                  # drives `probability`; same seed + same calls = same faults
    startup: {fail_spawns: 1}                # chaos server only: the first spawn exits before reading (C1)
    rules:                                   # the first rule that matches a call decides its fault
      - match: {tool: create_order, nth_call: 1}
        fault: C3_attempt_timeout            # a catalog fault type, its id (C3), its name or an alias (timeout)
        params: {commit: before_hang, hang_ms: 60000}
      - match: {tool: "get_*", args: {order_id: {regex: "-flaky$"}}, probability: 0.5}
        fault: rate_limit
        params: {retry_after_ms: 1000}
        times: 2                             # fire at most twice

``match``: ``tool`` (glob), ``upstream`` (glob; proxy chaos mode only), ``nth_call`` (int or list: the n-th call of
that tool, counted per tool name, or over all calls when ``tool`` is not given), ``every`` (every k-th call),
``args`` (name -> predicate: ``eq ne gt ge lt le regex in exists``; a plain value means ``eq``), ``probability``.
Parameters are checked per fault (``params.py``); aliases may carry default parameters (``stdout_pollution`` is
``E1_malformed_response`` with ``variant: log_line``).
"""

from __future__ import annotations

import fnmatch
import os
import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ..faults import CATALOG
from ..policy.source import Document, SourceError, load_document, validate_document
from .params import PARAMS, FaultParams

_PREDICATES = ("eq", "ne", "gt", "ge", "lt", "le", "regex", "in", "exists")

#: Short names and the default parameters they imply (canonical id, defaults).
ALIASES: dict[str, tuple[str, dict[str, Any]]] = {
    "timeout": ("C3_attempt_timeout", {}),
    "hang": ("C3_attempt_timeout", {}),
    "slow": ("D3_slow_success", {}),
    "crash": ("C2_connection_lost_after_send", {}),
    "die": ("C2_connection_lost_after_send", {}),
    "die_mid_call": ("C2_connection_lost_after_send", {"commit": "before"}),
    "refuse": ("C1_connect_failure", {}),
    "outage": ("C5_persistent_outage", {}),
    "5xx": ("C4_gateway_5xx", {}),
    "gateway": ("C4_gateway_5xx", {}),
    "rate_limit": ("D2_rate_limited", {}),
    "transient": ("D1_transient_execution_error", {}),
    "unavailable": ("D1_transient_execution_error", {}),
    "not_found": ("D4_permanent_execution_error", {}),
    "conflict": ("D5_state_conflict", {}),
    "malformed": ("E1_malformed_response", {}),
    "stdout_pollution": ("E1_malformed_response", {"variant": "log_line"}),
    "oversized": ("E4_oversized_result", {}),
    "injection": ("F4_prompt_injection_in_output", {}),
    "quota": ("F3_quota_exhausted", {}),
    "unauthorized": ("F1_unauthenticated", {}),
    "forbidden": ("F2_permission_denied_or_approval_required", {}),
    "rename_tool": ("A2_stale_tool_list", {}),
}


def _fault_names() -> dict[str, tuple[str, dict[str, Any]]]:
    table: dict[str, tuple[str, dict[str, Any]]] = {}
    for cls in CATALOG:
        short, _, name = cls.fault_type.partition("_")
        for key in (cls.fault_type, short, name):
            table[key.lower()] = (cls.fault_type, {})
    return table | ALIASES


FAULT_NAMES = _fault_names()
"""Every accepted spelling (lower case) -> (catalog fault type, default parameters)."""


def resolve_fault(name: str) -> tuple[str, dict[str, Any]]:
    """The catalog fault type and default parameters ``name`` stands for; ``ValueError`` naming the choices."""
    found = FAULT_NAMES.get(name.strip().lower())
    if found is None:
        raise ValueError(
            f"unknown fault {name!r}: use a catalog fault type (e.g. C3_attempt_timeout), its id (C3), "
            f"its name (attempt_timeout) or an alias ({', '.join(sorted(ALIASES))})"
        )
    return found


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class ArgPredicate(_Strict):
    """A test on one argument; every given test must hold. A plain value in a plan means ``eq``."""

    eq: Any = None
    ne: Any = None
    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None
    regex: str | None = None
    in_: list[Any] | None = Field(None, alias="in")
    exists: bool | None = None

    @field_validator("regex")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        if v is not None:
            try:
                re.compile(v)
            except re.error as exc:
                raise ValueError(f"invalid regex {v!r}: {exc}") from None
        return v

    def test(self, args: Mapping[str, Any], name: str) -> bool:
        present = name in args
        if self.exists is not None and self.exists != present:
            return False
        value = args.get(name)
        given = self.model_fields_set
        if "eq" in given and value != self.eq:
            return False
        if "ne" in given and value == self.ne:
            return False
        if self.in_ is not None and value not in self.in_:
            return False
        if self.regex is not None and not (isinstance(value, str) and re.search(self.regex, value)):
            return False
        return self._compare(value)

    def _compare(self, value: Any) -> bool:
        bounds = ((self.gt, float.__gt__), (self.ge, float.__ge__), (self.lt, float.__lt__), (self.le, float.__le__))
        if all(b is None for b, _ in bounds):
            return True
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        return all(b is None or op(float(value), float(b)) for b, op in bounds)


class Match(_Strict):
    tool: str | None = None
    """Glob on the tool name (the upstream's own name in proxy chaos mode)."""
    upstream: str | None = None
    """Glob on the upstream's configured name (proxy chaos mode only)."""
    nth_call: int | list[int] | None = None
    """The n-th call (1-based) of the tool, or of all calls when `tool` is not given."""
    every: int | None = Field(None, ge=1)
    """Every k-th call (k, 2k, ...)."""
    args: dict[str, ArgPredicate] = Field(default_factory=dict)
    """Argument name -> predicate (a plain value means equality)."""
    probability: float = Field(1.0, ge=0.0, le=1.0)
    """Chance that an otherwise matching call faults, drawn from the plan's seeded generator."""

    @field_validator("nth_call")
    @classmethod
    def _positive(cls, v: int | list[int] | None) -> int | list[int] | None:
        if v is not None and any(n < 1 for n in ([v] if isinstance(v, int) else v)):
            raise ValueError("nth_call counts from 1")
        return v

    @field_validator("args", mode="before")
    @classmethod
    def _plain_values(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {
                k: p if isinstance(p, dict) and p and set(p) <= set(_PREDICATES) else {"eq": p} for k, p in v.items()
            }
        return v

    def hits(self, tool: str, args: Mapping[str, Any], upstream: str | None, n: int) -> bool:
        """Whether a call is selected, ``n`` being its number in this rule's counting (before probability)."""
        if self.tool is not None and not fnmatch.fnmatchcase(tool, self.tool):
            return False
        if self.upstream is not None and (upstream is None or not fnmatch.fnmatchcase(upstream, self.upstream)):
            return False
        if self.nth_call is not None and n not in (
            [self.nth_call] if isinstance(self.nth_call, int) else self.nth_call
        ):
            return False
        if self.every is not None and n % self.every:
            return False
        return all(p.test(args, name) for name, p in self.args.items())


class Rule(_Strict):
    match: Match = Match()
    """Which calls this rule selects (every call when empty)."""
    fault: str
    """The fault to inject: a catalog fault type, its id, its name or an alias."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Parameters of the fault (checked per fault)."""
    times: int | None = Field(None, ge=1)
    """Fire at most this many times."""
    name: str | None = None
    """A label for logs and reports."""

    @field_validator("fault")
    @classmethod
    def _canonical(cls, v: str) -> str:
        return resolve_fault(v)[0]

    @model_validator(mode="before")
    @classmethod
    def _alias_defaults(cls, data: Any) -> Any:
        if isinstance(data, dict) and isinstance(data.get("fault"), str) and data["fault"].lower() in FAULT_NAMES:
            _, defaults = FAULT_NAMES[data["fault"].lower()]
            if defaults:
                data = {**data, "params": {**defaults, **(data.get("params") or {})}}
        return data

    @model_validator(mode="after")
    def _check_params(self) -> Rule:
        try:
            PARAMS[self.fault].model_validate(self.params)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "(params)"
            raise ValueError(f"params of {self.fault}: {where}: {first['msg']}") from None
        return self

    @property
    def parsed(self) -> FaultParams:
        return PARAMS[self.fault].model_validate(self.params)


class Startup(_Strict):
    fail_spawns: int | Literal["always"] = 0
    """Chaos server over stdio: this many first spawns (counted in the --ledger file) exit before reading a message
    (C1); "always" never serves (C5)."""
    exit_code: int = Field(1, ge=0, le=255)


class FaultPlan(_Strict):
    seed: int = 0
    """Seed of the generator behind `probability`."""
    startup: Startup = Startup()
    rules: list[Rule] = Field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Decision:
    """One injection: which rule fired on which call, with its checked parameters."""

    rule: int
    fault: str
    params: FaultParams
    tool: str
    call: int
    """The call's number among calls of this tool (1-based)."""


@dataclass
class Planner:
    """Applies a plan to a sequence of calls. Deterministic: same plan, same seed, same calls -> same decisions."""

    plan: FaultPlan
    counts: dict[str, int] = field(default_factory=dict)
    total: int = 0
    fired: dict[int, int] = field(default_factory=dict)
    history: list[Decision] = field(default_factory=list)
    _parsed: list[FaultParams] = field(default_factory=list)
    _rng: random.Random = field(default_factory=random.Random)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.plan.seed)
        self._parsed = [rule.parsed for rule in self.plan.rules]

    def decide(self, tool: str, args: Mapping[str, Any] | None, *, upstream: str | None = None) -> Decision | None:
        """Count this call and return the fault to inject into it, if any."""
        args = args or {}
        self.total += 1
        self.counts[tool] = n_tool = self.counts.get(tool, 0) + 1
        for i, rule in enumerate(self.plan.rules):
            n = n_tool if rule.match.tool is not None else self.total
            if rule.times is not None and self.fired.get(i, 0) >= rule.times:
                continue
            if not rule.match.hits(tool, args, upstream, n):
                continue
            if rule.match.probability < 1.0 and self._rng.random() >= rule.match.probability:
                continue
            self.fired[i] = self.fired.get(i, 0) + 1
            decision = Decision(rule=i, fault=rule.fault, params=self._parsed[i], tool=tool, call=n_tool)
            self.history.append(decision)
            return decision
        return None


def parse_plan(doc: Document, data: Any = None, prefix: tuple[str | int, ...] = ()) -> FaultPlan:
    """Validate a plan document (or the part ``data`` of it found at ``prefix``); errors name file, line and key."""
    payload = doc.data if data is None else data
    if isinstance(payload, dict) and isinstance(payload.get("rules"), list):
        for i, rule in enumerate(payload["rules"]):  # first pass: precise lines for parameter errors
            fault = rule.get("fault") if isinstance(rule, dict) else None
            if isinstance(fault, str) and fault.strip().lower() in FAULT_NAMES and isinstance(rule.get("params"), dict):
                canonical, defaults = FAULT_NAMES[fault.strip().lower()]
                validate_document(
                    PARAMS[canonical], doc, data={**defaults, **rule["params"]}, prefix=(*prefix, "rules", i, "params")
                )
    return validate_document(FaultPlan, doc, data=payload, prefix=prefix)


def load_plan(path: str | os.PathLike[str]) -> FaultPlan:
    """Read a fault plan file (YAML or JSON). Raises ``SourceError`` naming file, line and key."""
    doc = load_document(path)
    if doc.data is not None and not isinstance(doc.data, dict):
        raise SourceError(doc.path, [f"{doc.path}:1: a fault plan is a mapping (seed:, rules: [...])"])
    return parse_plan(doc)
