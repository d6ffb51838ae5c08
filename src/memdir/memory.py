"""The ``Memory`` value, the naming rules, and lossless ``loads``/``dumps`` of a memory file.

A memory file is YAML frontmatter (``name``, ``type``, ``description``, ``created``, ``updated``
and any keys a person adds) between ``---`` lines, then the Markdown body. A file in canonical
form round-trips byte for byte; keys memdir does not know are kept in order.
This module does NOT touch the filesystem.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import yaml

from .errors import InvalidMemory, InvalidName

MAX_NAME_CHARS = 100
MAX_NAME_BYTES = 200  # keeps "<name>.md" under every filesystem's 255-byte limit
MAX_DESCRIPTION_CHARS = 200
INDEX_NAME = "MEMORY"
KNOWN_KEYS = ("name", "type", "description", "created", "updated")
_NAME_RE = re.compile(r"^\w[\w-]*$")
_WINDOWS_DEVICES = {"con", "prn", "aux", "nul"} | {
    f"{p}{i}" for p in ("com", "lpt") for i in range(10)
}

# The C loader and dumper are several times faster when PyYAML was built with libyaml.
_BaseLoader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_BaseDumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def _without_timestamps(resolvers: dict[Any, Any]) -> dict[Any, Any]:
    return {
        ch: [(tag, rx) for tag, rx in items if tag != "tag:yaml.org,2002:timestamp"]
        for ch, items in resolvers.items()
    }


class _Loader(_BaseLoader):  # type: ignore[misc,valid-type]
    """SafeLoader that keeps timestamps as the strings they were written as."""


class _Dumper(_BaseDumper):  # type: ignore[misc,valid-type]
    """SafeDumper that writes timestamp-like strings plain, as the loader reads them back."""


_Loader.yaml_implicit_resolvers = _without_timestamps(yaml.SafeLoader.yaml_implicit_resolvers)
_Dumper.yaml_implicit_resolvers = _without_timestamps(yaml.SafeDumper.yaml_implicit_resolvers)


def now() -> str:
    """The current UTC time as memdir writes it (second precision, ``Z`` suffix)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def validate_name(name: object) -> str:
    """Return the name NFC-normalised, or raise InvalidName saying which rule it breaks."""
    if not isinstance(name, str) or not name:
        raise InvalidName(
            "a memory name must be a non-empty string — pass a name like 'prefer-pytest'"
        )
    norm = unicodedata.normalize("NFC", name)
    shown = norm if len(norm) <= 40 else norm[:40] + "…"
    if "/" in norm or "\\" in norm or ".." in norm or norm.startswith("."):
        raise InvalidName(
            f"invalid memory name {shown!r}: no path separators, '..' or leading dot"
            " — use letters, digits, '-' and '_'"
        )
    if len(norm) > MAX_NAME_CHARS or len(norm.encode()) > MAX_NAME_BYTES:
        raise InvalidName(
            f"invalid memory name {shown!r}: longer than {MAX_NAME_CHARS} characters"
            f" or {MAX_NAME_BYTES} bytes — use a shorter name"
        )
    if not _NAME_RE.match(norm):
        raise InvalidName(
            f"invalid memory name {shown!r}: only letters, digits, '-' and '_' are allowed"
            " and it must start with a letter or digit — rename it"
        )
    if norm.upper() == INDEX_NAME or norm.lower() in _WINDOWS_DEVICES:
        raise InvalidName(f"invalid memory name {shown!r}: the name is reserved — choose another")
    return norm


def filename_for(name: str) -> str:
    """The file name a memory called ``name`` is stored under."""
    return validate_name(name) + ".md"


def slugify(text: str) -> str:
    """A valid memory name made from free text (used when a model proposes a sloppy name)."""
    norm = unicodedata.normalize("NFC", text).strip().lower()
    slug = re.sub(r"[^\w]+", "-", norm).strip("-_")
    slug = slug[:MAX_NAME_CHARS].rstrip("-_") or "memory"
    while len(slug.encode()) > MAX_NAME_BYTES:
        slug = slug[:-1]
    return slug if slug.upper() != INDEX_NAME else "memory-index-note"


@dataclass(frozen=True)
class Memory:
    """One memory: what its file says. ``path`` and ``digest`` describe where it was read from."""

    name: str
    type: str
    description: str
    body: str = ""
    created: str | None = None
    updated: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)
    path: str | None = field(default=None, compare=False)
    digest: str | None = field(default=None, compare=False, repr=False)

    @property
    def pinned(self) -> bool:
        """Whether a person marked this memory ``pinned: true`` (never consolidated away)."""
        return self.extra.get("pinned") is True

    def replace(self, **changes: Any) -> Memory:
        """A copy with some fields changed."""
        return replace(self, **changes)

    def to_dict(self, *, body: bool = True) -> dict[str, Any]:
        """The memory as plain JSON-able data."""
        data: dict[str, Any] = {
            "name": self.name,
            "type": self.type,
            "description": self.description,
            "created": self.created,
            "updated": self.updated,
        }
        data.update({k: v for k, v in self.extra.items() if isinstance(k, str)})
        if body:
            data["body"] = self.body
        if self.path:
            data["path"] = self.path
        return data


def digest_of(data: bytes) -> str:
    """Content hash used to detect that a file changed since it was read."""
    return hashlib.sha256(data).hexdigest()


