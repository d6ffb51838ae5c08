"""Where a host reads its hooks, and putting memdir's entries in and out of those settings
files: Claude Code's ``.claude/settings(.local).json`` and Codex's ``hooks.json``, the user's
or the project's. The person's own hooks and settings are kept as they are; a second install
changes nothing; uninstall takes out exactly memdir's entries.
This module does NOT run hooks (``hooks`` does).
"""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import re
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..disk.atomic import write_atomic
from ..errors import MemdirError

HOSTS = ("claude-code", "codex")
# memdir's own entries
MARKER = re.compile(r"(?:-m memdir|\bmemdir) hook (?:start|prompt|tool|learn)\b")


Settings = dict[str, Any]  # a host's settings file: the host's own shape, kept as it is


# the tool calls the PreToolUse hook is asked about: those that write code or run a command
TOOL_MATCHER = {"claude-code": "Write|Edit|MultiEdit|Bash", "codex": ""}


@dataclass(frozen=True)
class Target:
    """A host settings file memdir's hooks go into."""

    host: str
    path: Path
    events: dict[str, str]  # event name -> memdir hook subcommand


def target(host: str, *, user: bool, project: Path) -> Target:
    """Where ``host`` reads hooks: the project's settings, or the user's."""
    home = Path.home()
    if host == "claude-code":  # a project's settings.json is shared: this machine's go local
        path = (
            home / ".claude" / "settings.json"
            if user
            else project / ".claude" / "settings.local.json"
        )
        events = {
            "SessionStart": "start",
            "UserPromptSubmit": "prompt",
            "PreToolUse": "tool",
            "Stop": "learn",
            "SessionEnd": "learn",
            "PreCompact": "learn",
        }
    elif host == "codex":
        path = (home if user else project) / ".codex" / "hooks.json"
        events = {
            "SessionStart": "start",
            "UserPromptSubmit": "prompt",
            "PreToolUse": "tool",
            "Stop": "learn",
            "PreCompact": "learn",
        }
    else:
        raise MemdirError(f"unknown host {host!r} — use one of {', '.join(HOSTS)}")
    return Target(host, path, events)


def _command(sub: str, host: str, *, shared: bool) -> str:
    """The hook's command: ``memdir`` from the PATH in a file teammates share (their
    memdir, wherever they installed it), else this installation's interpreter."""
    if shared:
        return f"memdir hook {sub} --host {host}"
    return f"{shlex.quote(sys.executable)} -m memdir hook {sub} --host {host}"


def _read_settings(path: Path) -> Settings:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    try:
        data = json.loads(text) if text.strip() else {}
    except ValueError as exc:
        raise MemdirError(
            f"{path} is not valid JSON ({exc}) — fix it first; memdir leaves it as it is"
        ) from None
    if not isinstance(data, dict):
        raise MemdirError(f"{path} does not hold a JSON object — fix it first")
    return data


def _without_memdir(data: Settings) -> Settings:
    """``data`` with memdir's hook entries taken out (and groups and events left empty)."""
    out = dict(data)
    hooks = out.get("hooks")
    if not isinstance(hooks, dict):
        return out
    kept: Settings = {}
    for event, groups in hooks.items():
        if not isinstance(groups, list):
            kept[event] = groups
            continue
        new_groups = []
        for group in groups:
            if isinstance(group, dict) and isinstance(group.get("hooks"), list):
                handlers = [
                    h
                    for h in group["hooks"]
                    if not (isinstance(h, dict) and MARKER.search(str(h.get("command", ""))))
                ]
                if handlers:
                    new_groups.append({**group, "hooks": handlers})
            else:
                new_groups.append(group)
        if new_groups:
            kept[event] = new_groups
    if kept:
        out["hooks"] = kept
    else:
        out.pop("hooks", None)
    return out


def install(host: str, *, user: bool, project: Path, timeout: int = 10) -> tuple[Path, str]:
    """Add memdir's hooks to the host's settings (again: no change); the file and a diff."""
    t = target(host, user=user, project=project)
    before = _read_settings(t.path)
    data = _without_memdir(before)
    hooks = data.setdefault("hooks", {})
    shared = not user and host == "codex"  # .codex/hooks.json is checked in with the project
    for event, sub in t.events.items():
        matcher = {"matcher": TOOL_MATCHER[host]} if event == "PreToolUse" else {}
        hooks.setdefault(event, []).append(
            {
                **matcher,
                "hooks": [
                    {
                        "type": "command",
                        "command": _command(sub, host, shared=shared),
                        "timeout": timeout,
                    }
                ],
            }
        )
    return t.path, _save(t.path, before, data)


