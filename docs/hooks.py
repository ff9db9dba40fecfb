"""MkDocs hook: a page's ``<!-- conf: NAME -->`` line becomes the options table of
``conf/NAME.yaml`` (``<!-- conf-files: GROUP -->``: the table of a group's files;
``<!-- errors -->``: every error message of the code).

The table lists every option of the file as the user overrides it on the command line (a group
file's keys are prefixed by the group: ``explainer.it_max``), its default as written in the file
and its description: the comment on the key's line (and the comment lines that continue it), or
the comment block right above the key, or, for an explainer, the one-line description of its
``Params`` declaration (``cftgnn.explain.params.option``). The YAML files stay the one place the
defaults are written. ``tests/test_docs.py`` reads the same functions to check that every option
of ``conf/`` is documented on some page.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CONF = ROOT / "conf"
#: Files of these groups only override other options (``# @package _global_``): no options.
OVERRIDE_GROUPS = frozenset({"experiment", "sweep", "baseline", "debug"})
#: Files that are not Hydra configurations of a script.
NOT_OPTIONS = frozenset({"wandb_sweep"})
#: Keys that are never options, and maps whose keys are data (names), not options.
SKIPPED = frozenset({"defaults", "_target_", "hydra"})
DATA_MAPS = frozenset({"auto_ratios", "explainers"})
DIRECTIVE = re.compile(r"^<!-- conf: ([\w/*]+) -->$", re.M)
FILES_DIRECTIVE = re.compile(r"^<!-- conf-files: (\w+) -->$", re.M)
_KEY = re.compile(r"^(\s*)([A-Za-z_][\w-]*):(.*)$")
_COMMENT = re.compile(r"^(\s*)#\s?(.*)$")


@dataclass(frozen=True)
class ConfOption:
    """One option of a configuration file.

    Attributes:
        path: The key as overridden on the command line (``explainer.it_max``, ``sample.range``).
        default: The value as written in the file (empty for a section).
        doc: Its description ('' when the file and the declaration give none).
    """

    path: str
    default: str
    doc: str


def _split_comment(text: str) -> tuple[str, str, int]:
    """``value  # comment`` -> (value, comment, index of ``#`` or -1); a ``#`` inside quotes is
    not a comment."""
    quote = ""
    for i, ch in enumerate(text):
        if ch in "'\"" and not quote:
            quote = ch
        elif ch == quote:
            quote = ""
        elif ch == "#" and not quote and (i == 0 or text[i - 1] in " \t"):
            return text[:i].strip(), text[i + 1:].strip(), i
    return text.strip(), "", -1


def _params_docs(target: str) -> dict[str, str]:
    """The one-line descriptions of an explainer's ``Params`` declaration, by option."""
    module, _, name = target.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return {}
    params = getattr(cls, "Params", None)
    if params is None or not dataclasses.is_dataclass(params):
        return {}
    return {f.name: str(f.metadata.get("doc", "")) for f in dataclasses.fields(params)}


def conf_files() -> list[str]:
    """Names (relative to ``conf/``, without ``.yaml``) of every file that holds options."""
    names = []
    for path in sorted(CONF.rglob("*.yaml")):
        name = path.relative_to(CONF).with_suffix("").as_posix()
        group = name.split("/")[0] if "/" in name else ""
        if group not in OVERRIDE_GROUPS and name not in NOT_OPTIONS:
            names.append(name)
    return names


def conf_options(name: str) -> list[ConfOption]:
    """Every option of ``conf/<name>.yaml`` in file order (sections included)."""
    lines = (CONF / f"{name}.yaml").read_text().splitlines()
    prefix = name.split("/")[0] + "." if "/" in name else ""
    stack: list[tuple[int, str]] = []  # (indent, key) of the enclosing sections
    out: list[ConfOption] = []
    docs: dict[str, list[str]] = {}
    target = ""
    above: list[str] = []
    last: tuple[str, int] | None = None  # path and comment column of the last key with a comment
    for line in lines:
        comment = _COMMENT.match(line)
        if comment:
            indent = len(comment.group(1))
            if last is not None and indent >= last[1] > 0:
                docs[last[0]].append(comment.group(2))  # continues the comment above
            else:
                last = None
                above.append(comment.group(2))
            continue
        key = _KEY.match(line)
        if not key or line.lstrip().startswith("-"):
            above, last = [], None
            continue
        indent, k, rest = len(key.group(1)), key.group(2), key.group(3)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        value, inline, at = _split_comment(rest)
        parents = [s[1] for s in stack]
        if k == "_target_" and not parents:
            target = value
        skip = (not parents and k in SKIPPED) or any(p in SKIPPED or p in DATA_MAPS
                                                    for p in parents)
        stack.append((indent, k))
        if skip:
            maps = [prefix + ".".join(parents[: j + 1]) for j, p in enumerate(parents)
                    if p in DATA_MAPS]
            if maps and inline and maps[-1] in docs:  # a data map's entries continue its doc
                docs[maps[-1]].append(inline)
                last = (maps[-1], len(line) - len(rest) + at)
            else:
                last = None
            above = []
            continue
        path = prefix + ".".join([*parents, k])
        docs[path] = [inline] if inline else list(above)
        out.append(ConfOption(path, value, ""))
        last = (path, len(line) - len(rest) + at) if inline else None
        above = []
    declared = _params_docs(target) if prefix == "explainer." else {}
    result = []
    for opt in out:
        doc = " ".join(d for d in docs.get(opt.path, []) if d).strip()
        if not doc:
            doc = declared.get(opt.path.removeprefix(prefix), "")
        result.append(dataclasses.replace(opt, doc=doc))
    return result


