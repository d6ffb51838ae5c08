"""The core finds the wings through entry points (``memdir.wings``): every wing this package
ships is registered and loads, and what no wing serves is a one-line error."""

from __future__ import annotations

import importlib
import tomllib
from pathlib import Path

import pytest

from memdir import wings
from memdir.errors import ConfigError

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def test_every_entry_point_the_project_declares_is_installed_and_loads() -> None:
    """An install that predates a wing would lack its entry points: each declared one is
    found and loads to what it names."""
    declared = tomllib.loads(PYPROJECT.read_text())["project"]["entry-points"]
    assert {"memdir.commands", "memdir.backends", "memdir.asof", "memdir.serve"} <= set(declared)
    for group, points in declared.items():
        assert wings.names(group) == sorted(points), group
        for name, target in points.items():
            module, _, attr = target.partition(":")
            assert wings.load(group, name) is getattr(importlib.import_module(module), attr)


def test_what_no_wing_serves_is_a_one_line_error() -> None:
    with pytest.raises(ConfigError) as err:
        wings.need("memdir.asof", "rewind")
    assert str(err.value) == "no installed wing serves memdir.asof:rewind — reinstall memdir"
    with pytest.raises(ConfigError, match=r"^no installed backend serves mysql:// URLs"):
        wings.backend("mysql")
    assert wings.load("memdir.serve", "carrier-pigeon") is None
    assert wings.event("no-such-moment") == []
