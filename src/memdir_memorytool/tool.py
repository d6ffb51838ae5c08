"""A memdir store as the backend of Anthropic's memory tool (``memory_20250818``).

``MemdirMemoryTool`` subclasses the SDK's ``BetaAbstractMemoryTool``, so the SDK's tool runner
uses it unchanged: ``client.beta.messages.tool_runner(..., tools=[MemdirMemoryTool(store)])``.
``/memories/<name>.md`` is the project's memory ``<name>``; given the user's store too,
``/memories/user/<name>.md`` is one of the user's own memories (every project sees those), and
renaming a file between the two folders moves it.

The model sees and edits the text it wrote, as it wrote it: ``view`` numbers the lines of a
memory's body, and ``str_replace`` and ``insert`` work on those lines; memdir keeps the
frontmatter behind it (a description taken from the first line follows the text). A note the
model creates gets a type from its words (a preference of the person goes to the user's store
when there is one); a file that opens with frontmatter sets its own fields. Claude's habits
are mapped onto memories: ``.txt``, ``.xml`` and other text endings, subfolders
(``/memories/projects/x/notes.md`` is ``projects-x-notes``) and names with spaces or capitals.
Every change goes through the store (lock, journal, history, undo, secret screening); a
refused change or a malformed argument is a tool error that says why. Return strings follow
the SDK's own implementation. This module does NOT call the model: the SDK's runner does.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

from anthropic.lib.tools import BetaAbstractMemoryTool, ToolError
from anthropic.types.beta import (
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)

from memdir.config import Config
from memdir.errors import MemdirError, MemoryNotFound, SecretFound
from memdir.gate.safetext import lines_of
from memdir.memfile import read_file
from memdir.memory import MAX_DESCRIPTION_CHARS, Memory, loads, slugify, validate_name
from memdir.notes import first_line, from_text, guess_type
from memdir.plan import Put, Remove
from memdir.policy import HELD, Policy
from memdir.review import land
from memdir.store import Store

ROOT = "/memories"
USER = ROOT + "/user"
WIDTH = 6  # line-number width, as the SDK's local-filesystem tool prints it
TEXT_ENDINGS = (".md", ".markdown", ".txt", ".xml", ".json", ".yaml", ".yml", ".rst", ".org")
MAX_LINES_SHOWN = 10  # line numbers listed for an ambiguous old_str
STRINGS = ("path", "file_text", "old_str", "new_str", "insert_text", "old_path", "new_path")


def _size(n: int) -> str:
    """Sizes as the SDK's tool prints them: 512B, 1.5K, 2.0M."""
    if n < 1024:
        return f"{n}B"
    value = float(n)
    for unit in ("K", "M", "G"):
        value /= 1024
        if value < 1024 or unit == "G":
            break
    return f"{value:.1f}{unit}"


