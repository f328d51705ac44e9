"""Why an upstream did not start, in the server's own words: a classified start-up failure, and when to give up.

A server that cannot start mostly says why on stderr (or in its answer to ``initialize``) and exits: a wrong password,
a missing database, a bad argument, a directory that does not exist. Restarting it changes nothing, and "upstream
unavailable, retry later" tells the model the opposite of the truth. Here:

- ``StderrTail`` keeps the last bytes a stdio server wrote to stderr (it is still relayed to the proxy's stderr) and
  the lines it wrote to stdout that are not JSON-RPC, bounded;
- ``classify_start_failure`` reads the exception of a failed start with those words: recognised authentication
  failures become F1 (``Unauthenticated``), permission refusals F2, words that say "later" (refused connections,
  timeouts, "try again") stay transient, and a server that exits or answers ``initialize`` with an error otherwise is
  a permanent failure (D4). Every verdict is ``ask_user`` when permanent, never sent, and carries the server's words
  short and fenced as untrusted (``fenced``). Words are matched as plain substrings (no regular expression runs on
  the server's text);
- the supervisor (``Upstream``) stops restarting after ``STOP_AFTER`` permanent failures in a row, and says so.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Any

import anyio
from mcp.shared.exceptions import MCPError

from ..faults import (
    ConnectFailure,
    Fault,
    MalformedResponse,
    PermanentExecutionError,
    PermissionDenied,
    RepairAction,
    RetrySafety,
    SideEffectStatus,
    Unauthenticated,
    vocab,
)

STOP_AFTER = 3
"""Permanent start-up failures in a row after which an upstream is not started again (until the proxy restarts)."""
TAIL_BYTES = 16384
"""How much of a server's stderr is kept (its last bytes): a chained Python traceback fits."""
WORDS_CHARS = 240
"""How much of the server's words a report quotes (instructions, observations, ``/status``, ``check``)."""
_GARBAGE_LINES = 4

# Plain, lowercase substrings, matched in linear time. Standards first (SQLSTATE class 28, Redis, HTTP, POSIX), then
# the phrasings servers and drivers use.
_AUTH = (
    "authentication failed",
    "authentication failure",
    "authentication required",
    "failed to authenticate",
    "unauthenticated",
    "unauthorized",
    "unauthorised",
    "not authenticated",
    "invalid credentials",
    "bad credentials",
    "invalid password",
    "wrong password",
    "incorrect password",
    "password authentication failed",
    "access denied for user",
    "invalid api key",
    "invalid_api_key",
    "incorrect api key",
    "api key is invalid",
    "api key not valid",
    "missing api key",
    "no api key",
    "invalid token",
    "invalid_token",
    "token expired",
    "expired token",
    "token has expired",
    "bad token",
    "login failed",
    "sqlstate 28",
    "sqlstate[28",
    "28p01",
    "noauth",
    "wrongpass",
    "http 401",
    "401 unauthorized",
    "status 401",
)
_DENIED = ("permission denied", "eacces", "eperm", "operation not permitted", "access denied", "forbidden", "http 403")
_LATER = (
    "econnrefused",
    "connection refused",
    "econnreset",
    "connection reset",
    "etimedout",
    "timed out",
    "timeout",
    "eai_again",
    "temporary failure",
    "temporarily unavailable",
    "service unavailable",
    "try again",
    "eagain",
    "ebusy",
    "too many connections",
    "the database system is starting up",
    "loading the dataset",
    "http 503",
    "http 502",
)


