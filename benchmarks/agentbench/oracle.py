"""P0 ``oracle``: takes the scenario's accepted action (its recipe), knowing the ground truth: the upper bound.

The oracle acts on the fault aimed at the target step; on any other failure it behaves as ``repair_follower``. It
cannot do what the world does not allow: without the proxy a direct SDK client raises on a broken outputSchema and
hands it no text to degrade to (E2), and a 1 MB result overflows its context (E4).
"""

from __future__ import annotations

from random import Random
from typing import Any

from .agents import Action, Call, RepairFollower
from .reader import data_in_text
from .repair import Decision
from .spec import Scenario, Step
from .world import Outcome


def verify_call(step: Step) -> tuple[str, dict[str, Any]]:
    """The read that shows whether the step's write happened (the benchmark policy's ``verify_with``)."""
    if step.verify is not None:  # outside the order shop the scenario names it
        return step.verify
    if step.tool == "create_order":
        return "get_order", {"client_ref": step.args["client_ref"]}
    return "get_order", {"order_id": step.args["order_id"]}


class OracleAgent(RepairFollower):
    name = "oracle"

    def __init__(self, scenario: Scenario, rng: Random) -> None:
        super().__init__(scenario, rng)
        self.checked_success = False
        self.switched = False

    def _on_target(self) -> bool:
        return self.i == self.s.target

    def on_ok(self, result: Outcome, call: Call) -> Action:
        recipe = self.s.oracle.recipe
        if self._on_target() and self.s.fault.startswith("E5") and not self.checked_success:
            self.checked_success = True  # a success-shaped result the oracle knows to be wrong: check it
            if recipe == "verify":
                tool, args = verify_call(self.step)
                return Call(tool, args, "verify")
            self.tries += 1
            return self.current
        return super().on_ok(result, call)

    def on_error(self, result: Outcome) -> Decision:
        if not self._on_target():
            return super().on_error(result)
        o, step = self.s.oracle, self.step
        recipe = o.recipe
        if recipe in ("retry", "requery"):
            if self.tries < max(o.max_retry, 1):
                return Decision("repeat", wait_s=(o.retry_after_ms or 200) / 1000)
            return Decision("stop", status="failed")
        if recipe == "fix" and self.fixes < 2:
            return Decision("call", tool=step.tool, args=dict(o.fix_args or step.args))
        if recipe == "correct_tool" and self.fixes < 2:
            return Decision("call", tool=step.tool, args=dict(step.args))
        if recipe == "refresh":
            return Decision("refresh", tool=f"{step.tool}_v2")
        if recipe in ("verify", "reread"):
            tool, args = verify_call(step)
            return Decision("verify", tool=tool, args=args)
        if recipe == "switch" and o.alt is not None and not self.switched:
            self.switched = True
            return Decision("call", tool=o.alt[0], args=dict(o.alt[1]))
        if recipe == "degrade":
            text = data_in_text(result.text)
            return Decision("fact", value=text) if text else Decision("skip", status="degraded")
        if recipe == "stop":
            return Decision("stop", status=o.terminal_ok[0])
        return super().on_error(result)
