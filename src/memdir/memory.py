"""The ``Memory`` value, the naming rules, and lossless ``loads``/``dumps`` of a memory file
(its frontmatter read and written by ``frontmatter``).

A memory file is YAML frontmatter (``name``, ``type``, ``description``, ``created``, ``updated``
and any keys a person adds) between ``---`` lines, then the Markdown body. A file in canonical
form round-trips byte for byte; keys memdir does not know are kept in order.
This module does NOT touch the filesystem.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .errors import InvalidMemory, InvalidName
from .frontmatter import dump_pair, parse_frontmatter, split_frontmatter

if TYPE_CHECKING:
    pass

MAX_NAME_CHARS = 100
MAX_NAME_BYTES = 200  # keeps "<name>.md" under every filesystem's 255-byte limit
MAX_DESCRIPTION_CHARS = 200
INDEX_NAME = "MEMORY"
KNOWN_KEYS = ("name", "type", "description", "created", "updated")
CONFLICT_KEY = "conflict"  # set by a sync merge when both sides changed the same field
CONFLICTED = "conflicted:"  # how ``check`` begins the warning about it
_NAME_RE = re.compile(r"\w[\w-]*")
_WINDOWS_DEVICES = {"con", "prn", "aux", "nul"} | {
    f"{p}{i}" for p in ("com", "lpt") for i in range(10)
}


def now() -> str:
    """The current UTC time as memdir writes it (second precision, ``Z`` suffix)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def validate_name(name: object) -> str:
    """Return the name NFC-normalised, or raise InvalidName saying which rule it breaks."""
    if not isinstance(name, str) or not name:
        raise InvalidName(
            "a memory name must be a non-empty string — pass a name like 'prefer-pytest'"
        )
    ascii = name.isascii()  # (the common case: normal forms and scripts have nothing to say)
    norm = name if ascii else unicodedata.normalize("NFC", name)
    if "/" in norm or "\\" in norm or ".." in norm or norm.startswith("."):
        raise InvalidName(
            f"invalid memory name {_shown(norm)}: no path separators, '..' or leading dot"
            " — use letters, digits, '-' and '_'"
        )
    if len(norm) > MAX_NAME_CHARS or len(norm.encode()) > MAX_NAME_BYTES:
        raise InvalidName(
            f"invalid memory name {_shown(norm)}: longer than {MAX_NAME_CHARS} characters"
            f" or {MAX_NAME_BYTES} bytes — use a shorter name"
        )
    if not _NAME_RE.fullmatch(norm):
        raise InvalidName(
            f"invalid memory name {_shown(norm)}: only letters, digits, '-' and '_' are allowed"
            " and it must start with a letter or digit — rename it"
        )
    plain = norm if ascii else unicodedata.normalize("NFKC", norm)
    if plain != norm:
        raise InvalidName(
            f"invalid memory name {_shown(norm)}: it has compatibility characters (fullwidth,"
            f" superscripts…) — write it as {safe_repr(plain)}"
        )
    if plain.upper() == INDEX_NAME or plain.lower() in _WINDOWS_DEVICES:
        raise InvalidName(
            f"invalid memory name {_shown(norm)}: the name is reserved — choose another"
        )
    scripts = {"LATIN"} if ascii else _scripts(norm)
    if len(scripts & _CONFUSABLE_SCRIPTS) > 1 or (
        "LATIN" in scripts and scripts & (_CONFUSABLE_SCRIPTS - {"LATIN"})
    ):
        raise InvalidName(
            f"invalid memory name {_shown(norm)}: it mixes {' and '.join(sorted(scripts))} letters,"
            " which can look alike — write it in one script"
        )
    return norm


def valid_name(name: object) -> str | None:
    """The name NFC-normalised when it is a valid one (``validate_name``), else None."""
    try:
        return validate_name(name)
    except InvalidName:
        return None


def _shown(name: str) -> str:
    return safe_repr(name if len(name) <= 40 else name[:40] + "…")


_CONFUSABLE_SCRIPTS = {"LATIN", "CYRILLIC", "GREEK", "ARMENIAN", "CHEROKEE", "COPTIC"}


