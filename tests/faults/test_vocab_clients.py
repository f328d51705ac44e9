"""HTTP client libraries' status texts, runtimes' network exceptions and numbered protocol replies (issue 19): each
text is the library's or the RFC's own documented shape, cited beside it, not a benchmark record."""

from __future__ import annotations

import pytest

from resilient_mcp.faults import (
    Fault,
)
from resilient_mcp.faults.vocab import read
from tests.faults.support import B1, B4, D1, D2, D4, D5, F1, F2, F3, of_text, reads_as


@pytest.mark.parametrize(
    ("text", "cls", "transient"),
    [
        # Python requests, Response.raise_for_status (requests/models.py: "%s Client Error: %s for url: %s")
        ("404 Client Error: Not Found for url: https://httpbin.org/status/404", D4, False),
        ("409 Client Error: Conflict for url: https://api.test/items/1", D5, False),
        ("429 Client Error: Too Many Requests for url: https://api.test/search", D2, True),
        ("502 Server Error: Bad Gateway for url: https://api.test/", D1, True),
        # go-swagger's generated clients ("[%s %s][%d] %s  %+v")
        (
            '[POST /annotations][500] postAnnotationInternalServerError {"message":"Failed to save annotation"}',
            D1,
            True,
        ),
        ("[GET /search][401] searchUnauthorized {}", F1, False),
        ("[DELETE /folders/{uid}][409] deleteFolderConflict {}", D5, False),
        # axios (lib/core/settle.js: "Request failed with status code " + status)
        ("AxiosError: Request failed with status code 404", D4, False),
        # Go's net and net/http (context.DeadlineExceeded, os.ErrDeadlineExceeded, the resolver, syscall texts)
        (
            'Get "http://api.test/x": context deadline exceeded (Client.Timeout exceeded while awaiting headers)',
            D1,
            True,
        ),
        ("read tcp 127.0.0.1:5000->127.0.0.1:80: i/o timeout", D1, True),
        ("dial tcp: lookup api.invalid on 127.0.0.53:53: no such host", D4, False),
        ("read tcp 10.0.0.2:443: read: connection reset by peer", D1, True),
        ("dial tcp 127.0.0.1:9200: connect: connection refused", D1, True),
        # the JVM's and .NET's network and file exceptions
        ("java.net.ConnectException: Connection refused (Connection refused)", D1, True),
        ("java.net.SocketTimeoutException: Read timed out", D1, True),
        ("java.net.UnknownHostException: api.invalid", D4, False),
        ("java.nio.file.NoSuchFileException: /data/report.csv", D4, False),
        ("java.nio.file.FileAlreadyExistsException: /data/report.csv", D5, False),
        ("System.UnauthorizedAccessException: Access to the path '/data' is denied.", F2, False),
        ("System.TimeoutException: The operation has timed out.", D1, True),
        # libcurl (libcurl-errors(3), curl_easy_strerror)
        ("curl: (6) Could not resolve host: api.invalid", D4, False),
        ("curl: (7) Failed to connect to localhost port 80 after 0 ms: Couldn't connect to server", D1, True),
        ("curl: (52) Empty reply from server", D1, True),
        ("curl: (60) SSL certificate problem: self-signed certificate", D4, False),
        ("curl: (28) Operation timed out after 3001 milliseconds with 0 bytes received", D1, True),
    ],
)
def test_http_clients_and_runtimes(text: str, cls: type[Fault], transient: bool) -> None:
    reads_as(text, cls, transient)


def test_a_400_that_names_a_refusal_is_the_refusal_and_a_not_found_stays_the_requests() -> None:
    assert type(of_text('[POST /dashboards/db][400] postDashboardBadRequest {"message":"Access denied"}')) is F2
    assert type(of_text("400 Client Error: Bad Request for url: x (field 'statuss' does not exist)")) is B4


