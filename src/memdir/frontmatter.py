"""A memory file's frontmatter read and written: ``split_frontmatter`` (the head and the
body), ``parse_frontmatter`` (plain ``key: value`` lines without YAML — byte for byte what
YAML gives, checked against it in the tests — anything else by a safe YAML loader that keeps
timestamps as written and refuses tags that are not plain data, within a bound on what aliases
may expand to) and ``dump_pair`` (one key and value as YAML writes it).
This module does NOT know what a memory is (``memory``).
"""

from __future__ import annotations

import re
from typing import Any

from .errors import InvalidMemory

MAX_FRONTMATTER_NODES = 10_000  # values a frontmatter may expand to (YAML aliases included)

_yaml_classes: tuple[Any, Any] | None = None


def _yaml() -> tuple[Any, Any]:
    """The loader and dumper, built on first use (PyYAML costs start-up time)."""
    global _yaml_classes
    if _yaml_classes is None:
        import yaml

        # The C loader and dumper are several times faster when PyYAML was built with libyaml.
        base_loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        base_dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

        def without_timestamps(resolvers: dict[Any, Any]) -> dict[Any, Any]:
            return {
                ch: [(tag, rx) for tag, rx in items if tag != "tag:yaml.org,2002:timestamp"]
                for ch, items in resolvers.items()
            }

        class Loader(base_loader):  # type: ignore[misc,valid-type]
            """SafeLoader that keeps timestamps as the strings they were written as, and
            refuses tags whose values are not plain data (binary, sets, ordered pairs)."""

        class Dumper(base_dumper):  # type: ignore[misc,valid-type]
            """SafeDumper that writes timestamp-like strings plain and expands aliases, so
            each key is dumped on its own without repeating an anchor."""

            def ignore_aliases(self, data: Any) -> bool:
                return True

        def as_string(loader: Any, node: Any) -> str:
            return str(loader.construct_scalar(node))

        def refuse(loader: Any, node: Any) -> Any:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"the tag {node.tag} is not supported (plain values only)",
                node.start_mark,
            )

        Loader.yaml_implicit_resolvers = without_timestamps(yaml.SafeLoader.yaml_implicit_resolvers)
        Dumper.yaml_implicit_resolvers = without_timestamps(yaml.SafeDumper.yaml_implicit_resolvers)
        Loader.add_constructor("tag:yaml.org,2002:timestamp", as_string)
        for tag in ("binary", "set", "omap", "pairs"):
            Loader.add_constructor(f"tag:yaml.org,2002:{tag}", refuse)
        _yaml_classes = (Loader, Dumper)
    return _yaml_classes


_HEAD_END = re.compile(r"^(---|\.\.\.)[ \t]*$", re.MULTILINE)


def split_frontmatter(text: str) -> tuple[str, str]:
    """Split a memory file into (frontmatter YAML, body); raise InvalidMemory if there is none."""
    if text.startswith("\ufeff"):
        text = text[1:]
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    if not text.startswith("---\n"):
        raise InvalidMemory("no YAML frontmatter: the file must start with a '---' line")
    end = _HEAD_END.search(text, 4)  # (position 4 follows a newline, so '^' matches there)
    if end is None:
        raise InvalidMemory("the frontmatter is not closed by a '---' line")
    head = text[4 : end.start()]
    rest = text[end.end() :]
    if rest.startswith("\n"):
        rest = rest[1:]
    if rest.endswith("\n"):
        rest = rest[:-1]
    return head, rest


# What YAML 1.1 reads as a boolean, and as null, when written plain (PyYAML's resolvers).
_BOOLS = {
    **dict.fromkeys(("yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), True),
    **dict.fromkeys(("no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), False),
}
_NULLS = frozenset({"null", "Null", "NULL", "~"})
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")
_KEYS_SEEN: set[str] = set()  # keys already found plain (a store repeats a few of them)
_STAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")  # as memdir writes times


def _plain(head: str) -> dict[str, Any] | None:
    """The frontmatter as YAML reads it, when every line is ``key: value`` with a value YAML
    reads as the very text written (a plain string starting with a letter, a time as memdir
    writes it, or a boolean word); None for anything else, which YAML itself then parses.
    Files memdir wrote, and most written by hand, take this path (a YAML parse costs tens of
    microseconds a file, which a store of thousands pays at every open)."""
    data: dict[str, Any] = {}
    for line in head.split("\n"):
        key, sep, value = line.partition(": ")
        if not sep:
            return None
        if key not in _KEYS_SEEN:
            if not _PLAIN_KEY.fullmatch(key) or key in _BOOLS or key in _NULLS:
                return None
            if len(_KEYS_SEEN) < 1000:
                _KEYS_SEEN.add(key)
        if not value or not value.isprintable() or value != value.strip():
            return None
        if value[0].isalpha():
            if ": " in value or " #" in value or value.endswith(":") or value in _NULLS:
                return None
            data[key] = _BOOLS.get(value, value)
        elif _STAMP.fullmatch(value):
            data[key] = value
        else:
            return None
    return data


def parse_frontmatter(head: str) -> dict[str, Any]:
    """Parse frontmatter YAML into a mapping, or raise InvalidMemory with the reason."""
    if head.endswith("\n"):
        plain = _plain(head[:-1])
        if plain is not None:
            return plain
    import yaml

    loader, _ = _yaml()
    try:
        data = yaml.load(head, Loader=loader)
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "syntax error"
        where = getattr(exc, "problem_mark", None)
        at = f" (line {where.line + 2}, column {where.column + 1})" if where else ""
        problem = getattr(exc, "problem", None) or first
        raise InvalidMemory(f"bad YAML in frontmatter{at}: {problem}") from None
    except RecursionError:
        raise InvalidMemory("bad YAML in frontmatter: nested too deeply") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InvalidMemory("the frontmatter is not a mapping of keys to values")
    if _node_count(data, {}) > MAX_FRONTMATTER_NODES:
        raise InvalidMemory(
            f"the frontmatter expands to more than {MAX_FRONTMATTER_NODES} values (YAML"
            " aliases?) — write the values out or remove them"
        )
    return data


def _node_count(value: Any, memo: dict[int, int], depth: int = 0) -> int:
    """How many values ``value`` stands for once aliases are expanded (shared parts counted
    each time they are used, computed once each)."""
    if not isinstance(value, (dict, list)):
        return 1
    if depth > 100:
        return MAX_FRONTMATTER_NODES + 1
    key = id(value)
    if key not in memo:
        items = value.values() if isinstance(value, dict) else value
        memo[key] = 1 + sum(_node_count(v, memo, depth + 1) for v in items)
    return memo[key]


def dump_pair(key: str, value: Any) -> str:
    if (
        isinstance(value, str)
        and value.isprintable()
        and max(value, default="") < "\ufffe"  # PyYAML quotes characters past the BMP
        and _plain(f"{key}: {value}") == {key: value}
    ):
        return f"{key}: {value}\n"  # what YAML writes for a value it reads back as written
    import yaml

    out: str = yaml.dump(
        {key: value},
        Dumper=_yaml()[1],
        allow_unicode=True,
        sort_keys=False,
        width=1 << 30,
        default_flow_style=False,
    )
    return out
