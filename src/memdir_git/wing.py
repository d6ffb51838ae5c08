"""The git wing's parts in the core's moments (``memdir.wings``): doctor's check of a store kept
in git, a sync after each learn, ``memdir init --git``, and the background sync job."""

from __future__ import annotations

from memdir import jobs
from memdir.config import Config
from memdir.doctor import Report
from memdir.errors import MemdirError
from memdir.scopes import user_store_dir
from memdir.store import Store, as_folder, open_store
from memdir_git import repo as syncrepo


def doctor(store: Store, report: Report, fix: bool) -> None:
    """For a store kept in git: memdir's merge drivers registered, the last sync's failure."""
    if store.read_only or not syncrepo.set_up(store.root):
        return  # not synced through git: nothing to say
    try:
        missing = syncrepo.setup_problems(store.root)
        if missing and fix:
            report.fixed += syncrepo.install(store.root)
        else:
            report.warnings += [
                {"file": ".", "reason": f"{m} — 'memdir doctor --fix' sets it up"} for m in missing
            ]
    except MemdirError as exc:  # no git at all: nothing to say about syncing
        report.notes.append(f"sync: {exc}")
        return
    state = syncrepo.status(store.root)
    if state.get("error"):
        report.warnings.append(
            {
                "file": ".",
                "reason": f"the last sync failed ({state.get('last')}): {state['error']}"
                " — 'memdir sync' tries again (nothing is lost)",
            }
        )


def learned(store: Store, config: Config) -> None:
    """After a learn: the store and the user's synced in the background (``sync = "auto"``),
    which also brings what teammates pushed."""
    syncrepo.kick_all([store.root, user_store_dir(config)], config)


def started(config: Config) -> None:
    """A session starts (a host's, or memdir's agent's): the project's store and the user's
    pulled in the background when the last sync is older than ``sync_interval``."""
    syncrepo.kick_all([config.dir, user_store_dir(config)], config, pull=True)


def init_git(store: Store) -> list[str]:
    """``memdir init --git``: what setting the store up in git did, a line each."""
    return syncrepo.init(as_folder(store), None)


def sync_job(config: Config) -> jobs.Handler:
    """The background sync of the store ``config`` opens."""

    def sync(data: jobs.Data) -> None:
        from memdir_git import run

        run.background(as_folder(open_store(config, create=False, watch=False)), config)

    return sync
