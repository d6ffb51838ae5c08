"""A memdir store as the backend of Anthropic's memory tool (``memory_20250818``).

``MemdirMemoryTool`` subclasses the SDK's ``BetaAbstractMemoryTool``, so the SDK's tool runner
uses it unchanged: ``client.beta.messages.tool_runner(..., tools=[MemdirMemoryTool(store)])``.
``/memories/<name>.md`` is the project's memory ``<name>``; given the user's store too,
``/memories/user/<name>.md`` is one of the user's own memories (every project sees those), and
renaming a file between the two folders moves it. ``view`` shows files as
they are on disk, with line numbers; a file the model creates without frontmatter gets one
(``user_preference`` in the user's folder, elsewhere a type guessed from the words; its first
line of text as the description), and an insert that would break the frontmatter is refused
with the line where the text starts. Every change goes through the store (lock, journal,
history, undo, secret screening); a refused change is a tool error that says why.
``memories/…`` is read as ``/memories/…`` and ``<name>`` as ``<name>.md``; paths outside
``/memories``, ``..`` (also percent-encoded), other subfolders and anything but ``<name>.md``
are refused. Return strings follow the SDK's own implementation. This module does NOT call
the model: the SDK's runner does.
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

from ..errors import InvalidMemory, MemdirError, MemoryNotFound, SecretFound
from ..extract import sounds_like_preference
from ..index import read_file
from ..memory import MAX_DESCRIPTION_CHARS, Memory, loads, split_frontmatter, validate_name
from ..plan import Put, Remove
from ..store import MemoryStore

ROOT = "/memories"
USER = ROOT + "/user"
WIDTH = 6  # line-number width, as the SDK's local-filesystem tool prints it


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


def _frontmatter_end(text: str) -> int:
    """The line number of the line that closes a file's frontmatter (0: it has none)."""
    try:
        head, _ = split_frontmatter(text)
    except InvalidMemory:
        return 0
    return head.count("\n") + 2  # the opening line, the YAML's lines, the closing line


_MARKS = re.compile(r"^\s*(?:[#>]+\s*|[-*+]\s+)*")  # headings, quotes, list bullets
_CLOSING = re.compile(r"\s+#+\s*$")  # a heading's closing hashes ("## Title ##")


def _first_line(text: str) -> str:
    """A note's first line of prose, without Markdown marks; code only when there is nothing
    else (a description reads better as "Always add type hints" than as a code fence)."""
    prose: list[str] = []
    code: list[str] = []
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith(("```", "~~~")):
            fenced = not fenced
            continue
        bare = _CLOSING.sub("", _MARKS.sub("", line)).strip()
        if bare:
            (code if fenced else prose).append(bare)
            if prose:
                break
    return (prose or code or [""])[0]


