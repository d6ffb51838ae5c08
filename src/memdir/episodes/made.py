"""What the episodes' parts of the store's index were made from (``Made``): each episode
file's size when a part (full text, vectors) was last brought up to date with it."""

from __future__ import annotations

import sqlite3

from ..find.cachedb import CacheDB


class Made(CacheDB):
    """What the episodes' parts of the store's index were made from: per part (``TEXT``,
    ``VECTORS``), each file's size when the part was last brought up to date with it."""

    def _schema(self, db: sqlite3.Connection) -> None:
        self.built(
            db,
            "files",
            "1",
            f"""
                DROP TABLE IF EXISTS {self.prefix}files;
                CREATE TABLE {self.prefix}files (part TEXT, name TEXT, size INTEGER,
                    PRIMARY KEY (part, name))
            """,
        )

    def of(self, part: str) -> dict[str, int]:
        """The files and sizes ``part`` was last brought up to date with."""
        sql = f"SELECT name, size FROM {self.prefix}files WHERE part = ?"
        return {str(n): int(size) for n, size in self.db.execute(sql, (part,))}

    def note(self, part: str, sizes: dict[str, int]) -> None:
        """``part`` is up to date with these files of these sizes."""
        with self.transaction() as db:
            db.execute(f"DELETE FROM {self.prefix}files WHERE part = ?", (part,))
            db.executemany(
                f"INSERT INTO {self.prefix}files VALUES (?, ?, ?)",
                [(part, name, size) for name, size in sizes.items()],
            )

    def any(self) -> bool:
        """Whether the index holds anything of the episodes."""
        tables = [
            name
            for (name,) in self.db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            if name in {f"{self.prefix}{t}" for t in ("files", "docs", "vec_docs")}
        ]
        return any(self.db.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone() for t in tables)
