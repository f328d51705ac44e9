"""Issue 10, defect 7: secrets at rest and in logs.

``state.sqlite3`` was created 0644 (world-readable stored results when the folder pre-existed with loose
permissions); the audit's ``arguments_hash`` was an unsalted SHA-256 (``{"pin":"4821"}`` recovered in 17 ms); a
secret in an upstream URL was logged by the SDK and httpx at debug level. Now: every file in the state folder is
0600 whatever the folder, the hash is an HMAC keyed with a per-installation secret kept 0600 beside the database,
and every log line, the libraries' included, has URL credentials and query values replaced by ``***``.
"""

from __future__ import annotations

import hashlib
import hmac
import http.server
import os
import stat
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from resilient_mcp.call.chain import ToolCall
from resilient_mcp.ops.logs import bound
from resilient_mcp.policy import ToolRule
from resilient_mcp.state.sqlite import SECRET_FILE, StateStore
from resilient_mcp.text import canonical_json
from tests.helpers import STARTUP_S, proxy_argv, running, wait_until, write_yaml

pytestmark = pytest.mark.anyio

START_S = STARTUP_S


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _pin_call() -> ToolCall:
    return ToolCall(name="unlock", arguments={"pin": "4821"}, upstream="door", upstream_tool="unlock", rule=ToolRule())


async def test_state_files_are_0600_in_a_folder_that_already_existed_world_readable(tmp_path: Path) -> None:
    folder = tmp_path / "volume"
    folder.mkdir()
    os.chmod(folder, 0o777)
    loose = folder / "state.sqlite3"
    old_umask = os.umask(0)  # the loosest a process can have: files get exactly the mode asked for
    try:
        store = await StateStore.open(folder)
        try:
            handle = await store.put_output("t", ["stored result with a secret argument"], "{}")
            assert handle is not None
            files = sorted(p.name for p in folder.iterdir())
            assert {"state.sqlite3", SECRET_FILE} <= set(files)
            assert {p.name: _mode(p) for p in folder.iterdir() if _mode(p) & 0o077} == {}
        finally:
            await store.aclose()
        os.chmod(loose, 0o644)  # a database left readable by an older version is tightened when opened
        await (await StateStore.open(folder)).aclose()
        assert _mode(loose) == 0o600
    finally:
        os.umask(old_umask)


async def test_the_audit_hash_is_keyed_with_the_installations_own_secret(tmp_path: Path) -> None:
    call = _pin_call()
    plain = hashlib.sha256(canonical_json({"pin": "4821"}).encode()).hexdigest()
    hashes = []
    for name in ("one", "two"):
        store = await StateStore.open(tmp_path / name)
        try:
            hashes.append(store.arguments_hash(call))
            again = await StateStore.open(tmp_path / name)  # the same installation: the same secret
            assert again.arguments_hash(call) == hashes[-1]
            await again.aclose()
        finally:
            await store.aclose()
        secret = bytes.fromhex((tmp_path / name / SECRET_FILE).read_text().strip())
        assert hashes[-1] == hmac.new(secret, canonical_json({"pin": "4821"}).encode(), hashlib.sha256).hexdigest()
        assert _mode(tmp_path / name / SECRET_FILE) == 0o600
    assert plain not in hashes
    assert hashes[0] != hashes[1], "two installations must not share a key"


async def test_idempotency_records_on_disk_carry_no_unkeyed_hash_of_the_arguments(tmp_path: Path) -> None:
    import sqlite3

    import mcp_types as types

    from resilient_mcp.call.chain import fingerprint
    from resilient_mcp.faults import EffectClass
    from resilient_mcp.stages.idempotency import Idempotency, InFlight

    call = ToolCall(
        name="unlock",
        arguments={"pin": "4821"},
        upstream="door",
        upstream_tool="unlock",
        rule=ToolRule(effect=EffectClass.WRITE_UNSAFE),
    )
    store = await StateStore.open(tmp_path)
    try:

        async def upstream(_: ToolCall) -> types.CallToolResult:
            return types.CallToolResult(content=[types.TextContent(type="text", text="open")])

        stage = Idempotency(call.rule, store, InFlight())
        assert not (await stage(call, upstream)).is_error
        await store.flush()
        keyed = store.call_fingerprint(call)
    finally:
        await store.aclose()
    dump = "\n".join(sqlite3.connect(tmp_path / "state.sqlite3").iterdump())
    assert keyed in dump, "the record is stored under the keyed fingerprint"
    assert fingerprint(call) not in dump, "a plain SHA-256 of upstream, tool and arguments is reversible by guessing"
    assert '"pin"' not in dump and "4821" not in dump


def test_log_values_are_capped_and_keep_no_url_secret() -> None:
    line = "POST https://alice:hunter2@mcp.example.com:8443/mcp?token=SEKRET&v=2#x failed"
    assert "SEKRET" not in bound({"url": line * 3000})["url"]
    assert len(bound("x" * 1_000_000)) < 3000


class _Answer404(http.server.BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.send_response(404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST

    def log_message(self, format: str, *args: object) -> None:
        return


@pytest.fixture
def answering_404() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer404)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_no_log_line_of_the_proxy_or_its_libraries_shows_a_url_secret(tmp_path: Path, answering_404: int) -> None:
    url = f"http://alice:hunter2@127.0.0.1:{answering_404}/mcp?token=SEKRET-TOKEN-42"
    config = write_yaml(
        tmp_path / "config.yaml",
        {
            "upstreams": {
                "remote": {"url": url, "connect_timeout_s": 5},
                "local": {"command": sys.executable, "args": [str(Path(__file__).with_name("hostile_upstream.py"))]},
            },
            "state_dir": str(tmp_path / "state"),
        },
    )
    stderr = tmp_path / "proxy.stderr"
    argv = proxy_argv("--log-level", "debug", "--log-format", "json", "serve", "--config", str(config))
    with running(argv, stderr, stdin=subprocess.PIPE, stdout=subprocess.PIPE) as proxy:
        wait_until(
            lambda: b"upstream_start_failed" in stderr.read_bytes(),
            START_S,
            "the remote upstream to fail",
            process=proxy,
            stderr=stderr,
        )
        assert proxy.stdin is not None
        proxy.stdin.close()
        proxy.wait(timeout=START_S)
    logged = stderr.read_text(errors="replace")
    assert f"127.0.0.1:{answering_404}/mcp?token=***" in logged, "the libraries logged the URL (redacted)"
    assert "SEKRET-TOKEN-42" not in logged
    assert "hunter2" not in logged
