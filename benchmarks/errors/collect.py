"""Regenerates the error corpus (``corpus.jsonl``) by provoking real MCP servers.

    bash scripts/install-corpus-servers.sh      # once: the wider corpus's servers, pinned, under .tools/corpus/
    python -m benchmarks.errors.collect [--out benchmarks/errors/corpus.jsonl] [--only fs,git,...] [--table]

``--only`` re-collects those sources and keeps every other record of the files. Failures a server answers as a
successful result go to ``success_shaped.jsonl`` beside the corpus (listed "to review" at the end of a run: a
situation that did not fail at all is removed from its source). A source with ``startup`` records the error of a
server that fails while the proxy starts it (tool ``(start-up)``). The wider corpus's servers are in
``servers.py``, the local services behind them (PostgreSQL, redis-server, a fake HTTP API) in ``services.py``.

Every server is started as the proxy starts an upstream (``resilient_mcp.upstream.calls.Upstream``: stdio subprocess or
streamable HTTP) and called with arguments that provoke one known situation (``situations.py``). What is recorded
is the raw outcome *as the proxy saw it*, before its rules read it: the ``isError`` result as received, or the
JSON-RPC error / HTTP status / transport exception the upstream seam caught (captured at the seam's two classifier
entry points), or a fault the proxy detected itself (its own attempt timeout). ``replay.py`` turns a record back
into what the rules see. Each record carries the gold label of its situation (``labels.py``).

Servers: the first nine servers (``situations.py``: the reference filesystem, memory, everything, git, time and
fetch servers, ``database-mcp-sqlite``, the project's chaos server over stdio and behind the HTTP fault shim) and the
wider corpus of issue 19 (``servers.py``); the list with versions, kinds and situations is in ``LABELS.md``. Scratch
files live in a temporary directory; every process started here is stopped here.
"""

from __future__ import annotations

import argparse
import dataclasses
import fcntl
import json
import os
import shutil
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp.shared.exceptions import MCPError

import resilient_mcp.upstream.errors as seam
from resilient_mcp.faults import Fault
from resilient_mcp.policy.config import RemoteUpstream, StdioUpstream
from resilient_mcp.upstream import NoHost, Upstream

from .holdout import HOLDOUT_SOURCES
from .servers import SOURCES as MORE_SOURCES
from .situations import SOURCES, Case, Source, Workspace

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
ALL_SOURCES: list[Source] = [*SOURCES, *MORE_SOURCES]


# --- capture at the seam --------------------------------------------------------------------------------------------

_captured: list[dict[str, Any]] = []
_classify_exception = seam.classify_exception
_classify_http_status = seam.classify_http_status


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def raw_exception(exc: BaseException, *, sent: bool) -> dict[str, Any]:
    """An exception as data: enough to rebuild it for the classifier (``replay.py``)."""
    exc = _leaf(exc)
    if isinstance(exc, MCPError):
        return {"kind": "mcp_error", "code": exc.code, "message": exc.message, "data": _jsonable(exc.data)}
    module = type(exc).__module__.split(".")[0]
    return {"kind": "exception", "type": f"{module}.{type(exc).__name__}", "message": str(exc), "sent": sent}


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _recording_exception(exc: BaseException, *, sent: bool) -> Fault:
    _captured.append(raw_exception(exc, sent=sent))
    return _classify_exception(exc, sent=sent)


def _recording_status(status: int, headers: Any, **kw: Any) -> Fault:
    _captured.append({"kind": "http_status", "status": status, "headers": dict(headers), "message": kw.get("message")})
    return _classify_http_status(status, headers, **kw)


seam.classify_exception = _recording_exception  # type: ignore[assignment]
seam.classify_http_status = _recording_status  # type: ignore[assignment]


_NO_HOST = NoHost("the error corpus collector does not sample")


@asynccontextmanager
async def connected(name: str, config: StdioUpstream | RemoteUpstream) -> AsyncIterator[Upstream]:
    async with Upstream(name, config, _NO_HOST, backoff_initial_s=0.2, backoff_max_s=1.0).running(60.0) as up:
        yield up


def _fault_dict(fault: Fault) -> dict[str, Any]:
    return {
        "kind": "proxy_fault",
        "fault_type": fault.fault_type,
        "message": fault.message,
        "transient": fault.is_transient,
        "retry_safety": fault.retry_safety.value,
        "side_effect_status": fault.side_effect_status.value,
        "repair_action": fault.repair_action.value,
        "max_retry": fault.max_retry,
        "details": _jsonable(fault.details),
    }


async def call_once(up: Upstream, case: Case) -> dict[str, Any]:
    """The raw outcome of one call: a fault as the seam caught it, or the result, error or not (a provoked failure
    the server answers as a success is a success-shaped failure; ``collect_source`` lists them for review)."""
    _captured.clear()
    try:
        result = await up.call_tool(case.tool, case.arguments, timeout_s=case.timeout_s)
    except Fault as fault:
        return _captured[-1] if _captured else _fault_dict(fault)
    return {"kind": "result", "result": result.model_dump(mode="json", by_alias=True, exclude_none=True)}


