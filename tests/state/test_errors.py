"""The state boundary's one exception seam (``resilient_mcp/state/errors.py``): each backend exception it maps, and
what passes through unchanged."""

from __future__ import annotations

import errno
import re
import sqlite3
from pathlib import Path

import pytest
from redis.exceptions import AuthenticationError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from resilient_mcp.faults import StateUnavailableFault
from resilient_mcp.state import StateError, StateUnavailable
from resilient_mcp.state.errors import state_errors, state_fault, to_state_error
from resilient_mcp.state.sqlite import StateStore

WHERE = "/state/state.sqlite3"
REDIS = "redis://127.0.0.1:6390/0"


def test_a_database_sqlite_cannot_read_is_unusable_with_what_to_do() -> None:
    with (
        pytest.raises(StateError, match=re.escape(f"cannot use the state database {WHERE}: file is not")) as e,
        state_errors(WHERE),
    ):
        raise sqlite3.DatabaseError("file is not a database")
    assert "Move that file aside" in str(e.value) and isinstance(e.value.__cause__, sqlite3.DatabaseError)


def test_a_database_error_while_doing_something_named_says_so() -> None:
    mapped = to_state_error(sqlite3.OperationalError("disk I/O error"), WHERE, doing="read the state database")
    assert isinstance(mapped, StateError) and str(mapped) == f"cannot read the state database {WHERE}: disk I/O error"


def test_a_file_error_names_the_file_its_strerror_and_the_hint() -> None:
    exc = PermissionError(errno.EACCES, "Permission denied")
    mapped = to_state_error(exc, "/state/secret.key", doing="create", hint="; check the state directory's owner")
    assert str(mapped) == "cannot create /state/secret.key: Permission denied; check the state directory's owner"


def test_a_state_error_raised_below_the_seam_passes_unchanged() -> None:
    own = StateError("the state database has schema version 9")
    with pytest.raises(StateError) as e, state_errors(WHERE):
        raise own
    assert e.value is own


def test_anything_else_passes_unchanged() -> None:
    with pytest.raises(KeyError), state_errors(WHERE):
        raise KeyError("a bug")


@pytest.mark.parametrize("exc", [RedisConnectionError("refused"), RedisTimeoutError("slow"), OSError("reset")])
def test_redis_down_is_unavailable_for_an_open_store_and_cannot_reach_while_opening(exc: Exception) -> None:
    running = to_state_error(exc, REDIS, redis=True)
    assert isinstance(running, StateUnavailable), running
    assert str(running).startswith("the shared state (Redis) is unavailable")
    opening = to_state_error(exc, REDIS, redis=True, opening=True)
    assert type(opening) is StateError and str(opening).startswith(f"cannot reach Redis at {REDIS}")


def test_an_os_error_is_a_files_not_redis_being_down_unless_the_block_talks_to_redis() -> None:
    assert type(to_state_error(OSError("no space"), WHERE, doing="create")) is StateError


def test_redis_refusing_the_credentials_names_them() -> None:
    mapped = to_state_error(AuthenticationError("invalid password"), REDIS, redis=True, opening=True)
    assert type(mapped) is StateError and "refused to authenticate" in str(mapped)
    assert "state.password" in str(mapped)


def test_another_redis_error_is_a_refusal() -> None:
    mapped = to_state_error(ResponseError("NOPERM"), REDIS, redis=True)
    assert type(mapped) is StateError and str(mapped).startswith(f"Redis at {REDIS} refused: NOPERM")


def test_an_unavailable_state_is_a_state_unavailable_fault_for_the_call() -> None:
    fault = state_fault(StateUnavailable("the shared state (Redis) is unavailable: refused"))
    assert isinstance(fault, StateUnavailableFault)
    assert fault.details["state_error"] == "the shared state (Redis) is unavailable: refused"
    assert fault.is_transient


@pytest.mark.anyio
async def test_a_file_that_is_not_a_database_fails_to_open_through_the_seam(tmp_path: Path) -> None:
    (tmp_path / "state.sqlite3").write_bytes(b"not a database at all" * 100)
    with pytest.raises(StateError, match="cannot use the state database") as e:
        await StateStore.open(tmp_path)
    assert isinstance(e.value.__cause__, sqlite3.DatabaseError)
