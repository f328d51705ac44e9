"""Families of one meaning (``vocab._FAMILIES``, the SQL engines' conditions, the network words): phrases that say the
same thing in different layers' or servers' words are one rule, so a server that words it as another layer does is
still read (issue 19, strict leave-one-server-out). Texts are the standards' own examples (PostgreSQL's, SQLite's and
MySQL's message catalogs, git's builtin messages, Kubernetes's kubelet and admission messages, Airtable's error
types) or written in a family's plain form; each family has negatives: the same words in a success, in a user
program's output, or after a permanent cause must not flip the verdict."""

from __future__ import annotations

import mcp_types as types
import pytest

from resilient_mcp.faults import (
    Fault,
    PermanentExecutionError,
    PermissionDenied,
    RepairAction,
    SemanticArgumentRejection,
    StateConflict,
    TransientExecutionError,
    Unauthenticated,
    UnknownTool,
)
from resilient_mcp.faults.classify import classify_result
from resilient_mcp.faults.vocab import held_out, read

B4, D1, D4, D5 = SemanticArgumentRejection, TransientExecutionError, PermanentExecutionError, StateConflict
F1, F2 = Unauthenticated, PermissionDenied
FIX, ASK = RepairAction.FIX_PARAMETER, RepairAction.ASK_USER


def of_text(text: str, *, tool: types.Tool | None = None) -> Fault:
    result = types.CallToolResult(content=[types.TextContent(text=text)], is_error=True)
    fault = classify_result(result, tool=tool)
    assert fault is not None
    return fault


def key_of(text: str) -> str | None:
    reading = read(text)
    return None if reading is None else reading.rule.key


@pytest.mark.parametrize(
    ("text", "cls", "key"),
    [
        # one SQLSTATE condition in three engines' words (PostgreSQL, SQLite, MySQL message catalogs)
        ('relation "audit_log" does not exist', B4, "42P01"),
        ("no such table: audit_log", B4, "42P01"),
        ("Table 'shop.audit_log' doesn't exist", B4, "42P01"),
        ("Unknown table 'audit_log'", B4, "42P01"),
        ('syntax error at or near "SELEC"', B4, "42601"),
        ("incomplete input", B4, "42601"),
        ("You have an error in your SQL syntax; check the manual", B4, "42601"),
        ("cannot execute INSERT in a read-only transaction", F2, "25006"),
        ("attempt to write a readonly database", F2, "25006"),
        ("The MySQL server is running with the --read-only option so it cannot execute this statement", F2, "25006"),
        ('duplicate key value violates unique constraint "users_email_key"', D5, "23505"),
        ("UNIQUE constraint failed: users.email", D5, "23505"),
        ("Duplicate entry 'a@example.com' for key 'users.email'", D5, "23505"),
        ('null value in column "email" of relation "users" violates not-null constraint', B4, "23502"),
        ("NOT NULL constraint failed: users.email", B4, "23502"),
        ('invalid input syntax for type integer: "abc"', B4, "(22)"),
        ("value too long for type character varying(8)", B4, "(22)"),
        ("Data too long for column 'name' at row 1", B4, "(22)"),
    ],
)
def test_one_sql_condition_in_each_engines_words_is_one_rule(text: str, cls: type[Fault], key: str) -> None:
    fault = of_text(text)
    assert type(fault) is cls
    assert key in str(key_of(text))


def test_a_server_whose_sql_words_no_other_server_used_keeps_the_condition() -> None:
    """Strict leave-one-server-out switches a rule off by its key: the engines' phrases of one condition are one
    key, so SQLite's "incomplete input" stays on when only another server showed PostgreSQL's "syntax error"."""
    sqlite, postgres = read("incomplete input"), read('syntax error at or near "x"')
    assert sqlite is not None and postgres is not None
    assert (sqlite.rule.family, sqlite.rule.key) == (postgres.rule.family, postgres.rule.key)
    off = frozenset({("sql", "some other rule")})
    with held_out(frozenset({"sqlite"}), off):
        assert type(of_text("incomplete input")) is B4


