"""A permanent cause outranks a generic transport word that merely prefixes it (issue 19, the third hold-out's harmful
verdicts): "connection error", "unavailable" or "failed to connect" in front of an authentication failure, a host
key that is not the trusted one, an approval that could not be obtained or a program that cannot work on this system
is that cause, never a transient fault the proxy may repeat. Each text is written from the standard's own wording
(OpenSSH's ssh(1), the Node ssh2 client, paramiko, systemd's systemctl), not from the benchmark's records."""

from __future__ import annotations

import mcp_types as types
import pytest
from mcp.shared.exceptions import MCPError

from resilient_mcp.faults import (
    Fault,
    RepairAction,
)
from resilient_mcp.faults.classify import classify_exception
from resilient_mcp.faults.vocab import read
from tests.faults.support import B4, D4, F1, F2, of_text, reads_as

ASK, FIX = RepairAction.ASK_USER, RepairAction.FIX_PARAMETER


CAUSES = [
    # OpenSSH ssh(1) after every offered method was refused (sshconnect2.c: "Permission denied (%s).")
    ("Permission denied (publickey).", F1, ASK),
    ("user@db.example: Permission denied (publickey,password).", F1, ASK),
    ("ssh: connect to host db: Permission denied (keyboard-interactive).", F1, ASK),
    # the Node ssh2 client's client-authentication error; libssh2's public-key refusal
    ("All configured authentication methods failed", F1, ASK),
    ("Unable to connect: Username/PublicKey combination invalid", F1, ASK),
    # OpenSSH, ssh2 and paramiko when the server's host key is not the trusted one
    ("Host key verification failed.", D4, ASK),
    ("@@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@", D4, ASK),
    ("Host denied (verification failed)", D4, ASK),
    ("Host key for server 'db.example' does not match: got 'AAAAC3Nz', expected 'AAAAB3Nz'", D4, ASK),
    # systemd's systemctl on a host that was not booted with it
    ("System has not been booted with systemd as init system (PID 1). Can't operate.", B4, FIX),
]


@pytest.mark.parametrize(("text", "cls", "repair"), CAUSES)
def test_a_documented_permanent_cause_is_read_as_itself(text: str, cls: type[Fault], repair: RepairAction) -> None:
    fault = reads_as(text, cls, False)
    assert fault.repair_action is repair, text


@pytest.mark.parametrize(
    "prefix",
    ["SSH connection error: ", "Connection error: ", "Failed to connect to db.example: ", "Service unavailable: "],
)
@pytest.mark.parametrize(("cause", "cls", "repair"), CAUSES)
def test_a_generic_transport_prefix_followed_by_a_permanent_cause_takes_the_cause(
    prefix: str, cause: str, cls: type[Fault], repair: RepairAction
) -> None:
    """Before: "connection error", "failed to connect" and "unavailable" were read first (D1, transient, the proxy
    repeating a read-only call); the cause after them was never looked at."""
    fault = of_text(prefix + cause)
    assert type(fault) is cls and not fault.is_transient, (prefix + cause, fault)
    assert fault.repair_action is repair


@pytest.mark.parametrize(
    "text",
    [
        # an approval gate that fails closed, spelled as a code and as words (MCP elicitation the client lacks)
        "APPROVAL_UNAVAILABLE: the client could not be asked to approve the command; it was refused, not run",
        "Approval unavailable: no person could be asked",
        "Command approval was denied",
        "The operation was declined by the user",
    ],
)
def test_an_approval_that_could_not_be_obtained_is_a_refusal_to_ask_about(text: str) -> None:
    fault = reads_as(text, F2, False)
    assert fault.repair_action is ASK


def test_a_host_key_mismatch_spelled_as_a_code_is_read_as_words() -> None:
    fault = of_text("SSH connection error: HOST_KEY_MISMATCH: the presented key is not the known one")
    assert type(fault) is D4 and fault.repair_action is ASK and not fault.is_transient


def test_the_cause_of_a_tools_json_rpc_error_is_read_too() -> None:
    """A -32603 whose message is an SSH refusal: the tool's permanent failure, not a transient one to repeat."""
    exc = MCPError(types.INTERNAL_ERROR, "SSH connection error: All configured authentication methods failed")
    fault = classify_exception(exc, sent=True)
    assert type(fault) is F1 and not fault.is_transient


@pytest.mark.parametrize(
    "text",
    [
        "SSH connection error: connect ECONNREFUSED 127.0.0.1:22",  # errno: still transient
        "Connection error: read ETIMEDOUT",
        "Failed to connect to bus: Host is down",  # systemctl's words alone say nothing permanent
        "Service unavailable",
        "Permission denied (os error 13)",  # Rust's io::Error: a file permission, not SSH authentication
    ],
)
def test_texts_without_a_permanent_cause_keep_their_reading(text: str) -> None:
    reading = read(text)
    assert reading is not None and reading.rule.family != "cause", (text, reading)
