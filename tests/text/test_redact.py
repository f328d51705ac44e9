"""Credentials out of text (``resilient_mcp/text/redact.py``)."""

from __future__ import annotations

from resilient_mcp.text.redact import redact


def test_url_credentials_and_query_values_are_redacted() -> None:
    line = "POST https://alice:hunter2@mcp.example.com:8443/mcp?token=SEKRET&v=2#x failed"
    assert redact(line) == "POST https://***@mcp.example.com:8443/mcp?token=***&v=***#x failed"


def test_text_without_a_url_is_returned_as_it_is() -> None:
    text = "token=SEKRET user:pw@host"
    assert redact(text) is text
