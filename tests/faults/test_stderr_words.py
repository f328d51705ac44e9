"""The text rules of ``resilient_mcp/faults/stderr_words.py``: what a wordless error result is, and which line of what
an upstream wrote on stderr holds the tool's own exception (the pairing over a real subprocess:
``tests/upstream/test_stderr_words.py``)."""

from __future__ import annotations

import mcp_types as types
import pytest

from resilient_mcp.faults.classify import classify_result
from resilient_mcp.faults.stderr_words import STDERR_META_KEY, exception_words, wordless, wrapper_seen


def test_an_upstreams_own_stderr_key_is_not_taken_for_the_connections() -> None:
    # an HTTP upstream (no stderr) that puts the key in its own _meta is not believed: classify_result reads it only
    # as the connection wrote it, and the connection replaces it (tested above); here, the reading is bounded
    meta = {STDERR_META_KEY: {"words": "x" * 5000}}
    result = types.CallToolResult(content=[types.TextContent(text="Error executing tool t")], is_error=True, _meta=meta)
    fault = classify_result(result, tool=None)
    assert fault is not None and len(fault.details["stderr_words"]) <= 400


@pytest.mark.parametrize(
    ("text", "is_wordless"),
    [
        ("Error executing tool start_container", True),
        ("Error executing tool outer: Error executing tool inner", True),
        ("Error executing tool fetch: ", True),
        ("", True),
        ("Error calling tool 'query'", True),  # FastMCP's masked error
        ("Error executing tool fetch: Failed to fetch http://x/ - status code 500", False),
        ("No such container: web-9", False),
    ],
)
def test_what_counts_as_wordless(text: str, is_wordless: bool) -> None:
    assert wordless(text) is is_wordless


PLAIN = """Tool 'start_container' raised an unexpected exception
Traceback (most recent call last):
  File "/srv/docker/api/client.py", line 275, in _raise_for_status
    response.raise_for_status()
requests.exceptions.HTTPError: 404 Client Error: Not Found for url: http://127.0.0.1:2375/v1.47/containers/web-9/start

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/srv/server.py", line 40, in start_container
docker.errors.NotFound: 404 Client Error for http://docker/containers/web-9: Not Found ("No such container: web-9")

The above exception was the direct cause of the following exception:

Traceback (most recent call last):
  File "/srv/mcp/server/mcpserver/tools/base.py", line 161, in run
mcp.server.mcpserver.exceptions.UnexpectedToolError: Error executing tool start_container
"""

RICH = """[12/02/26 11:00:00] ERROR    Tool 'pull_image' raised an unexpected       server.py:455
                             exception
╭───────────────────── Traceback (most recent call last) ──────────────────────╮
│ /srv/server.py:40 in pull_image                                              │
╰──────────────────────────────────────────────────────────────────────────────╯
APIError: 500 Server Error for http://127.0.0.1:2375/v1.47/images/create: Internal
Server Error ("Get https://registry-1.docker.io/v2/: dial tcp: lookup
registry-1.docker.io: Temporary failure in name resolution")

The above exception was the direct cause of the following exception:

╭───────────────────── Traceback (most recent call last) ──────────────────────╮
│ /srv/mcp/server/mcpserver/tools/base.py:161 in run                           │
╰──────────────────────────────────────────────────────────────────────────────╯
UnexpectedToolError: Error executing tool pull_image
"""

NODE = """Error: connect ECONNREFUSED 127.0.0.1:11211
    at TCPConnectWrap.afterConnect [as oncomplete] (node:net:1555:16) {
  errno: -111,
  code: 'ECONNREFUSED',
}
"""


def test_the_tools_own_exception_line_of_a_chained_python_traceback() -> None:
    words = exception_words(PLAIN)
    assert words is not None and words.startswith("docker.errors.NotFound: 404 Client Error")
    assert "No such container: web-9" in words


def test_a_line_the_console_wrapped_is_joined() -> None:
    words = exception_words(RICH)
    assert words is not None and words.startswith("APIError: 500 Server Error")
    assert "Temporary failure in name resolution" in words


def test_a_node_error_line() -> None:
    assert exception_words(NODE) == "Error: connect ECONNREFUSED 127.0.0.1:11211"


def test_no_exception_line_is_none() -> None:
    assert exception_words("INFO Processing request of type CallToolRequest\n") is None
    assert exception_words("mcp.server.mcpserver.exceptions.UnexpectedToolError: Error executing tool x\n") is None


RICH_LOG_COLUMN = """[12/02/26 11:37:01] ERROR    Tool 'cache_get' raised an unexpected server.py:455
                             exception
                             ╭─ Traceback (most recent call last─╮
                             │ /srv/memcached_mcp_server/tools/  │
                             │ cache.py:36 in cache_get          │
                             ╰───────────────────────────────────╯
                             ConnectionRefusedError: [Errno 111]
                             Connection refused

                             The above exception was the direct
                             cause of the following exception:

                             ╭─ Traceback (most recent call last─╮
                             │ /srv/mcp/server/mcpserver/tools/  │
                             │ base.py:213 in run                │
                             ╰───────────────────────────────────╯
                             UnexpectedToolError: Error executing
                             tool cache_get
"""


def test_a_traceback_rich_wrapped_inside_a_log_column() -> None:
    # rich's log handler renders the traceback in the message column (indented, wrapped at its width): the SDK's
    # wrapper is wrapped too, and is still the wrapper
    assert exception_words(RICH_LOG_COLUMN) == "ConnectionRefusedError: [Errno 111] Connection refused"
    assert wrapper_seen(RICH_LOG_COLUMN, "cache_get")