def uninstall(host: str, *, user: bool, project: Path) -> tuple[Path, str]:
    """Take exactly memdir's entries out of the host's settings; the file and a diff."""
    t = target(host, user=user, project=project)
    before = _read_settings(t.path)
    if not before:
        return t.path, ""
    if host == "codex":  # Codex's trust of memdir's entries goes with them
        forget_codex_trust(_codex_keys(t.path, before))
    after = _without_memdir(before)
    if after or after == before:
        return t.path, _save(t.path, before, after)
    # nothing but memdir's hooks was in it: no empty settings file is left behind
    old = json.dumps(before, indent=2, ensure_ascii=False) + "\n"
    t.path.unlink()
    with contextlib.suppress(OSError):
        t.path.parent.rmdir()  # (only when nothing else is in the host's folder)
    return t.path, "".join(difflib.unified_diff(old.splitlines(True), [], str(t.path), "/dev/null"))


def _save(path: Path, before: Settings, after: Settings) -> str:
    old = json.dumps(before, indent=2, ensure_ascii=False) + "\n" if before else ""
    new = json.dumps(after, indent=2, ensure_ascii=False) + "\n"
    if old == new:
        return ""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, new.encode())
    return "".join(
        difflib.unified_diff(old.splitlines(True), new.splitlines(True), str(path), str(path))
    )


def installed(project: Path) -> list[str]:
    """Where memdir's hooks are installed (for ``memdir doctor``)."""
    out = []
    for host in HOSTS:
        for user in (False, True):
            t = target(host, user=user, project=project)
            try:
                text = t.path.read_text(encoding="utf-8")
            except OSError:
                continue
            if MARKER.search(text):
                where = f"{host} ({'user' if user else 'project'}: {t.path})"
                if host == "codex":
                    keys = _codex_keys(t.path, _read_settings(t.path))
                    where += (
                        "; trusted in Codex"
                        if keys and keys <= codex_trusted()
                        else "; NOT trusted in Codex yet: Codex skips them silently — start"
                        " codex, type /hooks and trust memdir's entries"
                    )
                out.append(where)
    return out


# Codex keeps which hooks a person trusted in its config.toml, one table a hook:
# [hooks.state."<hooks.json path>:<event in snake case>:<group>:<handler>"] trusted_hash = "…"
_SNAKE = re.compile(r"(?<!^)(?=[A-Z])")


def _codex_config() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex") / "config.toml"


def _codex_keys(path: Path, data: Settings) -> set[str]:
    """The keys under which Codex records its trust of memdir's entries in ``path``."""
    keys = set()
    hooks = data.get("hooks")
    for event, groups in hooks.items() if isinstance(hooks, dict) else ():
        for g, group in enumerate(groups if isinstance(groups, list) else ()):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for h, handler in enumerate(handlers if isinstance(handlers, list) else ()):
                if isinstance(handler, dict) and MARKER.search(str(handler.get("command", ""))):
                    keys.add(f"{path}:{_SNAKE.sub('_', event).lower()}:{g}:{h}")
    return keys


def codex_trusted() -> set[str]:
    """The hook keys Codex's config.toml records a trusted hash for."""
    import tomllib

    try:
        data = tomllib.loads(_codex_config().read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return set()
    state = data.get("hooks", {}).get("state", {}) if isinstance(data.get("hooks"), dict) else {}
    return {k for k, v in state.items() if isinstance(v, dict) and v.get("trusted_hash")}


def forget_codex_trust(keys: set[str]) -> None:
    """Take the ``[hooks.state."KEY"]`` tables of ``keys`` out of Codex's config.toml, the rest
    of the file as it is (a hook memdir no longer installs is trusted no more)."""
    path = _codex_config()
    try:
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    except OSError:
        return
    out, skipping = [], False
    for line in lines:
        head = line.strip()
        if head.startswith("["):
            found = re.fullmatch(r'\[\s*hooks\.state\.("(?:[^"\\]|\\.)*")\s*\]', head)
            skipping = found is not None and json.loads(found.group(1)) in keys
        if not skipping:
            out.append(line)
    if len(out) != len(lines):
        write_atomic(path, "".join(out).encode())


# -- running ----------------------------------------------------------------------------------
