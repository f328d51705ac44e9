"""A program the tool ran for the caller failed: read as "the program failed" (issue 19, the hold-outs' code runners
and shells), not by the standard words inside its output, which are the program's. Texts are written from the
runtimes' and shells' own documented output, not from the benchmark's records:

- Python's traceback module ("Traceback (most recent call last):", the last line ``ExcName: message``;
  docs.python.org/3/library/traceback.html, /tutorial/errors.html);
- Node's ``Error.prototype.stack`` ("TypeError: msg\\n    at f (file:1:6)"; nodejs.org/api/errors.html) and
  ``child_process.exec``'s error ("Command failed: <cmd>\\n<stderr>"; nodejs.org/api/child_process.html);
- the POSIX shells' "not found" messages (dash ``sh: 1: x: not found``, bash ``bash: x: command not found``, zsh
  ``zsh: command not found: x``) and exit statuses (POSIX 2.8.2: 126 not executable, 127 not found, >128 a signal;
  GNU coreutils ``timeout``: 124).
"""

from __future__ import annotations

import mcp_types as types
import pytest

from resilient_mcp.faults import (
    Fault,
    RepairAction,
    RetrySafety,
)
from resilient_mcp.faults.classify import classify_result
from resilient_mcp.faults.vocab import read
from tests.faults import support
from tests.faults.support import B4, D1, D4, D5

FIX, ASK = RepairAction.FIX_PARAMETER, RepairAction.ASK_USER
RUNNER = types.Tool(name="run-code", input_schema={"type": "object", "properties": {"code": {}, "language": {}}})
READER = types.Tool(name="read_file", input_schema={"type": "object", "properties": {"path": {}}})


def of_text(text: str, tool: types.Tool | None = RUNNER) -> Fault:
    return support.of_text(text, tool)


PY_RUNTIME = """Traceback (most recent call last):
  File "/tmp/snippet.py", line 3, in <module>
    spam = open('/data/eggs.csv').read()
           ^^^^^^^^^^^^^^^^^^^^^^
FileNotFoundError: [Errno 2] No such file or directory: '/data/eggs.csv'
"""
PY_NAME = """Traceback (most recent call last):
  File "<stdin>", line 1, in <module>
NameError: name 'spam' is not defined
"""
PY_ZERO = """Traceback (most recent call last):
  File "<stdin>", line 1, in <module>
ZeroDivisionError: division by zero
"""
PY_SYNTAX = """  File "<stdin>", line 1
    while True print('Hello world')
               ^^^^^
SyntaxError: invalid syntax
"""
PY_MODULE = """Traceback (most recent call last):
  File "/tmp/snippet.py", line 1, in <module>
    import numpy
ModuleNotFoundError: No module named 'numpy'
"""
PY_REFUSED = """Traceback (most recent call last):
  File "/tmp/snippet.py", line 2, in <module>
    socket.create_connection(('127.0.0.1', 5432))
ConnectionRefusedError: [Errno 111] Connection refused
"""
PY_CHAINED = """Traceback (most recent call last):
  File "<stdin>", line 2, in <module>
KeyError: 'x'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "<stdin>", line 4, in <module>
RuntimeError: Failed to open database
"""
NODE_TYPE = """/tmp/snippet.js:1
null.length
     ^

TypeError: Cannot read properties of null (reading 'length')
    at Object.<anonymous> (/tmp/snippet.js:1:6)
    at Module._compile (node:internal/modules/cjs/loader:1554:14)
"""
NODE_SYNTAX = """/tmp/snippet.js:1
const x = ;
          ^

SyntaxError: Unexpected token ';'
    at wrapSafe (node:internal/modules/cjs/loader:1469:18)
"""
NODE_REFUSED = """Error: connect ECONNREFUSED 127.0.0.1:5432
    at TCPConnectWrap.afterConnect [as oncomplete] (node:net:1607:16)
"""


@pytest.mark.parametrize(
    ("output", "cls", "safety"),
    [
        # the code ran and raised: change it; what it did before is unknown (maybe executed)
        (PY_RUNTIME, B4, RetrySafety.MAYBE_EXECUTED),
        (PY_NAME, B4, RetrySafety.MAYBE_EXECUTED),
        (PY_ZERO, B4, RetrySafety.MAYBE_EXECUTED),
        (PY_CHAINED, B4, RetrySafety.MAYBE_EXECUTED),
        (NODE_TYPE, B4, RetrySafety.MAYBE_EXECUTED),
        # refused before a statement of it ran: change it; nothing ran
        (PY_SYNTAX, B4, RetrySafety.EXECUTED_FAILED),
        (PY_MODULE, B4, RetrySafety.EXECUTED_FAILED),
        (NODE_SYNTAX, B4, RetrySafety.EXECUTED_FAILED),
    ],
)
@pytest.mark.parametrize("runner", ["", 'Command failed: python3 -u "/tmp/snippet"\n'])
def test_a_callers_program_that_failed_is_b4(output: str, cls: type[Fault], safety: RetrySafety, runner: str) -> None:
    """Before: FileNotFoundError was read as the server's missing file (D4 switch_tool), ModuleNotFoundError as the
    server's (D4 ask_user), NameError/TypeError/SyntaxError in a stack were unrecognised."""
    fault = of_text(runner + output)
    assert type(fault) is cls and not fault.is_transient, (output, fault)
    assert fault.retry_safety is safety
    assert fault.details["vocabulary"] == "program"


