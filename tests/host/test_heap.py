"""The listening proxy's collector: start-up's heap frozen and young collections rarer while it serves (host.heap)."""

from __future__ import annotations

import gc
import inspect

import pytest

from resilient_mcp.host import http
from resilient_mcp.host.heap import GC_SWITCH, YOUNG_THRESHOLD, settled_heap


def test_the_heap_is_frozen_and_young_collections_rarer_while_serving_then_restored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(GC_SWITCH, raising=False)
    before, frozen_before = gc.get_threshold(), gc.get_freeze_count()
    survivor = [object()]  # a tracked container alive at start-up
    with settled_heap() as on:
        assert on
        assert gc.get_freeze_count() > frozen_before
        assert gc.get_threshold() == (YOUNG_THRESHOLD, *before[1:])
        assert not any(survivor is o for o in gc.get_objects())  # frozen: no generation walks it
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0
    assert any(survivor is o for o in gc.get_objects(generation=2))


def test_the_switch_leaves_the_collector_as_python_sets_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(GC_SWITCH, "off")
    before = gc.get_threshold()
    with settled_heap() as on:
        assert not on
        assert gc.get_freeze_count() == 0
        assert gc.get_threshold() == before


def test_serve_http_serves_with_the_heap_settled() -> None:
    assert "settled_heap()" in inspect.getsource(http.serve_http)  # after start-up, around uvicorn's serving


def test_the_stdio_proxy_freezes_after_a_young_collection_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """The host's ``initialize`` waits meanwhile: no full collection of start-up's heap (40-160 ms) before it."""
    monkeypatch.delenv(GC_SWITCH, raising=False)
    collected: list[tuple[int, ...]] = []
    monkeypatch.setattr(gc, "collect", lambda *generation: collected.append(generation) or 0)
    with settled_heap(full=False) as on:
        assert on
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold()[0] == YOUNG_THRESHOLD
    with settled_heap():
        pass
    assert collected == [(1,), ()]


def test_serve_stdio_serves_with_the_heap_settled() -> None:
    from resilient_mcp import app

    assert "settled_heap(full=False)" in inspect.getsource(app._serve_on)  # around the SDK server's run
