"""The aggregated view of every upstream's tools, prompts and resources, under the names the host sees.

With one upstream (and no explicit prefix) names are unchanged. With several, each upstream's tools and prompts are
named ``{prefix}{separator}{name}`` (prefix defaults to the upstream's configured name; ``prefix: ""`` opts out),
except a name the server already starts with its prefix and ``_``, ``-`` or ``.`` (the git server's ``git_status``
under prefix ``git``), which is kept as it is rather than doubled (``git__git_status``); see ``public_name``.
Two upstreams offering the same host-visible name is a ``CatalogConflict`` naming both: never silent shadowing.
Resources keep their URIs (they are already global); a URI offered twice goes to the first upstream, with a warning.
Metadata (title, description, schemas, annotations, icons, ``_meta``) passes through unchanged but for the name.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import mcp_types as types
import structlog
from mcp.shared.tool_name_validation import validate_tool_name

from ..call.chain import Entry
from ..policy.config import default_prefix

if TYPE_CHECKING:
    from ..upstream import Upstream

log = structlog.get_logger(__name__)


class CatalogConflict(Exception):
    """Two upstreams offer the same host-visible name."""


@dataclass(slots=True)
class Catalog:
    tools: dict[str, Entry] = field(default_factory=dict)
    prompts: dict[str, Entry] = field(default_factory=dict)
    resources: dict[str, tuple[str, types.Resource]] = field(default_factory=dict)
    templates: list[tuple[str, types.ResourceTemplate]] = field(default_factory=list)
    prefixes: dict[str, str] = field(default_factory=dict)
    """upstream name -> the prefix its names carry ("" when unprefixed)."""
    refused: list[str] = field(default_factory=list)
    """Why each name an upstream offered is not routed to it (a clash, or another upstream's prefix)."""

    def prompt_list(self) -> list[types.Prompt]:
        return [
            e.prompt.model_copy(update={"name": e.public_name}) for e in self.prompts.values() if e.prompt is not None
        ]

    def upstream_for_name(self, public_name: str) -> str | None:
        """The upstream a name would belong to by its prefix (for calls to tools of an upstream that is down)."""
        best: tuple[int, str] | None = None
        for upstream, prefix in self.prefixes.items():
            own = prefix if public_name.startswith(prefix) else _bare_match(public_name, prefix)
            if prefix and own and (best is None or len(own) > best[0]):
                best = (len(own), upstream)
        if best is not None:
            return best[1]
        unprefixed = [u for u, p in self.prefixes.items() if not p]
        return unprefixed[0] if len(unprefixed) == 1 else None

    def upstream_for_uri(self, uri: str) -> str | None:
        if uri in self.resources:
            return self.resources[uri][0]
        for upstream, template in self.templates:
            if template_matches(template.uri_template, uri):
                return upstream
        return None


class Prefix(str):
    """A full prefix (``git__``) that knows its bare part (``git``): ``public_name`` needs both."""

    bare: str

    def __new__(cls, bare: str, separator: str) -> Prefix:
        full = super().__new__(cls, f"{bare}{separator}" if bare else "")
        full.bare = bare
        return full

    def __getnewargs__(self) -> tuple[str, str]:  # type: ignore[override]
        return self.bare, self[len(self.bare) :]


def prefixes_for(upstreams: Mapping[str, str | None], separator: str) -> dict[str, str]:
    """The prefix each upstream's names get: none for a single upstream without an explicit prefix; otherwise the
    explicit prefix, or the upstream's name made safe for tool names; ``prefix: ""`` opts out."""
    if len(upstreams) == 1:
        ((name, prefix),) = upstreams.items()
        return {name: Prefix(prefix or "", separator)}
    return {
        name: Prefix("" if prefix == "" else (prefix if prefix is not None else default_prefix(name)), separator)
        for name, prefix in upstreams.items()
    }


def _bare_match(name: str, prefix: str) -> str:
    """The part of ``name`` that already says its prefix (``git_`` of ``git_status`` under ``git__``), or ""."""
    bare = getattr(prefix, "bare", "")
    if not bare or len(name) <= len(bare) + 1 or name[len(bare)] not in "_-.":
        return ""
    if name[: len(bare)].lower() != bare.lower() or name.lower().startswith(prefix.lower()):
        return ""
    return name[: len(bare) + 1]


def public_name(name: str, prefix: str) -> str:
    """The host-visible name of an upstream's tool or prompt ``name`` under ``prefix`` (a ``Prefix``).

    ``{prefix}{separator}{name}``, except that a name that already starts with the bare prefix (any case) and one of
    ``_ - .`` is kept as it is: ``git_status`` stays ``git_status`` under ``git``, not ``git__git_status``. A name
    that starts with the whole prefix (``git__x``) is prefixed as usual, so a kept name never looks like a prefixed
    one and two names of one upstream cannot meet; a clash across upstreams is a ``CatalogConflict`` as always."""
    return name if _bare_match(name, prefix) else prefix + name


def prefix_owner(public: str, prefixes: Mapping[str, str]) -> str | None:
    """The upstream whose (non-empty) prefix ``public`` starts with, the longest prefix first; None when none."""
    best: tuple[int, str] | None = None
    for upstream, prefix in prefixes.items():
        if prefix and public.startswith(prefix) and (best is None or len(prefix) > best[0]):
            best = (len(prefix), upstream)
    return best[1] if best is not None else None


def build_catalog(
    upstreams: Mapping[str, Upstream],
    prefixes: Mapping[str, str],
    *,
    strict: bool,
    previous: Catalog | None = None,
) -> Catalog:
    """Aggregate. With ``strict`` a name clash raises ``CatalogConflict``; otherwise the name's owner keeps it: the
    upstream that had it in ``previous`` (the routing in force), else the first upstream in the configuration.

    A name in another upstream's prefix (``victim__read_file`` offered by an unprefixed upstream) is never taken:
    it is refused (``tool_name_refused`` in the log, ``Catalog.refused``), whether or not its owner offers it now,
    so an upstream cannot take over another's tool by adding it at runtime with ``list_changed``."""
    cat = Catalog(prefixes=dict(prefixes))
    conflicts: list[str] = []
    owners = {name: e.upstream for name, e in previous.tools.items()} if previous is not None else {}
    for up_name, up in upstreams.items():
        prefix = prefixes.get(up_name, "")
        refused: list[str] = []
        for tool in up.catalog.tools:
            public = public_name(tool.name, prefix)
            why = _in_anothers_prefix(public, up_name, prefixes)
            if why is not None:
                refused.append(why)
                continue
            entry = Entry(public, up_name, tool.name, tool=tool)
            incumbent = cat.tools.get(public)
            if incumbent is not None and owners.get(public) == up_name:  # the name was this upstream's: it stays
                cat.tools[public] = entry
                entry = incumbent
            clash = _add(cat.tools, entry, "tool")
            if clash:
                conflicts.append(clash)
            _check_name(public, up_name)
        up.refused_tools = refused  # the status page shows them with the upstream
        cat.refused.extend(refused)
        for prompt in up.catalog.prompts:
            entry = Entry(public_name(prompt.name, prefix), up_name, prompt.name, prompt=prompt)
            clash = _add(cat.prompts, entry, "prompt")
            if clash:
                conflicts.append(clash)
        for res in up.catalog.resources:
            uri = str(res.uri)
            if uri in cat.resources:
                log.warning("resource_uri_shadowed", uri=uri, kept=cat.resources[uri][0], dropped=up_name)
                continue
            cat.resources[uri] = (up_name, res)
        cat.templates.extend((up_name, t) for t in up.catalog.resource_templates)
    if conflicts:
        if strict:
            raise CatalogConflict("; ".join(conflicts))
        for c in conflicts:
            log.error("name_conflict", detail=c)
        cat.refused.extend(conflicts)
    return cat


def _in_anothers_prefix(public: str, upstream: str, prefixes: Mapping[str, str]) -> str | None:
    """Why ``upstream`` may not offer the tool ``public`` (it is in another upstream's prefix), or ``None``."""
    owner = prefix_owner(public, prefixes)
    if owner is None or owner == upstream:
        return None
    why = (
        f"tool {public!r} of upstream {upstream!r} is named in upstream {owner!r}'s prefix "
        f"({prefixes[owner]!r}): refused, {owner!r} keeps the name"
    )
    log.warning("tool_name_refused", tool=public, upstream=upstream, owner=owner, reason=why)
    return why


def _add(table: dict[str, Entry], entry: Entry, kind: str) -> str | None:
    other = table.get(entry.public_name)
    if other is None:
        table[entry.public_name] = entry
        return None
    return (
        f"{kind} name {entry.public_name!r} is offered by both upstream {other.upstream!r} and upstream "
        f'{entry.upstream!r}: give one of them a prefix (upstreams.<name>.prefix) or remove prefix: ""'
    )


def _check_name(name: str, upstream: str) -> None:
    result = validate_tool_name(name)
    if not result.is_valid:
        log.warning("tool_name_not_sep986", tool=name, upstream=upstream, warnings=list(result.warnings))


MAX_URI_CHARS = 65_536
"""Longest URI a ``resources/read`` may name (the SDK's own matching cap); a longer one is refused before routing."""
MAX_TEMPLATE_CHARS = 8_192
"""Longest URI template an upstream may list that the proxy routes by (the SDK's parse cap); a longer one never
matches (its URIs still reach a single upstream)."""
_MAY_BE_ABSENT = frozenset("#./;?&")
"""RFC 6570 operators whose expansion is empty when the variable is undefined (level 2-3): ``{?q}``, ``{/seg}``."""


def template_parts(template: str) -> tuple[list[str], list[int]] | None:
    """``template`` as its literal runs and, between each two, the fewest characters its expressions take.

    ``(literals, gaps)`` with ``len(literals) == len(gaps) + 1`` (a literal may be empty); adjacent expressions
    (``{a}{b}``) make one gap. A simple or reserved expression (``{var}``, ``{+var}``) takes at least one character,
    one whose operator may expand to nothing (``{?q}``, ``{/seg}``, ``{#frag}``) none. None when the template is
    longer than ``MAX_TEMPLATE_CHARS``. An unclosed ``{`` is a literal. Linear in the template's length."""
    if len(template) > MAX_TEMPLATE_CHARS:
        return None
    literals: list[str] = []
    gaps: list[int] = []
    pos = 0
    while True:
        start = template.find("{", pos)
        end = template.find("}", start + 1) if start >= 0 else -1
        if end < 0:
            literals.append(template[pos:])
            return literals, gaps
        least = 0 if template[start + 1 : start + 2] in _MAY_BE_ABSENT else 1
        if start == pos and gaps:  # right after the previous expression: one gap
            gaps[-1] += least
        else:
            literals.append(template[pos:start])
            gaps.append(least)
        pos = end + 1


def template_matches(template: str, uri: str) -> bool:
    """Whether ``uri`` could be an expansion of ``template``: its literal runs appear in order, the first at the
    start and the last at the end, with at least as many characters between two as their expressions need.

    RFC 6570 levels 1-3 read leniently (routing only decides which upstream gets the URI; the upstream matches it
    exactly): an expression matches any run of characters, so every URI the SDK's ``UriTemplate.match`` accepts is
    accepted here. No regular expression and no backtracking: each literal is found once, left to right, at its
    earliest place (the earliest leaves the most room for the rest), so the cost is linear in the URI's length for
    a given template, whatever the URI holds."""
    if len(uri) > MAX_URI_CHARS:
        return False
    parts = template_parts(template)
    if parts is None:
        return False
    literals, gaps = parts
    if not gaps:
        return uri == template
    first, last = literals[0], literals[-1]
    limit = len(uri) - len(last)
    if not uri.startswith(first) or limit < len(first) or not uri.endswith(last):
        return False
    pos = len(first)
    for literal, least in zip(literals[1:-1], gaps[:-1], strict=True):
        found = uri.find(literal, pos + least, limit)
        if found < 0:
            return False
        pos = found + len(literal)
    return limit - pos >= gaps[-1]
