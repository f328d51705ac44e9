"""Text as UTF-8 bytes and JSON as one text (``resilient_mcp/text/__init__.py``): lengths, cuts, canonical JSON."""

from __future__ import annotations

from resilient_mcp.text import canonical_json, cut_text, json_prefix, utf8_head, utf8_len


def test_utf8_len_counts_encoded_bytes_without_encoding_whole() -> None:
    assert utf8_len("abc") == 3
    assert utf8_len("é✓😀" * 300_000) == (2 + 3 + 4) * 300_000
    assert utf8_len("\ud800") == 1  # a lone surrogate is stored as "?"


def test_a_utf8_head_never_splits_a_character() -> None:
    assert utf8_head("aé✓", 2) == "a"
    assert utf8_head("aé✓", 3) == "aé"
    assert utf8_head("aé✓", 6) == "aé✓"


def test_json_cut_never_ends_inside_a_string_number_or_key() -> None:
    assert json_prefix('[1, 2, "abc') == (5, "]")
    assert json_prefix("[10, 2345") == (3, "]")
    assert json_prefix('{"a": {"b": [true, nu') == (17, "]}}")
    assert json_prefix('{"a": 1, "key') == (7, "}")
    assert json_prefix("{name} is not JSON at all, it only starts with a brace") is None
    text = "{name} is a template, not JSON " * 100
    head, covered = cut_text(text, 300)
    assert text.startswith(head) and covered == len(head) == 300


def test_canonical_json_is_one_text_per_value() -> None:
    assert canonical_json({"b": "é", "a": [1, None]}) == '{"a":[1,null],"b":"é"}'
    assert canonical_json({"a": 1, "b": 2}) == canonical_json({"b": 2, "a": 1})
