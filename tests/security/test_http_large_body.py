"""Issue 10.6 (HTTP part): a 3.6 MB body of 200,000 keys no longer stalls every session.

Before: the SDK parsed it and the chain walked it on the event loop (every other session waited 1-2 s, the call
was then refused as malformed anyway). Now its JSON items (strings and keys, numbers, literals, objects, arrays) are
counted first (a cheap bound, then token by token in a worker thread): past ``listen.max_json_items`` (default
100,000) it is refused with 413 and a short -32600 error before the SDK parses it. (How long other sessions wait is
measured by ``benchmarks/soak.py --body-stall``, not here.)
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.helpers import http_proxy
from tests.security.http_proxy import RawSession


def _call(arguments: dict[str, object], request_id: int = 7) -> bytes:
    message = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "echo", "arguments": arguments},
    }
    return json.dumps(message).encode()


def test_a_body_with_200000_keys_is_refused_unparsed_while_other_sessions_go_on(tmp_path: Path) -> None:
    with http_proxy(tmp_path) as proxy:
        attacker, bystander = RawSession(proxy).initialize(), RawSession(proxy).initialize()
        body = _call({f"k{i}": i for i in range(200_000)})
        assert len(body) > 3_500_000
        reply = attacker.send("POST", body)
        assert reply.status == 413, (reply.status, reply.text[:300])
        error = reply.message()["error"]
        assert error["code"] == -32600 and "listen.max_json_items" in error["message"], error
        assert len(reply.text) < 300
        assert bystander.call_tool("echo", {"text": "unaffected"}).message()["result"]["content"][0]["text"] == (
            "unaffected"
        )
        assert attacker.call_tool("echo", {"text": "still open"}).status == 200


def test_a_large_body_of_few_items_passes_and_the_limit_is_configurable(tmp_path: Path) -> None:
    with http_proxy(tmp_path, listen={"max_json_items": 1_000}) as proxy:
        session = RawSession(proxy).initialize()
        text = "y," * 100_000  # 200 KB with 100,000 commas, but a single JSON item
        ok = session.send("POST", _call({"text": text}))
        assert ok.status == 200 and ok.message()["result"]["content"][0]["text"].startswith("y," * 500)
        many = session.send("POST", _call({"text": "z", "extra": list(range(2_000))}))  # 2,014 items
        assert many.status == 413 and "more than 1000 JSON items" in many.message()["error"]["message"]
        bad = session.send("POST", b'{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": ' + b" " * 70_000)
        assert bad.status == 400 and bad.message()["error"]["code"] == -32700
