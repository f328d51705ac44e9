"""The model's words live on the fault classes: every template fills with the fields it names, a wrong field fails
loudly, and every raise site in the package names templates and passes exactly their fields."""

from __future__ import annotations

import ast
import inspect
from collections.abc import Iterator
from itertools import product
from pathlib import Path

import pytest

import resilient_mcp.faults as faults
from resilient_mcp.faults import (
    AttemptTimeout,
    Fault,
    GatewayError,
    PersistentOutage,
    StateConflict,
    TemplateFieldError,
    template_fields,
)
from resilient_mcp.stages.observe import ProxyInternalError

PACKAGE = Path(faults.__file__).resolve().parents[1]
OPTIONS = frozenset(inspect.signature(Fault.of).parameters) - {"cls", "message", "fields"}
"""The keyword arguments of ``Fault.of`` that are not template fields."""


def fault_classes(root: type[Fault] = Fault) -> Iterator[type[Fault]]:
    yield root
    for sub in root.__subclasses__():
        yield from fault_classes(sub)


def own_templates() -> list[tuple[type[Fault], str]]:
    return [(cls, name) for cls in fault_classes() for name in vars(cls).get("templates", {})]


def sample(names: frozenset[str]) -> dict[str, object]:
    return {name: 1 for name in names}  # 1 formats under every spec the templates use ({x:.1f}, {x!r}, {x})


def test_the_tree_has_templates_and_the_package_s_own_subclass_is_seen() -> None:
    assert ProxyInternalError in set(fault_classes())
    assert len(own_templates()) > 100


@pytest.mark.parametrize(("cls", "name"), own_templates(), ids=lambda v: v if isinstance(v, str) else v.__name__)
def test_every_template_fills_with_the_fields_it_names(cls: type[Fault], name: str) -> None:
    template = cls.template(name)
    fields = template_fields(template)
    assert all(field.isidentifier() for field in fields), f"{name}: only named fields ({{tool}}, not {{}} or {{0}})"
    assert not fields & OPTIONS, f"{name}: a field named like an argument of Fault.of would never reach the text"
    filled = cls.text(name, **sample(fields))
    assert "{" not in filled and "}" not in filled, f"{name}: {filled!r} (no template writes a brace)"
    fault = cls.of(name, **sample(fields))
    assert isinstance(fault, cls) and fault.message == filled and fault.suggestion is None


def test_of_takes_the_same_fault_arguments_as_the_constructor() -> None:
    init = set(inspect.signature(Fault.__init__).parameters) - {"self", "message", "suggestion"}
    assert init | {"suggest"} == OPTIONS


def test_a_missing_or_misspelt_field_fails_loudly() -> None:
    with pytest.raises(TemplateFieldError, match=r"missing \['timeout_ms'\]"):
        AttemptTimeout.of("deadline")
    with pytest.raises(TemplateFieldError, match=r"missing \['timeout_ms'\], unused \['timeout'\]"):
        AttemptTimeout.of("deadline", timeout=500)
    with pytest.raises(TemplateFieldError, match=r"unused \['status'\]"):
        AttemptTimeout.of("no_answer", status=408)
    with pytest.raises(TemplateFieldError, match=r"unused \['tols'\]"):
        PersistentOutage.text("alternatives", tools="a", tols="b")
    with pytest.raises(TemplateFieldError, match="approval_refused_advice"):  # the suggestion's fields count too
        faults.PermissionDenied.of("policy_denied", suggest="approval_refused_advice", tool="t", outcome="x")
    with pytest.raises(KeyError, match="AttemptTimeout has no template 'dedline'"):
        AttemptTimeout.of("dedline", timeout_ms=1)


def test_a_class_speaks_its_bases_templates_and_its_own_first() -> None:
    fault = GatewayError.of("http_status", status=502, details={"http_status": 502})
    assert fault.message == "The upstream answered HTTP 502." and fault.details == {"http_status": 502}
    assert ProxyInternalError.template("http_error_status") == GatewayError.template("http_error_status")
    assert faults.UnknownTool.has_template("reported") and not GatewayError.has_template("reported")
    conflict = StateConflict.of("in_flight", suggest="wait_for_running", at="T", max_retry=1)
    assert conflict.message == "An identical call started at T is still running; this one was not run."
    assert conflict.suggestion is not None and conflict.suggestion.startswith("Wait for the running call to finish")
    assert conflict.max_retry == 1


# --- the raise sites, read from the source -------------------------------------------------------------------------

CLASSES: dict[str, type[Fault]] = {cls.__name__: cls for cls in fault_classes()}
PROBES = {("verdict/repeat.py", "ConnectionLost")}
"""Faults the package builds for a decision, never shown to the model (rule R's outcome-unknown probe)."""


def _keys(node: ast.expr | None) -> list[str | None] | None:
    """The template names an argument can take (a constant, or a conditional of constants); None if not known."""
    if node is None or (isinstance(node, ast.Constant) and node.value is None):
        return [None]
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.IfExp):
        body, orelse = _keys(node.body), _keys(node.orelse)
        return None if body is None or orelse is None else body + orelse
    return None


def _calls() -> Iterator[tuple[str, ast.Call]]:
    for path in sorted(PACKAGE.rglob("*.py")):
        where = str(path.relative_to(PACKAGE))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                yield where, node


def test_no_fault_is_worded_at_its_raise_site() -> None:
    worded = [
        f"{where}:{call.lineno} {call.func.id}(...)"
        for where, call in _calls()
        if isinstance(call.func, ast.Name) and call.func.id in CLASSES and (where, call.func.id) not in PROBES
    ]
    assert worded == [], "build faults with Class.of(template, **fields); put the words in the class's templates"


def test_every_raise_site_names_templates_and_passes_exactly_their_fields() -> None:
    checked, problems = 0, []
    for where, call in _calls():
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr in ("of", "text") and isinstance(func.value, ast.Name)):
            continue
        cls = CLASSES.get(func.value.id)
        if cls is None or not call.args:
            continue
        messages = _keys(call.args[0])
        suggest = next((k.value for k in call.keywords if k.arg == "suggest"), None)
        suggestions = _keys(suggest)
        if messages is None or suggestions is None:
            continue  # a name computed at run time: the tests that reach the site fill it
        spread = any(k.arg is None for k in call.keywords)
        given = {k.arg for k in call.keywords if k.arg is not None} - OPTIONS
        for message, advice in product(messages, suggestions):
            site = f"{where}:{call.lineno} {cls.__name__}.{func.attr}({message!r}, suggest={advice!r})"
            try:
                wanted = template_fields(cls.template(str(message)))
                wanted |= template_fields(cls.template(advice)) if advice is not None else frozenset()
            except KeyError as exc:
                problems.append(f"{site}: {exc}")
                continue
            if given - wanted or (not spread and given != wanted):
                problems.append(f"{site}: passes {sorted(given)}, the templates name {sorted(wanted)}")
            checked += 1
    assert problems == []
    assert checked > 80
