"""The hosts' hooks as a thin client of the resident memdir: read the event, hand it to the
resident process over its socket, print the answer. It imports nothing of memdir's store, so a
prompt costs the interpreter's start and one round trip.

Where the resident is: one socket per user, environment (the settings, keys and endpoints
a hook sees decide what it does) and installed memdir (its files' names, sizes and times: an
upgrade reaches the next hook, never an older resident), in a folder only the user can enter —
``$XDG_RUNTIME_DIR/memdir`` or ``/tmp/memdir-<uid>``; a folder or socket that is not the
user's own, or open to others, is never used. When no resident answers (none yet, a stale
socket, a crash mid-request) the hook runs in this process as before and starts a resident
for next time; ``MEMDIR_RESIDENT=off`` keeps every hook in its own process.
This module does NOT know what hooks do (``integrations.hooks``) or how the resident serves
(``integrations.resident``).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import stat
import struct
import sys

from .disk.layout import NESTED_ENV

TYPE_CHECKING = False  # (as typing.TYPE_CHECKING: importing typing costs every prompt ms)

try:  # (CPython's own BLAKE2: importing hashlib loads OpenSSL, a few ms of every prompt)
    from _blake2 import blake2b
except ImportError:  # pragma: no cover - another interpreter
    from hashlib import blake2b


RESIDENT_ENV = "MEMDIR_RESIDENT"  # "off": no resident process
KINDS = ("start", "prompt", "tool", "learn")
CONNECT_TIMEOUT = 0.5
# Below the hosts' hook timeout memdir installs (10 s), with room for this process to run the
# hook itself when the resident is stuck or stopped
ANSWER_TIMEOUT = 4.0
MAX_MESSAGE = 64 << 20
# What a hook's answer depends on, besides the files it reads: one resident per value. Not the
# PATH or a terminal's session variables (XDG_SESSION_*…), which differ between Claude Code,
# Codex and two terminals without changing what memdir answers: they share one resident.
_PREFIXES = ("MEMDIR_", "ANTHROPIC_", "OPENAI_")
_NAMES = (
    "HOME",
    "USER",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
    "XDG_RUNTIME_DIR",
)


_PACKAGE = os.path.dirname(os.path.realpath(__file__))  # (no pathlib: a hook imports little)


def _digest(value: object) -> str:
    return blake2b(json.dumps(value).encode(), digest_size=8).hexdigest()


def code_identity(root: str | os.PathLike[str] = _PACKAGE) -> str:
    """A digest of the memdir that is installed: the interpreter and every file of the package
    and of the wings beside it (``memdir_*``: their code runs in the resident too) — name,
    size, modification time — so that an upgrade or an edit gives another value. A stat per
    file, no reading: well under a millisecond."""
    seen: list[tuple[str, int, int]] = []
    parent, name = os.path.split(os.fspath(root))
    try:
        wings = [os.path.join(parent, n) for n in os.listdir(parent) if n.startswith(name + "_")]
    except OSError:  # (a folder that cannot be listed: the package alone)
        wings = []
    stack = [os.fspath(root), *(w for w in wings if os.path.isdir(w))]
    while stack:
        where = stack.pop()
        try:
            with os.scandir(where) as entries:
                for e in entries:
                    if e.is_dir(follow_symlinks=False):
                        if e.name != "__pycache__":
                            stack.append(e.path)
                        continue
                    with contextlib.suppress(OSError):
                        st = e.stat(follow_symlinks=False)
                        seen.append((e.path, st.st_size, st.st_mtime_ns))
        except OSError:
            continue
    seen.sort()
    return _digest([sys.executable, seen])


def environment_key(environ: dict[str, str] | os._Environ[str], code: str | None = None) -> str:
    """A digest of the environment a hook's answer depends on, and of the code answering it."""
    seen = sorted(
        (k, v)
        for k, v in environ.items()
        if (k.startswith(_PREFIXES) or k in _NAMES) and k != RESIDENT_ENV + "_IDLE"
    )
    where = code_identity() if code is None else code
    return _digest([seen, where])


def usual_folder() -> str:
    """Where this user's resident sockets are when that folder is free for them."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        return os.path.join(runtime, "memdir")
    return f"/tmp/memdir-{os.getuid()}"


def folder() -> str:
    """Where this user's resident sockets are: the usual folder, or, when that one is taken
    (another user made it, or it is open to others: never used), one in the user's own cache
    (``memdir doctor`` says so). Not checked further: see ``private``."""
    usual = usual_folder()
    if not os.path.lexists(usual) or private(usual, kind=stat.S_IFDIR):
        return usual
    own = os.path.join(os.path.expanduser("~"), ".cache", "memdir", "run")
    # where the home's is too long for a socket's path, no resident (every hook runs in its
    # own process, as it would in the taken folder)
    return own if len(os.fsencode(own)) + len(_name("0123456789abcdef")) < SUN_PATH else usual


# the bytes of a socket's path, its NUL included
SUN_PATH = 108 if sys.platform.startswith("linux") else 104  # (macOS and the BSDs: 104)


def _name(key: str) -> str:
    return f"/resident-{key}.sock"


def private(path: str | os.PathLike[str], *, kind: int) -> bool:
    """Whether ``path`` is this user's own, of ``kind`` (S_IFDIR, S_IFSOCK), not a link, and
    open to nobody else."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return (
        stat.S_IFMT(st.st_mode) == kind
        and st.st_uid == os.getuid()
        and not st.st_mode & (stat.S_IRWXG | stat.S_IRWXO)
    )


