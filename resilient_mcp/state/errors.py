"""The state boundary's one exception seam: what SQLite, the file system or Redis raise becomes a state error here.

After httpx's ``map_httpcore_exceptions``, as ``upstream/errors.py`` is for upstreams: the code that talks to a
backend runs inside ``state_errors(where, ...)``, and nothing above the store sees a ``sqlite3``, ``OSError`` or
redis-py exception. ``to_state_error`` is the mapping itself, pure:

    a StateError (StateUnavailable included)     unchanged (raised below the seam on purpose: a newer schema...)
    sqlite3.DatabaseError                        StateError: the database is unusable (``unusable``), or, with
                                                 ``doing``, cannot do that to ``where``
    Redis refused to authenticate                StateError naming the credentials to check
    Redis or its socket (an OSError while the    StateUnavailable (an open store: the call decides what to do), or
    block talks to Redis) down, timed out        StateError "cannot reach" while ``opening``
    any other Redis error                        StateError: Redis refused
    OSError (a file, a directory)                StateError: cannot ``doing`` ``where`` (its strerror) + ``hint``

Above the store, a call meets the fault tree: ``state_fault`` is the fault (``STATE_UNAVAILABLE``) of a write that
could not be claimed because the shared state was unavailable.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from ..faults import StateUnavailableFault

_redis: ModuleType | None
try:  # redis-py is an optional extra: without it no Redis error can reach the seam
    import redis.exceptions as _redis
except ImportError:  # pragma: no cover - the test environment has it
    _redis = None


class StateError(RuntimeError):
    """The state directory cannot be used (a newer schema, not a database, a closed store)."""


class StateUnavailable(StateError):
    """A shared state backend (Redis) cannot be reached, or did not answer within its timeout."""


def unusable(where: Path | str, exc: sqlite3.DatabaseError) -> StateError:
    """The one-line error for a state database SQLite cannot read (not a database, or damaged inside)."""
    return StateError(
        f"cannot use the state database {where}: {exc}. Move that file aside (or delete it: stored results, "
        "idempotency records and the audit trail in it are lost), or give another --state-dir"
    )


def to_state_error(
    exc: BaseException,
    where: Path | str,
    *,
    doing: str | None = None,
    hint: str = "",
    redis: bool = False,
    opening: bool = False,
) -> BaseException:
    """The state error ``exc`` means (the module docstring's table); an exception of none of those kinds (a bug,
    cancellation) is returned as it is."""
    if isinstance(exc, StateError):
        return exc
    if isinstance(exc, sqlite3.DatabaseError):
        return unusable(where, exc) if doing is None else StateError(f"cannot {doing} {where}: {exc}{hint}")
    if _redis is not None and isinstance(exc, _redis.AuthenticationError):  # a ConnectionError to redis-py
        return StateError(
            f"Redis at {where} refused to authenticate: {exc}; check state.username and state.password (or the "
            "credentials in state.url)"
        )
    if _down(exc, redis):
        if opening:
            return StateError(f"cannot reach Redis at {where}: {exc}; check state.url and that Redis is running")
        return StateUnavailable(f"the shared state (Redis) is unavailable: {exc}")
    if _redis is not None and isinstance(exc, _redis.RedisError):
        return StateError(f"Redis at {where} refused: {exc}; check state.username/password")
    if isinstance(exc, OSError):
        return StateError(f"cannot {doing or 'use'} {where}: {exc.strerror or exc}{hint}")
    return exc


def _down(exc: BaseException, redis: bool) -> bool:
    """Redis, or the socket to it (any ``OSError`` while the block talks to Redis), is down or timed out."""
    if _redis is not None and isinstance(exc, _redis.ConnectionError | _redis.TimeoutError):
        return True
    return redis and isinstance(exc, OSError)


@contextmanager
def state_errors(
    where: Path | str, *, doing: str | None = None, hint: str = "", redis: bool = False, opening: bool = False
) -> Iterator[None]:
    """The seam: everything the block raises that a backend raises becomes a ``StateError`` (or
    ``StateUnavailable``); anything else (a bug, cancellation) passes unchanged. ``where``: the file or the
    (redacted) Redis URL the words name; ``doing``: what was being done to a file; ``opening``: a Redis store that
    is not open yet (down: it cannot be opened, not "unavailable"); ``redis``: the block talks to Redis, so an
    ``OSError`` is its socket's (down), not a file's."""
    try:
        yield
    except Exception as exc:
        mapped = to_state_error(exc, where, doing=doing, hint=hint, redis=redis, opening=opening)
        if mapped is exc:
            raise
        raise mapped from exc


def state_fault(exc: StateUnavailable) -> StateUnavailableFault:
    """A write that needs an idempotency claim, not sent because the shared state was unavailable."""
    return StateUnavailableFault.of("unclaimed_write", suggest="retry_later", details={"state_error": str(exc)})
