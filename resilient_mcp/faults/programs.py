"""A program's failure as the runner that ran the caller's code or command reports it, read without regular expressions.

Code runners, shells and remote shells run what the caller sent and pass on its output: a Python traceback, a Node
stack, a shell's complaint, an exit status. Those words describe the caller's program, not the server, the proxy or
its transport: a ``FileNotFoundError`` in them is the program's missing file, not the server's; their verdict is "the
program failed" (B4, change the code or command), except where the output names a cause of its own (a connection the
program's service refused: that service, transient; a state conflict). This module finds the documented shapes; what
they mean is decided in ``vocab.py``.

    shape                                           documented by
    Traceback (most recent call last): ... X: msg   Python's traceback module (the last line names the exception)
    X: msg / "    at f (file:line:col)"             Node's Error.prototype.stack (V8 stack trace API)
    Command failed: <cmd>                           Node's child_process.exec / execSync error message
    sh: 1: x: not found, bash: x: command not found the POSIX shells' (dash, bash, zsh, busybox ash) messages
    exit status N, exit code N, [exit N]            POSIX exit statuses: 126 not executable, 127 not found,
                                                    124 GNU timeout, 128+n the signal n (137 SIGKILL, 143 SIGTERM)

All scans are linear (``str.find``, ``str.split``, slices) over text already cut to ``vocab.MAX_SCAN_CHARS``.
"""

from __future__ import annotations

PROGRAM_ARGUMENTS = frozenset({"code", "command", "cmd", "script", "snippet", "program", "function"})
"""Argument names of a tool that runs what the caller wrote (``run-code``'s ``code``, a shell's ``command``,
Playwright's ``browser_evaluate`` ``function``): its output is the caller's program's."""

_RUNNER_MARKS = ("command failed: ", "traceback (most recent call last):")
"""Node's ``child_process`` error message (``Command failed: ${cmd}``), Python's traceback header."""

_SHELLS = frozenset({"sh", "bash", "dash", "zsh", "ksh", "ash", "mksh"})

REFUSED_BEFORE_RUN = frozenset(
    {
        "SyntaxError",  # Python's compiler, V8's parser: nothing ran
        "IndentationError",
        "TabError",
        "ModuleNotFoundError",  # the code imports what is not installed: change the code (or ask for the package)
        "ImportError",
    }
)
"""Exceptions raised before the caller's code ran a statement of its own: nothing ran (``executed_failed``)."""

BUILTIN_EXCEPTIONS = frozenset(
    {
        # Python's built-in exceptions (docs.python.org/3/library/exceptions.html)
        *("ArithmeticError", "AssertionError", "AttributeError", "BufferError", "EOFError", "FloatingPointError"),
        *("ImportError", "ModuleNotFoundError", "IndexError", "KeyError", "KeyboardInterrupt", "LookupError"),
        *("MemoryError", "NameError", "NotImplementedError", "OSError", "IOError", "EnvironmentError"),
        *("BlockingIOError", "ChildProcessError", "ConnectionError", "BrokenPipeError", "ConnectionAbortedError"),
        *("ConnectionRefusedError", "ConnectionResetError", "FileExistsError", "FileNotFoundError"),
        *("InterruptedError", "IsADirectoryError", "NotADirectoryError", "PermissionError", "ProcessLookupError"),
        *("TimeoutError", "OverflowError", "RecursionError", "ReferenceError", "RuntimeError", "StopIteration"),
        *("StopAsyncIteration", "SyntaxError", "IndentationError", "TabError", "SystemError", "SystemExit"),
        *("TypeError", "UnboundLocalError", "UnicodeError", "UnicodeEncodeError", "UnicodeDecodeError"),
        *("UnicodeTranslateError", "ValueError", "ZeroDivisionError", "ExceptionGroup", "BaseExceptionGroup"),
        "Exception",
        # ECMAScript's native errors (ECMA-262 §20.5), as V8 and Node print them
        *("Error", "EvalError", "RangeError", "URIError", "AggregateError"),
    }
)
"""The exceptions a language itself raises: in a program's output they say the program failed. A library's own
exception (``sqlite3.OperationalError``, botocore's ``ResourceNotFoundException``) is left to the vocabularies
that name it."""
_IDENT = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.")
MAX_LINES = 200
"""Lines of output read for an exception line (the last ones: a traceback ends with its exception)."""