def _cell(text: str) -> str:
    """Text safe in a table cell: no column breaks, tags or emphasis."""
    return text.replace("|", "\\|").replace("<", "&lt;").replace("*", "\\*")


def options_table(name: str) -> str:
    """The Markdown table of ``conf/<name>.yaml``'s options."""
    options = conf_options(name)
    if not options:
        return f"`conf/{name}.yaml` has no options.\n"
    rows = ["| option | default | what it does |", "| --- | --- | --- |"]
    for opt in options:
        default = f"`{opt.default.replace('|', '&#124;')}`" if opt.default else ""
        rows.append(f"| `{opt.path}` | {default} | {_cell(opt.doc)} |")
    return f"Options of `conf/{name}.yaml`:\n\n" + "\n".join(rows) + "\n"


def resolve(pattern: str) -> list[str]:
    """The files a directive names: ``explainer/cftgnn``, or every file of a group, ``model/*``."""
    return sorted(p.relative_to(CONF).with_suffix("").as_posix()
                  for p in CONF.glob(f"{pattern}.yaml"))


def tabled(markdown: str) -> set[str]:
    """The files whose options table a page's ``<!-- conf: ... -->`` lines include."""
    return {name for m in DIRECTIVE.finditer(markdown) for name in resolve(m.group(1))}


def _head_comment(path: Path) -> str:
    """The first comment paragraph of a file (``# @package`` lines left out)."""
    out: list[str] = []
    for line in path.read_text().splitlines():
        comment = _COMMENT.match(line)
        if not comment or comment.group(1):
            break
        text = comment.group(2).strip()
        if text.startswith("@package"):
            continue
        if not text or text.startswith(("python ", "-m ")):
            break
        before, command, _ = text.partition("python scripts/")
        out.append(before.rstrip(" :") if command else text)
        if command:
            break
    return " ".join(out).removesuffix(":").strip()


def files_table(group: str) -> str:
    """The Markdown table of a group's files, each with the first paragraph of its comment."""
    rows = ["| file | what it does |", "| --- | --- |"]
    for path in sorted((CONF / group).glob("*.yaml")):
        rows.append(f"| `{group}={path.stem}` | {_cell(_head_comment(path))} |")
    return "\n".join(rows) + "\n"


#: Exceptions of Python itself: a programming error, not a message for the user.
_BUILTIN_ERRORS = frozenset({"TypeError", "ValueError", "AssertionError", "NotImplementedError",
                             "RuntimeError", "KeyError", "IndexError", "AttributeError",
                             "OSError", "FileNotFoundError", "SystemExit", "StopIteration"})


def _message(node: ast.expr) -> str | None:
    """The text of a message expression, ``…`` for every value filled in at run time."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "…" for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _message(node.left), _message(node.right)
        return None if left is None or right is None else left + right
    return None


def error_messages() -> list[tuple[str, str, str]]:
    """Every ``raise XError("...")`` of the package and the scripts whose message is a string:
    (module, exception, message), in file order. These are the ``error: ...`` lines a user can
    get (a script prints a project error as one such line, exit status 2)."""
    found = []
    files = sorted((ROOT / "cftgnn").rglob("*.py")) + sorted((ROOT / "scripts").glob("*.py"))
    for path in files:
        tree = ast.parse(path.read_text())
        module = path.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".")
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
                    and node.exc.args):
                continue
            func = node.exc.func
            name = func.id if isinstance(func, ast.Name) else (
                func.attr if isinstance(func, ast.Attribute) else "")
            if not name.endswith("Error") or name in _BUILTIN_ERRORS:
                continue
            text = _message(node.exc.args[0])
            if text:
                found.append((module.removeprefix("cftgnn."), name, " ".join(text.split())))
    return found


def errors_table() -> str:
    """The Markdown table of ``error_messages``, one row per distinct message."""
    rows = ["| where | error | message (… = a value of your run) |", "| --- | --- | --- |"]
    seen = set()
    for module, name, text in error_messages():
        if (module, text) in seen:
            continue
        seen.add((module, text))
        rows.append(f"| `{module}` | `{name}` | {_cell(text).replace('`', '')} |")
    return "\n".join(rows) + "\n"


def expand(markdown: str) -> str:
    """A page's Markdown with every ``<!-- conf: NAME -->`` line replaced by its table (one per
    file for ``GROUP/*``) and every ``<!-- conf-files: GROUP -->`` by the table of the files."""
    markdown = DIRECTIVE.sub(lambda m: "\n".join(options_table(n) for n in resolve(m.group(1))),
                             markdown)
    markdown = FILES_DIRECTIVE.sub(lambda m: files_table(m.group(1)), markdown)
    if "<!-- errors -->" in markdown:
        markdown = markdown.replace("<!-- errors -->", errors_table())
    return markdown


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """MkDocs hook (``hooks:`` in mkdocs.yml)."""
    return expand(markdown)
