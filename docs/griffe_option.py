"""Griffe extension of the API reference (mkdocs.yml, ``mkdocstrings`` ``extensions``): a
parameter field declared with ``cftgnn.explain.params.option`` shows its real default.

mkdocstrings reads the source, not the running classes, so ``max_time_s: float | None =
option(None, "seconds of the search", low=0)`` would show that whole call as the default of
the field and of the class' signature. Before Griffe's dataclass support builds the classes'
``__init__`` from their fields, each such field's value becomes the call's first argument
(the default: ``None``); the call's description becomes the field's docstring where it has
none. ``tests/test_docs.py`` checks the built pages for ``option(``.
"""

from __future__ import annotations

import ast
import contextlib
from typing import Any

import griffe

#: The helper whose calls are rewritten.
OPTION = "cftgnn.explain.params.option"


def _default(call: griffe.ExprCall) -> tuple[str | griffe.Expr | None, str | None]:
    """(default, description) of an ``option(default, doc, ...)`` call, either positional or by
    keyword."""
    default: str | griffe.Expr | None = None
    doc: str | None = None
    positional = [a for a in call.arguments if not isinstance(a, griffe.ExprKeyword)]
    keywords = {a.name: a.value for a in call.arguments if isinstance(a, griffe.ExprKeyword)}
    if positional:
        default = positional[0]
    default = keywords.get("default", default)
    text = positional[1] if len(positional) > 1 else keywords.get("doc")
    if isinstance(text, str):
        with contextlib.suppress(ValueError, SyntaxError):  # an expression: no description
            doc = str(ast.literal_eval(text))  # a string literal, or several joined
    return default, doc


def _is_option(value: object) -> bool:
    if not isinstance(value, griffe.ExprCall):
        return False
    try:
        return value.function.canonical_path == OPTION
    except Exception:  # noqa: BLE001 (a name Griffe cannot resolve is not the helper)
        return False


def rewrite(obj: griffe.Module | griffe.Class, seen: set[str]) -> int:
    """Rewrite the ``option(...)`` fields of every class under ``obj``; the number rewritten."""
    if obj.path in seen:
        return 0
    seen.add(obj.path)
    count = 0
    for member in obj.members.values():
        if member.is_alias:
            continue
        if isinstance(member, griffe.Attribute) and _is_option(member.value):
            default, doc = _default(member.value)  # type: ignore[arg-type]
            member.value = default
            if doc and member.docstring is None:
                member.docstring = griffe.Docstring(doc, parent=member)
            count += 1
        elif isinstance(member, (griffe.Module, griffe.Class)):
            count += rewrite(member, seen)
    return count


class OptionDefaults(griffe.Extension):
    """Runs on a loaded package, before the built-in dataclasses extension (which Griffe always
    appends after the configured ones)."""

    def on_package(self, *, pkg: griffe.Module, **kwargs: Any) -> None:
        rewrite(pkg, set())
