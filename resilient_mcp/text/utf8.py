"""Text as UTF-8 bytes: encoded in chunks (never a whole copy) and measured without encoding."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

_CHUNK_CHARS = 64 * 1024


def iter_utf8(parts: Iterable[str], chunk_chars: int = _CHUNK_CHARS) -> Iterator[bytes]:
    """``parts`` encoded as UTF-8, chunk by chunk (never a whole copy). Lone surrogates become ``?``."""
    for part in parts:
        for i in range(0, len(part), chunk_chars):
            yield part[i : i + chunk_chars].encode("utf-8", "replace")


def utf8_len(text: str) -> int:
    """Length of ``text`` in UTF-8 bytes, as ``iter_utf8`` encodes it, without encoding it whole."""
    if text.isascii():
        return len(text)
    return sum(len(chunk) for chunk in iter_utf8((text,)))