class StderrTail:
    """The last ``TAIL_BYTES`` a server wrote to stderr, and the first lines of its stdout that are not JSON-RPC.

    ``written`` counts every byte ever added (a mark for "since this call was sent": ``since``), and ``grown`` waits
    for the next chunk."""

    def __init__(self, limit: int = TAIL_BYTES) -> None:
        self._limit = limit
        self._data = bytearray()
        self.garbage: deque[str] = deque(maxlen=_GARBAGE_LINES)
        """Lines of stdout that are not JSON-RPC (the first few bytes of each)."""
        self.written = 0
        self._grew = anyio.Event()

    def add(self, chunk: bytes) -> None:
        self._data += chunk[-self._limit :]
        del self._data[: -self._limit]
        self.written += len(chunk)
        self._grew.set()
        self._grew = anyio.Event()

    async def grown(self) -> None:
        """Until the next chunk is added."""
        await self._grew.wait()

    def since(self, mark: int) -> str:
        """What was written after ``written`` was ``mark`` (as much of it as is still kept)."""
        new = self.written - mark
        if new <= 0:
            return ""
        return bytes(self._data[-new:]).decode("utf-8", "replace")

    def unreadable(self, line: bytes) -> None:
        if len(self.garbage) < _GARBAGE_LINES:
            self.garbage.append(line[:200].decode("utf-8", "replace"))

    def clear(self) -> None:
        self._data.clear()
        self.garbage.clear()

    def text(self) -> str:
        return bytes(self._data).decode("utf-8", "replace")


def fenced(text: str, limit: int = WORDS_CHARS) -> str:
    """``text`` on one line, at most ``limit`` characters, inside «» (which it cannot close early), for quoting an
    upstream's words where the proxy speaks: never read as the proxy's own."""
    flat = " ".join(text.replace("«", '"').replace("»", '"').split())
    if len(flat) > limit:
        flat = flat[: limit - 1] + "…"
    return f"«{flat}»"


def _has(text: str, words: tuple[str, ...]) -> bool:
    return any(word in text for word in words)


def _last_lines(text: str, limit: int) -> str:
    """The end of a server's stderr that most likely says why it stopped: its last non-empty lines, at most
    ``limit`` characters (a traceback's last line is its message)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    picked: list[str] = []
    size = 0
    for line in reversed(lines):
        if picked and size + len(line) > limit:
            break
        picked.append(line)
        size += len(line) + 1
    return " / ".join(reversed(picked))


@dataclass(frozen=True, slots=True)
class StartFailure:
    """A classified failed start: what the model, ``/status``, ``check`` and the instructions are told."""

    kind: type[Fault]
    permanent: bool
    what: str
    """What happened, in the proxy's words (no server text)."""
    words: str | None
    """The server's own words (stderr's end, the initialize error, stdout garbage), untrusted, uncut here."""

    @property
    def fault_type(self) -> str:
        return self.kind.fault_type

    def summary(self) -> str:
        """One short line: the fault type, what happened, and the server's words fenced and capped."""
        said = f"; the server said (untrusted): {fenced(self.words)}" if self.words else ""
        return f"{self.fault_type}: {self.what}{said}"

    def fault(self, upstream: str, stopped: bool) -> Fault:
        """A fresh fault for a call that found the upstream not started (never sent; ask the user when permanent)."""
        details: dict[str, Any] = {
            "upstream": upstream,
            "startup_failure": True,
            "permanent": self.permanent,
            "stopped": stopped,
        }
        kw: dict[str, Any] = {
            "details": details,
            "upstream_message": fenced(self.words, WORDS_CHARS)[1:-1] if self.words else None,
            "retry_safety": RetrySafety.NOT_SENT,
            "side_effect_status": SideEffectStatus.NONE,
        }
        if self.permanent:
            kw |= {"transient": False, "repair_action": RepairAction.ASK_USER, "max_retry": 0}
        return self.kind.of(
            "startup_failed",
            suggest="startup_permanent_advice" if self.permanent else "startup_transient_advice",
            upstream=upstream,
            what=self.what,
            state="it is not restarted again" if stopped else "it is being restarted",
            **kw,
        )


