"""Memories in PostgreSQL with pgvector (``memdir[postgres]``), found by the core as the
backend of ``postgresql://`` URLs (``memdir.wings``):

- ``pg``: ``PgStore``, a named store in a database (``pgwrite``: its writes; ``pgsearch``: its
  full-text postings and vectors; ``pgschema``: the tables, the driver, the connections).
- ``pgteam`` and ``team``: a team's identities and row-level security, and the MCP server
  that serves each person their own stores; ``cli``: ``memdir tokens``.
- ``pglocal``: a throwaway local server for tests and trials.

The driver (psycopg) is imported only by ``pgschema``, when a database is used.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:
    from memdir_postgres.pg import PgStore


def __getattr__(name: str) -> object:
    if name == "PgStore":
        from memdir_postgres.pg import PgStore

        return PgStore
    raise AttributeError(name)


__all__ = ["PgStore"]