@pytest.mark.parametrize(
    "text",
    [
        "Failed to fetch robots.txt http://127.0.0.1:9/robots.txt due to a connection issue",
        "Network Error: fetch failed. Check if the SEARXNG_URL is correct",  # axios's ERR_NETWORK
        "There was a connection problem talking to the API",
        "Unable to connect to the database at db:5432",
    ],
)
def test_a_connection_that_failed_is_transient_in_plain_words(text: str) -> None:
    fault = of_text(text)
    assert type(fault) is D1 and fault.is_transient
    assert key_of(text) == "connection or network failure"


@pytest.mark.parametrize(
    ("text", "cls"),
    [
        # a permanent cause over a connection outranks the connection words (authentication, a host key)
        ("SSH connection error: All configured authentication methods failed", F1),
        ("SSH connection error: Host key verification failed.", D4),
        ("Connection error: password authentication failed for user app", F1),
        # a bare "fetch failed" names no cause (DNS failure and a refused connection alike): not transient
        ("fetch failed", D4),
    ],
)
def test_connection_words_never_outrank_a_permanent_cause(text: str, cls: type[Fault]) -> None:
    fault = of_text(text)
    assert type(fault) is cls and not fault.is_transient


@pytest.mark.parametrize(
    "text",
    [
        "Access denied - path outside allowed directories: /etc/passwd not in /srv",
        "Path '/etc/hosts.xlsx' is outside the allowed directories.",
        "Path traversal detected: attempts to escape the defined root directory.",
        "Path not allowed: /root. Must be within one of these directories: /srv",
        # a file name that contains "outside" is the caller's data, the refusal is still read
        "Access denied: path '/srv/outside.pdf' is outside the allowed directories.",
    ],
)
def test_a_path_outside_the_sandbox_is_fixed_by_another_path(text: str) -> None:
    fault = of_text(text)
    assert type(fault) is F2 and fault.repair_action is FIX


@pytest.mark.parametrize(
    ("text", "repair"),
    [
        ("Command rejected by default security policy: python", FIX),
        ("Command not allowed: rm", FIX),
        ('admission webhook "validate.kyverno.svc" denied the request: the label team must be set', FIX),
        ("Recipient(s) not in allowlist", FIX),
        # the remedy is configuration: only a person can change it
        ("No commands are allowed. Please set ALLOW_COMMANDS environment variable.", ASK),
        ("Recipient(s) not in allowlist; configure allowed recipients before sending.", ASK),
    ],
)
def test_an_allow_list_or_policy_refusal(text: str, repair: RepairAction) -> None:
    fault = of_text(text)
    assert type(fault) is F2 and fault.repair_action is repair and not fault.is_transient


@pytest.mark.parametrize(
    "text",
    [
        "Connection 'staging' not found",
        "Search session nope not found",
        "No session found for PID 999999",
        'Session "deploy-tail" not found on dev',
        'Profile "staging" not found',
        "Tab 7 not found",
        "Error: Failed to kill process: kill ESRCH",  # POSIX errno: no such process
        "kill: (999999) - No such process",  # strerror(ESRCH)
    ],
)
def test_a_session_or_handle_the_server_holds_is_a_wrong_value(text: str) -> None:
    fault = of_text(text)
    assert type(fault) is B4 and fault.repair_action is FIX


def test_a_file_or_page_not_found_stays_a_missing_resource() -> None:
    """The handle family names the server's own handles; a file, a page or an entity not found stays D4 (look it
    up), and a host name that does not resolve stays the resolver's D4."""
    assert type(of_text("File not found: /srv/docs/notes.md")) is D4
    assert type(of_text("Entity with name Alice not found")) is D4
    assert type(of_text("connect: getaddrinfo ENOTFOUND db.invalid")) is D4


@pytest.mark.parametrize(
    ("text", "cls"),
    [
        ("fatal: Not a valid object name develop", B4),
        ("fatal: ambiguous argument 'v9': unknown revision or path not in the working tree.", B4),
        ("fatal: invalid reference: feature-y", B4),
        ("fatal: bad revision 'main..nope'", B4),
        ("Ref 'develop' did not resolve to an object", B4),
        ("On branch main\nnothing to commit, working tree clean", D5),
        ('no changes added to commit (use "git add" and/or "git commit -a")', D5),
        ("No changes staged for commit. Use git_add to stage changes first", D5),
    ],
)
def test_git_revisions_and_an_empty_commit(text: str, cls: type[Fault]) -> None:
    assert type(of_text(text)) is cls