def ran_program(lowered: str, arguments: frozenset[str]) -> bool:
    """Whether the text is the output of a program the tool ran for the caller: a runner's mark (Node's "Command
    failed: ", a Python traceback header) or a tool whose arguments carry the code or command it runs."""
    return any(m in lowered for m in _RUNNER_MARKS) or any(a.lower() in PROGRAM_ARGUMENTS for a in arguments)


def node_command_failed(lowered: str) -> bool:
    """Node's ``child_process`` message for a command that exited non-zero: ``Command failed: <cmd>``."""
    return "command failed: " in lowered


def _strip_stream_label(line: str) -> str:
    line = line.strip()
    for label in ("[stderr]", "stderr:", "[stdout]", "stdout:"):
        if line.lower().startswith(label):
            return line[len(label) :].strip()
    return line


def shell_command_missing(text: str) -> bool:
    """A POSIX shell that could not find or execute the command it was given: dash's ``sh: 1: ruby: not found``,
    bash's ``bash: ruby: command not found`` / ``bash: line 1: ruby: command not found``, zsh's ``zsh: command not
    found: ruby``, busybox's ``sh: ruby: not found`` (exit status 127). The line opens with the shell's name."""
    for raw in text.splitlines()[:MAX_LINES]:
        line = _strip_stream_label(raw)
        head, colon, rest = line.partition(":")
        if not colon or head.rsplit("/", 1)[-1] not in _SHELLS:
            continue
        rest = rest.lower()
        if "command not found" in rest or rest.rstrip().endswith(": not found"):
            return True
    return False


def last_exception(text: str) -> tuple[str, str] | None:
    """The built-in exception a Python traceback or a Node stack names, as (class name, message): the last line of
    the shape ``NameError: message`` (or a bare ``KeyboardInterrupt``) that is not a stack frame.
    Python prints it last; Node prints it before its ``    at`` frames, which never have that shape. A bare
    ``Error: ...`` counts only with a stack (servers label any message so)."""
    lines = text.splitlines()[-MAX_LINES:]
    stack = "traceback (most recent call last):" in text.lower() or any(ln.startswith("    at ") for ln in lines)
    for raw in reversed(lines):
        line = _strip_stream_label(raw)
        head, colon, message = line.partition(":")
        head = head.strip()
        if not head or " " in head or not set(head) <= _IDENT:
            continue
        name = head.rsplit(".", 1)[-1]
        if name not in BUILTIN_EXCEPTIONS:
            continue
        if name == "Error" and not stack:  # "Error: ..." is how servers label any message; Node's Error has frames
            continue
        if colon or line == head:
            return name, message.strip()
    return None


def exit_status(lowered_words: list[str], lowered: str) -> int | None:
    """A process's exit status in the text: "exit status 1", "exit code 128", "Exit Code: 2", "exited with code 1",
    Python's "returned non-zero exit status 1", git's "exit code(128)", a remote shell's ``[exit 1]``."""
    for i, word in enumerate(lowered_words[:-1]):
        if word not in ("status", "code"):
            continue
        before = lowered_words[max(0, i - 2) : i]
        if "exit" not in before and "exited" not in before:
            continue
        value = lowered_words[i + 1]
        if value.isdigit() and len(value) <= 3:
            return int(value)
    at = lowered.find("[exit ")
    while at >= 0:
        end = lowered.find("]", at + 6, at + 10)
        value = lowered[at + 6 : end] if end >= 0 else ""
        if value.isdigit():
            return int(value)
        at = lowered.find("[exit ", at + 6)
    return None
