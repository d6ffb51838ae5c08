"""`memdir mcp --http` (the ``memdir_http`` wing) through the SDK's own client and raw
requests: the same tools over streamable HTTP, and who may call them (the token, the Host,
the Origin)."""

from __future__ import annotations

import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("mcp")
from mcp import Client

from memdir import MemoryStore
from test_mcp import TOKEN, _env, _free_port, _post, _start_http, authed, call, run


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    root = tmp_path / ".memory"
    MemoryStore(root).write(
        "tabs", type="user_preference", description="Prefers tabs", body="Indent with tabs."
    )
    proc, port = _start_http(root, env={**_env(), "MEMDIR_MCP_TOKEN": TOKEN})
    try:
        yield f"http://127.0.0.1:{port}/mcp", root
    finally:
        proc.terminate()
        proc.wait(10)


def test_streamable_http(http_server: tuple[str, Path]) -> None:
    """The same tools over streamable HTTP, on loopback."""
    url, root = http_server

    async def body(client: Client) -> None:
        out, err = await call(client, "recall", message="tabs or spaces?")
        assert not err and "Indent with tabs." in out
        out, err = await call(
            client,
            "remember",
            name="ci",
            type="project_fact",
            description="CI runs on every push",
            body="GitHub Actions.",
        )
        assert not err
        out, err = await call(client, "edit", name="nope", old="a", new="b")
        assert err and "no memory named 'nope'" in out
        out, err = await call(client, "list")
        assert not err and "ci (project_fact)" in out

    run(root, body, server=authed(url))
    assert "ci" in {e.name for e in MemoryStore(root).entries()}


@pytest.mark.slow
def test_http_needs_the_token_and_a_known_host_and_origin(tmp_path: Path) -> None:
    """Without a token one is generated (owner-only, printed once); a request without it, with
    a wrong one, a foreign Host or an unlisted Origin is refused; a listed Origin works."""
    root = tmp_path / ".memory"
    MemoryStore(root)
    proc, port = _start_http(root, "--allow-origin", "http://localhost:3000")
    try:
        token_file = tmp_path / "config" / "memdir" / "mcp-token"
        deadline = time.monotonic() + 10
        while not token_file.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        token = token_file.read_text().strip()
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600 and len(token) >= 32
        host = {"Host": f"127.0.0.1:{port}"}
        assert _post(port, host) == 401
        assert _post(port, {**host, "Authorization": "Bearer wrong-token-0123456789"}) == 401
        ok = {**host, "Authorization": f"Bearer {token}"}
        assert _post(port, ok) == 200
        assert _post(port, {**ok, "Origin": "http://127.0.0.1:9999"}) == 403
        assert _post(port, {**ok, "Origin": "http://localhost:3000"}) == 200
        assert _post(port, {**ok, "Host": f"evil.example:{port}"}) == 421
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert token in err.decode()  # printed when it was made
    proc, port = _start_http(root)
    try:
        assert (
            _post(port, {"Host": f"localhost:{port}", "Authorization": f"Bearer {token}"}) == 200
        )  # kept
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert token not in err.decode()


@pytest.mark.slow
def test_http_beyond_loopback_needs_a_token_of_ones_own(tmp_path: Path) -> None:
    """HTTP beyond loopback needs a token of one's own."""
    root = tmp_path / ".memory"
    MemoryStore(root)
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "memdir",
            "--dir",
            str(root),
            "mcp",
            "--http",
            "--host",
            "0.0.0.0",
            "--port",
            str(_free_port()),
        ],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1
    assert r.stderr.startswith(
        "memdir: error: serving on 0.0.0.0 reaches beyond this machine — pass --token"
    )
    r = subprocess.run(
        [sys.executable, "-m", "memdir", "--dir", str(root), "mcp", "--http", "--token", "short"],
        env=_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 1 and "give one of at least 16" in r.stderr
