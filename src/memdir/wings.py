"""The wings: capabilities most users do not turn on, each a package of its own beside the
core — ``memdir_git`` (sync through git), ``memdir_postgres`` (stores in PostgreSQL, the team
server and its tokens), ``memdir_agent`` (``memdir chat`` and ``run``), ``memdir_ui``
(``memdir ui``), ``memdir_memorytool`` (the Anthropic memory tool), ``memdir_http``
(``memdir mcp --http``, a team's server among it), ``memdir_asof`` (what a store held at a
past moment) and ``memdir_embedders`` (``e5`` and ``http``). The core finds them
through entry points and imports none of them; an install extra pulls in what a wing needs.

Entry point groups (``pyproject.toml``'s ``[project.entry-points]``):

- ``memdir.commands``: a command the command line adds (a click command).
- ``memdir.backends``: a database URL's scheme -> ``open(config, create, watch) -> Store``.
- ``memdir.jobs``: a background job's kind -> ``handler(config) -> jobs.Handler``.
- ``memdir.embedders``: the ``embedder`` setting's value -> ``chosen(config) -> (identity,
  make)``, ``make() -> find.embed.Embedder``.
- ``memdir.asof``: what a store held at a past moment, for ``--as-of`` and MCP's
  ``as_of``: ``search(scopes, query, as_of, k) -> (when, [(scope, held, score)])`` and
  ``recall(scopes, text, as_of, k, budget) -> (when, names, block)``.
- ``memdir.serve``: a transport ``memdir mcp`` serves on besides stdio (``http``) ->
  ``serve(config, host=, port=, token=, origins=, hosts=, home=)``.
- ``memdir.events``: what a wing does at one of the core's moments, named ``MOMENT.WING``:
  ``learned``
  ``(store, config)`` after a learn job ended well; ``started`` ``(config)`` as a session
  starts (a host's session start hook, memdir's agent); ``doctor`` ``(store, report, fix)`` among
  doctor's checks; ``init-git`` ``(store) -> lines`` for ``memdir init --git``;
  ``team`` ``(config, token) -> who | None``, the identities a team server's database
  holds.

Read once per process, when first asked (``importlib.metadata`` costs tens of milliseconds:
nothing on a hook's way to its answer asks).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from .errors import ConfigError


@functools.cache
def _group(group: str) -> dict[str, Any]:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=group)}


def names(group: str) -> list[str]:
    """The names the installed wings give in ``group`` (``memdir.commands``…), sorted."""
    return sorted(_group(group))


def load(group: str, name: str) -> Any:
    """What the wing registered as ``name`` in ``group``; None when no wing did."""
    found = _group(group).get(name)
    return None if found is None else found.load()


def need(group: str, name: str) -> Any:
    """What the wing registered as ``name`` in ``group``; ConfigError when no wing did (an
    install that predates the wing: reinstalling memdir registers it)."""
    found = load(group, name)
    if found is None:
        raise ConfigError(f"no installed wing serves {group}:{name} — reinstall memdir")
    return found


def backend(scheme: str) -> Callable[..., Any]:
    """How to open a store whose database URL has ``scheme``; ConfigError when no wing
    serves it."""
    opener = load("memdir.backends", scheme)
    if opener is None:
        raise ConfigError(
            f"no installed backend serves {scheme}:// URLs — for PostgreSQL install"
            " memdir[postgres]"
        )
    return opener  # type: ignore[no-any-return]


def event(moment: str, *args: Any) -> list[Any]:
    """Run every wing's part in the core's ``moment``; what each returned."""
    parts = _group("memdir.events")
    return [parts[key].load()(*args) for key in sorted(parts) if key.split(".")[0] == moment]
