"""The scripted agent policies of §7.2, as a ReAct-style step function: given what the last action returned, the
next action.

Every policy works through the task's steps in order and reports each read's fact. They differ in what they do
when a call fails (``on_error``), when a result is unusable (``on_incomplete``: empty or cut) and when output holds
instructions:

=====================  ===================================================================================
P0 oracle              the scenario's recipe (ground truth): the accepted action, the upper bound
P1 blind_retry         repeats the identical call on any error or unusable result until the budget ends
P2 give_up             the first error or unusable result ends the task as failed
P3 keyword_heuristic   the catalog's narrow regexes over the raw text (``repair.keyword``); asks an empty read again
P3c text_reader        the competent text reader (``reader.read_text``), identical in every mode
P3s strong_reader      the strong reference reader (``strong.StrongReader``): text_reader plus the habits of a
                       careful frontier model with the raw text, identical in every mode: the reference
P4 repair_follower     the proxy's advice as its text shows it (``reader.visible_observation``, ``repair.follow``);
                       the text reader when the text has no advice
P5 overtrusting        P4 on errors, but takes any success at face value and obeys instructions in output
P6 noisy_follower      P4 with probability 0.7 (seeded), else P1, decided per failure
=====================  ===================================================================================
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from datetime import datetime
from random import Random
from typing import Any

from .check import MISSING, effect_shown, extract
from .reader import read_text, remap_to_schema, visible_observation
from .repair import Decision, degraded_fact, follow, injected_call, keyword
from .spec import Scenario, Status, Step
from .world import Outcome

POLICIES = (
    "oracle",
    "strong_reader",
    "text_reader",
    "blind_retry",
    "give_up",
    "keyword_heuristic",
    "repair_follower",
    "overtrusting",
    "noisy_follower",
)


@dataclass(frozen=True)
class Call:
    tool: str
    args: Any
    purpose: str = "step"
    """step | verify | alt | injected | list"""


@dataclass(frozen=True)
class Wait:
    seconds: float


@dataclass(frozen=True)
class ListTools:
    pass


@dataclass(frozen=True)
class Finish:
    status: Status


Action = Call | Wait | ListTools | Finish


class Agent:
    """The task walk shared by every policy; subclasses decide what to do about failures."""

    name = "agent"

    def __init__(self, scenario: Scenario, rng: Random) -> None:
        self.s = scenario
        self.rng = rng
        self.i = 0
        self.facts: dict[int, Any] = {}
        self.final: Status = "done"
        self.current = self._first_call(0)
        self.pending: list[Action] = []
        self.last: Action | None = None
        self.tries = 0
        self.fixes = 0
        self.replacement: str | None = None
        self.verified_absent = False
        self.waited_window = False
        self.tools: dict[str, dict[str, Any]] = {}
        """Tool name -> input schema, from the host's last listing (what a model is shown)."""

    def known(self, tools: Any) -> None:
        """The host listed the tools (at the start, and after every ListTools)."""
        self.tools = {t.name: dict(t.input_schema or {}) for t in tools} if isinstance(tools, list) else {}

    # --- the loop -------------------------------------------------------------------------------------------------

    def act(self, result: Any) -> Action:
        action = self._next(result)
        self.last = action
        return action

    def _next(self, result: Any) -> Action:
        if self.pending:
            return self.pending.pop(0)
        last = self.last
        if last is None or isinstance(last, Wait):
            return self.current
        if isinstance(last, ListTools):
            return self._after_list(result)
        assert isinstance(last, Call) and isinstance(result, Outcome)
        if last.purpose == "verify":
            return self._after_verify(last, result)
        if last.purpose == "injected":
            return self.current
        if self.verified_absent and not self.waited_window and _held(result):
            self.waited_window = True  # the proxy holds the identical write for its idempotency window: wait it out
            self.pending = [self.current]
            return Wait(_window_s(result))
        if result.ok:
            return self.on_ok(result, last)
        return self.decide(self.on_error(result))

    @property
    def step(self) -> Step:
        return self.s.steps[self.i]

    def _first_call(self, i: int) -> Call:
        step = self.s.steps[i]
        tool, args = step.first or step.call()
        return Call(tool, args)

    def advance(self, fact: Any = True) -> Action:
        self.facts[self.i] = fact
        self.i += 1
        self.tries = self.fixes = 0
        if self.i >= len(self.s.steps):
            return Finish(self.final)
        self.current = self._first_call(self.i)
        return self.current

    # --- successes ------------------------------------------------------------------------------------------------

    def on_ok(self, result: Outcome, call: Call) -> Action:
        fact = self.step.fact
        if fact is None:
            return self.advance()
        value = extract(fact, result.structured, result.text)
        return self.on_incomplete(result) if value is MISSING else self.advance(value)

    def on_incomplete(self, result: Outcome) -> Action:
        """An empty or cut read: ask again once, then go on without it."""
        if self.tries < 1:
            self.tries += 1
            return self.current
        return self.skip("degraded")

    def skip(self, status: Status) -> Action:
        self.final = status
        return self.advance(MISSING)

    # --- failures -------------------------------------------------------------------------------------------------

    def on_error(self, result: Outcome) -> Decision:
        raise NotImplementedError

    def decide(self, d: Decision) -> Action:
        """Turn a ``Decision`` about the current call into the next action."""
        if d.kind == "repeat":
            self.tries += 1
            if d.wait_s > 0:
                self.pending = [self.current]
                return Wait(d.wait_s)
            return self.current
        if d.kind == "call":
            self.fixes += 1
            self.current = Call(d.tool or self.current.tool, d.args, "alt" if d.tool != self.step.tool else "step")
            return self.current
        if d.kind == "verify":
            return Call(d.tool or "get_order", d.args, "verify")
        if d.kind == "refresh":
            self.replacement = d.tool
            return ListTools()
        if d.kind == "fact":
            value = degraded_fact(self.step.fact, d.value)
            return self.advance(value) if value is not MISSING or self.step.fact is None else self.skip("degraded")
        if d.kind == "skip":
            return self.skip(d.status)
        return Finish(d.status)

    def _after_list(self, tools: Any) -> Action:
        self.known(tools)
        names = list(self.tools)
        old = self.current.tool
        new = self.replacement if self.replacement in names and self.replacement != old else None
        new = new or next((n for n in names if n != old and n.startswith(old)), None)
        if new is None and old in names and isinstance(self.current.args, dict):
            remapped = remap_to_schema(self.current.args, self.tools[old], self.s.domain.context)  # A3: rebuild
            if remapped is not None:
                self.fixes += 1
                self.current = Call(old, remapped, "step")
                return self.current
        if new is None:
            return self.skip("degraded")
        self.current = Call(new, self.current.args, "step")
        return self.current

    def _after_verify(self, call: Call, result: Outcome) -> Action:
        """The write took effect: the step is done. It did not: re-issue it once (with a re-read version)."""
        if effect_visible(self.step, result):
            return self.advance()
        if self.tries >= 1:
            return Finish("aborted")
        self.tries += 1
        self.verified_absent = True
        args = self.current.args
        if isinstance(args, dict) and "version" in args and result.ok:
            data = result.structured or _json(result.text)
            version = data.get("version") if isinstance(data, dict) else None
            self.current = replace(self.current, args={**args, "version": version or args["version"]})
        return self.current


