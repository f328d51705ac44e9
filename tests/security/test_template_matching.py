"""Issue 20.1: matching a ``resources/read`` URI against upstream templates costs time linear in the URI.

Before: each ``{var}`` became a lazy ``(.+?)`` under ``re.fullmatch``, so a URI that almost matches cost
length^(variables): ``repo://{owner}/{repo}/{path}/raw`` against ``'repo://' + 'a/'*800 + 'b'`` (1.6 KB) took 16 s
on the event loop, and every other session (another token's echo, ``/healthz``) waited as long; ten adjacent
variables took 3 s on 28 characters. Now the literal runs of a template are found left to right with ``str.find``
(no regex, no backtracking) and a URI is at most ``MAX_URI_CHARS`` long.

Costs are CPU time of this thread, compared with a benign URI of the same length in the same run (a ratio, never a
wall-clock bound).
"""

from __future__ import annotations

import contextlib
import functools
import random
import secrets
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.shared.uri_template import InvalidUriTemplate, UriTemplate

from resilient_mcp.proxy.catalog import MAX_URI_CHARS, template_matches
from tests.helpers import RunningProxy, child_env, free_port, proxy_argv, running, wait_healthy, write_yaml
from tests.security.cpu import cpu_cost
from tests.security.http_proxy import RawSession

pytestmark = pytest.mark.anyio

UPSTREAM = Path(__file__).with_name("catalog_upstream.py")
REPO_TEMPLATE = "repo://{owner}/{repo}/{path}/raw"
TEN_ADJACENT = "x://{a}{b}{c}{d}{e}{f}{g}{h}{i}{j}/end"
RATIO = 25.0
"""How many times the benign URI's cost a hostile URI of the same length may take (linear: about 1)."""


def _benign(head: str, after_scheme: int, tail: str) -> str:
    """A URI that matches, as long as the hostile one (``after_scheme`` characters after its scheme's ``://``)."""
    scheme = head[: head.index("://") + 3]
    return head + "a" * (len(scheme) + after_scheme - len(head) - len(tail)) + tail


@pytest.mark.parametrize(
    ("template", "hostile", "benign"),
    [
        (REPO_TEMPLATE, "repo://" + "a/" * 200 + "b", _benign("repo://o/r/", 401, "/raw")),
        (REPO_TEMPLATE, "repo://" + "a/" * 800 + "b", _benign("repo://o/r/", 1601, "/raw")),
        (TEN_ADJACENT, "x://" + "a" * 28, _benign("x://", 28, "/end")),
        (TEN_ADJACENT, "x://" + "a" * 2000, _benign("x://", 2000, "/end")),
    ],
    ids=["repo-400", "repo-1600", "adjacent-28", "adjacent-2000"],
)
def test_a_hostile_uri_costs_what_a_benign_one_of_its_length_costs(template: str, hostile: str, benign: str) -> None:
    assert len(hostile) == len(benign)
    assert template_matches(template, benign)
    assert not template_matches(template, hostile)
    benign_s = cpu_cost(lambda: template_matches(template, benign))
    hostile_s = cpu_cost(lambda: template_matches(template, hostile), stop_above=RATIO * benign_s)
    assert hostile_s <= RATIO * benign_s, f"hostile {hostile_s:.6f} s vs benign {benign_s:.6f} s (CPU)"


def test_the_cost_grows_linearly_with_the_uri() -> None:
    """Ten times the URI costs at most ~ten times as much (backtracking: 100 times here, 10^variables at worst)."""
    short = "repo://" + "a/" * 400 + "b/raw"
    long = "repo://" + "a/" * 4000 + "b/raw"
    template = "repo://{owner}/{repo}~{path}/raw"  # "~" is never found: searched to the end of the URI
    assert not template_matches(template, short) and not template_matches(template, long)
    short_s = cpu_cost(lambda: template_matches(template, short))
    long_s = cpu_cost(lambda: template_matches(template, long), stop_above=30 * short_s)
    assert long_s <= 3 * 10 * short_s, f"10x the URI cost {long_s / short_s:.1f}x"


@pytest.mark.parametrize(
    ("template", "uri", "expected"),
    [
        (REPO_TEMPLATE, "repo://acme/tools/src/main.py/raw", True),
        (REPO_TEMPLATE, "repo://acme/tools/raw", False),  # {path} needs a character of its own
        (REPO_TEMPLATE, "repo://acme/tools/src/raw/more", False),  # the last literal ends the URI
        ("file:///{path}", "file:///", False),
        ("file:///{path}", "file:///a/b/c.txt", True),
        ("logs://{service}{?since,level}", "logs://api", True),  # a query expression may be absent
        ("logs://{service}{?since,level}", "logs://api?level=error", True),
        ("docs://{+path}{.ext}", "docs://a/b.md", True),
        ("prefix-{id}", "prefix-prefix-123", True),
        ("a{b", "a{b", True),  # an unclosed brace is a literal
        ("a{b", "ab", False),
        ("static://one", "static://one", True),
        ("static://one", "static://two", False),
        ("x://{a}{b}{c}", "x://ab", False),  # three simple expressions take three characters
        ("x://{a}{b}{c}", "x://abc", True),
    ],
)
def test_routing_matches_as_before_without_a_regex(template: str, uri: str, expected: bool) -> None:
    assert template_matches(template, uri) is expected


