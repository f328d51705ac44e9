"""P3s ``strong_reader``: the strong reference reader, what a careful frontier model does with the raw text of an
error (and of a suspicious success), the same policy in every mode.

It reads only what a host shows (``Outcome.text``, and a success's structured content as text readers do) and
knows nothing of the proxy: every habit below applies to a direct server's words as much as to the proxy's. It was
written from the habits a careful model has (issue 23 names four of them) before looking at the episodes it
changes, and was not tuned on them afterwards; the held-out domains and the real-error scenarios check it.

On top of ``text_reader`` (``reader.read_text``, which it falls back to):

1. **A conflict in any words** ("exists", "duplicate", "already", "conflict", "409", "taken", "in use", "unique")
   on a write: check the state with the verifying read before doing anything else.
2. **A client-side parse failure is not an argument error**: "validation error(s) for CallToolResult", "invalid
   JSON", "could not parse/decode", "unexpected token" describe the *answer*: the call ran. A read asks again (twice
   at most, then another read); a write checks whether it happened.
3. **"It may have run" beats the transport's words**: "may have executed / taken effect", "outcome unknown" on a
   write means verify, even when the text also says "unavailable" (which ``text_reader`` takes for "not sent").
   Only explicit before-sending words ("refused", "connect call failed", "not sent", "did not run") let a write be
   repeated blind; rate limits are waited out.
4. **An unrecognised error**: a read is tried once more, then another read gives the fact, then it goes on
   without it; a write is checked once with the verifying read instead of giving up.
5. **A create that returns no id is worth one check**: the result of a creating write with no identifier in it is
   verified once.
6. **A verification that did not answer is not an answer**: a verifying read that failed on the way (timeout,
   transport, server error) is asked again once before its silence is read as "absent" (or, for a delete, as
   "gone").
7. **A call that was not sent does not use up a retry**: the one re-issue after a verified-absent write is counted
   apart from repeats the server (or a proxy) refused unsent.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .agents import Action, Call, Finish, TextReader, common_verify, effect_visible
from .reader import APPROVAL, NOT_FOUND, RATE, TRANSIENT, wait_seconds
from .repair import Decision
from .world import Outcome

CONFLICT_ANY = re.compile(
    r"conflict|\b409\b|already|\bexists?\b|duplicate|\btaken\b|in use|unique constraint|stale|version mismatch",
    re.IGNORECASE,
)
PARSE = re.compile(
    r"validation errors? for CallToolResult|invalid json|could not (?:parse|decode)|failed to (?:parse|decode)"
    r"|unexpected token|JSONDecodeError|malformed (?:response|result|answer)|not valid JSON",
    re.IGNORECASE,
)
MAYBE_RAN = re.compile(
    r"may have (?:executed|taken effect|run|been applied|succeeded)|outcome is unknown|outcome unknown"
    r"|not known whether|unknown whether",
    re.IGNORECASE,
)
NOT_SENT = re.compile(
    r"refused|connect call failed|could not connect|was not sent|not sent|did not run|nothing was sent",
    re.IGNORECASE,
)
CREATES = re.compile(r"^(?:create|add|new|insert|make|open)", re.IGNORECASE)
_ID_TOKEN = re.compile(r"\b[A-Za-z]{1,12}[-_]\d{1,12}\b|\b[0-9a-f]{8}-[0-9a-f]{4}-|\bid\b\W{0,3}\w", re.IGNORECASE)


def _has_id(value: Any) -> bool:
    if isinstance(value, dict):
        for k, v in value.items():
            if (k.lower() == "id" or k.lower().endswith("_id")) and v not in (None, "", [], {}):
                return True
            if isinstance(v, dict | list) and _has_id(v):
                return True
        return False
    if isinstance(value, list):
        return any(_has_id(v) for v in value)
    return False


def carries_id(result: Outcome) -> bool:
    """Whether a creating write's result names what it created: an id field, or an id-like token in its text."""
    if _has_id(result.structured):
        return True
    try:
        if _has_id(json.loads(result.text)):
            return True
    except ValueError:
        pass
    return _ID_TOKEN.search(result.text[:4000]) is not None


class StrongReader(TextReader):
    """P3s: the strong reference reader; see the module docstring."""

    name = "strong_reader"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.reissued = False
        self.reverified = False
        self.checked_create = False

    def advance(self, fact: Any = True) -> Action:
        self.reissued = self.reverified = self.checked_create = False
        return super().advance(fact)

    # --- successes ------------------------------------------------------------------------------------------------

    def on_ok(self, result: Outcome, call: Call) -> Action:
        step = self.step
        verify = common_verify(step)
        creating = step.cls != "read_only" and CREATES.match(call.tool) is not None
        if creating and verify is not None and not self.checked_create and not carries_id(result):
            self.checked_create = True  # habit 5: a create that names nothing it created is checked once
            self.verified_absent = False
            return Call(verify[0], verify[1], "verify")
        return super().on_ok(result, call)

    # --- failures -------------------------------------------------------------------------------------------------

    def on_error(self, result: Outcome) -> Decision:
        text = result.text
        write = self.step.cls != "read_only"
        verify = common_verify(self.step)
        if APPROVAL.search(text) and not RATE.search(text) and not PARSE.search(text):
            return self.read(result)
        if write and verify is not None:
            if MAYBE_RAN.search(text) or PARSE.search(text) or CONFLICT_ANY.search(text):
                return Decision("verify", tool=verify[0], args=verify[1])  # habits 1, 2, 3
            if TRANSIENT.search(text) and not NOT_SENT.search(text) and not RATE.search(text):
                return Decision("verify", tool=verify[0], args=verify[1])  # habit 3: ambiguous on a write
        if not write and PARSE.search(text):  # habit 2: the answer was unreadable, not the arguments
            if self.tries < 2:
                return Decision("repeat", counts_as_retry=True)
            return self._other_read()
        decision = self.read(result)
        if decision.kind == "stop" and decision.status == "failed":  # habit 4: text_reader found nothing to do
            if not write:
                if self.tries < 1:
                    return Decision("repeat", wait_s=wait_seconds(text, 1.0), counts_as_retry=True)
                return self._other_read()
            if verify is not None and not self.reissued:
                return Decision("verify", tool=verify[0], args=verify[1])
        return decision

    def _other_read(self) -> Decision:
        alternatives = self.s.domain.alternatives
        alt = next((a for a in alternatives if a in self.tools and a != self.current.tool), None)
        if alt is not None and self.fixes < 1:
            return Decision("call", tool=alt, args=dict(alternatives[alt]))
        return Decision("skip", status="degraded")

    # --- verification ---------------------------------------------------------------------------------------------

    def _after_verify(self, call: Call, result: Outcome) -> Action:
        unanswered = not result.ok and TRANSIENT.search(result.text) and not NOT_FOUND.search(result.text)
        if unanswered and not self.reverified:  # habit 6: ask the verifying read again before believing silence
            self.reverified = True
            return call
        if effect_visible(self.step, result):
            return self.advance()
        if self.reissued:
            return Finish("aborted")
        self.reissued = True  # habit 7: the one re-issue after a verified-absent write, whatever was refused before
        saved, self.tries = self.tries, 0
        action = super()._after_verify(call, result)
        self.tries = max(saved, self.tries)
        return action