def split_frontmatter(text: str) -> tuple[str, str]:
    """Split a memory file into (frontmatter YAML, body); raise InvalidMemory if there is none."""
    if text.startswith("\ufeff"):
        text = text[1:]
    text = text.replace("\r\n", "\n")
    if not text.startswith("---\n"):
        raise InvalidMemory("no YAML frontmatter: the file must start with a '---' line")
    end = re.search(r"^(---|\.\.\.)[ \t]*$", text[4:], re.MULTILINE)
    if end is None:
        raise InvalidMemory("the frontmatter is not closed by a '---' line")
    head = text[4 : 4 + end.start()]
    rest = text[4 + end.end() :]
    if rest.startswith("\n"):
        rest = rest[1:]
    if rest.endswith("\n"):
        rest = rest[:-1]
    return head, rest


def parse_frontmatter(head: str) -> dict[str, Any]:
    """Parse frontmatter YAML into a mapping, or raise InvalidMemory with the reason."""
    try:
        data = yaml.load(head, Loader=_Loader)
    except yaml.YAMLError as exc:
        first = str(exc).splitlines()[0] if str(exc) else "syntax error"
        raise InvalidMemory(f"bad YAML in frontmatter: {first}") from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InvalidMemory("the frontmatter is not a mapping of keys to values")
    return data


def _text_field(data: Mapping[str, Any], key: str, *, required: bool) -> str | None:
    value = data.get(key)
    if value is None:
        if required:
            raise InvalidMemory(f"missing required field {key!r} in frontmatter")
        return None
    if isinstance(value, (dict, list)):
        raise InvalidMemory(f"field {key!r} must be text, not a {type(value).__name__}")
    return str(value)


def from_mapping(data: Mapping[str, Any], body: str) -> Memory:
    """Build a Memory from parsed frontmatter (liberal: only the name must follow the rules)."""
    raw_name = _text_field(data, "name", required=True)
    try:
        name = validate_name(raw_name)
    except InvalidName as exc:
        raise InvalidMemory(str(exc)) from None
    extra = {k: v for k, v in data.items() if k not in KNOWN_KEYS}
    return Memory(
        name=name,
        type=_text_field(data, "type", required=True) or "",
        description=_text_field(data, "description", required=True) or "",
        body=body,
        created=_text_field(data, "created", required=False),
        updated=_text_field(data, "updated", required=False),
        extra=extra,
    )


def loads(text: str) -> Memory:
    """Parse the text of a memory file; raise InvalidMemory with the reason if it is not one."""
    if "\x00" in text:
        raise InvalidMemory("the file is binary (contains NUL bytes)")
    head, body = split_frontmatter(text)
    return from_mapping(parse_frontmatter(head), body)


def _dump_pair(key: str, value: Any) -> str:
    out: str = yaml.dump(
        {key: value},
        Dumper=_Dumper,
        allow_unicode=True,
        sort_keys=False,
        width=1 << 30,
        default_flow_style=False,
    )
    return out


def dumps(memory: Memory) -> str:
    """Render a memory file in canonical form (``loads(dumps(m)) == m``)."""
    pairs: list[tuple[str, Any]] = [
        ("name", memory.name),
        ("type", memory.type),
        ("description", memory.description),
    ]
    if memory.created is not None:
        pairs.append(("created", memory.created))
    if memory.updated is not None:
        pairs.append(("updated", memory.updated))
    pairs.extend((k, v) for k, v in memory.extra.items() if k not in KNOWN_KEYS)
    head = "".join(_dump_pair(k, v) for k, v in pairs)
    return f"---\n{head}---\n{memory.body}\n" if memory.body else f"---\n{head}---\n"


def check(memory: Memory, types: tuple[str, ...]) -> list[str]:
    """The rules a readable memory bends (warnings, not errors): what ``doctor`` reports."""
    warnings = []
    if memory.type not in types:
        warnings.append(f"unknown type {memory.type!r} (known: {', '.join(types)})")
    if not memory.description.strip():
        warnings.append("empty description")
    if "\n" in memory.description:
        warnings.append("description spans several lines")
    if len(memory.description) > MAX_DESCRIPTION_CHARS:
        warnings.append(f"description longer than {MAX_DESCRIPTION_CHARS} characters")
    if memory.created is None or memory.updated is None:
        warnings.append("missing created/updated timestamps")
    return warnings


def validate_new(memory: Memory, types: tuple[str, ...]) -> Memory:
    """Strict checks for what memdir itself writes; raise InvalidMemory naming the fix."""
    validate_name(memory.name)
    if memory.type not in types:
        raise InvalidMemory(
            f"unknown type {memory.type!r} — use one of: {', '.join(types)}"
            " (or add it to 'types' in config.toml)"
        )
    desc = memory.description.strip()
    if not desc:
        raise InvalidMemory("the description is empty — say in one line what the memory is about")
    if "\n" in desc:
        raise InvalidMemory("the description must be one line — move details into the body")
    if len(desc) > MAX_DESCRIPTION_CHARS:
        raise InvalidMemory(
            f"the description is {len(desc)} characters — keep it under {MAX_DESCRIPTION_CHARS}"
            " and move details into the body"
        )
    return memory.replace(description=desc, body=memory.body.strip("\n"))
