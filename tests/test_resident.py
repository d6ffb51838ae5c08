"""The resident memdir: the hosts' hooks answered by a warm per-user process, and every way
it can be absent, stale, killed or someone else's without a hook failing its host."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memdir import MemoryStore, jobs
from memdir.cli.upkeep import NICE as LEARN_NICE
from memdir.disk.layout import state_dir
from memdir.integrations.resident import NICE, failures

from conftest import child_env
from fakeserver import FakeLLMServer, Scripted

pytestmark = pytest.mark.slow  # real processes, started and killed

ASK = (
    "import json, sys; from memdir.hookclient import ask, socket_path;"
    " a = ask(sys.argv[1], 'claude-code', sys.stdin.read(), socket_path());"
    " print(json.dumps(a))"
)


def _until(check: Callable[[], object], what: str, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            raise AssertionError(f"never happened: {what}")
        time.sleep(0.05)


class Host:
    """A project with memories and the environment a host gives its hooks."""

    def __init__(self, tmp_path: Path, **extra: str) -> None:
        self.project = tmp_path / "app"
        (self.project / ".git").mkdir(parents=True)
        self.store = MemoryStore(self.project / ".memory")
        self.store.write(
            "api-port", type="project_fact", description="The API listens on port 8080",
            body="The API server listens on port 8080.",
        )  # fmt: skip
        run = tmp_path / "run"
        run.mkdir(mode=0o700)
        self.folder = run / "memdir"
        self.env = {
            **child_env(),
            "HOME": str(tmp_path / "home"),
            "MEMDIR_USER_DIR": "none",
            "MEMDIR_EMBEDDER": "none",
            "XDG_RUNTIME_DIR": str(run),
            "MEMDIR_RESIDENT": "on",
            "MEMDIR_RESIDENT_IDLE": "60",
            **extra,
        }

    def event(self, prompt: str) -> str:
        return json.dumps(
            {"prompt": prompt, "cwd": str(self.project), "hook_event_name": "UserPromptSubmit",
             "session_id": "s1"}
        )  # fmt: skip

    def hook(self, prompt: str, kind: str = "prompt") -> subprocess.CompletedProcess[str]:
        """``memdir hook KIND`` as the host runs it."""
        return subprocess.run(
            [sys.executable, "-m", "memdir", "hook", kind, "--host", "claude-code"],
            input=self.event(prompt), capture_output=True, text=True, env=self.env,
            cwd=self.project, timeout=60,
        )  # fmt: skip

    def ask(self, prompt: str, kind: str = "prompt") -> list[str] | None:
        """The resident's own answer (None: no resident of this user's answered)."""
        r = subprocess.run(
            [sys.executable, "-c", ASK, kind], input=self.event(prompt), capture_output=True,
            text=True, env=self.env, cwd=self.project, timeout=60, check=True,
        )  # fmt: skip
        answer: list[str] | None = json.loads(r.stdout)
        return answer

    def sockets(self) -> list[Path]:
        return sorted(self.folder.glob("*.sock")) if self.folder.is_dir() else []

    def pid(self) -> int | None:
        for lock in self.folder.glob("*.lock"):
            text = lock.read_text().strip()
            if text and _alive(int(text)):
                return int(text)
        return None

    def running(self) -> int:
        """Wait for the resident a hook started; its pid."""
        _until(lambda: self.sockets() and self.pid(), "the resident listening")
        pid = self.pid()
        assert pid is not None
        return pid


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (our own child that exited) is not alive
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except OSError:
        return False


@pytest.fixture
def host(tmp_path: Path) -> Iterator[Host]:
    h = Host(tmp_path)
    yield h
    pid = h.pid() if h.folder.is_dir() else None
    if pid is not None:
        os.kill(pid, signal.SIGKILL)


def test_the_first_hook_starts_the_resident_and_the_next_ones_are_answered_by_it(
    host: Host,
) -> None:
    """The first prompt is answered in its own process and leaves a resident behind; later
    prompts get the same block from the resident; an owner-only socket in an owner-only
    folder."""
    first = host.hook("which port does the API use?")
    assert first.returncode == 0 and "api-port" in first.stdout, first.stderr
    host.running()
    (sock,) = host.sockets()
    assert (sock.stat().st_mode & 0o777) == 0o600 and (host.folder.stat().st_mode & 0o777) == 0o700
    answer = host.ask("which port does the API use?")
    assert answer is not None and "api-port" in answer[0] and answer[1] == ""
    assert json.loads(answer[0]) == json.loads(first.stdout)  # the same block either way
    again = host.hook("which port does the API use?")
    assert again.returncode == 0 and json.loads(again.stdout) == json.loads(first.stdout)


def test_a_hand_edit_and_a_config_edit_count_while_it_runs(host: Host) -> None:
    """Stores stay open in the resident, yet a memory written by hand is recalled at the next
    prompt and an edited config.toml counts at once."""
    host.hook("which port?")
    host.running()
    assert host.ask("which port does the API use?") is not None
    (host.store.root / "deploy-day.md").write_text(
        "---\nname: deploy-day\ntype: project_fact\ndescription: Deploys happen on"
        " Thursdays\n---\nWe deploy the API on Thursdays only.\n"
    )
    answer = host.ask("which day do we deploy the API?")
    assert answer is not None and "deploy-day" in answer[0]
    (host.store.root / "config.toml").write_text("recall_max_items = 1\n")
    answer = host.ask("which day do we deploy the API and on which port?")
    assert answer is not None
    block = json.loads(answer[0])["hookSpecificOutput"]["additionalContext"]
    assert block.count("<memory ") == 1


def test_it_leaves_when_idle_and_a_stale_socket_is_replaced(tmp_path: Path) -> None:
    """Idle past MEMDIR_RESIDENT_IDLE, the resident exits and removes its socket; one killed
    outright leaves a stale socket, which the next hook survives (answered in its own process)
    and the next resident replaces."""
    host = Host(tmp_path, MEMDIR_RESIDENT_IDLE="1")
    host.hook("which port?")
    pid = host.running()
    _until(lambda: not _alive(pid) and not host.sockets(), "the idle resident leaving")
    host.env["MEMDIR_RESIDENT_IDLE"] = "60"  # (another environment: another socket)
    host.hook("which port?")
    pid = host.running()
    os.kill(pid, signal.SIGKILL)
    _until(lambda: not _alive(pid), "the resident killed")
    assert len(host.sockets()) == 1  # stale: left by the killed resident
    assert host.ask("which port?") is None  # nobody listens on it
    r = host.hook("which port does the API use?")
    assert r.returncode == 0 and "api-port" in r.stdout and r.stderr == ""
    _until(lambda: host.pid() not in (None, pid), "a new resident")
    answer = host.ask("which port does the API use?")
    assert answer is not None and "api-port" in answer[0]
    os.kill(host.running(), signal.SIGKILL)


def test_a_resident_killed_mid_request_costs_the_hook_nothing(
    tmp_path: Path, llm_server: FakeLLMServer
) -> None:
    """The resident dies while it waits on the memory model: the hook notices the dropped
    connection and answers in its own process (search's hits), exit 0."""
    arrived = threading.Event()

    def slow(req: dict[str, object]) -> Scripted:
        arrived.set()
        return Scripted(text='{"selected": []}', delay=8)

    llm_server.handler = slow
    host = Host(
        tmp_path,
        ANTHROPIC_API_KEY="k",
        ANTHROPIC_BASE_URL=llm_server.url,
        MEMDIR_MAX_RETRIES="0",
    )
    (host.store.root / "config.toml").write_text("hook_budget = 4.0\nhook_model_wait = 1.0\n")
    from conftest import trust

    trust(host.store.root / "config.toml")
    host.hook("which port?")
    pid = host.running()
    arrived.clear()
    proc = subprocess.Popen(
        [sys.executable, "-m", "memdir", "hook", "prompt", "--host", "claude-code"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=host.env, cwd=host.project,
    )  # fmt: skip
    assert proc.stdin is not None
    proc.stdin.write(host.event("which port does the API use?"))
    proc.stdin.close()
    assert arrived.wait(30)  # the resident is asking the model
    os.kill(pid, signal.SIGKILL)
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout.read(), proc.stderr.read()
    assert proc.wait(timeout=60) == 0 and "api-port" in out, err


def test_a_folder_or_socket_that_is_not_the_users_own_is_never_used(host: Host) -> None:
    """A socket folder open to others is neither listened in nor connected to: the resident
    listens in the user's own cache instead, and doctor says so; a caller of another user
    gets no answer from the resident."""
    host.folder.mkdir(mode=0o755)
    host.folder.chmod(0o755)
    home = Path(tempfile.mkdtemp(prefix="h", dir="/tmp"))  # (a socket's path is short)
    host.env["HOME"] = str(home)
    r = host.hook("which port does the API use?")
    assert r.returncode == 0 and "api-port" in r.stdout  # answered in its own process
    fallback = home / ".cache" / "memdir" / "run"
    _until(lambda: list(fallback.glob("*.sock")), f"a resident in {fallback}: {r.stderr}")
    assert host.sockets() == []  # never in the open folder
    answer = host.ask("which port does the API use?")
    assert answer is not None and "api-port" in answer[0]
    doctor = subprocess.run(
        [sys.executable, "-m", "memdir", "doctor"], capture_output=True, text=True,
        env=host.env, cwd=host.project, timeout=60,
    )  # fmt: skip
    assert f"the resident listens in {fallback} instead" in doctor.stdout, doctor.stdout
    host.folder.chmod(0o700)
    for sock in fallback.glob("*.sock"):  # the resident leaves once its socket is gone
        sock.unlink()
    shutil.rmtree(home, ignore_errors=True)

    from memdir.integrations.resident import Resident

    sock_path = host.folder / "other.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock_path))
    listener.listen(1)
    other = Resident(sock_path, idle=60, uid=os.getuid() + 1)  # as if it were someone else's
    threading.Thread(target=other.serve, args=(listener,), daemon=True).start()
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(10)
    client.connect(str(sock_path))
    from memdir.hookclient import receive, send

    try:  # (on a busy machine it may have hung up before the request is even sent)
        send(client, json.dumps({"kind": "prompt", "event": host.event("x")}).encode())
    except BrokenPipeError:
        pass
    with pytest.raises(ConnectionError):
        receive(client)  # closed without a word
    other.stopping.set()


def test_a_home_too_long_for_a_socket_path_gets_no_resident(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the usual folder is taken, the resident's socket goes to the user's cache only
    where its whole path fits a socket's (108 bytes with its NUL; 104 on macOS and BSDs);
    elsewhere there is none, and each hook runs in its own process."""
    from memdir import hookclient
    from memdir.hookclient import SUN_PATH

    taken = tmp_path / "taken"
    taken.mkdir(mode=0o755)
    taken.chmod(0o755)  # (open to others: never used)
    monkeypatch.setattr(hookclient, "usual_folder", lambda: str(taken))
    base = Path("/tmp") / "h"
    for size, fits in ((50, True), (62, False)):
        home = str(base) + "x" * (size - len(str(base)))  # + "/.cache/memdir/run"
        monkeypatch.setenv("HOME", home)
        where = hookclient.socket_path()
        assert where.startswith(home) == fits and len(os.fsencode(where)) < SUN_PATH, where


def test_where_the_platform_names_no_peer_the_owner_only_folder_decides(
    host: Host, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without SO_PEERCRED (macOS, the BSDs) the resident still answers this user's hooks:
    what keeps other users out there is the socket's owner-only folder."""
    from memdir.hookclient import receive, send
    from memdir.integrations.resident import Resident, peer_uid

    monkeypatch.delattr(socket, "SO_PEERCRED")
    host.folder.mkdir(mode=0o700)
    sock_path = host.folder / "mine.sock"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(sock_path))
    listener.listen(1)
    mine = Resident(sock_path, idle=60, uid=os.getuid())
    threading.Thread(target=mine.serve, args=(listener,), daemon=True).start()
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(60)
    client.connect(str(sock_path))
    assert peer_uid(client) is None
    request = {"kind": "prompt", "host": "claude-code", "cwd": str(host.project),
               "event": host.event("which port does the API use?")}  # fmt: skip
    send(client, json.dumps(request).encode())
    assert "api-port" in json.loads(receive(client))["out"]
    client.close()
    mine.stopping.set()


def test_resident_off_keeps_every_hook_in_its_own_process(host: Host) -> None:
    """MEMDIR_RESIDENT=off: the hook answers as before and no resident is started."""
    host.env["MEMDIR_RESIDENT"] = "off"
    r = host.hook("which port does the API use?")
    assert r.returncode == 0 and "api-port" in r.stdout
    time.sleep(1.0)
    assert host.sockets() == []


def test_learning_goes_through_the_resident(host: Host, tmp_path: Path) -> None:
    """A Stop event handed to the resident is queued and learned from by the resident's own
    worker, with no process of its own (the host's CLI as the memory model)."""
    from test_hooks import DATA, PNPM, fake_host

    bindir = tmp_path / "bin"
    fake_host(bindir, "claude", PNPM)
    host.env["PATH"] = f"{bindir}{os.pathsep}{os.environ['PATH']}"
    host.hook("which port?")
    host.running()
    stop = json.dumps(
        {"session_id": "s1", "transcript_path": str(DATA / "claude_session.jsonl"),
         "cwd": str(host.project), "hook_event_name": "Stop", "stop_hook_active": False}
    )  # fmt: skip
    r = subprocess.run(
        [sys.executable, "-c", ASK, "learn"], input=stop, capture_output=True, text=True,
        env=host.env, cwd=host.project, timeout=60, check=True,
    )  # fmt: skip
    assert json.loads(r.stdout) == ["", ""]  # the resident took it
    _until(lambda: "use-pnpm" in MemoryStore(host.store.root), "the memory learned", 120)

    # the learn is logged as the hook's (its line comes a moment after the memory's file)
    def sources() -> list[str]:
        return [op.source for op in host.store.log() if op.changes]

    _until(lambda: "extract:hook:claude-code" in sources(), "the learn's log line", 30)
    assert sources() == ["api", "extract:hook:claude-code"]
    log = state_dir(host.store.root) / "hooks.jsonl"
    _until(lambda: log.exists() and '"status": "ok"' in log.read_text(), "the learn logged")
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert [r.get("worker") for r in records if r["hook"] == "learn"] == ["resident"]
    _until(lambda: not jobs.queued(host.store.internal, running=True), "the queue empty")
    assert not (host.store.internal / jobs.FAILURES).exists()
    # learning is background work: below the user's own (the resident's priority, or lower)
    resident = min(19, os.getpriority(os.PRIO_PROCESS, 0) + NICE)
    assert int((bindir / "claude.nice").read_text()) == max(resident, LEARN_NICE)


def test_a_bad_event_gets_its_one_line_from_the_resident(host: Host) -> None:
    """An event that is not JSON, sent to the running resident, is answered with the hook's
    one-line error (nothing on stdout), and the resident goes on answering."""
    host.hook("which port?")
    host.running()
    r = subprocess.run(
        [sys.executable, "-c", ASK, "prompt"], input="not json", capture_output=True,
        text=True, env=host.env, cwd=host.project, timeout=60, check=True,
    )  # fmt: skip
    out, err = json.loads(r.stdout)
    assert out == "" and err.startswith("memdir hook prompt: the hook input is not JSON")
    answer = host.ask("which port does the API use?")
    assert answer is not None and "api-port" in answer[0]


@pytest.mark.parametrize("configured", [True, False])
def test_the_resident_loads_the_model_client_before_its_first_call(
    tmp_path: Path, configured: bool
) -> None:
    """With a memory model configured, the resident makes its client at start (the SDK is
    imported off the first prompt's path); with none, it loads nothing for one."""
    env = child_env()
    if configured:
        env.update(ANTHROPIC_API_KEY="test", ANTHROPIC_BASE_URL="http://127.0.0.1:9")
    code = (
        "import sys\n"
        "from memdir.integrations.resident import warm\n"
        "warm()\n"
        "print('anthropic' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(configured)


def test_what_goes_wrong_inside_the_resident_is_in_its_log_for_doctor(
    host: Host, tmp_path: Path
) -> None:
    """An embedding model file that is not there: each prompt is answered (by full text),
    and what memdir warns of inside the resident is not lost with its stderr: it is in the
    resident's log, which `memdir doctor` shows."""
    host.env["MEMDIR_EMBEDDER"] = "minilm"
    host.env["MEMDIR_EMBED_MODEL"] = str(tmp_path / "no-model-here.onnx")
    first = host.hook("which port does the API use?")
    assert first.returncode == 0 and "api-port" in first.stdout, first.stderr
    host.running()
    answer = host.ask("which port does the API use?")
    assert answer is not None and "api-port" in answer[0]
    _until(lambda: failures(host.folder), "the warning logged")
    assert "hybrid search is off" in failures(host.folder)[-1]
    assert "no-model-here.onnx is missing" in failures(host.folder)[-1]
    doctor = subprocess.run(
        [sys.executable, "-m", "memdir", "--dir", str(host.project / ".memory"), "doctor"],
        capture_output=True, text=True, env=host.env, cwd=host.project, timeout=60,
    )  # fmt: skip
    assert "hybrid search is off" in doctor.stdout + doctor.stderr


def test_an_upgraded_memdir_is_answered_by_a_new_resident_and_the_old_one_leaves(
    tmp_path: Path,
) -> None:
    """After an upgrade (a file of the installed package changed), the next hook does not ask
    the resident still running the old code: it gets a resident of the new code, and the old
    one leaves on its own, long before its idle time."""
    import shutil

    code = tmp_path / "code"
    shutil.copytree(
        Path(__file__).resolve().parents[1] / "src" / "memdir", code / "memdir",
        ignore=shutil.ignore_patterns("__pycache__"),
    )  # fmt: skip
    host = Host(tmp_path, PYTHONPATH=str(code), MEMDIR_RESIDENT_IDLE="600")
    host.hook("which port?")
    old = host.running()
    (before,) = host.sockets()
    answer = host.ask("which port does the API use?")
    assert answer is not None and "api-port" in answer[0]

    with open(code / "memdir" / "jobs.py", "a") as f:
        f.write("\n# the next version\n")
    assert host.ask("which port does the API use?") is None  # the old one is not asked
    r = host.hook("which port does the API use?")
    assert r.returncode == 0 and "api-port" in r.stdout and r.stderr == ""
    _until(lambda: not _alive(old), "the old resident leaving", 60)
    _until(lambda: host.sockets() and host.sockets() != [before], "the new one listening")
    assert not before.with_suffix(".lock").exists()  # nothing of the old one is left
    new = host.pid()
    assert new not in (None, old)
    answer = host.ask("which port does the API use?")
    assert answer is not None and "api-port" in answer[0]
    os.kill(new, signal.SIGKILL)


def test_a_stopped_resident_leaves_the_hook_to_its_own_process(host: Host) -> None:
    """A resident stopped mid-life (SIGSTOP) still accepts connections but answers nothing:
    the hook waits less than the host's timeout, then answers from its own process."""
    host.hook("warm up")
    pid = host.running()
    os.kill(pid, signal.SIGSTOP)
    try:
        r = host.hook("which port does the API use?")
        assert r.returncode == 0 and "api-port" in r.stdout, r.stderr
        assert "did not answer" not in r.stderr
    finally:
        os.kill(pid, signal.SIGCONT)


def _serve(resident: object, path: Path) -> tuple[socket.socket, threading.Thread]:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(4)
    serve = getattr(resident, "serve")  # noqa: B009 - (typed loosely: the helper takes any)
    thread = threading.Thread(target=serve, args=(listener,), daemon=True)
    thread.start()
    return listener, thread


def _send(path: Path, kind: str = "prompt") -> socket.socket:
    from memdir.hookclient import send

    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.settimeout(30)
    client.connect(str(path))
    send(client, json.dumps({"kind": kind, "host": "claude-code", "event": "{}"}).encode())
    return client


def test_a_call_that_fails_is_logged_and_one_that_hangs_makes_the_resident_leave(
    tmp_path: Path,
) -> None:
    """A call whose hook raises ends its connection (the client runs the hook itself) and is
    written to the resident's log; a call that outlives the bound makes the resident leave
    instead of answering nobody for ever."""
    from memdir.hookclient import receive
    from memdir.integrations.resident import Resident

    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)

    def broken(*_: object, **__: object) -> tuple[str, str]:
        raise RuntimeError("the index is gone")

    failing = Resident(folder / "a.sock", idle=60, run=broken)
    listener, thread = _serve(failing, folder / "a.sock")
    with pytest.raises(ConnectionError):
        receive(_send(folder / "a.sock"))
    _until(lambda: failures(folder), "the failure logged")
    assert "RuntimeError: the index is gone" in failures(folder)[-1]
    failing.stopping.set()
    thread.join(30)
    listener.close()

    release = threading.Event()

    def hangs(*_: object, **__: object) -> tuple[str, str]:
        release.wait(120)
        return "", ""

    stuck = Resident(folder / "b.sock", idle=60, bound=0.5, run=hangs)
    listener, thread = _serve(stuck, folder / "b.sock")
    client = _send(folder / "b.sock")
    thread.join(60)
    assert not thread.is_alive() and stuck.stuck
    assert "a call ran past" in failures(folder)[-1]
    release.set()
    client.close()
    listener.close()


def test_hosts_that_differ_only_in_path_and_session_share_one_resident() -> None:
    """Claude Code and Codex hooks (another PATH, another terminal session) reach the same
    resident; a setting that changes memdir's answers gets one of its own."""
    from memdir.hookclient import socket_path

    claude = {"HOME": "/home/a", "PATH": "/usr/bin:/opt/claude/bin", "XDG_SESSION_ID": "3",
              "ANTHROPIC_API_KEY": "k"}  # fmt: skip
    codex = {"HOME": "/home/a", "PATH": "/usr/bin:/opt/codex/bin", "XDG_SESSION_ID": "7",
             "CODEX_HOME": "/home/a/.codex", "ANTHROPIC_API_KEY": "k"}  # fmt: skip
    assert socket_path(claude, code="c") == socket_path(codex, code="c")
    assert socket_path(claude, code="c") != socket_path({**claude, "MEMDIR_MODEL": "m"}, code="c")
    assert socket_path(claude, code="c") != socket_path({**claude, "HOME": "/home/b"}, code="c")


def test_a_resident_whose_worker_has_work_does_not_leave_for_being_idle(tmp_path: Path) -> None:
    """Idle means no call and no job: a resident whose worker thread is at a job stays past
    its idle time, and leaves once the job is done."""
    from memdir.integrations.resident import Resident

    folder = tmp_path / "run"
    folder.mkdir(mode=0o700)
    resident = Resident(folder / "w.sock", idle=0.1)
    at_work = threading.Event()
    at_work.set()
    resident.worker.busy = at_work.is_set  # type: ignore[method-assign]
    listener, thread = _serve(resident, folder / "w.sock")
    # three looks at least (one each half second when no call comes), all past the idle time
    _until(lambda: time.monotonic() - resident.last > 1.6, "the idle time passed thrice over")
    assert thread.is_alive()
    at_work.clear()
    thread.join(30)
    assert not thread.is_alive()
    listener.close()


def test_the_installed_codes_identity_covers_the_wings_beside_it(tmp_path: Path) -> None:
    """An upgrade that changes only a wing's file (its code runs in the resident too) gives
    the installed memdir another identity, so no resident of the old code is asked; a package
    of another name beside it does not count."""
    from memdir.hookclient import code_identity

    for folder in ("memdir", "memdir_git", "requests"):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("# v1\n")
    first = code_identity(tmp_path / "memdir")
    (tmp_path / "requests" / "__init__.py").write_text("# another package, v2\n")
    assert code_identity(tmp_path / "memdir") == first
    (tmp_path / "memdir_git" / "__init__.py").write_text("# the wing, v2\n")
    assert code_identity(tmp_path / "memdir") != first
