"""The scripted agent policies of §7.2, as a ReAct-style step function: given what the last action returned, the
next action.

Every policy works through the task's steps in order and reports each read's fact. They differ in what they do
when a call fails (``on_error``), when a result is unusable (``on_incomplete``: empty or cut) and when output holds
instructions:

=====================  ===================================================================================
P0 oracle              the scenario's recipe (ground truth): the accepted action, the upper bound
P1 blind_retry         repeats the identical call on any error or unusable result until the budget ends
P2 give_up             the first error or unusable result ends the task as failed
P3 keyword_heuristic   regexes over the raw text (``repair.keyword``); asks an empty read again once
P4 repair_follower     ``repair_action`` with ``details`` (``repair.follow``); P3 when there is no structure
P5 overtrusting        P4 on errors, but takes any success at face value and obeys instructions in output
P6 noisy_follower      P4 with probability 0.7 (seeded), else P1, decided per failure
=====================  ===================================================================================
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from random import Random
from typing import Any

from .check import MISSING, extract
from .repair import Decision, degraded_fact, follow, injected_call, keyword
from .spec import Scenario, Status, Step
from .world import Outcome

POLICIES = (
    "oracle",
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
        names = [t.name for t in tools] if isinstance(tools, list) else []
        old = self.step.tool
        new = self.replacement if self.replacement in names else None
        new = new or next((n for n in names if n != old and n.startswith(old)), None)
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
            version = (result.structured or {}).get("version")
            self.current = replace(self.current, args={**args, "version": version or args["version"]})
        return self.current


def _held(result: Outcome) -> bool:
    """The proxy did not run an identical write again: a replayed result, or a conflict on an unknown outcome."""
    details = (result.observation or {}).get("details") or {}
    return result.replayed or details.get("conflict") == "outcome_unknown"


def _window_s(result: Outcome) -> float:
    """How long the proxy holds the write: ``blocked_until - original_at`` when given, else its default 60 s."""
    details = (result.observation or {}).get("details") or {}
    try:
        until = datetime.fromisoformat(str(details["blocked_until"]))
        since = datetime.fromisoformat(str(details["original_at"]))
    except (KeyError, ValueError):
        return 60.0
    return max(1.0, (until - since).total_seconds() + 1.0)


def effect_visible(step: Step, result: Outcome) -> bool:
    """Whether a verification read shows the step's write (the user's intended state)."""
    data: Any = result.structured or {}
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
        return keyword(result.text, self.current.tool, self.current.args, self.tries, self.fixes)


class RepairFollower(Agent):
    name = "repair_follower"

    def on_error(self, result: Outcome) -> Decision:
        if result.observation is None:
            return keyword(result.text, self.current.tool, self.current.args, self.tries, self.fixes)
        return follow(result.observation, self.current.tool, self.current.args, self.tries, self.fixes)


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