def socket_path(
    environ: dict[str, str] | os._Environ[str] | None = None, code: str | None = None
) -> str:
    key = environment_key(os.environ if environ is None else environ, code)
    return folder() + _name(key)


def send(conn: socket.socket, payload: bytes) -> None:
    conn.sendall(struct.pack(">I", len(payload)) + payload)


def receive(conn: socket.socket) -> bytes:
    """One framed message; ConnectionError when the other side went before it was whole."""
    head = _exactly(conn, 4)
    (size,) = struct.unpack(">I", head)
    if size > MAX_MESSAGE:
        raise ConnectionError("message too large")
    return _exactly(conn, size)


def _exactly(conn: socket.socket, size: int) -> bytes:
    parts, got = [], 0
    while got < size:
        chunk = conn.recv(min(size - got, 1 << 20))
        if not chunk:
            raise ConnectionError("the other side closed the connection")
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


if TYPE_CHECKING:  # (typing costs every prompt a few ms: at run time both are dicts)
    from typing import TypedDict

    class Request(TypedDict):
        """A hook call as the resident receives it: the hook, its host, the event as the
        host sent it, and the folder the hook ran in."""

        kind: str
        host: str | None
        event: str
        cwd: str | None

    class Reply(TypedDict):
        """The resident's answer: what the hook prints on stdout and on stderr."""

        out: str
        err: str

else:
    Request = Reply = dict


def read_request(data: bytes) -> Request:
    """A request off the wire; ValueError when it is not one."""
    got = json.loads(data)
    kind, host, event, cwd = (got.get(k) for k in ("kind", "host", "event", "cwd"))
    if kind not in KINDS:
        raise ValueError(f"unknown hook {kind!r}")
    if not isinstance(event, str):
        raise ValueError("a hook call without its event")
    return Request(
        kind=kind,
        host=host if isinstance(host, str) else None,
        event=event,
        cwd=cwd if isinstance(cwd, str) else None,
    )


def read_reply(data: bytes) -> Reply:
    """A reply off the wire; ValueError when it is not one."""
    got = json.loads(data)
    out, err = got.get("out", ""), got.get("err", "")
    if not isinstance(out, str) or not isinstance(err, str):
        raise ValueError("a reply that is not the hook's output")
    return Reply(out=out, err=err)


def ask(kind: str, host: str | None, raw: str, where: str) -> tuple[str, str] | None:
    """The resident's answer (stdout, stderr) to one hook call through the socket ``where``;
    None when no resident of this user's could answer it (the caller runs the hook itself)."""
    if not private(os.path.dirname(where), kind=stat.S_IFDIR) or not private(
        where, kind=stat.S_IFSOCK
    ):
        return None
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(CONNECT_TIMEOUT)
        conn.connect(where)
        conn.settimeout(ANSWER_TIMEOUT)
        request = Request(kind=kind, host=host, event=raw, cwd=os.getcwd())
        send(conn, json.dumps(request).encode())
        answer = read_reply(receive(conn))
        return answer["out"], answer["err"]
    except (OSError, ValueError, ConnectionError):
        return None  # gone, stale, stuck or crashed mid-request: this process does it
    finally:
        conn.close()


def start_resident() -> None:
    """Start this user's resident for this environment, detached (it exits at once when one
    is already running)."""
    import subprocess

    try:
        subprocess.Popen(
            [sys.executable, "-m", "memdir.integrations.resident"],
            start_new_session=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            cwd="/",
        )
    except OSError:
        pass


def hook(argv: list[str]) -> bool:
    """Run ``memdir hook KIND [--host H]`` through the resident; False when ``argv`` is not
    that, or the resident is off or absent (the command line runs it, and a resident is
    started for the next call)."""
    if len(argv) < 2 or argv[0] != "hook" or argv[1] not in KINDS:
        return False
    rest = argv[2:]
    host = None
    if rest[:1] == ["--host"] and len(rest) == 2:
        host = rest[1] if rest[1] in ("claude-code", "codex") else None
    elif rest:
        return False  # anything else (--worker, --help): the command line's own
    if os.environ.get(NESTED_ENV):
        return True  # a session memdir started as its memory model: no hook runs
    if os.environ.get(RESIDENT_ENV, "").lower() in ("off", "0", "no", "false"):
        return False
    raw = sys.stdin.read()
    where = socket_path()
    answer = ask(argv[1], host, raw, where)
    if answer is None:
        if len(os.fsencode(where)) < SUN_PATH:  # (else no resident could listen there)
            start_resident()
        import io

        sys.stdin = io.StringIO(raw)  # the command line reads the event once more
        return False
    out, err = answer
    if out:
        sys.stdout.write(out + "\n")
    if err:
        sys.stderr.write(err + "\n")
    sys.stdout.flush()
    return True
