"""Reading policy files, and reloading them when they change.

``load_policy`` validates every file against the strict ``PolicyFile`` model (errors name file, line and key) and
merges them in order. A file with no document in it (empty, blank or only comments) is an error, not an empty
policy: an editor that truncates a file before writing it would otherwise apply, for a moment, a policy without the
file's denies; ``{}`` is the empty policy, written on purpose. ``PolicyWatcher`` polls the files' modification
times; a change is read once the files have stayed the same for one poll (an editor writing a file in place, in two
chunks, left a first half that parsed as a valid policy without the second half's denies for a moment); a valid
change is then applied for new calls (the proxy recompiles its chains and swaps them atomically), an invalid one (an
empty file included) is logged and the last good policy stays. Writing the new file beside the old and renaming it
over (what most editors and ``mv`` do) replaces it in one step.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import anyio
import structlog

from . import Policy, PolicyFile, merge_files
from .source import SourceError, load_document, validate_document

log = structlog.get_logger(__name__)


def load_policy(paths: Sequence[Path], base: PolicyFile | None = None) -> Policy:
    """Every file validated and merged, later files on top of ``base`` (e.g. what command-line flags say).
    Raises ``SourceError`` listing all problems."""
    files: list[PolicyFile] = [base] if base is not None else []
    problems: list[str] = []
    for path in paths:
        try:
            doc = load_document(path)
            if doc.data is None:
                problems.append(
                    f"{path}: the file is empty (or only comments), so it is refused rather than read as a policy "
                    "that sets nothing (which would lift its denies); write {} for an empty policy"
                )
                continue
            files.append(validate_document(PolicyFile, doc))
        except SourceError as exc:
            problems.extend(exc.problems)
    if problems:
        raise SourceError(", ".join(str(p) for p in paths), problems)
    return Policy(merge_files(files), sources=[str(p) for p in paths])


def policy_schema() -> dict[str, object]:
    """JSON Schema of a policy file, generated from the models (committed as policies/schema.json)."""
    schema = PolicyFile.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "resilient-mcp policy file"
    return schema


def write_policy_schema(path: Path) -> None:
    path.write_text(json.dumps(policy_schema(), indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _stamp(paths: Sequence[Path]) -> tuple[tuple[str, int, int, int, int], ...]:
    out = []
    for p in paths:
        try:
            st = p.stat()
            out.append((str(p), st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino))
        except OSError:
            out.append((str(p), -1, -1, -1, -1))
    return tuple(out)


class PolicyWatcher:
    """Polls policy files and calls ``apply`` with each new valid policy. Keeps the last good one on errors."""

    def __init__(
        self,
        paths: Callable[[], Sequence[Path]],
        apply: Callable[[Policy], None],
        *,
        interval_s: float = 1.0,
        base: PolicyFile | None = None,
    ) -> None:
        self._base = base
        self._paths = paths
        self._apply = apply
        self._interval_s = interval_s
        self._last = _stamp(paths())
        self._seen = self._last
        """The files as the previous check saw them: a change is read once a check sees them unchanged since."""
        self.rejected = 0

    def check_now(self) -> bool:
        """Reload if anything changed and has since stayed the same for one check (the file is not being written).
        True when a new policy was applied."""
        paths = list(self._paths())
        stamp = _stamp(paths)
        if stamp == self._last:
            self._seen = stamp
            return False
        if stamp != self._seen:  # changed since the last check: maybe still being written, read it next time
            self._seen = stamp
            return False
        self._last = stamp
        try:
            policy = load_policy(paths, self._base)
        except SourceError as exc:
            self.rejected += 1
            log.error("policy_reload_rejected", problems=exc.problems, kept="the last valid policy")
            return False
        self._apply(policy)
        log.info("policy_reloaded", files=[str(p) for p in paths])
        return True

    async def run(self) -> None:
        while True:
            await anyio.sleep(self._interval_s)
            self.check_now()
