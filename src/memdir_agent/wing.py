"""The agent wing's part in the core's moments (``memdir.wings``): the background job that
finishes the extractions an exiting agent handed over."""

from __future__ import annotations

from memdir import jobs
from memdir.config import Config


def pending_job(config: Config) -> jobs.Handler:
    """Finish what an agent of the store ``config`` opens handed over as it exited."""

    def pending(data: jobs.Data) -> None:
        from memdir.disk.layout import USAGE
        from memdir.providers import make_model
        from memdir.scopes import user_store_dir
        from memdir.store import open_store
        from memdir_agent.worker import finish_handed_over

        store = open_store(config, create=False, watch=False)
        model = make_model(config, memory=True, usage_log=store.internal / USAGE)
        finish_handed_over(store, model, user_store_dir(config))

    return pending
