"""A real ``redis-server`` for the shared-state tests: started on a free loopback port in a temporary directory with
persistence off (``--save '' --appendonly no``), stopped by its pid. CI installs Debian's ``redis-server``
(``.ci/run``); elsewhere the tests are skipped with that reason when the binary is missing (never in CI)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.helpers import free_port, wait_until

REDIS_SERVER = shutil.which("redis-server")


def needs_redis() -> pytest.MarkDecorator:
    missing = REDIS_SERVER is None and not os.environ.get("CI")
    return pytest.mark.skipif(missing, reason="redis-server missing: apt-get install -y redis-server (.ci/run does)")


class RedisServer:
    def __init__(self, directory: Path, port: int | None = None) -> None:
        self.directory = directory
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        assert REDIS_SERVER is not None, "redis-server is not installed (apt-get install -y redis-server)"
        self.directory.mkdir(parents=True, exist_ok=True)
        log = self.directory / "redis.log"
        argv = [REDIS_SERVER, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no"]
        argv += ["--dir", str(self.directory), "--logfile", str(log), "--protected-mode", "no"]
        self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, cwd=self.directory)
        wait_until(
            lambda: log.exists() and "Ready to accept connections" in log.read_text(errors="replace"),
            30,
            "redis-server ready",
            process=self.process,
            stderr=log,
        )

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        process.kill()  # by its own pid
        process.wait(timeout=30)
        log = self.directory / "redis.log"
        if log.exists():
            log.rename(self.directory / f"redis.{process.pid}.log")


@contextmanager
def redis_server(directory: Path) -> Iterator[RedisServer]:
    server = RedisServer(directory)
    server.start()
    try:
        yield server
    finally:
        server.stop()