_HELD = re.compile(r"identical call made at (\S+?) may have executed, but its outcome is unknown")
_UNTIL = re.compile(r"(?:after|until) (\d{4}-\d\d-\d\dT[\d:.]+(?:Z|[+-]\d\d:\d\d)?)")


def _held(result: Outcome) -> bool:
    """The proxy did not run an identical write again: its text says an identical call's outcome is unknown."""
    return not result.ok and _HELD.search(result.text) is not None


def _window_s(result: Outcome) -> float:
    """How long the proxy holds the write, from its text (the time of the first call to the time it names)."""
    since, until = _HELD.search(result.text), _UNTIL.search(result.text)
    try:
        start = datetime.fromisoformat(since.group(1).rstrip(";,.")) if since else None
        end = datetime.fromisoformat(until.group(1).rstrip(";,.")) if until else None
    except ValueError:
        return 60.0
    if start is None or end is None:
        return 60.0
    return max(1.0, (end - start).total_seconds() + 1.0)


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return {}


def common_verify(step: Step) -> tuple[str, dict[str, Any]] | None:
    """The read a model picks from its tool list to see whether a write happened (None for reads)."""
    if step.cls == "read_only":
        return None
    if step.verify is not None:  # outside the order shop the scenario names the read (as it names alternatives)
        return step.verify
    if step.tool.startswith("create_order"):
        return "get_order", {"client_ref": step.args["client_ref"]}
    return "get_order", {"order_id": step.args["order_id"]}


