"""Canonical JSON: one text per value, so equal values hash equal."""

from __future__ import annotations

import json
from typing import Any


def canonical_json(value: Any) -> str:
    """``value`` as canonical JSON: sorted keys, compact separators, non-ASCII kept; non-JSON values via ``str``."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