# --- sources --------------------------------------------------------------------------------------------------------


@dataclass
class Record:
    id: str
    source: str
    """The server's package and version."""
    server: str
    """The server's short name: what leave-one-server-out groups by."""
    kind: str
    """What kind of server (database, cache, shell, ...)."""
    transport: str
    situation: str
    tool: dict[str, Any]
    effect: str
    arguments: dict[str, Any]
    raw: dict[str, Any]
    gold: dict[str, Any]
    success_shaped: bool = False
    """The server answered this failure as a successful result (no ``isError``); kept in ``success_shaped.jsonl``."""

    def line(self) -> str:
        return json.dumps(self.__dict__, ensure_ascii=False, sort_keys=True)


def _tool_dict(up: Upstream, name: str) -> dict[str, Any]:
    for tool in up.catalog.tools:
        if tool.name == name:
            return {"name": name, "description": tool.description or "", "input_schema": tool.input_schema}
    return {"name": name, "description": "", "input_schema": {"type": "object"}}


STARTUP_TOOL = {"name": "(start-up)", "description": "", "input_schema": {"type": "object"}}
"""The ``tool`` of a start-up record: no call was made; the server failed while the proxy started it."""


async def collect_startup(source: Source, ws: Workspace, out: list[Record], problems: list[str]) -> None:
    """A server that fails while starting: the first error the proxy's seam caught, as one record."""
    assert source.startup is not None
    situation, gold = source.startup
    # No call was made: the proxy never sent one (the server failed while starting), whatever the situation's label
    # says a call would have met. "not_sent" is the one retry safety that is true of it.
    gold = dataclasses.replace(gold, retry_safety="not_sent")
    async with source.started(ws) as config:
        _captured.clear()
        up = Upstream(
            source.name,
            config,
            _NO_HOST,
            backoff_initial_s=0.2,
            backoff_max_s=1.0,
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(up.run)
            try:  # long enough for a server that retries its own connection a few times and then exits
                await up.wait_ready(60.0)
            except Fault as fault:
                raw = _captured[0] if _captured else _fault_dict(fault)
            else:
                problems.append(f"{source.name}: started, no start-up failure")
                raw = None
            tg.cancel_scope.cancel()
    if raw is not None:
        transport = config.type if isinstance(config, RemoteUpstream) else "stdio"
        out.append(
            Record(
                f"{source.name}-001-{situation}",
                source.package,
                source.server or source.name,
                source.kind,
                transport,
                situation,
                dict(STARTUP_TOOL),
                "read_only",
                {},
                raw,
                gold.as_dict(),
            )
        )


async def collect_source(source: Source, ws: Workspace, out: list[Record], problems: list[str]) -> None:
    if source.startup is not None:
        await collect_startup(source, ws, out, problems)
        return
    async with source.started(ws) as config:
        cases = source.cases(ws)
        async with connected(source.name, config) as up:
            for i, case in enumerate(cases, 1):
                if case.before is not None:
                    case.before(ws)
                raw = await call_once(up, case)
                if case.setup:
                    if raw["kind"] != "result" or raw["result"].get("isError"):
                        problems.append(f"{source.name}: setup call {case.tool} failed: {json.dumps(raw)[:200]}")
                    continue
                rid = f"{source.name}-{i:03d}-{case.situation}"
                shaped = raw["kind"] == "result" and not raw["result"].get("isError", False)
                if shaped:  # to review: a situation that did not fail at all is removed from situations
                    text = json.dumps(raw["result"].get("content", []))[:160]
                    problems.append(f"success-shaped {rid}: {text}")
                out.append(
                    Record(
                        rid,
                        source.package,
                        source.server or source.name,
                        source.kind,
                        config.type if isinstance(config, RemoteUpstream) else "stdio",
                        case.situation,
                        _tool_dict(up, case.tool),
                        source.effect(case.tool),
                        case.arguments or {},
                        raw,
                        case.gold.as_dict(),
                        shaped,
                    )
                )
                if case.settle_s:  # a reset HTTP connection is noticed a moment later (REPORT.md, findings)
                    await anyio.sleep(case.settle_s)
                if case.restart_after:  # the server died on purpose: wait for the supervisor's restart
                    await up.wait_ready(60.0)


@contextmanager
def workspace() -> Iterator[Workspace]:
    # A fixed path, so that paths quoted in error texts are the same on every regeneration; one run at a time (a
    # second run would delete the first one's files under its servers).
    root = Path(tempfile.gettempdir()) / "rmcp-errors-corpus"
    with open(root.with_suffix(".lock"), "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise SystemExit(f"another collector is running (it holds {lock.name})") from None
        yield from _workspace(root)


def _workspace(root: Path) -> Iterator[Workspace]:
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    try:
        yield Workspace.create(root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _kept(path: Path, keep: Callable[[str], bool]) -> list[str]:
    """The lines of an existing corpus file that this run keeps, by source: ``--only`` keeps the other sources, and a
    source that failed keeps its old records."""
    if not path.exists():
        return []
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip() and keep(_source_of(json.loads(line)["id"]))]


def _source_of(record_id: str) -> str:
    """``postgres-ref-writes-003-read_only_transaction`` -> ``postgres-ref-writes`` (ids are source-NNN-situation)."""
    parts = record_id.split("-")
    for i, part in enumerate(parts):
        if len(part) == 3 and part.isdigit():
            return "-".join(parts[:i])
    return record_id


def _write(path: Path, kept: list[str], records: list[Record]) -> None:
    lines = sorted([*kept, *(r.line() for r in records)], key=lambda line: str(json.loads(line)["id"]))
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")


def shaped_path_of(out_path: Path) -> Path:
    """Where the success-shaped records of ``out_path`` go: ``success_shaped.jsonl`` beside the corpus,
    ``holdout_success_shaped.jsonl`` beside the fresh hold-out."""
    prefix = "" if out_path.stem == "corpus" else out_path.stem + "_"
    return out_path.with_name(f"{prefix}success_shaped.jsonl")


async def main_async(out_path: Path, only: set[str] | None, sources: list[Source] | None = None) -> int:
    records: list[Record] = []
    problems: list[str] = []
    sources = ALL_SOURCES if sources is None else sources
    unknown = (only or set()) - {s.name for s in sources}
    if unknown:
        known = ", ".join(s.name for s in sources)
        print(f"unknown source(s): {', '.join(sorted(unknown))}; known: {known}", file=sys.stderr)
        return 2
    shaped_path = shaped_path_of(out_path)
    failed: set[str] = set()
    with workspace() as ws:
        for source in sources:
            if only and source.name not in only:
                continue
            before = len(records)
            try:
                with anyio.fail_after(600):
                    await collect_source(source, ws, records, problems)
            except Exception as exc:  # one broken peer must not lose the others' records (nor its old ones)
                problems.append(f"{source.name}: {type(exc).__name__}: {exc}")
                failed.add(source.name)
                del records[before:]
            print(f"{source.name:12} {len(records) - before:4d} records", file=sys.stderr)
    keep = (lambda name: name not in only or name in failed) if only else (lambda name: name in failed)
    kept, kept_shaped = _kept(out_path, keep), _kept(shaped_path, keep)
    errors = [r for r in records if not r.success_shaped]
    shaped = [r for r in records if r.success_shaped]
    _write(out_path, kept, errors)
    _write(shaped_path, kept_shaped, shaped)
    print(f"{len(errors)} records -> {out_path}, {len(shaped)} -> {shaped_path}", file=sys.stderr)
    for p in problems:
        print(f"  {'to review' if p.startswith('success-shaped') else 'not collected'}: {p}", file=sys.stderr)
    return 0 if records else 1


def server_table(out_path: Path) -> str:
    """The servers of the committed corpus as a Markdown table (LABELS.md): records and success-shaped per server."""
    languages = {(s.server or s.name): s.language for s in [*ALL_SOURCES, *HOLDOUT_SOURCES]}
    rows: dict[str, dict[str, Any]] = {}
    for path, key in ((out_path, "errors"), (shaped_path_of(out_path), "shaped")):
        if not path.exists():
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            r = json.loads(line)
            row = rows.setdefault(
                r["server"], {"package": r["source"], "kind": r["kind"], "errors": 0, "shaped": 0, "situations": {}}
            )
            row[key] += 1
            mark = "*" if key == "shaped" else ""
            row["situations"].setdefault(r["situation"] + mark, None)
    lines = [
        "| server | package | kind | SDK | error records | success-shaped | situations (* success-shaped) |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, row in sorted(rows.items(), key=lambda kv: (kv[1]["kind"], kv[0])):
        situations = ", ".join(sorted(row["situations"])) if row["kind"] != "fault injector" else "see situations.py"
        lines.append(
            f"| {name} | `{row['package']}` | {row['kind']} | {languages.get(name, '')} | {row['errors']} | "
            f"{row['shaped']} | {situations} |"
        )
    total_e = sum(r["errors"] for r in rows.values())
    total_s = sum(r["shaped"] for r in rows.values())
    real = sum(1 for row in rows.values() if row["kind"] != "fault injector")
    label = f"**{real} real servers** (+ {len(rows) - real} fault injectors)"
    lines.append(f"| {label} | | | | **{total_e}** | **{total_s}** | |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=HERE / "corpus.jsonl")
    parser.add_argument("--only", help="comma-separated source names (fs, memory, everything, git, ...)")
    parser.add_argument("--table", action="store_true", help="print the corpus's servers as a Markdown table")
    parser.add_argument(
        "--holdout", action="store_true", help="collect the fresh hold-out's servers (holdout.py) into holdout.jsonl"
    )
    args = parser.parse_args()
    if args.holdout and args.out == HERE / "corpus.jsonl":
        args.out = HERE / "holdout.jsonl"
    if args.table:
        sys.stdout.write(server_table(args.out) + "\n")
        return 0
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    only = set(args.only.split(",")) if args.only else None
    return anyio.run(main_async, args.out, only, HOLDOUT_SOURCES if args.holdout else None)


if __name__ == "__main__":
    raise SystemExit(main())
