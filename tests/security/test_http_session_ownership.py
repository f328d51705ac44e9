"""Issue 10.4: an MCP session and the outputs it stores belong to the bearer token and the host session.

Before: token B could call on and DELETE token A's session (the listener checked only that *a* token was sent), and
any session that learned a stored-output handle could read it, with ``read_stored_output`` or as the resource
``resilient-mcp://outputs/{handle}``. Now a session answers only to the token that opened it (any other gets 404,
as for an unknown session), and a handle reads as unknown outside the session (and token) that stored it.
"""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

import pytest

from resilient_mcp.state.sqlite import StateStore
from resilient_mcp.state.stored_outputs import OUTPUT_URI_PREFIX, StoredOutputMissing, StoredOutputs
from tests.helpers import http_proxy
from tests.security.http_proxy import RawSession, Reply

pytestmark = pytest.mark.anyio

TRUNCATED = "io.github.resilient-mcp/truncated"
BIG = 150_000  # over the default output cap (100,000 bytes): the rest is stored under a handle


def _tokens() -> tuple[str, str]:
    return secrets.token_urlsafe(16), secrets.token_urlsafe(16)


def _with_two_tokens(tmp_path: Path, stateless: bool = False) -> Any:
    a, b = _tokens()
    listen = {"auth_tokens": ["${TOKEN_A}", "${TOKEN_B}"], "stateless": stateless}
    return http_proxy(tmp_path, listen=listen, env={"TOKEN_A": a, "TOKEN_B": b}), a, b


def _text(reply: Reply) -> str:
    message = reply.message()
    assert "result" in message, message
    return "".join(c["text"] for c in message["result"]["content"] if c["type"] == "text")


def _stored_handle(session: RawSession) -> str:
    reply = session.call_tool("echo", {"text": "x" * BIG})
    assert reply.status == 200, (reply.status, reply.text[:300])
    facts = reply.message()["result"]["_meta"][TRUNCATED]
    assert facts["handle"], facts
    return str(facts["handle"])


def _read_page(session: RawSession, handle: str) -> Reply:
    return session.call_tool("read_stored_output", {"handle": handle, "length": 1_000_000})


def _read_resource(session: RawSession, handle: str) -> Reply:
    return session.request("resources/read", {"uri": f"{OUTPUT_URI_PREFIX}{handle}"})


def test_token_b_can_neither_call_on_nor_delete_token_a_session(tmp_path: Path) -> None:
    proxy_cm, a, b = _with_two_tokens(tmp_path)
    with proxy_cm as proxy:
        alice = RawSession(proxy, a).initialize()
        assert alice.session_id
        mallory = RawSession(proxy, b)

        hijack = mallory.call_tool("echo", {"text": "as alice"}, session_id=alice.session_id)
        assert hijack.status == 404, (hijack.status, hijack.text[:300])
        assert "as alice" not in hijack.text

        deleted = mallory.send("DELETE", session_id=alice.session_id)
        assert deleted.status == 404, (deleted.status, deleted.text[:300])

        # Alice's session is intact and still hers.
        assert _text(alice.call_tool("echo", {"text": "still mine"})) == "still mine"
        assert alice.send("DELETE").status == 200
        assert alice.call_tool("echo", {"text": "gone"}).status == 404


def test_a_stored_output_handle_reads_only_in_the_session_that_stored_it(tmp_path: Path) -> None:
    proxy_cm, a, b = _with_two_tokens(tmp_path)
    with proxy_cm as proxy:
        alice = RawSession(proxy, a).initialize()
        handle = _stored_handle(alice)

        page = _read_page(alice, handle)
        assert _text(page).startswith("x" * 1000)
        whole = _read_resource(alice, handle).message()
        assert whole["result"]["contents"][0]["text"] == "x" * BIG

        for other in (RawSession(proxy, b).initialize(), RawSession(proxy, a).initialize()):  # other token, same token
            refused = _read_page(other, handle).message()["result"]
            assert refused["isError"] is True
            assert "x" * 100 not in str(refused)
            assert "another session" in refused["content"][0]["text"]
            resource = _read_resource(other, handle).message()
            assert "result" not in resource and resource["error"]["message"].startswith("Resource not found"), resource


def test_stateless_http_binds_stored_outputs_to_the_token(tmp_path: Path) -> None:
    proxy_cm, a, b = _with_two_tokens(tmp_path, stateless=True)
    with proxy_cm as proxy:
        handle = _stored_handle(RawSession(proxy, a))
        assert _text(_read_page(RawSession(proxy, a), handle)).startswith("x" * 1000)  # another request, same token
        refused = _read_page(RawSession(proxy, b), handle).message()["result"]
        assert refused["isError"] is True and "x" * 100 not in str(refused)
        assert "error" in _read_resource(RawSession(proxy, b), handle).message()


async def test_the_store_finds_an_output_only_for_its_owner(tmp_path: Path) -> None:
    store = await StateStore.open(str(tmp_path / "state"))
    try:
        handle = await store.put_output("t", ["secret text"], '{"content": []}', owner="token-1 session-a")
        assert handle is not None
        outputs = StoredOutputs(store)
        assert (await outputs.read_page(handle, owner="token-1 session-a")).text == "secret text"
        for owner in ("token-2 session-a", "token-1 session-b", ""):
            assert await store.read_output(handle, 0, 100, owner) is None
            assert await store.output_manifest(handle, owner) is None
            with pytest.raises(StoredOutputMissing):
                await outputs.read_stored_output_resource(f"{OUTPUT_URI_PREFIX}{handle}", owner)
            assert (await outputs.call_read_stored_output({"handle": handle}, owner)).is_error
    finally:
        await store.aclose()