class MemdirMemoryTool(BetaAbstractMemoryTool):
    """The memory tool over a memdir store."""

    def __init__(self, store: MemoryStore, *, user_store: MemoryStore | None = None,
                 default_type: str = "reference", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.store = store
        self.user_store = user_store
        self.default_type = (default_type if default_type in store.config.types
                             else store.config.types[0])

    @classmethod
    def with_user_store(cls, store: MemoryStore, **kwargs: Any) -> MemdirMemoryTool:
        """The tool over ``store`` and the user's own store as its configuration places it
        (created owner-only if need be); just ``store`` when the user's store is turned off."""
        from ..scopes import USER, Scopes

        scopes = Scopes(store.config, project=store, watch=False, scopes=[USER])
        user = scopes.writable(USER) if scopes.user_root() is not None else None
        return cls(store, user_store=user, **kwargs)

    # -- paths ------------------------------------------------------------------------------

    def _locate(self, path: str, *, allow_dir: bool = False) -> tuple[MemoryStore, str | None]:
        """The store and memory a path names (memory None: that store's folder itself)."""
        raw = unquote(unquote(path or "")).replace("\\", "/")
        if raw.split("/")[0] == ROOT[1:]:  # "memories/…": only the leading slash left out
            raw = "/" + raw
        if raw.rstrip("/") == ROOT and allow_dir:
            return self.store, None
        if not raw.startswith(ROOT + "/"):
            such = "" if raw.startswith("/") else f", such as {ROOT}/{raw}"
            raise ToolError(f"Path must start with {ROOT}, got: {path}{such}")
        rest, store = raw[len(ROOT) + 1:], self.store
        if self.user_store is not None and rest.split("/")[0] == "user":
            rest, store = rest[len("user/"):], self.user_store
        if not rest.strip("/") and allow_dir:
            return store, None
        parts = rest.split("/")
        folders = f"{ROOT} or {USER}" if self.user_store is not None else ROOT
        if ".." in parts or len(parts) > 1 or not parts[0]:
            raise ToolError(f"Path {path} would escape {ROOT} or names a folder: memories are"
                            f" files directly in {folders}, like {ROOT}/<name>.md")
        if "." not in parts[0]:  # "/memories/tea" names the memory tea, as tea.md does
            parts[0] += ".md"
        if not parts[0].endswith(".md"):
            folder = USER if store is self.user_store else ROOT
            raise ToolError(f"Path {path} is not a memory file: use {folder}/<name>.md")
        try:
            return store, validate_name(parts[0][:-3])
        except MemdirError as exc:
            raise ToolError(str(exc)) from None

    def _file(self, path: str) -> tuple[MemoryStore, str]:
        """The store and memory of a path that must name a file."""
        store, name = self._locate(path)
        assert name is not None
        return store, name

    def _text(self, store: MemoryStore, name: str, path: str) -> str:
        try:
            mem = store.get(name)
        except MemoryNotFound:
            raise ToolError(f"The path {path} does not exist. Please provide a valid path"
                            f" (view {ROOT} lists the memories).") from None
        try:
            data = read_file(store.root / str(mem.path), store.config.max_file_bytes)
            return data.decode("utf-8")
        except (InvalidMemory, UnicodeDecodeError) as exc:
            raise ToolError(f"{path} cannot be read ({exc}) — see 'memdir doctor'") from None

    def _write(self, store: MemoryStore, changes: list[Any], summary: str) -> None:
        try:
            store.apply(changes, source="memory-tool", summary=summary)
        except SecretFound as exc:
            raise ToolError(f"refused: {str(exc).split(' — ')[0]} — leave the secret out and"
                            " write the rest") from None
        except MemdirError as exc:
            raise ToolError(str(exc)) from None

    def _parse(self, store: MemoryStore, name: str, text: str, path: str) -> Memory:
        """The memory a file's new text describes; frontmatter is added when missing."""
        if text.lstrip("\ufeff").startswith("---\n"):
            try:
                mem = loads(text)
            except MemdirError as exc:
                raise ToolError(f"{path} would not be a valid memory: {exc}") from None
            if mem.name != name:
                raise ToolError(f"the frontmatter names {mem.name!r} but the path names"
                                f" {name!r} — keep them the same, or use rename")
            return mem
        first = _first_line(text) or name
        about_user = store is self.user_store or sounds_like_preference(text)
        kind = "user_preference" if about_user else self.default_type
        if kind not in store.config.types:
            kind = self.default_type
        return Memory(name, kind, first[:MAX_DESCRIPTION_CHARS], text.strip("\n"))

    # -- commands -----------------------------------------------------------------------------

    def _listing(self, store: MemoryStore, folder: str) -> list[str]:
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
        if name is None:
            if store is self.store:
                lines = self._listing(store, ROOT)
                if self.user_store is not None:
                    lines += self._listing(self.user_store, USER)
            else:
                lines = self._listing(store, USER)
            return ("Here're the files and directories up to 2 levels deep in"
                    f" {command.path}, excluding hidden items:\n" + "\n".join(lines))
        text = self._text(store, name, command.path)
        lines = text.split("\n")
        start = 1
        if command.view_range and len(command.view_range) == 2:
            first, last = command.view_range
            start = max(1, first)
            lines = lines[start - 1: len(lines) if last == -1 else last]
        numbered = [f"{str(i + start).rjust(WIDTH)}\t{line}" for i, line in enumerate(lines)]
        return f"Here's the content of {command.path} with line numbers:\n" + "\n".join(numbered)

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        store, name = self._file(command.path)
        if name in store:
            raise ToolError(f"File {command.path} already exists")
        self._write(store, [Put(self._parse(store, name, command.file_text, command.path),
                                reason="created with the memory tool")], f"create {name}")
        return f"File created successfully at: {command.path}"

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        store, name = self._file(command.path)
        text = self._text(store, name, command.path)
        count = text.count(command.old_str) if command.old_str else 0
        if count == 0:
            raise ToolError(f"No replacement was performed, old_str `{command.old_str}` did not"
                            f" appear verbatim in {command.path}.")
        if count > 1:
            lines, at = [], text.find(command.old_str)
            while at != -1:
                lines.append(text[:at].count("\n") + 1)
                at = text.find(command.old_str, at + 1)
            raise ToolError(f"No replacement was performed. Multiple occurrences of old_str"
                            f" `{command.old_str}` in lines: {', '.join(map(str, lines))}."
                            " Please ensure it is unique")
        at = text.find(command.old_str)
        new = text.replace(command.old_str, command.new_str, 1)
        current = store.get(name)
        self._write(store, [Put(self._parse(store, name, new, command.path),
                                reason="edited with the memory tool", expect=current.digest,
                                merge_extra=False)], f"edit {name}")
        shown = self._text(store, name, command.path).split("\n")
        line = text[:at].count("\n")
        snippet = [f"{str(n).rjust(WIDTH)}\t{shown[n - 1]}"
                   for n in range(max(1, line - 1), min(len(shown), line + 3) + 1)]
        return ("The memory file has been edited. Here is the snippet showing the change (with"
                " line numbers):\n" + "\n".join(snippet))

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        store, name = self._file(command.path)
        text = self._text(store, name, command.path)
        lines = text.split("\n")
        if text.endswith("\n"):
            lines.pop()
        if command.insert_line < 0 or command.insert_line > len(lines):
            raise ToolError(f"Invalid `insert_line` parameter: {command.insert_line}. It should"
                            f" be within the range [0, {len(lines)}].")
        lines.insert(command.insert_line, command.insert_text.rstrip("\n"))
        new = "\n".join(lines) + "\n"
        top = _frontmatter_end(text)
        try:
            if command.insert_line < top and not _frontmatter_end(new):
                raise ToolError("the frontmatter must open the file")
            mem = self._parse(store, name, new, command.path)
        except ToolError:
            if command.insert_line >= top:
                raise
            raise ToolError(f"No insertion was performed: line {command.insert_line} of"
                            f" {command.path} is in its frontmatter (lines 1-{top}), where only"
                            f" YAML fields go; its text starts after line {top}, so insert at"
                            f" {top} or later") from None
        current = store.get(name)
        self._write(store, [Put(mem, reason="edited with the memory tool", expect=current.digest,
                                merge_extra=False)], f"insert into {name}")
        return f"The file {command.path} has been edited."

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        store, name = self._locate(command.path, allow_dir=True)
        if name is None:
            raise ToolError(f"Cannot delete the {command.path.rstrip('/')} directory itself")
        if name not in store:
            raise ToolError(f"The path {command.path} does not exist")
        self._write(store, [Remove(name, reason="deleted with the memory tool")],
                    f"delete {name}")
        return f"Successfully deleted {command.path}"

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
            self._write(source, [Put(current.replace(name=new), reason=f"renamed from {old}",
                                     merge_extra=False),
                                 Remove(old, reason=f"renamed to {new}",
                                        expect=current.digest)], f"rename {old} to {new}")
        else:  # another store: the copy is written before the original goes
            there, here = ("user", "project") if target is self.user_store else ("project",
                                                                                 "user")
            self._write(target, [Put(current.replace(name=new), merge_extra=False,
                                     reason=f"moved from the {here} store")],
                        f"moved {old} from {here}")
            self._write(source, [Remove(old, reason=f"moved to the {there} store",
                                        expect=current.digest)], f"moved {old} to {there}")
        return f"Successfully renamed {command.old_path} to {command.new_path}"

    def clear_all_memory(self) -> str:
        """Refused: memdir never deletes everything at once (use `memdir rm` per memory)."""
        raise ToolError("clearing all memory is not supported — delete memories one by one")


__all__ = ["MemdirMemoryTool"]
