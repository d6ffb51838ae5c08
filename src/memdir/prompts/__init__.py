"""Prompt templates, as package data. ``render(name, **values)`` fills ``$placeholders``."""

from __future__ import annotations

from functools import cache
from importlib import resources
from string import Template


@cache
def _template(name: str) -> Template:
    return Template(resources.files(__package__).joinpath(f"{name}.md").read_text("utf-8"))


def render(name: str, **values: object) -> str:
    """The template ``name`` with values substituted (unknown ``$words`` are left alone)."""
    return _template(name).safe_substitute({k: str(v) for k, v in values.items()})
