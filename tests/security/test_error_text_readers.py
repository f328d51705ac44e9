"""The readers of an upstream's error text (issue 19's vocabularies, issue 20's rule: no backtracking regular expression
on outside text) use no regular expression at all, and cost on adversarial text about what they cost on benign text
of the same length: every scan is ``str.find`` / ``split`` / slices over text cut to ``vocab.MAX_SCAN_CHARS``, JSON
is decoded a bounded number of times (``bodies.MAX_PARSES``) and walked a bounded number of nodes."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from resilient_mcp.faults import bodies, vocab
from tests.security.cpu import cpu_cost

FAULTS = Path(__file__).resolve().parents[2] / "resilient_mcp" / "faults"
READERS = ("vocab.py", "programs.py", "bodies.py", "stderr_words.py")


@pytest.mark.parametrize("name", READERS)
def test_the_error_text_readers_import_no_regular_expressions(name: str) -> None:
    tree = ast.parse((FAULTS / name).read_text(encoding="utf-8"))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert not imported & {"re", "regex"}, (name, imported)


N = vocab.MAX_SCAN_CHARS
HOSTILE = {
    "error-lines": ("Error: x\n" * N)[:N] + "\n    at f (a.js:1:1)",
    "exception-lines": "Traceback (most recent call last):\n" + ("NameError: x\n" * N)[:N],
    "exit-brackets": ("[exit " * N)[:N],
    "swagger-brackets": ("][" * N)[:N],
    "open-braces": "{" * N,
    "nested-json": ('{"a":[' * N)[:N],
    "many-json": ('{"errors":[{"extensions":{"code":"X_Y"}}]} ' * N)[:N],
    "code-words": ("code: NOT_A_CODE_X " * N)[:N],
    "runner-marks": ("Command failed: " * N)[:N],
    "shell-lines": ("sh: 1: x: y\n" * N)[:N],
    "ldap-codes": ("ldap error code 99 " * N)[:N],
    "smtp-replies": ("smtp 999 5 9 9 " * N)[:N],
}


@pytest.mark.parametrize("hostile", HOSTILE.values(), ids=HOSTILE.keys())
def test_reading_an_adversarial_error_text_costs_what_a_benign_one_does(hostile: str) -> None:
    benign = ("the tool could not finish the request in time " * N)[: len(hostile)]
    vocab.read(hostile, frozenset({"code"}))  # and it never raises
    benign_s = cpu_cost(lambda: vocab.read(benign, frozenset({"code"})), repeat=5)
    hostile_s = cpu_cost(lambda: vocab.read(hostile, frozenset({"code"})), repeat=5, stop_above=40 * benign_s)
    assert hostile_s <= 20 * benign_s + 0.002, f"hostile {hostile_s:.6f} s vs benign {benign_s:.6f} s (CPU)"


def test_json_bodies_are_decoded_a_bounded_number_of_times() -> None:
    calls = []
    real = bodies._DECODER.raw_decode

    class Counting:
        def raw_decode(self, s: str, idx: int = 0) -> tuple[object, int]:
            calls.append(idx)
            return real(s, idx)

    bodies_decoder = bodies._DECODER
    bodies._DECODER = Counting()  # type: ignore[assignment]
    try:
        bodies.error_codes("{" * 5000)
        bodies.error_codes('{"a": 1} ' * 5000)
    finally:
        bodies._DECODER = bodies_decoder
    assert len(calls) <= 2 * bodies.MAX_PARSES