def test_git_nothing_to_commit_outranks_the_exit_status() -> None:
    """git exits 1 with "nothing to commit": the index is not as the call assumed (D5), not a failed command."""
    text = "Error: Git commit failed: Exit Code: 1 Stderr: Stdout: On branch main nothing to commit, working tree clean"
    assert type(of_text(text)) is D5


@pytest.mark.parametrize(
    "text",
    [
        'container "job" in pod "batch-2" is waiting to start: ContainerCreating',
        "The search index is starting up, please wait",
        "Service not ready yet",
    ],
)
def test_what_is_still_starting_is_transient(text: str) -> None:
    fault = of_text(text)
    assert type(fault) is D1 and fault.is_transient


@pytest.mark.parametrize(
    "text",
    [
        # "ready" or "start" without a word of passing state says nothing about time
        "Pod is not ready: CrashLoopBackOff",
        "failed to start container: exec format error",
    ],
)
def test_not_ready_without_a_passing_state_is_not_transient(text: str) -> None:
    assert not of_text(text).is_transient


@pytest.mark.parametrize(
    ("text", "cls"),
    [
        # Airtable's error types under HTTP 422 and 403: the type names the cause the status only classes
        ('API Error: Unprocessable Entity. Response: {"error": {"type": "ROW_DOES_NOT_EXIST", "message": "x"}}', D4),
        ('API Error: Unprocessable Entity. Response: {"error": {"type": "VIEW_NAME_NOT_FOUND", "message": "x"}}', D4),
        ('API Error: Unprocessable Entity. {"error": {"type": "DUPLICATE_TABLE_NAME", "message": "x"}}', D5),
        ('API Error: Forbidden. {"error": {"type": "INVALID_PERMISSIONS_OR_MODEL_NOT_FOUND", "message": "x"}}', F2),
        # a type with no known part leaves the status to decide
        ('API Error: Unprocessable Entity. {"error": {"type": "SOMETHING_ODD", "message": "x"}}', B4),
    ],
)
def test_an_apis_error_type_outranks_its_http_status(text: str, cls: type[Fault]) -> None:
    assert type(of_text(text)) is cls


def test_a_top_level_type_field_is_not_an_error_type() -> None:
    """Only an ``error`` object's ``type`` is an error type: a top-level ``"type"`` is the payload's own."""
    assert key_of('{"type": "RECORD_NOT_FOUND_EVENT", "detail": "weird"} Unprocessable Entity') != "*_NOT_FOUND"


@pytest.mark.parametrize(
    "text", ["Tool not found: fetch_pdf", "Unknown tool: cache_scan", "MCP error -32602: Tool echo2 not found"]
)
def test_an_unknown_tool_in_each_wording_is_one_rule(text: str) -> None:
    assert type(of_text(text)) is UnknownTool
    assert key_of(text) == "unknown tool"


def test_only_some_values_supported_names_the_choices() -> None:
    text = "Unsupported URL protocol for ftp://x/y. Only http, https, and data URLs are supported."
    with held_out(frozenset(), frozenset({("keyword", "unsupported")})):
        fault = of_text(text)
    assert type(fault) is B4 and fault.repair_action is FIX


def test_family_words_in_a_success_change_nothing() -> None:
    """A successful result is never reinterpreted, whatever its words."""
    ok = types.CallToolResult(content=[types.TextContent(text="connection refused 3 times, then ok")], is_error=False)
    assert classify_result(ok, tool=None) is None


def test_family_words_in_a_user_programs_output_stay_the_programs() -> None:
    """A program the tool ran for the caller that printed a policy refusal or a session not found: the program
    failed (B4), not the server's allow-list (F2)."""
    run = types.Tool(name="run", input_schema={"type": "object", "properties": {"command": {"type": "string"}}})
    fault = of_text("Command failed: ./deploy.sh\nrejected by policy: staging\n[exit 1]", tool=run)
    assert type(fault) is B4