class MemdirMemoryTool(BetaAbstractMemoryTool):
    """The memory tool over a memdir store."""

    def __init__(
        self,
        store: Store,
        *,
        user_store: Store | None = None,
        default_type: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.store = store
        self.user_store = user_store
        self.default_type = default_type if default_type in store.config.types else None

    @classmethod
    def with_user_store(
        cls, store: Store, config: Config | None = None, **kwargs: Any
    ) -> MemdirMemoryTool:
        """The tool over ``store`` and the user's own store where ``config`` places it
        (default: the store's; ``memdir.load_config()`` reads ``MEMDIR_USER_DIR`` too), created
        owner-only if need be; just ``store`` when the user's store is turned off."""
        from memdir.scopes import USER, Scopes

        scopes = Scopes(config or store.config, project=store, watch=False, scopes=[USER])
        user = scopes.writable(USER) if scopes.user_root() is not None else None
        return cls(store, user_store=user, **kwargs)

    def execute(self, command: Any) -> Any:
        """Check the arguments' types (the SDK hands them over unchecked), then run."""
        for key in STRINGS:
            value = getattr(command, key, "")
            if not isinstance(value, str):
                raise ToolError(f"`{key}` must be a string, got {type(value).__name__}")
        line = getattr(command, "insert_line", 0)
        if not isinstance(line, int) or isinstance(line, bool):
            raise ToolError(f"`insert_line` must be a whole number, got {line!r}")
        span = getattr(command, "view_range", None)
        if span is not None and (
            not isinstance(span, list)
            or len(span) != 2
            or not all(isinstance(n, int) for n in span)
        ):
            raise ToolError(f"`view_range` must be two line numbers, like [1, 20]; got {span!r}")
        return super().execute(command)

    # -- paths ------------------------------------------------------------------------------

    def _locate(self, path: str, *, allow_dir: bool = False) -> tuple[Store, str | None]:
        """The store and memory a path names (memory None: that store's folder itself)."""
        raw = unquote(unquote(path or "")).replace("\\", "/")
        if raw.split("/")[0] == ROOT[1:]:  # "memories/…": only the leading slash left out
            raw = "/" + raw
        if raw.rstrip("/") == ROOT and allow_dir:
            return self.store, None
        if not raw.startswith(ROOT + "/"):
            such = "" if raw.startswith("/") else f", such as {ROOT}/{raw}"
            raise ToolError(f"Path must start with {ROOT}, got: {path}{such}")
        rest, store = raw[len(ROOT) + 1 :], self.store
        if self.user_store is not None and rest.split("/")[0] == "user":
            rest, store = rest[len("user/") :], self.user_store
        parts = [p for p in rest.split("/") if p]
        if ".." in parts or "." in parts:
            raise ToolError(f"Path {path} would escape {ROOT}")
        if not parts:
            if allow_dir:
                return store, None
            raise ToolError(
                f"Path {path} names a folder: memories are files, like {ROOT}/<name>.md"
            )
        stem = parts[-1]
        for ending in TEXT_ENDINGS:
            if stem.lower().endswith(ending):
                stem = stem[: -len(ending)]
                break
        else:
            if "." in stem and not re.fullmatch(r"[^.]+\.[^.]*\d[^.]*", stem):
                folder = USER if store is self.user_store else ROOT
                raise ToolError(f"Path {path} is not a text file: use {folder}/<name>.md")
        name = "-".join([*parts[:-1], stem])
        try:
            name = validate_name(name)
        except MemdirError:
            name = slugify(name)
        if (
            store is self.store
            and name not in store
            and self.user_store is not None
            and name in self.user_store
        ):
            store = self.user_store  # a preference the tool kept in the user's store
        return store, name

    def _file(self, path: str) -> tuple[Store, str]:
        """The store and memory of a path that must name a file."""
        store, name = self._locate(path)
        assert name is not None
        return store, name

    def _memory(self, store: Store, name: str, path: str) -> Memory:
        """The memory, read through the same no-follow handle the store checks with."""
        try:
            mem = store.get(name)
        except MemoryNotFound:
            raise ToolError(
                f"The path {path} does not exist. Please provide a valid path"
                f" (view {ROOT} lists the memories)."
            ) from None
        verdict = Policy(store).verdict(name, mem)
        if not verdict.model and verdict.why == HELD:
            raise ToolError(
                f"{path} is held for review: it came from elsewhere (a sync, a repository,"
                " another author) and is not shown until the user approves it ('memdir review')"
            )
        if not verdict.model:
            raise ToolError(
                f"{path} is not shown: {verdict.why}, not the user's words ('memdir doctor'"
                " names it for the user)"
            )
        try:
            data = read_file(store.root / str(mem.path), store.config.max_file_bytes)
            return loads(data.decode("utf-8")).replace(path=mem.path, digest=mem.digest)
        except (MemdirError, UnicodeDecodeError) as exc:
            raise ToolError(f"{path} cannot be read ({exc}) — see 'memdir doctor'") from None

    def _write(self, store: Store, changes: list[Any], summary: str) -> str | None:
        """Make ``changes`` through the review queue (``review.land``); what to tell the model
        when they wait for the user's review instead (``review = "ask"``, or a text that reads
        as an instruction to an agent), else None."""
        limit = store.config.max_file_bytes
        for change in changes:
            if isinstance(change, Put) and len(change.memory.body.encode()) > limit:
                raise ToolError(
                    f"the text is over the {limit // 1024} KiB a memory may hold"
                    " — keep the gist, not the whole document"
                )
        try:
            landed = land(store, changes, source="memory-tool", summary=summary, secrets="refuse")
        except SecretFound as exc:
            raise ToolError(
                f"refused: {str(exc).split(' — ')[0]} — leave the secret out and write the rest"
            ) from None
        except MemdirError as exc:
            raise ToolError(str(exc)) from None
        if landed.operation is not None:
            return None
        why = f" ({landed.held[0].removeprefix('held: ')})" if landed.held else ""
        return (
            f"Not changed yet: {summary} waits for the user's review{why} ('memdir review' or"
            " 'memdir ui'); the file stays as it was until the user approves it."
        )

    def _new(self, store: Store, name: str, text: str, path: str) -> Memory:
        """The memory a created file's text describes: its own frontmatter, or the type its
        words suggest and its first line as the description."""
        if len(text.encode()) > store.config.max_file_bytes:
            raise ToolError(
                f"the text is over the {store.config.max_file_bytes // 1024} KiB"
                " a memory may hold — keep the gist, not the whole document"
            )
        if text.lstrip("\ufeff").startswith("---\n"):
            try:
                return loads(text).replace(name=name)
            except MemdirError as exc:
                raise ToolError(f"{path} would not be a valid memory: {exc}") from None
        types = store.config.types
        if store is self.user_store and "user_preference" in types:
            kind = "user_preference"
        else:
            kind = guess_type(text, types)
            if kind != "user_preference" and self.default_type is not None:
                kind = self.default_type
        return from_text(name, text, types, kind)

    def _edited(self, current: Memory, body: str) -> Memory:
        """``current`` with a new body; a description that was its first line follows it."""
        derived = first_line(current.body)[:MAX_DESCRIPTION_CHARS]
        description = current.description
        if description == derived or not description:
            description = (first_line(body) or current.name)[:MAX_DESCRIPTION_CHARS]
        return current.replace(body=body.strip("\n"), description=description)

    # -- commands -----------------------------------------------------------------------------

    def _listing(self, store: Store, folder: str) -> list[str]:
        lines = [f"{_size(4096)}\t{folder}"]
        for e in store.entries():
            try:
                size = (store.root / e.file).lstat().st_size
            except OSError:
                continue
            lines.append(f"{_size(size)}\t{folder}/{e.name}.md")
        return lines

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        store, name = self._locate(command.path, allow_dir=True)
        if name is not None and name not in store and "." not in command.path.rsplit("/")[-1]:
            prefix = name + "-"  # a subfolder the model made: the memories it maps onto
            if any(e.name.startswith(prefix) for e in store.entries()):
                folder = USER if store is self.user_store else ROOT
                lines = [
                    line
                    for line in self._listing(store, folder)[1:]
                    if line.split("\t")[1].startswith(f"{folder}/{prefix}")
                ]
                return (
                    "Here're the files and directories up to 2 levels deep in"
                    f" {command.path}, excluding hidden items:\n" + "\n".join(lines)
                )
        if name is None:
            if store is self.store:
                lines = self._listing(store, ROOT)
                if self.user_store is not None:
                    lines += self._listing(self.user_store, USER)
            else:
                lines = self._listing(store, USER)
            return (
                "Here're the files and directories up to 2 levels deep in"
                f" {command.path}, excluding hidden items:\n" + "\n".join(lines)
            )
        lines = self._memory(store, name, command.path).body.split("\n")
        start = 1
        if command.view_range:
            first, last = command.view_range
            start = max(1, first)
            lines = lines[start - 1 : len(lines) if last == -1 else last]
        numbered = [f"{str(i + start).rjust(WIDTH)}\t{line}" for i, line in enumerate(lines)]
        return f"Here's the content of {command.path} with line numbers:\n" + "\n".join(numbered)

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        store, name = self._file(command.path)
        if name in store:
            raise ToolError(f"File {command.path} already exists")
        mem = self._new(store, name, command.file_text, command.path)
        where = command.path
        if mem.type == "user_preference" and store is self.store and self.user_store is not None:
            store, where = self.user_store, f"{USER}/{name}.md"  # the person's, in any project
            if name in store:
                raise ToolError(f"File {where} already exists")
        waits = self._write(
            store, [Put(mem, reason="created with the memory tool")], f"create {name}"
        )
        if waits:
            return waits
        note = (
            ""
            if where == command.path
            else " (a preference of the person: kept in their own store, which every project sees)"
        )
        return f"File created successfully at: {where}{note}"

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        store, name = self._file(command.path)
        current = self._memory(store, name, command.path)
        text = current.body
        lines = lines_of(text, command.old_str)
        if not lines:
            raise ToolError(
                f"No replacement was performed, old_str `{command.old_str[:200]}`"
                f" did not appear verbatim in {command.path}."
            )
        if len(lines) > 1:
            shown = ", ".join(map(str, lines[:MAX_LINES_SHOWN]))
            more = (
                f" (and {len(lines) - MAX_LINES_SHOWN} more)"
                if len(lines) > MAX_LINES_SHOWN
                else ""
            )
            raise ToolError(
                f"No replacement was performed. Multiple occurrences of old_str"
                f" `{command.old_str[:200]}` in lines: {shown}{more}. Please"
                " ensure it is unique"
            )
        new = text.replace(command.old_str, command.new_str, 1)
        waits = self._write(
            store,
            [
                Put(
                    self._edited(current, new),
                    reason="edited with the memory tool",
                    expect=current.digest,
                    merge_extra=False,
                )
            ],
            f"edit {name}",
        )
        if waits:
            return waits
        body = new.split("\n")
        line = lines[0] - 1
        snippet = [
            f"{str(n).rjust(WIDTH)}\t{body[n - 1]}"
            for n in range(max(1, line - 1), min(len(body), line + 3) + 1)
        ]
        return (
            "The memory file has been edited. Here is the snippet showing the change (with"
            " line numbers):\n" + "\n".join(snippet)
        )

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        store, name = self._file(command.path)
        current = self._memory(store, name, command.path)
        lines = current.body.split("\n") if current.body else []
        if command.insert_line < 0 or command.insert_line > len(lines):
            raise ToolError(
                f"Invalid `insert_line` parameter: {command.insert_line}. It should"
                f" be within the range [0, {len(lines)}]."
            )
        lines.insert(command.insert_line, command.insert_text.rstrip("\n"))
        waits = self._write(
            store,
            [
                Put(
                    self._edited(current, "\n".join(lines)),
                    reason="edited with the memory tool",
                    expect=current.digest,
                    merge_extra=False,
                )
            ],
            f"insert into {name}",
        )
        return waits or f"The file {command.path} has been edited."

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        store, name = self._locate(command.path, allow_dir=True)
        if name is None:
            raise ToolError(f"Cannot delete the {command.path.rstrip('/')} directory itself")
        if name not in store:
            raise ToolError(f"The path {command.path} does not exist")
        gone = Remove(name, reason="deleted with the memory tool")
        return (
            self._write(store, [gone], f"delete {name}") or f"Successfully deleted {command.path}"
        )

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        source, old = self._locate(command.old_path, allow_dir=True)
        target, new = self._file(command.new_path)
        if old is None:
            raise ToolError(f"Cannot rename the {command.old_path.rstrip('/')} directory itself")
        if old not in source:
            raise ToolError(f"The path {command.old_path} does not exist")
        if new in target:
            raise ToolError(f"The destination {command.new_path} already exists")
        current = source.get(old)
        if target is source:
            waits = self._write(
                source,
                [
                    Put(current.replace(name=new), reason=f"renamed from {old}", merge_extra=False),
                    Remove(old, reason=f"renamed to {new}", expect=current.digest),
                ],
                f"rename {old} to {new}",
            )
        else:  # another store: the copy is written before the original goes
            there, here = ("user", "project") if target is self.user_store else ("project", "user")
            waits = self._write(
                target,
                [
                    Put(
                        current.replace(name=new),
                        merge_extra=False,
                        reason=f"moved from the {here} store",
                    )
                ],
                f"moved {old} from {here}",
            )
            waits = waits or self._write(  # (the original goes only once the copy is made)
                source,
                [Remove(old, reason=f"moved to the {there} store", expect=current.digest)],
                f"moved {old} to {there}",
            )
        return waits or f"Successfully renamed {command.old_path} to {command.new_path}"

    def clear_all_memory(self) -> str:
        """Refused: memdir never deletes everything at once (use `memdir rm` per memory)."""
        raise ToolError("clearing all memory is not supported — delete memories one by one")


__all__ = ["MemdirMemoryTool"]