def classify_start_failure(exc: BaseException, tail: StderrTail | None, *, served_before: bool = False) -> StartFailure:
    """The verdict on one failed start, from its exception and what the server wrote meanwhile.

    An exit without decisive words is permanent only for a server that never started in this process: one that has
    served before and exits on a restart is a crash to retry with backoff (its configuration was fine)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    stderr = _last_lines(tail.text(), 600) if tail is not None else ""
    garbage = " / ".join(tail.garbage) if tail is not None else ""
    if isinstance(exc, FileNotFoundError | PermissionError | NotADirectoryError) and exc.filename is not None:
        what = "the command was not found" if isinstance(exc, FileNotFoundError) else "the command cannot be run"
        said = f"{exc.strerror or type(exc).__name__}: {exc.filename}"
        return StartFailure(PermanentExecutionError, True, what, said)
    if isinstance(exc, MCPError) and exc.code != -32000:  # an answer to initialize (-32000: the connection closed)
        words = exc.message + (f" / {stderr}" if stderr else "")
        return _by_words(words, "it answered initialize with an error", permanent_by_default=True)
    if isinstance(exc, TimeoutError):
        if garbage:
            what = "it wrote text that is not JSON-RPC on stdout and never answered initialize"
            return StartFailure(MalformedResponse, True, what, garbage + (f" / {stderr}" if stderr else ""))
        return StartFailure(ConnectFailure, False, "it did not answer initialize in time", stderr or None)
    if isinstance(exc, ExitedAfterStart):
        return exc.failure
    if _ended(exc):
        if garbage and not stderr:
            what = "it wrote text that is not JSON-RPC on stdout and exited"
            return StartFailure(MalformedResponse, True, what, garbage)
        return _by_words(stderr, "it exited before answering initialize", permanent_by_default=not served_before)
    words = f"{type(exc).__name__}: {exc}" + (f" / {stderr}" if stderr else "")
    return _by_words(words, "it could not be connected", permanent_by_default=False)


class ExitedAfterStart(Exception):
    """A server answered ``initialize``, then exited with words that say it cannot work (``exited_for_good``):
    ``failure`` is the verdict read from them."""

    def __init__(self, failure: StartFailure) -> None:
        super().__init__(failure.summary())
        self.failure = failure


def exited_for_good(tail: StderrTail | None) -> ExitedAfterStart | None:
    """The failure of a server that exited after a good start, when its last words on stderr decide a permanent
    cause (authentication, permission...); ``None`` for a crash to restart (no words, or words of a passing fault)."""
    stderr = _last_lines(tail.text(), 600) if tail is not None else ""
    if not stderr:
        return None
    failure = _by_words(stderr, "it exited after answering initialize", permanent_by_default=False)
    return ExitedAfterStart(failure) if failure.permanent else None


def _ended(exc: BaseException) -> bool:
    if isinstance(exc, MCPError):
        return exc.code == -32000
    return isinstance(exc, anyio.EndOfStream | anyio.ClosedResourceError | anyio.BrokenResourceError | EOFError)


def _by_words(words: str, what: str, *, permanent_by_default: bool) -> StartFailure:
    """The verdict the server's words support: the shared vocabularies first (``vocab``: SQLSTATE, Redis, errno,
    HTTP, ...), then the start-up phrasings below; otherwise ``permanent_by_default``."""
    said = words or None
    reading = vocab.read(words) if words else None
    if reading is not None:
        rule = reading.rule
        if issubclass(rule.fault, Unauthenticated):
            return StartFailure(Unauthenticated, True, what + ": authentication failed", said)
        if rule.transient:
            return StartFailure(ConnectFailure, False, what, said)
        if issubclass(rule.fault, PermissionDenied):
            return StartFailure(PermissionDenied, True, what + ": permission denied", said)
    lowered = words.lower()
    if _has(lowered, _AUTH):
        return StartFailure(Unauthenticated, True, what + ": authentication failed", said)
    if _has(lowered, _LATER):
        return StartFailure(ConnectFailure, False, what, said)
    if _has(lowered, _DENIED):
        return StartFailure(PermissionDenied, True, what + ": permission denied", said)
    return StartFailure(PermanentExecutionError, permanent_by_default, what, said)