def _scripts(name: str) -> set[str]:
    """The scripts of the letters in ``name`` (the first word of each letter's Unicode name)."""
    out = set()
    for ch in name:
        if ch.isalpha():
            if ch.isascii():
                out.add("LATIN")
            else:
                out.add(unicodedata.name(ch, "UNKNOWN").split(" ")[0])
    return out


# Letters of other scripts that pass for Latin ones in a name (Cyrillic, Greek).
_CONFUSABLE = str.maketrans(
    "аеорсухіјѕԁһкмптвԛԝοαιντυкχρ",
    "aeopcyxijsdhkmntbqwoaivtukxp",
)


def skeleton(name: str) -> str:
    """A key under which names that differ only in case or look-alike letters collide."""
    folded = unicodedata.normalize("NFKC", name).casefold().replace("_", "-")
    return folded.translate(_CONFUSABLE)


def safe_repr(text: str) -> str:
    """``text`` quoted, with control and invisible characters escaped (for error messages)."""
    return repr(text) if text.isprintable() else ascii(text)


def filename_for(name: str) -> str:
    """The file name a memory called ``name`` is stored under."""
    return validate_name(name) + ".md"


def slugify(text: str) -> str:
    """A valid memory name made from free text (used when a model proposes a sloppy name)."""
    norm = unicodedata.normalize("NFC", text).strip().lower()
    slug = re.sub(r"[^\w]+", "-", norm).strip("-_")
    slug = unicodedata.normalize("NFKC", slug)
    slug = slug[:MAX_NAME_CHARS].rstrip("-_") or "memory"
    while len(slug.encode()) > MAX_NAME_BYTES:
        slug = slug[:-1]
    return valid_name(slug) or valid_name(f"note-{slug}"[:MAX_NAME_CHARS]) or "memory"


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

    def to_dict(self, *, body: bool = True) -> dict[str, object]:
        """The memory as plain JSON-able data."""
        data: dict[str, object] = {
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
    import hashlib

    return hashlib.sha256(data).hexdigest()


def _text_field(data: Mapping[str, Any], key: str, *, required: bool) -> str | None:
    value = data.get(key)
    if value is None:
        if required:
            raise InvalidMemory(f"missing required field {key!r} in frontmatter")
        return None
    if isinstance(value, (dict, list)):
        raise InvalidMemory(f"field {key!r} must be text, not a {type(value).__name__}")
    return str(value)


def from_mapping(
    data: Mapping[str, Any], body: str, path: str | None = None, digest: str | None = None
) -> Memory:
    """Build a Memory from parsed frontmatter (liberal: only the name must follow the rules)."""
    raw_name = _text_field(data, "name", required=True)
    try:
        name = validate_name(raw_name)
    except InvalidName as exc:
        raise InvalidMemory(str(exc)) from None
    # a key YAML reads as a number or a date (``1: one``) is a key all the same: text
    extra = {k if isinstance(k, str) else str(k): v for k, v in data.items() if k not in KNOWN_KEYS}
    return Memory(
        name=name,
        type=_text_field(data, "type", required=True) or "",
        description=_text_field(data, "description", required=True) or "",
        body=body,
        created=_text_field(data, "created", required=False),
        updated=_text_field(data, "updated", required=False),
        extra=extra,
        path=path,
        digest=digest,
    )


def loads(text: str, path: str | None = None, digest: str | None = None) -> Memory:
    """Parse the text of a memory file; raise InvalidMemory with the reason if it is not one.
    ``path`` and ``digest``: where it was read from, kept in the memory.

    A file git left conflict markers in (a merge memdir's drivers did not make: a plain
    ``git pull`` in a clone memdir never set up) is read as ``HEAD``'s side (the user's in a
    merge, the remote's during a rebase: who wrote it is the log's to say), marked
    conflicted (``CONFLICT_KEY``, with the git blob id of the other side's text): the other
    side came through a door, so it is shown to no model before a person resolves it."""
    if "\x00" in text:
        raise InvalidMemory("the file is binary (contains NUL bytes)")
    sides = git_sides(text) if "<<<<<<<" in text else None
    if sides is None:
        head, body = split_frontmatter(text)
        return from_mapping(parse_frontmatter(head), body, path, digest)
    ours, theirs = sides
    mem = loads(ours, path, digest)
    try:
        other = loads(theirs)
        fields = [
            f for f in ("type", "description", "body") if getattr(mem, f) != getattr(other, f)
        ]
    except InvalidMemory:
        fields = []
    mark = {"other": git_blob_id(theirs.encode("utf-8")), "fields": fields, "by": "git"}
    return replace(mem, extra={**mem.extra, CONFLICT_KEY: mark})


def git_blob_id(data: bytes) -> str:
    """The id git gives ``data`` as a blob (SHA-1 repositories)."""
    import hashlib

    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def git_conflicted(memory: Memory) -> bool:
    """Whether ``memory`` was read from a file git left its conflict markers in."""
    mark = memory.extra.get(CONFLICT_KEY)
    return isinstance(mark, dict) and mark.get("by") == "git"


_MARK = re.compile(r"(<{7}|\|{7}|={7}|>{7})(?:$| )")  # a conflict marker line's start
_FENCE = re.compile(r" {0,3}(```|~~~)")  # a Markdown code fence opens or closes


def git_sides(text: str) -> tuple[str, str] | None:
    """The two texts a file with git's conflict markers stands for: ours (``HEAD``'s side,
    the lines outside the blocks with it) and theirs; None when it holds no whole block
    (``<<<<<<<``, optionally ``|||||||`` and the base, ``=======``, ``>>>>>>>``). Markers in
    a fenced code block are an example a memory shows, not a conflict."""
    ours: list[str] = []
    theirs: list[str] = []
    side = ""  # "" outside a block, then "ours", "base", "theirs"
    found = fenced = False
    for line in text.splitlines(keepends=True):
        m = _MARK.match(line.rstrip("\r\n"))
        kind = m.group(1)[0] if m and not fenced else ""
        if side == "" and _FENCE.match(line):
            fenced = not fenced
        if side == "" and kind == "<":
            side = "ours"
        elif side == "ours" and kind == "|":
            side = "base"
        elif side in ("ours", "base") and kind == "=" and line.rstrip("\r\n") == "=" * 7:
            side = "theirs"
        elif side == "theirs" and kind == ">":
            side, found = "", True
        elif side in ("", "ours"):
            ours.append(line)
            if side == "":
                theirs.append(line)
        elif side == "theirs":
            theirs.append(line)
    if side or not found:
        return None
    return "".join(ours), "".join(theirs)


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
    head = "".join(dump_pair(k, v) for k, v in pairs)
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
    if not (memory.description.replace("\n", "") + memory.type).isprintable():
        warnings.append(
            "control or invisible characters in the type or description (shown"
            " escaped in MEMORY.md, prompts and the terminal)"
        )
    if len(memory.description) > MAX_DESCRIPTION_CHARS:
        warnings.append(f"description longer than {MAX_DESCRIPTION_CHARS} characters")
    if git_conflicted(memory):
        warnings.append(
            f"{CONFLICTED} git left conflict markers in it (a merge memdir's drivers did not"
            " make); no model is shown the other side — look ('memdir show"
            f" {memory.name}'), then run 'memdir resolve {memory.name} --keep current|other'"
        )
    elif CONFLICT_KEY in memory.extra:
        warnings.append(
            f"{CONFLICTED} two syncs changed it differently (the other version is in history)"
            f" — look, then run 'memdir resolve {memory.name}'"
        )
    return warnings


def validate_new(memory: Memory, types: tuple[str, ...]) -> Memory:
    """Strict checks for what memdir itself writes; raise InvalidMemory naming the fix."""
    validate_name(memory.name)
    if memory.type not in types:
        raise InvalidMemory(
            f"unknown type {memory.type!r} — use one of: {', '.join(types)}"
            " (or add it to 'types' in config.toml)"
        )
    for field_name, value in (("description", memory.description), ("body", memory.body)):
        if "\x00" in value:
            raise InvalidMemory(
                f"the {field_name} holds a NUL character (binary data) — write text only"
            )
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidMemory(
                f"the {field_name} holds a lone surrogate (half of a character, not text)"
                " — send it as UTF-8 text"
            ) from None
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