def _tool(*names: str) -> types.Tool:
    return types.Tool(name="t", input_schema={"type": "object", "properties": {n: {"type": "string"} for n in names}})


@pytest.mark.parametrize(
    "text",
    [
        "Unexpected token } in JSON at position 9",  # V8's JSON.parse
        "Expected ',' or '}' after property value in JSON at position 69 (line 1 column 70)",
        "Unexpected end of JSON input",
        "invalid character 'x' looking for beginning of value",  # Go's encoding/json
        "error converting YAML to JSON: yaml: line 4: did not find expected key",  # sigs.k8s.io/yaml
        "Expecting value: line 1 column 1 (char 0)",  # Python's json
        "mapping values are not allowed here",  # PyYAML
    ],
)
def test_a_parser_error_is_whose_document_it_is(text: str) -> None:
    """A tool that takes a document was sent a malformed one (B4, fix it); a tool that takes none failed on a file
    of its own (D4, ask the user: no call the model can make repairs it)."""
    sent = of_text(text, tool=_tool("manifest"))
    assert type(sent) is B4 and sent.repair_action is FIX
    own = of_text(text, tool=_tool("query"))
    assert type(own) is D4 and own.repair_action is ASK and not own.is_transient


def test_a_parser_error_about_the_arguments_is_the_callers() -> None:
    text = "invalid arguments: json: error calling MarshalJSON: invalid character 'l' looking for beginning of value"
    assert type(of_text(text, tool=_tool("id"))) is B4


def test_json_words_without_a_parser_error_are_not_read_as_one() -> None:
    reading = read("Response was valid JSON but the record is locked by another user")
    assert reading is None or reading.rule.family != "parser"


@pytest.mark.parametrize(
    "text",
    [
        "Could not find exact match for edit: - write docs",
        "Search content not found in /srv/docs/notes.txt. The closest match was 'beta'",
        "Expected 1 occurrences but found 5 in /srv/docs/notes.txt",
        "Error 40080: The patch you provided could not be applied to the target content.",
    ],
)
def test_an_edit_whose_old_text_is_not_there_is_a_state_conflict(text: str) -> None:
    fault = of_text(text)
    assert type(fault) is D5 and not fault.is_transient


def test_a_path_is_the_callers_data_not_the_servers_words() -> None:
    """The "missing" of ``/srv/docs/missing.md`` is a file's name: the server said "not found" (D4)."""
    assert type(of_text("Error processing request: File not found: /srv/docs/missing.md")) is D4
    assert type(of_text("Error processing request: File not found: '/srv/docs/invalid.md'")) is D4
    assert type(of_text("Error: required file is missing")) is B4  # the word, not a path, still reads


@pytest.mark.parametrize(
    "text", ["endTime is required", "failed to get pod: name parameter required", "missing argument kind"]
)
def test_an_argument_of_the_tool_named_as_missing(text: str) -> None:
    """The name is the tool's own argument (from its schema): the caller left it out (B1). Read as a guess: the
    argument may have been sent empty, so it never claims that nothing ran."""
    fault = of_text(text, tool=_tool("endTime", "name", "kind"))
    assert fault.fault_type == "B1_missing_required_argument" and fault.repair_action is FIX
    assert fault.retry_safety.value == "executed_failed"


def test_a_word_that_is_not_an_argument_is_not_read_as_one() -> None:
    """ "name is required" from a tool without a ``name`` argument is the server's business, not a missing argument;
    a credential the tool does not take stays the user's (F1)."""
    assert of_text("failed: name is required", tool=_tool("query")).fault_type != "B1_missing_required_argument"
    assert type(of_text("API key is required", tool=_tool("query"))) is F1


@pytest.mark.parametrize(
    ("text", "cls"),
    [
        ('no matches for kind "Widget" in version "example.com/v1"', B4),  # apimachinery's NoKindMatchError
        (
            'pods "probe-1" is forbidden: unable to create new content in namespace legacy because it is being '
            "terminated",
            D5,
        ),
    ],
)
def test_kubernetes_documented_messages(text: str, cls: type[Fault]) -> None:
    assert type(of_text(text)) is cls


