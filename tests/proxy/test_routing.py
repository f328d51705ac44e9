"""Who hears what an upstream says or asks during a call: never a host it cannot be attributed to."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from resilient_mcp.policy import Policy
from resilient_mcp.policy.config import ProxyConfig
from resilient_mcp.proxy.pipeline import Pipeline
from resilient_mcp.proxy.proxy import Proxy

pytestmark = pytest.mark.anyio


class _Connection:
    """One host connection (the SDK's ``Connection``): what makes two requests one host session."""


class _Session:
    """The SDK's ``ServerSession`` of one request: an object of its own, weakly referenceable, as it is."""

    def __init__(self, **attrs: Any) -> None:
        self.__dict__.update(attrs)


_CONNECTIONS: dict[str, _Connection] = {}


def _ctx(host: str) -> Any:
    """A request of host ``host``; requests of one host name come on one connection here."""
    info = SimpleNamespace(name=host)
    connection = _CONNECTIONS.setdefault(host, _Connection())
    session = _Session(client_params=SimpleNamespace(client_info=info), can_send_request=True, _connection=connection)
    return SimpleNamespace(request=None, session=session, request_id=1)


def _proxy() -> Proxy:
    config = ProxyConfig.model_validate({"upstreams": {"up": {"command": "x"}}, "state_dir": ":memory:"})
    return Proxy(config, Policy(), Pipeline)


async def test_a_request_during_calls_of_one_host_goes_to_that_host() -> None:
    proxy, a1, a2 = _proxy(), _ctx("A"), _ctx("A")
    async with proxy.in_flight("up", a1), proxy.in_flight("up", a2):
        assert proxy.calls_in_flight("up") == 2
        assert proxy.answering("up") is a2


async def test_two_connections_of_hosts_with_one_name_are_two_hosts() -> None:
    proxy, a = _proxy(), _ctx("A")
    other = SimpleNamespace(**{**vars(a), "session": _Session(**{**vars(a.session), "_connection": _Connection()})})
    async with proxy.in_flight("up", a), proxy.in_flight("up", other):
        assert proxy.answering("up") is None, "two windows of one host app are two hosts"


async def test_a_request_during_calls_of_two_hosts_goes_to_neither() -> None:
    proxy, a, b = _proxy(), _ctx("A"), _ctx("B")
    async with proxy.in_flight("up", a), proxy.in_flight("up", b):
        assert proxy.answering("up") is None, "a wrong guess would show one host another host's prompt"


def test_with_no_call_in_flight_only_a_sole_host_is_asked() -> None:
    proxy, a, b = _proxy(), _ctx("A"), _ctx("B")
    proxy.seen(a)
    assert proxy.answering("up") is a
    proxy.seen(b)
    assert proxy.answering("up") is None
