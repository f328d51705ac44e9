"""Credentials out of text: a URL's user-info and query parameter values replaced by ``***``.

The patterns are linear (no nested quantifier), each bounded by the text it is given.
"""

from __future__ import annotations

import re

_URL = re.compile(r"""\b[a-zA-Z][a-zA-Z0-9+.-]{0,30}://[^\s"'<>]+""")
_USERINFO = re.compile(r"^([^:/?#]+://)[^/?#@]*@")
_QUERY_VALUE = re.compile(r"([?&;][^=&#;]*)=[^&#;]*")


def _redact_url(match: re.Match[str]) -> str:
    url = _USERINFO.sub(r"\1***@", match.group(0), count=1)
    head, sep, rest = url.partition("?")
    if not sep:
        return url
    query, hash_, fragment = rest.partition("#")
    return head + _QUERY_VALUE.sub(r"\1=***", "?" + query) + hash_ + fragment


def redact(text: str) -> str:
    """``text`` with every URL's user-info and query parameter values replaced by ``***``."""
    return _URL.sub(_redact_url, text) if "://" in text else text