def test_a_rate_limit_policy_is_a_rate_limit_not_a_refusal() -> None:
    fault = of_text("Request rejected by the rate-limit policy of this tenant, slow down")
    assert fault.fault_type == "D2_rate_limited" and fault.is_transient


@pytest.mark.parametrize(
    ("text", "fault_type", "transient"),
    [
        # a Redis reply's prefix after a wrapper's colon, and Redis's documented messages without their prefix
        ("Error getting field 'name' from hash 'h': WRONGTYPE Operation against a key holding the wrong", "B4", False),
        ("Error setting key k: BUSY Redis is busy running a script. You can only call SCRIPT KILL", "D1", True),
        ("Error retrieving key greeting: invalid username-password pair or user is disabled.", "F1", False),
        ("Error setting key big: command not allowed when used memory > 'maxmemory'.", "F3", False),
    ],
)
def test_redis_replies_inside_a_servers_sentence(text: str, fault_type: str, transient: bool) -> None:
    fault = of_text(text)
    assert fault.fault_type.startswith(fault_type) and fault.is_transient is transient


def test_a_redis_word_inside_a_sentence_is_not_a_prefix() -> None:
    """Only the first word after a colon: "the queue is BUSY" is not Redis's BUSY reply."""
    assert not of_text("Deploy failed: the build queue reported that the runner is BUSY").is_transient


@pytest.mark.parametrize(
    ("text", "cls"),
    [
        # DuckDB's error types (duckdb.org "Errors"), which reuse other words ("... does not exist")
        ("Database error: Catalog Error: Table with name customers does not exist! Did you mean x?", B4),
        ('Binder Error: Referenced column "username" not found in FROM clause!', B4),
        ('Parser Error: syntax error at or near "selec"', B4),
        ("Conversion Error: Could not convert string 'abc' to INT32", B4),
        ('Constraint Error: Duplicate key "id: 1" violates primary key constraint.', D5),
        # PostgreSQL's missing database stays D4 ask_user; "database" elsewhere in the text does not make it one
        ('database "shop_archive" does not exist', D4),
    ],
)
def test_duckdb_error_types(text: str, cls: type[Fault]) -> None:
    assert type(of_text(text)) is cls


@pytest.mark.parametrize(
    ("text", "fault_type", "transient"),
    [
        ("Error: es_rejected_execution_exception Root causes: rejected execution of TimedRunnable", "D2", True),
        ("Error: master_not_discovered_exception Root causes: master_not_discovered_exception: null", "D1", True),
        ("Error: index_not_found_exception Root causes: no such index [logs]", "D4", False),
        ("Error: version_conflict_engine_exception Root causes: [1]: version conflict", "D5", False),
        ("Error: parsing_exception Root causes: unknown query [mtch]", "B4", False),
    ],
)
def test_elasticsearch_error_types(text: str, fault_type: str, transient: bool) -> None:
    fault = of_text(text)
    assert fault.fault_type.startswith(fault_type) and fault.is_transient is transient


@pytest.mark.parametrize(
    "text",
    [
        '{"error":"Missing required argument: user_id"}',
        "Missing required arguments: channel_id and text",
        "Error calling tool drop_database: Unknown tool: drop_database",  # an SDK wrapper before the SDK's words
        '{"error":"Unknown tool: slack_send_dm"}',
    ],
)
def test_sdk_words_after_a_wrapper_or_inside_an_error_body(text: str) -> None:
    fault = of_text(text)
    assert fault.fault_type in ("B1_missing_required_argument", "A1_unknown_tool")


def test_an_unknown_tool_mid_sentence_is_not_the_callers_tool() -> None:
    """Only where the text opens with it (after a label or an SDK wrapper): "the plugin said: unknown tool" inside a
    program's output is not the proxy's caller calling a tool that does not exist."""
    assert type(of_text("Deploy step 3 failed because the plugin said unknown tool 'helm'")) is not UnknownTool
