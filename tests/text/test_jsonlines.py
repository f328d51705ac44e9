"""Counting a JSON document's items before parsing it (``resilient_mcp/text/jsonlines.py``)."""

from __future__ import annotations

import json

import pytest

from resilient_mcp.text.jsonlines import TooComplex, count_items, items_at_most


def test_every_string_key_number_literal_object_and_array_is_one_item() -> None:
    data = json.dumps({"a": [1, -2.5e3, "x,y:[{"], "b": {"c": None, "d": True}}).encode()
    # the object, "a", the array, 1, -2.5e3, "x,y:[{", "b", the inner object, "c", null, "d", true
    assert count_items(data, limit=100) == 12
    assert items_at_most(data) >= 12  # the bound counts the punctuation inside the string too


def test_past_the_limit_the_count_stops_with_too_complex() -> None:
    data = json.dumps({f"k{i}": i for i in range(1000)}).encode()
    assert count_items(data, limit=2001) == 2001
    with pytest.raises(TooComplex, match="more than 2000 JSON items"):
        count_items(data, limit=2000)