def effect_visible(step: Step, result: Outcome) -> bool:
    """Whether a verification read shows the step's write (the user's intended state)."""
    if step.verify is not None:  # outside the order shop: what the scenario says the read shows
        return effect_shown(step.shows, result.ok, result.structured, result.text)
    data: Any = result.structured or _json(result.text)
    orders = data.get("orders") if isinstance(data, dict) and "orders" in data else [data]
    orders = [o for o in orders or [] if isinstance(o, dict)]
    args = step.args
    if step.tool == "create_order":
        return result.ok and any(o.get("client_ref") == args["client_ref"] for o in orders)
    if step.tool == "delete_order":
        return not result.ok
    if not result.ok:
        return False
    key, value = ("status", args["status"]) if step.tool == "set_status" else ("qty", args.get("qty"))
    return any(o.get("order_id") == args["order_id"] and o.get(key) == value for o in orders)


class BlindRetry(Agent):
    name = "blind_retry"

    def on_error(self, result: Outcome) -> Decision:
        return Decision("repeat")

    def on_incomplete(self, result: Outcome) -> Action:
        self.tries += 1
        return self.current


class GiveUp(Agent):
    name = "give_up"

    def on_error(self, result: Outcome) -> Decision:
        return Decision("stop", status="failed")

    def on_incomplete(self, result: Outcome) -> Action:
        return Finish("failed")


class KeywordHeuristic(Agent):
    name = "keyword_heuristic"

    def on_error(self, result: Outcome) -> Decision:
        return keyword(result.text, self.current.tool, self.current.args, self.tries, self.fixes, self.s.domain.context)


class TextReader(Agent):
    """P3c: the competent reader of error text (``reader.read_text``); the same policy in every mode."""

    name = "text_reader"

    def on_error(self, result: Outcome) -> Decision:
        return self.read(result)

    def read(self, result: Outcome) -> Decision:
        return read_text(
            result.text,
            tool=self.current.tool,
            args=self.current.args,
            write=self.step.cls != "read_only",
            tries=self.tries,
            fixes=self.fixes,
            tools=list(self.tools),
            verify=common_verify(self.step),
            context=self.s.domain.context,
            alternatives=self.s.domain.alternatives,
        )


class RepairFollower(TextReader):
    """P4: the proxy's advice as the text shows it; where the text has none, or its fix names nothing the agent
    can fill in, the competent text reader."""

    name = "repair_follower"

    def on_error(self, result: Outcome) -> Decision:
        obs = visible_observation(result.text)
        if obs is None:
            return self.read(result)
        domain = self.s.domain
        decision = follow(
            obs, self.current.tool, self.current.args, self.tries, self.fixes, domain.context, domain.alternatives
        )
        if decision.kind in ("stop", "skip") and decision.status in ("failed", "degraded", "asked_user"):
            fallback = self.read(result)  # the advice names nothing it can act on: read the text as P3c does
            if fallback.kind in ("call", "refresh", "verify"):
                return fallback
        return decision


class Overtrusting(RepairFollower):
    name = "overtrusting"

    def on_ok(self, result: Outcome, call: Call) -> Action:
        injected = injected_call(result.text)
        fact = self.step.fact
        value = extract(fact, result.structured, result.text) if fact else True
        after = self.advance(None if value is MISSING else value)
        if injected is None:
            return after
        self.pending = [after]
        return Call(injected[0], injected[1], "injected")


class NoisyFollower(RepairFollower):
    name = "noisy_follower"
    compliance = 0.7

    def on_error(self, result: Outcome) -> Decision:
        return super().on_error(result) if self.rng.random() < self.compliance else Decision("repeat")

    def on_incomplete(self, result: Outcome) -> Action:
        if self.rng.random() < self.compliance:
            return super().on_incomplete(result)
        self.tries += 1
        return self.current