@pytest.mark.parametrize("output", [PY_REFUSED, NODE_REFUSED])
def test_a_connection_the_programs_service_refused_is_that_service_transient(output: str) -> None:
    fault = of_text(output)
    assert type(fault) is D1 and fault.is_transient


def test_nodes_exec_error_without_more_words_is_the_program_failing() -> None:
    fault = of_text('Error: Command failed: python -u "/tmp/snippet.py"\n')
    assert type(fault) is B4 and fault.retry_safety is RetrySafety.MAYBE_EXECUTED and not fault.is_transient


@pytest.mark.parametrize(
    "line",
    [
        "/bin/sh: 1: ruby: not found",  # dash
        "sh: ruby: not found",  # busybox ash
        "bash: ruby: command not found",
        "bash: line 1: ruby: command not found",
        "zsh: command not found: ruby",
        "[stderr] bash: rubyy: command not found",
    ],
)
def test_a_shell_that_cannot_find_the_command_is_b4_and_nothing_ran(line: str) -> None:
    fault = of_text('Command failed: ruby "/tmp/snippet.rb"\n' + line)
    assert type(fault) is B4 and fault.repair_action is FIX and not fault.is_transient
    assert fault.retry_safety is RetrySafety.EXECUTED_FAILED


@pytest.mark.parametrize(
    ("text", "cls", "repair", "cut"),
    [
        ("[exit 1]", B4, None, False),  # B4's own repair: fix_parameter
        ("[stderr] cat: /etc/app.ini: No such file or directory [exit 1]", B4, None, False),
        ("Command failed with exit status 2", B4, None, False),
        ("exit status 126", B4, FIX, False),  # found, not executable
        ("exit code 127", B4, FIX, False),  # not found
        ("process exited with code 124", D4, FIX, True),  # GNU timeout
        ("exit status 137", D4, FIX, True),  # SIGKILL (the OOM killer)
        ("[exit 143]", D4, ASK, True),  # SIGTERM
        ("exit code 130", D4, ASK, True),  # SIGINT
        ("exit status 139", D4, None, True),  # SIGSEGV
    ],
)
def test_exit_statuses_with_a_documented_meaning(
    text: str, cls: type[Fault], repair: RepairAction | None, cut: bool
) -> None:
    reading = read(text)
    assert reading is not None and reading.rule.fault is cls and not reading.rule.transient, text
    assert reading.rule.repair is repair and reading.rule.cut is cut


def test_no_exit_status_is_transient() -> None:
    for status in range(1, 256):
        reading = read(f"exit status {status}")
        assert reading is None or not reading.rule.transient, status


def test_a_failed_commands_state_conflict_or_refused_connection_outranks_the_status() -> None:
    assert type(of_text("exit status 128\nfatal: a branch named 'x' already exists")) is D5
    curl = of_text("Command failed with exit status 7\ncurl: (7) Failed to connect to db port 80: Connection refused")
    assert type(curl) is D1 and curl.is_transient


@pytest.mark.parametrize(
    "text",
    [
        "FileNotFoundError: [Errno 2] No such file or directory: 'notes.md'",  # a file server's own error
        "Error: ENOENT: no such file or directory, open '/data/a.txt'",
        PY_RUNTIME.split("\n", 1)[1],  # a server's own frames, without the traceback header
    ],
)
def test_a_servers_own_error_is_not_a_program_failure(text: str) -> None:
    """The same words from a tool that runs no program of the caller's keep their standard reading (D4 ENOENT)."""
    fault = of_text(text, tool=READER)
    assert fault.details.get("vocabulary") != "program", (text, fault)
    assert type(fault) is D4


def test_a_labelled_message_of_a_runner_is_not_nodes_error_without_a_stack() -> None:
    fault = of_text("Error: Connection 'staging' not found")
    assert fault.details.get("vocabulary") != "program"


def test_a_success_is_never_a_program_failure() -> None:
    ok = types.CallToolResult(content=[types.TextContent(text=PY_RUNTIME + "\n[exit 1]")], is_error=False)
    assert classify_result(ok, tool=RUNNER) is None


@pytest.mark.parametrize(
    ("text", "cls", "family"),
    [
        (
            'Traceback (most recent call last):\n  File "q.py", line 3\nsqlite3.OperationalError: no such table: users',
            B4,
            "sql",
        ),
        ("botocore.errorfactory.ResourceNotFoundException: Function not found: arn:aws:lambda:f", D4, "aws"),
    ],
)
def test_a_librarys_exception_in_a_programs_output_is_read_by_its_vocabulary(
    text: str, cls: type[Fault], family: str
) -> None:
    """Only a language's built-in exceptions say "the program failed"; a library's names its own cause."""
    fault = of_text(text)
    assert type(fault) is cls and fault.details["vocabulary"] == family, (text, fault)
