"""`memdir mcp` (stdio) from start to its first answers, as a host starts it: the time to the
`initialize` answer and to the `tools/list` answer, against the same run's baseline of the
interpreter importing the MCP SDK alone (what a server that loads the SDK first cannot
answer under). ``--load N`` keeps N processes spinning meanwhile (a busy machine: hosts give a
server about 5 s to answer ``initialize``).

    python benchmarks/mcp_bench.py [--runs 7] [--load 4]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def once(cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    began = time.monotonic()
    p = subprocess.Popen(
        [sys.executable, "-m", "memdir", "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, cwd=cwd, env=env, text=True,
    )  # fmt: skip
    assert p.stdin is not None and p.stdout is not None
    hello = {"protocolVersion": "2025-06-18", "capabilities": {},
             "clientInfo": {"name": "bench", "version": "1"}}  # fmt: skip
    p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}))
    p.stdin.write("\n")
    p.stdin.flush()
    p.stdout.readline()
    initialized = time.monotonic() - began
    for msg in (
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
    ):
        p.stdin.write(json.dumps(msg) + "\n")
    p.stdin.flush()
    answer = json.loads(p.stdout.readline())
    listed = time.monotonic() - began
    p.kill()
    p.wait()
    if "tools" not in answer.get("result", {}):
        raise SystemExit(f"tools/list failed: {answer}")
    return initialized, listed


def imported(env: dict[str, str]) -> float:
    began = time.monotonic()
    subprocess.run([sys.executable, "-c", "import mcp.server.mcpserver"], env=env, check=True)
    return time.monotonic() - began


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument("--load", type=int, default=0, help="busy processes beside it")
    args = ap.parse_args()
    spin = "import time\nend = time.monotonic() + 600\nwhile time.monotonic() < end: pass"
    busy = [subprocess.Popen([sys.executable, "-c", spin]) for _ in range(args.load)]
    home = Path(tempfile.mkdtemp())
    project = home / "app"
    (project / ".git").mkdir(parents=True)
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("MEMDIR_", "ANTHROPIC_", "OPENAI_"))
    }
    env.update(HOME=str(home), MEMDIR_USER_DIR="none")
    subprocess.run([sys.executable, "-m", "memdir", "init"], cwd=project, env=env, check=True,
                   capture_output=True)  # fmt: skip
    try:
        runs = [once(project, env) for _ in range(args.runs)]
        sdk = [imported(env) for _ in range(args.runs)]
    finally:
        for p in busy:
            p.kill()
    print(f"`memdir mcp` (stdio), medians of {args.runs}, {args.load} busy processes beside:")
    print(f"  initialize answered: {statistics.median(r[0] for r in runs):.2f} s")
    print(f"  tools/list answered: {statistics.median(r[1] for r in runs):.2f} s")
    print(f"  baseline, importing the MCP SDK alone: {statistics.median(sdk):.2f} s")


if __name__ == "__main__":
    main()
