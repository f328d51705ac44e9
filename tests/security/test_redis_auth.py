"""Issue 20.15: a Redis that refuses the proxy's credentials is reported as an authentication failure.

Before: redis-py raises ``AuthenticationError``, a subclass of its ``ConnectionError``, so a wrong or missing password
read "cannot reach Redis ... check state.url and that Redis is running", sending the operator to look for a Redis
that was up. Now it says Redis refused to authenticate and names the settings to check. A real ``redis-server`` with
``requirepass``.
"""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from resilient_mcp.policy.config import StateConfig
from resilient_mcp.state import StateError
from resilient_mcp.state.redis import RedisStateStore
from tests.helpers import free_port, wait_until
from tests.redis_server import REDIS_SERVER, needs_redis

pytestmark = [pytest.mark.anyio, needs_redis()]


@pytest.fixture
def guarded_redis(tmp_path: Path) -> Iterator[tuple[int, str]]:
    """A redis-server on a free loopback port that requires a password; stopped by its pid."""
    assert REDIS_SERVER is not None
    port, password = free_port(), secrets.token_hex(8)
    log = tmp_path / "redis.log"
    argv = [REDIS_SERVER, "--bind", "127.0.0.1", "--port", str(port), "--save", "", "--appendonly", "no"]
    argv += ["--dir", str(tmp_path), "--logfile", str(log), "--requirepass", password]
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, cwd=tmp_path)
    try:
        wait_until(
            lambda: log.exists() and "Ready to accept connections" in log.read_text(errors="replace"),
            30,
            "redis-server ready",
            process=process,
            stderr=log,
        )
        yield port, password
    finally:
        process.kill()
        process.wait(timeout=30)


@pytest.mark.parametrize("password", ["wrong-password", None], ids=["wrong", "missing"])
async def test_refused_credentials_are_an_authentication_error_not_an_unreachable_redis(
    guarded_redis: tuple[int, str], password: str | None
) -> None:
    port, _ = guarded_redis
    config = StateConfig(
        backend="redis",
        url=f"redis://127.0.0.1:{port}/0",
        password=password,
        connect_timeout_s=5.0,
        command_timeout_s=5.0,
    )
    with pytest.raises(StateError) as refused:
        await RedisStateStore.open(config)
    message = str(refused.value)
    assert "refused to authenticate" in message and "state.password" in message, message
    assert "cannot reach" not in message and "is running" not in message, message
    assert "wrong-password" not in message  # the password itself is never repeated


async def test_the_right_password_opens_the_store(guarded_redis: tuple[int, str]) -> None:
    port, password = guarded_redis
    config = StateConfig(backend="redis", url=f"redis://127.0.0.1:{port}/0", password=password)
    store = await RedisStateStore.open(config)
    await store.aclose()