def test_a_uri_past_the_cap_never_matches() -> None:
    assert template_matches("big://{x}", "big://" + "a" * 100)
    assert not template_matches("big://{x}", "big://" + "a" * MAX_URI_CHARS)


_OPERATORS = ["", "+", "#", ".", "/", ";", "?", "&"]


def _random_case(rng: random.Random) -> tuple[str, dict[str, str]]:
    """A template of RFC 6570 levels 1-3 (1-4 expressions between random literals) and a value per variable."""
    parts: list[str] = [rng.choice(["repo://", "file:///", "x:"])]
    values: dict[str, str] = {}
    for index in range(rng.randint(1, 4)):
        name = "".join(rng.choices("abcxyz_", k=rng.randint(1, 6))) + str(index)
        values[name] = "".join(rng.choices("abcxyz019-_~", k=rng.randint(1, 8)))
        parts.append(f"{{{rng.choice(_OPERATORS)}{name}}}")
        parts.append("".join(rng.choices("abc/:.-_~xy", k=rng.randint(0, 6))))
    return "".join(parts), values


def test_every_uri_the_sdk_expands_and_matches_is_routed() -> None:
    """The SDK's reading of RFC 6570 levels 1-3 (``mcp.shared.uri_template``): whatever it expands from a template,
    and matches back, the proxy routes to that template's upstream (2,000 seeded random templates)."""
    rng = random.Random(20)
    checked = 0
    for _ in range(2000):
        template, values = _random_case(rng)
        try:
            parsed = UriTemplate.parse(template)
        except InvalidUriTemplate:  # a template the SDK refuses (adjacent variables): routed by its literals alone
            continue
        uri = parsed.expand(values)
        if parsed.match(uri) is not None:
            checked += 1
            assert template_matches(template, uri), (template, uri)
    assert checked >= 500, checked


# --- through the real HTTP listener, two tokens ---------------------------------------------------------------------


@contextlib.contextmanager
def _proxy(tmp_path: Path, tokens: tuple[str, str]) -> Iterator[RunningProxy]:
    port = free_port()
    upstream = [str(UPSTREAM), "--template", REPO_TEMPLATE, "--template", TEN_ADJACENT]
    config: dict[str, Any] = {
        "upstreams": {"repo": {"command": sys.executable, "args": upstream}},
        "listen": {"auth_tokens": ["${TOKEN_A}", "${TOKEN_B}"]},
    }
    path = write_yaml(tmp_path / "config.yaml", config)
    stderr = tmp_path / "proxy.stderr"
    env = child_env(tmp_path / "state", TOKEN_A=tokens[0], TOKEN_B=tokens[1])
    argv = proxy_argv("serve", "--config", str(path), "--http", f"127.0.0.1:{port}")
    with running(argv, stderr, env=env) as process:
        proxy = RunningProxy("127.0.0.1", port, process, stderr)
        wait_healthy(proxy.base, process, stderr)
        yield proxy


async def test_a_hostile_read_does_not_hold_up_another_tokens_session(tmp_path: Path) -> None:
    """Alice reads a hostile URI; the upstream holds that read until an echo has been answered, so Bob's echo runs
    while Alice's read is in flight. Before, the proxy spent minutes matching the URI on its event loop: Bob's echo
    (and the read) never came within the bound."""
    a, b = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
    hostile = "repo://" + "a/" * 2000 + "b"
    with _proxy(tmp_path, (a, b)) as proxy:
        alice = RawSession(proxy, a).initialize()
        bob = RawSession(proxy, b).initialize()
        order: list[str] = []
        read_done = threading.Event()
        read: dict[str, Any] = {}

        def read_hostile() -> None:
            read.update(alice.request("resources/read", {"uri": hostile}).message())
            order.append("read")
            read_done.set()

        with anyio.fail_after(60):
            async with anyio.create_task_group() as tg:
                tg.start_soon(functools.partial(anyio.to_thread.run_sync, read_hostile, abandon_on_cancel=True))
                echoes = 0
                while not read_done.is_set():  # the read may reach the upstream after an echo: echo again
                    echoes += 1
                    echo = functools.partial(bob.call_tool, "echo", {"text": f"bob {echoes}"})
                    reply = await anyio.to_thread.run_sync(echo, abandon_on_cancel=True)
                    assert reply.message()["result"]["content"][0]["text"] == f"bob {echoes}"
                    order.append("echo")
                    await anyio.to_thread.run_sync(read_done.wait, 0.5, abandon_on_cancel=True)
        # The upstream answers the read only after an echo it received while holding it: the answer proves that
        # one of Bob's echoes ran through the proxy while Alice's read was in flight.
        assert read["result"]["contents"][0]["text"] == str(len(hostile)), read  # the upstream got it whole
        assert order.count("echo") >= 1 and order.count("read") == 1, order

        too_long = "repo://" + "a" * MAX_URI_CHARS
        refused = alice.request("resources/read", {"uri": too_long}).message()
        assert "error" in refused, refused
        assert f"at most {MAX_URI_CHARS:,}" in refused["error"]["message"], refused
