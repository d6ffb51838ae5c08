"""``memdir work``: the store's one background worker (hidden; started detached by
``jobs.enqueue``). It runs every queued job, oldest first — learn from a host's session,
embed what is not embedded yet, sync, finish what an exiting agent handed over — below the
user's own work in priority, each failure logged once for ``memdir doctor``.
This module does NOT queue jobs (hooks and commands do, through ``jobs``).
"""

from __future__ import annotations

import contextlib
import os

import click

from .. import jobs
from ..store import Store
from .context import Ctx, build_model, pass_ctx

NICE = 5  # the worker's priority at least this far below the user's


@click.command("work", hidden=True)
@pass_ctx
def work_cmd(c: Ctx) -> None:
    """Run the jobs queued for this store (started detached by hooks and commands)."""
    from ..layout import state_dir

    if not c.config.database_url and jobs.at_work(state_dir(c.config.dir)):
        return  # the store's worker takes the queue: this one leaves before opening the store
    with contextlib.suppress(OSError):  # below the user's work (the resident's share, if more)
        os.nice(max(0, NICE - os.nice(0)))
    store, config = c.store, c.config

    def learn(data: jobs.Data) -> None:
        from ..integrations.hooks import learn_job

        learn_job(data, config)

    def index(data: jobs.Data) -> None:
        embed_while_there(store)

    def sync(data: jobs.Data) -> None:
        from ..store import as_folder
        from ..sync import run

        run.background(as_folder(store), config)

    def pending(data: jobs.Data) -> None:
        from ..agent.loop import finish_handed_over
        from ..scopes import user_store_dir

        finish_handed_over(store, build_model(c, memory=True), user_store_dir(config))

    jobs.work(store.internal, {"learn": learn, "index": index, "sync": sync, "pending": pending})


def embed_while_there(store: Store) -> None:
    """Embed every memory not embedded yet, a chunk at a time, stopping at the first look
    that finds the store's folder gone (nothing left to embed it for)."""
    root = store.root

    def still_there(done: int, total: int) -> None:
        if not root.is_dir():
            raise _Gone

    with contextlib.suppress(_Gone, FileNotFoundError):
        store.index.embed_all(still_there)


class _Gone(Exception):
    """The store the worker works for is no longer there."""


COMMANDS = [work_cmd]
