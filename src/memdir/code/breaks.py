"""What code or a command breaks a convention (``broken``): Python read with ``ast`` — the
names of the kind of object a rule governs, their decorators, imports, docstrings,
annotations, statements — and a shell command held against the tooling rules.
This module does NOT read rules from text (``conventions``)."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING

from .conventions import TOOLS

if TYPE_CHECKING:
    from .conventions import Convention


def _names(tree: ast.AST, subject: str) -> list[tuple[str, int]]:
    """(name, line) of each definition of ``subject``'s kind in ``tree``."""
    if subject in ("function", "method"):
        return [
            (n.name, n.lineno)
            for n in _functions(tree, subject)
            if not (n.name.startswith("__") and n.name.endswith("__"))
        ]
    out: list[tuple[str, int]] = []
    for node in ast.walk(tree):
        if subject == "class" and isinstance(node, ast.ClassDef):
            out.append((node.name, node.lineno))
        elif subject == "argument" and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = [*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs]
            out += [(a.arg, node.lineno) for a in args if a.arg not in ("self", "cls")]
        elif subject in ("variable", "constant") and isinstance(node, ast.Name):
            out += [(node.id, node.lineno)] if isinstance(node.ctx, ast.Store) else []
        elif subject == "attribute" and isinstance(node, ast.Attribute):
            mine = isinstance(node.value, ast.Name) and node.value.id == "self"
            out += [(node.attr, node.lineno)] if mine and isinstance(node.ctx, ast.Store) else []
    return out


def _functions(tree: ast.AST, subject: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    methods = {
        id(item) for node in ast.walk(tree) if isinstance(node, ast.ClassDef) for item in node.body
    }
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
        and (subject == "code" or (id(node) in methods) == (subject == "method"))
    ]


_CASE_TEST = {
    "camelCase": re.compile(r"^_*[a-z][a-zA-Z0-9]*$"),
    "PascalCase": re.compile(r"^_*[A-Z][a-zA-Z0-9]*$"),
    "snake_case": re.compile(r"^_*[a-z0-9_]+$"),
    "UPPERCASE": re.compile(r"^_*[A-Z0-9_]+$"),
    "UPPER_CASE": re.compile(r"^_*[A-Z0-9_]+$"),
    "lowercase": re.compile(r"^_*[a-z0-9_]+$"),
}


def broken(conv: Convention, code: str) -> list[str]:
    if conv.subject == "tooling":
        return _tool_broken(conv, code)
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return []  # not Python, or not whole: nothing here can tell
    aspect, value, subject = conv.aspect, conv.value, conv.subject
    naming: dict[str, Callable[[str], bool]] = {
        "name prefix": lambda n: n.lstrip("_").startswith(value) or n.startswith(value),
        "name suffix": lambda n: n.endswith(value),
        "name includes": lambda n: value in n,
        "name digit": lambda n: any(ch.isdigit() for ch in n) == (value == "always"),
    }
    if aspect in naming:
        fits = naming[aspect]
        return [
            f"line {line}: {subject} {name!r} does not follow “{_said(conv)}”"
            for name, line in _names(tree, subject)
            if not fits(name)
        ]
    if aspect == "name case" and value in _CASE_TEST:
        case = _CASE_TEST[value]
        return [
            f"line {line}: {subject} {name!r} is not {value}"
            for name, line in _names(tree, subject)
            if not case.match(name)
        ]
    if aspect.startswith("decorator @"):
        deco = aspect.removeprefix("decorator @")
        nodes: Iterable[ast.AST] = (
            [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
            if subject == "class"
            else _functions(tree, subject)
        )
        out = []
        for node in nodes:
            assert isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            has = any(deco in ast.unparse(d) for d in node.decorator_list)
            if has != (value == "always"):
                verb = "lacks" if value == "always" else "has"
                out.append(f"line {node.lineno}: {node.name!r} {verb} the @{deco} decorator")
        return out
    if aspect.startswith("import "):
        module = aspect.removeprefix("import ")
        imported = any(
            (isinstance(n, ast.Import) and any(a.name == module for a in n.names))
            or (isinstance(n, ast.ImportFrom) and n.module == module)
            for n in ast.walk(tree)
        )
        if imported != (value == "always"):
            return [f"the code {'does not import' if value == 'always' else 'imports'} {module}"]
        return []
    if aspect == "docstrings" and subject in ("function", "method", "code"):
        return [
            f"line {n.lineno}: {n.name!r} has no docstring"
            for n in _functions(tree, subject)
            if (ast.get_docstring(n) is None) == (value == "always")
        ]
    if aspect == "annotations" and subject in ("function", "method", "code"):
        return [
            f"line {n.lineno}: {n.name!r} has no annotations"
            for n in _functions(tree, subject)
            if value == "always" and n.returns is None
        ]
    return []


def _said(conv: Convention) -> str:
    return f"{conv.slot} {conv.value}"


def _tool_broken(conv: Convention, command: str) -> list[str]:
    """A command that runs another tool of the same kind than the one the rule names."""
    if conv.value in ("always", "never"):
        return []
    others = [t for t in TOOLS.get(conv.aspect, ()) if t != conv.value and " " not in t]
    words = set(re.findall(r"[\w.-]+", command.lower()))
    return [f"the command runs {t}; the rule is {conv.value}" for t in others if t in words]