@pytest.mark.parametrize(
    ("text", "cls", "transient"),
    [
        # SMTP (RFC 5321 §4.2) with enhanced status codes (RFC 3463; RFC 4954 §6 for 5.7.8 / 530 5.7.0)
        ("smtplib.SMTPAuthenticationError: (535, b'5.7.8 Username and Password not accepted')", F1, False),
        ("SMTP error: 530 5.7.0 Authentication required", F1, False),
        ("SMTP error: 550 5.1.1 <nobody@example.com>: Recipient address rejected: User unknown", B4, False),
        ("SMTP error: 552 5.2.2 Mailbox full", F3, False),
        ("SMTP error: 552 5.3.4 Message size exceeds fixed limit", B4, False),
        ("SMTP error: 554 5.7.1 Relay access denied", F2, False),
        ("SMTP error: 421 4.7.0 Try again later, closing connection", D1, True),  # 4yz: transient by the RFC
        ("SMTP error: 450 4.2.1 Mailbox busy", D1, True),
        ("SMTP error: 451 Requested action aborted: local error in processing", D1, True),
        ("SMTP error: 550 Requested action not taken: mailbox unavailable", D4, False),
        # FTP (RFC 959 §4.2.2), Python ftplib's error_temp / error_perm
        ("ftplib.error_perm: 530 Login incorrect.", F1, False),
        ("ftplib.error_perm: 550 Failed to open file.", D4, False),
        ("ftplib.error_temp: 421 Too many connections (10) from this IP", D1, True),
        ("FTP error: 553 Could not create file.", B4, False),
        ("FTP error: 552 Requested file action aborted. Exceeded storage allocation", F3, False),
        # LDAP result codes (RFC 4511 §4.1.9): JNDI's "[LDAP: error code N - ...]", ldapjs's error classes
        ("javax.naming.AuthenticationException: [LDAP: error code 49 - Invalid Credentials]", F1, False),
        ("[LDAP: error code 50 - Insufficient Access Rights]", F2, False),
        ("[LDAP: error code 68 - Entry Already Exists]", D5, False),
        ("[LDAP: error code 32 - No Such Object]", D4, False),
        ("ldapjs InvalidCredentialsError: 80090308: LdapErr: DSID-0C09044E", F1, False),
        ("LDAP error: code 52 - Unavailable", D1, True),
    ],
)
def test_numbered_protocol_replies_where_the_protocol_is_named(text: str, cls: type[Fault], transient: bool) -> None:
    reads_as(text, cls, transient)


@pytest.mark.parametrize(
    "text",
    [
        "550 rows deleted",  # no protocol named: not an SMTP or FTP reply
        "SFTP list error: No such file",  # SFTP has no numbered replies
        "error 450 in line 3",
    ],
)
def test_a_number_without_its_protocol_is_not_a_reply(text: str) -> None:
    reading = read(text)
    assert reading is None or reading.rule.family != "reply", (text, reading)


@pytest.mark.parametrize(
    ("text", "cls"),
    [
        # zod 3's default message for an absent value ("Required"), as the TypeScript SDK words an issue
        ("MCP error -32602: Input validation error: Invalid arguments for tool run: Required at code", B1),
        # 401's reason phrase in RFC 2068 and Apache httpd's error page
        ("401 Authorization Required", F1),
        ("Authorization required. Find your API key in the settings.", F1),
        # a reference that names several things, a count that must agree with another
        ("Ambiguous heading 'Notes'. Candidates: Plan::Notes, Log::Notes", B4),
        ("Number of ids (1) must match number of documents (2).", B4),
    ],
)
def test_documented_generic_shapes(text: str, cls: type[Fault]) -> None:
    assert type(of_text(text)) is cls, text


def test_unambiguous_is_not_ambiguous() -> None:
    reading = read("the unambiguous name was used")
    assert reading is None or reading.rule.key != "ambiguous"


@pytest.mark.parametrize(
    ("text", "cls", "transient"),
    [
        # libcurl's CURLcode names (libcurl-errors(3)) as pycurl and node-libcurl pass them on
        ("pycurl.error: (28, 'CURLE_OPERATION_TIMEDOUT')", D1, True),
        ("CURLE_COULDNT_RESOLVE_HOST: could not resolve api.invalid", D4, False),
        ("CURLE_LOGIN_DENIED", F1, False),
        ("transfer failed: CURLE_REMOTE_FILE_NOT_FOUND", D4, False),
        ("transfer failed: CURLE_PEER_FAILED_VERIFICATION", D4, False),
    ],
)
def test_libcurl_codes(text: str, cls: type[Fault], transient: bool) -> None:
    reads_as(text, cls, transient)


def test_only_a_protocols_own_reply_codes_are_read_as_replies() -> None:
    """A tool named after the protocol passing on an HTTP 404 is not an SMTP 4yz (transient)."""
    reading = read("Error calling smtp_send: 404 page not found")
    assert reading is None or not reading.rule.transient


def test_an_exit_status_above_the_signals_is_the_programs_own_failure() -> None:
    ssh = read("exit status 255\nssh: connect to host db port 22: Connection refused")
    assert ssh is not None and ssh.rule.transient  # the host refused: the service's D1, not a signal
    assert read("exit status 255") is not None and read("exit status 255").rule.key == "exit status"  # type: ignore[union-attr]
