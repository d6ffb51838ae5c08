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
from .context import Ctx, build_model, pass_ctx

NICE = 5  # the worker's priority at least this far below the user's


@click.command("work", hidden=True)
@pass_ctx
def work_cmd(c: Ctx) -> None:
    """Run the jobs queued for this store (started detached by hooks and commands)."""
    from ..integrations.hooks import job_handlers
    from ..layout import state_dir

    config = c.config
    # (a folder's queue is known without opening the store: at 100,000 memories that takes
    # seconds, which an index job spends once itself)
    folder = None if config.database_url else state_dir(config.dir)
    if folder is not None and jobs.at_work(folder):
        return  # the store's worker takes the queue: this one leaves before opening the store
    with contextlib.suppress(OSError):  # below the user's work (the resident's share, if more)
        os.nice(max(0, NICE - os.nice(0)))

    def pending(data: jobs.Data) -> None:
        from ..agent.loop import finish_handed_over
        from ..scopes import user_store_dir

        finish_handed_over(c.store, build_model(c, memory=True), user_store_dir(config))

    jobs.work(folder or c.store.internal, {**job_handlers(config), "pending": pending})


COMMANDS = [work_cmd]
