"""What sync lets in and out of git: only the files memdir owns, checked before they land.

A store's git repository is shared with a remote and teammates, so whatever arrives from it
is somebody else's: sync commits only memory files at the store's root and the few files
memdir writes beside them (``OWNED``), never anything under ``<state>/`` whatever a
``.gitignore`` says; before merging, it checks what the remote changed in the store (no
``.memdir`` entry of any kind, no link, submodule or other non-regular file, nothing in a
subfolder or of another kind, nothing oversized, not too many files, not too many memories
retired at once) and refuses with one line naming the path, the commit and its author. How
memories merge is forced in the repository's own ``info/attributes``, so a committed
``.gitattributes`` cannot change the driver or the encoding. This module does NOT merge,
commit or push (``sync`` does).
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from memdir.disk.layout import INTERNAL
from memdir.entry import INDEX_FILE
from memdir_git.git import Git, SyncError

# The files beside the memories that memdir itself writes (config.toml is the store's data).
OWNED = frozenset({INDEX_FILE, "config.toml", ".gitattributes", ".gitignore"})
REGULAR = ("100644", "100755")
MAX_INCOMING = 20_000  # files one sync takes from a remote
MAX_OWNED_BYTES = 64 * 1024  # config.toml, .gitattributes, .gitignore
ATTRIBUTES_MARK = "# memdir: how memories merge, whatever a committed .gitattributes says"


def is_memory(fname: str) -> bool:
    """Whether a store-relative path is a memory file (at the root, not the index)."""
    return fname.endswith(".md") and "/" not in fname and fname != INDEX_FILE and fname[:1] != "."


def owned(fname: str) -> bool:
    """Whether sync commits and accepts the store-relative path ``fname``."""
    return is_memory(fname) or fname in OWNED


def in_store(rel: str, path: str) -> str | None:
    """``path`` (from the repository's top) relative to a store at ``rel``, or None."""
    if rel == ".":
        return path
    prefix = rel + "/"
    return path[len(prefix) :] if path.startswith(prefix) else None


def _lines(git: Git, *args: str, input: bytes | None = None) -> list[str]:
    return [p for p in git.run(*args, input=input).out.split("\0") if p]


def stage(git: Git, rel: str, root: Path) -> list[tuple[str, str]]:
    """Stage the store's owned files (added, changed, deleted), untrack anything under
    ``.memdir`` that an older sync or a person committed, and unstage everything else in the
    store; the staged ``(status, store-relative path)`` pairs."""
    here = "" if rel == "." else rel + "/"
    present = []
    for fname in sorted(os.listdir(root)):
        if owned(fname):
            try:
                if os.lstat(root / fname).st_mode & 0o170000 == 0o100000:  # regular, no link
                    present.append(fname)
            except FileNotFoundError:
                pass
    tracked = [in_store(rel, p) or "" for p in _lines(git, "ls-files", "-z", "--", rel)]
    wanted = sorted({*present, *(p for p in tracked if owned(p))})
    if wanted:
        paths = "\0".join(here + p for p in wanted).encode()
        git.run("add", "-A", "-f", "--pathspec-from-file=-", "--pathspec-file-nul", input=paths)
    if any(p == INTERNAL or p.startswith(INTERNAL + "/") for p in tracked):
        git.run("rm", "-r", "-q", "-f", "--cached", "--ignore-unmatch", "--", here + INTERNAL)
    listing = git.run("diff", "--cached", "--name-status", "-z", "--no-renames", "--", rel)
    parts = listing.out.split("\0")
    staged: list[tuple[str, str]] = []
    stray: list[str] = []
    for i in range(0, len(parts) - 1, 2):
        path = in_store(rel, parts[i + 1])
        if path is None:
            continue
        if owned(path) or parts[i].startswith("D"):
            staged.append((parts[i], path))
        else:
            stray.append(here + path)
    if stray:  # staged by hand: never committed by memdir
        git.run("reset", "-q", "--pathspec-from-file=-", "--pathspec-file-nul",
                input="\0".join(stray).encode())  # fmt: skip
    return staged


@dataclass(frozen=True)
class Refusal:
    """One thing the remote sent that sync does not take."""

    path: str  # store-relative
    why: str  # "adds X as a symbolic link"
    commit: str = ""
    author: str = ""


@dataclass(frozen=True)
class Incoming:
    """What a remote's commit changes in the store, as checked before merging."""

    refusals: tuple[Refusal, ...]
    retired: tuple[str, ...]  # memories it deletes that are here
    total: int  # memories here
    changed: tuple[str, ...]  # owned files other than memories and MEMORY.md it changes

    def retire_limit(self, share: float) -> int:
        """How many memories a sync may retire without asking (a small store may lose one)."""
        return max(1, math.floor(self.total * share))


def _why(fname: str, mode: str, size: int | None, max_bytes: int) -> str | None:
    if fname == "" or fname == INTERNAL or fname.startswith(INTERNAL + "/"):
        what = "the store folder itself" if fname == "" else fname
        return f"replaces {what} (memdir's own state is never taken from a remote)"
    if mode == "120000":
        return f"adds {fname} as a symbolic link"
    if mode == "160000":
        return f"adds {fname} as a submodule"
    if mode not in REGULAR:
        return f"adds {fname} with file mode {mode} (not a regular file)"
    if "/" in fname:
        return f"adds {fname} in a subfolder (a store holds its memories at its root)"
    if not owned(fname):
        return f"adds {fname}, which is not a memory file"
    limit = max_bytes if is_memory(fname) else MAX_OWNED_BYTES
    if size is not None and size > limit:
        return f"adds {fname} of {size:,} bytes (over the {limit:,}-byte limit)"
    return None


def check(git: Git, rel: str, target: str, *, max_bytes: int) -> Incoming:
    """What ``target`` changes in the store since its merge base with HEAD (all of it when
    there is none), with what sync refuses to take."""
    base = git.run("merge-base", "HEAD", target, check=False).out.strip()
    head = git.run("rev-parse", "-q", "--verify", "HEAD^{commit}", check=False).out.strip()
    if base:
        raw = git.run("diff", "--raw", "-z", "--no-renames", "--no-abbrev", base, target).out
    else:
        empty = git.run("hash-object", "-t", "tree", "/dev/null").out.strip()
        raw = git.run("diff", "--raw", "-z", "--no-renames", "--no-abbrev", empty, target).out
    changes: list[tuple[str, str, str, str]] = []  # (status, new mode, new blob, fname)
    parts = raw.split("\0")
    for i in range(0, len(parts) - 1, 2):
        meta = parts[i].lstrip(":").split()
        fname = in_store(rel, parts[i + 1])
        if fname is None and rel != "." and parts[i + 1] == rel:
            fname = ""  # the store's folder replaced by a file or a link
        if fname is not None and len(meta) >= 5:
            changes.append((meta[4][:1], meta[1], meta[3], fname))
    sizes = _sizes(git, [blob for st, mode, blob, _ in changes if st != "D" and mode in REGULAR])
    refusals: list[Refusal] = []
    if len([c for c in changes if c[0] != "D"]) > MAX_INCOMING:
        refusals.append(
            Refusal("", f"adds or changes more than {MAX_INCOMING:,} files in the store at once")
        )
    for st, mode, blob, fname in changes:
        why = None if st == "D" else _why(fname, mode, sizes.get(blob), max_bytes)
        if why:
            refusals.append(Refusal(fname, why))
    ours = set()
    if head:
        ours = {
            fname
            for p in _lines(git, "ls-tree", "-r", "-z", "--name-only", "HEAD", "--", rel)
            if (fname := in_store(rel, p)) is not None and is_memory(fname)
        }
    retired = tuple(sorted(f for st, _, _, f in changes if st == "D" and f in ours))
    changed = tuple(sorted({f for _, _, _, f in changes if f in OWNED and f != INDEX_FILE}))
    since = f"{base}..{target}" if base else target
    named = tuple(_author(git, since, rel, r) for r in refusals[:3]) + tuple(refusals[3:])
    return Incoming(named, retired, len(ours), changed)


def _sizes(git: Git, blobs: Iterable[str]) -> dict[str, int]:
    wanted = sorted(set(blobs))
    if not wanted:
        return {}
    out = git.run("cat-file", "--batch-check", input="\n".join(wanted).encode() + b"\n").out
    sizes = {}
    for line in out.splitlines():
        bits = line.split()
        if len(bits) == 3 and bits[2].isdigit():
            sizes[bits[0]] = int(bits[2])
    return sizes


def _author(git: Git, since: str, rel: str, r: Refusal) -> Refusal:
    """The refusal with the newest commit that touched its path, and that commit's author."""
    where = rel if r.path == "" else (r.path if rel == "." else f"{rel}/{r.path}")
    res = git.run("log", "-1", "--format=%H%x09%an <%ae>", since, "--", where, check=False)
    commit, _, author = res.out.strip().partition("\t")
    return Refusal(r.path, r.why, commit, author)


def authors(git: Git, rel: str, base: str | None, target: str) -> dict[str, str]:
    """Who last changed each store file between ``base`` and ``target`` (the newest commit's
    author email, by store-relative path)."""
    since = f"{base}..{target}" if base else target
    res = git.run("log", "--format=%x01%ae", "--name-only", "-z", since, "--", rel, check=False)
    out: dict[str, str] = {}
    who = ""
    for token in res.out.split("\0"):  # newest first: "\x01EMAIL", then "\nPATH", "PATH"…
        token = token.lstrip("\n")
        if token.startswith("\x01"):
            who = token[1:]
        elif token and (fname := in_store(rel, token)) is not None:
            out.setdefault(fname, who)
    return out


def refusal_error(remote: str, refusal: Refusal) -> SyncError:
    """The one line a refused remote gets: what, which commit, who, how to get past it."""
    short = refusal.commit[:12]
    by = f"commit {short} by {refusal.author} " if short else "it "
    skip = f"'memdir sync --skip {short}'" if short else "'memdir sync --skip COMMIT'"
    return SyncError(
        f"refused what {remote} sent: {by}{refusal.why} — nothing was merged; ask whoever"
        f" pushed it to take it out of the remote, or run {skip} to merge without it"
    )


def leave_out(git: Git, target: str, rel: str, paths: Iterable[str], why: str) -> str:
    """A commit on top of ``target`` without ``paths`` (store-relative; "" the folder itself),
    made without touching the working tree: what sync merges instead of ``target``."""
    here = "" if rel == "." else rel + "/"
    full = [rel if p == "" else here + p for p in paths]
    with tempfile.TemporaryDirectory(prefix="memdir-sync-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git.run("read-tree", target, env=env)
        git.run("rm", "-r", "-q", "-f", "--cached", "--ignore-unmatch", "--", *full, env=env)
        tree = git.run("write-tree", env=env).out.strip()
    message = f"memdir: left out what sync refused ({why})\n\n" + "\n".join(full) + "\n"
    return git.run("commit-tree", tree, "-p", target, input=message.encode()).out.strip()


def force_attributes(git: Git, rel: str) -> bool:
    """Write memdir's merge attributes into the repository's ``info/attributes`` (which wins
    over every ``.gitattributes``); whether the file changed."""
    here = "/" if rel == "." else f"/{rel}/"
    text = (
        f"{ATTRIBUTES_MARK}\n"
        f"{here}* -text -eol -filter -ident -working-tree-encoding\n"
        f"{here}*.md merge=memdir\n"
        f"{here}{INDEX_FILE} merge=memdir-index\n"
    )
    path = Path(git.run("rev-parse", "--git-path", "info/attributes").out.strip())
    if not path.is_absolute():
        path = git.cwd / path
    try:
        old = path.read_text(encoding="utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        old = ""
    lines = old.splitlines(keepends=True)
    kept = [ln for ln in lines if not _ours(ln, here)]
    new = "".join(kept) + ("" if not kept or kept[-1].endswith("\n") else "\n") + text
    if new == old:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    from memdir.disk.atomic import write_atomic

    write_atomic(path, new.encode("utf-8"))
    return True


def _ours(line: str, here: str) -> bool:
    return line.rstrip("\n") == ATTRIBUTES_MARK or line.startswith(
        (f"{here}* -text", f"{here}*.md merge=memdir", f"{here}{INDEX_FILE} merge=memdir-index")
    )


def attributes_forced(git: Git, rel: str) -> bool:
    """Whether memory files in the store merge with memdir's driver, whatever the committed
    ``.gitattributes`` say (``git check-attr``)."""
    probe = "x.md" if rel == "." else f"{rel}/x.md"
    res = git.run("check-attr", "merge", "working-tree-encoding", "--", probe, check=False)
    got: dict[str, str] = {}
    for line in res.out.splitlines():
        bits = line.split(": ")
        if len(bits) == 3:
            got[bits[1]] = bits[2]
    return got.get("merge") == "memdir" and got.get("working-tree-encoding") in (
        "unspecified",
        "unset",
    )
